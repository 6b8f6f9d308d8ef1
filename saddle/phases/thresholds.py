"""Phase boundaries between branches (THEORY.md sec. 6).

* transitions: every change of the global minimum (lowest ``eps_t`` over branches) from one
  branch to another between neighbouring alphas of the grid;
* ``alpha_c``: where the training loss ``eps_t`` of one declared branch crosses below that of
  another (the paper's: semantic below positional);
* ``alpha_l``: above which the global minimum (lowest ``eps_t`` over branches) has a lower
  test error ``eps_g`` than the linear positional baseline.

Both are found by bracketing on the scanned grid and then Brent's method in alpha, where
every evaluation solves the branches afresh at that alpha (continued from the bracket's
ends), so a threshold is not limited by the grid spacing. alpha_l depends on the overlaps
through the test error, and they converge more slowly with the quadrature order than eps_t
(which carries the kink correction), so its root is solved on a finer rule by default.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy.optimize import brentq

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.minimum import global_minimum
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import BranchTrace


class ThresholdStatus(enum.StrEnum):
    """How a threshold came out."""

    FOUND = "found"  # ``value`` finite
    ABSENT = "absent in range"  # no crossing in the scanned range
    UNRESOLVED = "not converged"  # bracketed on the grid, but a solve inside the bracket failed


@dataclass(frozen=True)
class Threshold:
    """A threshold in alpha; ``value`` is NaN unless ``status`` is found (``note`` says why);
    ``bracket``: the neighbouring grid alphas it lies between, when the grid brackets it."""

    name: str
    value: float
    bracket: tuple[float, float] | None
    note: str
    status: ThresholdStatus = ThresholdStatus.FOUND


def _by_alpha(trace: BranchTrace) -> dict[float, FixedPoint]:
    """The branch's converged point at each alpha, the lowest in training loss where the branch has
    several sheets there (folds, :mod:`saddle.search.arclength`)."""
    return global_minimum([trace])


class _BranchSolver:
    """Solves one branch at alphas inside a bracket, starting from the interpolation of the
    bracket's end points (from ``lo`` alone if it is ``hi``) and reusing the last Jacobian estimate.
    Where that does not converge onto the branch (near a fold or a merger, far from the start), it is
    continued there from the nearest point solved before, in steps halved up to the tuning's
    ``continuation_halvings`` times; if that fails too, ``RuntimeError``."""

    def __init__(self, solver: SaddlePointSolver, branch: Branch, lo: FixedPoint, hi: FixedPoint) -> None:
        self.solver, self.branch, self.lo, self.hi = solver, branch, lo, hi
        self.jacobian: np.ndarray | None = None
        self.solved: dict[float, FixedPoint] = {}  # on this solver's rule (lo and hi may be on another)
        self.ends: list[float] = []  # alphas the continuation did not reach
        self.answers: dict[float, FixedPoint | RuntimeError] = {}  # what each call returned or raised

    def __call__(self, alpha: float) -> FixedPoint:
        """The branch's point at ``alpha``; asked again at an alpha, the same answer (the point, or the
        ``RuntimeError`` that it was not reached) without solving again."""
        if alpha not in self.answers:
            w = 0.0 if self.hi.alpha == self.lo.alpha else (alpha - self.lo.alpha) / (self.hi.alpha - self.lo.alpha)
            try:
                point = self._solve(alpha, (1 - w) * self.lo.values + w * self.hi.values)
                self.answers[alpha] = point if point is not None else self._continued(alpha)
            except RuntimeError as error:
                self.answers[alpha] = error
        answer = self.answers[alpha]
        if isinstance(answer, RuntimeError):
            raise RuntimeError(*answer.args)
        return answer

    def _solve(self, alpha: float, initial: np.ndarray) -> FixedPoint | None:
        # a point of the root search for a crossing, not reported: no quadrature error check
        point, jacobian = self.solver.solve(
            alpha, self.branch, initial=initial, jacobian=self.jacobian, error_check=False
        )
        if not self.solver.on_branch(point, self.branch):
            return None
        self.jacobian = jacobian if jacobian is not None else self.jacobian
        self.solved[alpha] = point
        return point

    def _continued(self, alpha: float) -> FixedPoint:
        """Natural continuation to ``alpha`` from the nearest point solved before: a step that does
        not converge onto the branch is halved, one that does is taken, until ``alpha`` is reached or
        the step is ``continuation_halvings`` halvings below the first. Where it stops short of
        ``alpha`` but the branch converges as far beyond ``alpha`` (the solves stall at isolated alphas,
        e.g. where a quadrature node meets a kink), the two points' average stands for ``alpha``; else
        the branch ends before ``alpha`` (a fold, a merger), and so it does before every alpha beyond
        (the branch is taken to be connected between its points)."""
        known = {self.lo.alpha: self.lo, self.hi.alpha: self.hi, **self.solved}
        here = known[min(known, key=lambda x: abs(x - alpha))]
        ended = [x for x in self.ends if (x - here.alpha) * (alpha - x) >= 0]
        if ended:
            raise RuntimeError(
                f"the {self.branch.name} branch ends before alpha={alpha:.6g} (not found at {ended[0]:.6g})"
            )
        step = alpha - here.alpha
        smallest = abs(step) / 2**self.solver.tuning.thresholds.continuation_halvings
        while abs(step) >= smallest:
            target = alpha if abs(alpha - here.alpha) <= abs(step) else here.alpha + step
            point = self._solve(target, here.values)
            if point is None:
                step /= 2
            elif target == alpha:
                return point
            else:
                here = point
        beyond = self._solve(2 * alpha - here.alpha, here.values)
        if beyond is not None:  # the branch goes on beyond alpha: a defect of the map there, not its end
            if self.solved.get(here.alpha) is not here:  # a bracket's end, on the scan's rule
                here = self._solve(here.alpha, here.values)
                if here is None:
                    raise RuntimeError(f"the {self.branch.name} branch did not converge near alpha={alpha:.6g}")
            return _midway(here, beyond)
        self.ends.append(alpha)
        raise RuntimeError(
            f"the {self.branch.name} branch was not found at alpha={alpha:.6g} (continued to alpha={here.alpha:.6g})"
        )

    def on_branch(self, alpha: float) -> FixedPoint | None:
        """The point at ``alpha`` if the solve converges onto the branch, else ``None``."""
        try:
            return self(alpha)
        except RuntimeError:
            return None

    @classmethod
    def inside(
        cls, solver: SaddlePointSolver, branch: Branch, points: dict[float, FixedPoint], a: float, b: float
    ) -> _BranchSolver:
        """``branch`` solved inside ``[a, b]`` from its ``points`` (by alpha) at the bracket's ends, or
        from the one it has where it ends inside the bracket."""
        ends = [points[x] for x in (a, b) if x in points]
        return cls(solver, branch, ends[0], ends[-1])


def _midway(below: FixedPoint, above: FixedPoint) -> FixedPoint:
    """The average of two points of a branch (order parameters, training loss and test error) at
    their middle alpha: where the solves stall at that alpha, what a root search in alpha reads
    there, with an error of second order in their distance."""
    return replace(
        below,
        alpha=0.5 * (below.alpha + above.alpha),
        values=0.5 * (below.values + above.values),
        train_loss=0.5 * (below.train_loss + above.train_loss),
        test_error=0.5 * (below.test_error + above.test_error),
    )


def _root(
    f: Callable[[float], float], alphas: Sequence[float], values: Sequence[float], lo: float, hi: float, xtol: float
) -> float:
    """Root of ``f`` in ``[lo, hi]``: a cubic through the scanned values near the bracket
    gives a first guess, and Brent's method on a narrow bracket around it the root."""
    order = np.argsort(np.abs(np.asarray(alphas) - 0.5 * (lo + hi)))[:4]
    xs, ys = np.asarray(alphas)[order], np.asarray(values)[order]
    roots = np.roots(np.polyfit(xs - lo, ys, min(3, len(xs) - 1))) + lo
    real = [r.real for r in roots if abs(r.imag) < 1e-12 and lo <= r.real <= hi]
    guess = real[0] if real else 0.5 * (lo + hi)
    width = 0.01 * (hi - lo)
    while True:
        a, b = max(lo, guess - width), min(hi, guess + width)
        fa, fb = f(a), f(b)
        if fa * fb <= 0:
            return float(brentq(f, a, b, xtol=xtol, rtol=1e-12))
        if a == lo and b == hi:
            raise RuntimeError(f"no sign change of the threshold function in [{lo:g}, {hi:g}]")
        width *= 4


def critical_alpha(
    solver: SaddlePointSolver,
    low_branch: tuple[Branch, BranchTrace],
    high_branch: tuple[Branch, BranchTrace],
    xtol: float | None = None,
) -> Threshold:
    """Alpha where ``eps_t(high_branch) - eps_t(low_branch)`` changes sign from + to -: between two
    grid alphas where both branches have points, or else inside the grid step where the high branch
    begins already below the low one (:func:`_crossing_after_birth`). NaN, with the reason in
    ``note``, if there is no crossing or a solve inside the bracket fails."""
    xtol = solver.tuning.thresholds.xtol if xtol is None else xtol
    (b_low, t_low), (b_high, t_high) = low_branch, high_branch
    low, high = _by_alpha(t_low), _by_alpha(t_high)
    common = sorted(set(low) & set(high))
    diff = [high[a].train_loss - low[a].train_loss for a in common]
    for i in range(len(common) - 1):
        if diff[i] > 0 >= diff[i + 1]:
            a, b = common[i], common[i + 1]
            break
    else:
        born = _crossing_after_birth(solver, (b_low, low), (b_high, high), xtol)
        if born is not None:
            return born
        return Threshold(
            "alpha_c",
            float("nan"),
            None,
            "no crossing of the training losses in the scanned range",
            ThresholdStatus.ABSENT,
        )
    solve_low = _BranchSolver(solver, b_low, low[a], low[b])
    solve_high = _BranchSolver(solver, b_high, high[a], high[b])
    try:
        value = _root(lambda x: solve_high(x).train_loss - solve_low(x).train_loss, common, diff, a, b, xtol)
    except RuntimeError as error:
        return Threshold(
            "alpha_c", float("nan"), (a, b), f"not resolved inside the bracket: {error}", ThresholdStatus.UNRESOLVED
        )
    return Threshold("alpha_c", value, (a, b), f"{b_high.name} eps_t crosses below {b_low.name}")


def _crossing_after_birth(
    solver: SaddlePointSolver,
    low: tuple[Branch, dict[float, FixedPoint]],
    high: tuple[Branch, dict[float, FixedPoint]],
    xtol: float,
) -> Threshold | None:
    """alpha_c inside the grid step where the high branch begins, if it lies there: the high branch's
    first point ``c`` is already below the low branch, which has a point at the grid alpha ``g`` before
    it. The change of minimum between ``g`` and ``c`` (:func:`change_of_minimum`, the high branch
    continued down from ``c`` and absent where it does not converge) is a crossing if the high branch
    exists just below it; if it does not, the high branch begins below the low one and there is no
    crossing. ``None`` if it is not such a step or there is no crossing; each branch is given with its
    converged points by alpha."""
    (b_low, low_points), (b_high, high_points) = low, high
    if not high_points or min(high_points) not in low_points:
        return None
    c = min(high_points)
    before = [x for x in low_points if x < c]
    if not before or high_points[c].train_loss > low_points[c].train_loss:
        return None
    g = max(before)
    try:
        value = change_of_minimum(solver, low, high, g, c, xtol)
        below = _BranchSolver.inside(solver, *high, g, c).on_branch(max(g, value - 10 * xtol))
    except RuntimeError as error:
        return Threshold(
            "alpha_c", float("nan"), (g, c), f"not resolved inside the bracket: {error}", ThresholdStatus.UNRESOLVED
        )
    if below is None:
        return None
    note = f"{b_high.name} eps_t crosses below {b_low.name} inside the step where it begins"
    return Threshold("alpha_c", value, (g, c), note)


def linear_threshold(
    solver: SaddlePointSolver,
    branches: Sequence[tuple[Branch, BranchTrace]],
    baseline_error: float,
    xtol: float | None = None,
    loss_solver: SaddlePointSolver | None = None,
) -> Threshold:
    """Smallest alpha above which the global minimum beats the baseline's test error for
    every larger scanned alpha; the root is solved with ``solver``, which may use a finer rule
    than the scan (:func:`saddle.phases.survey.threshold_solver`). Where the global minimum changes branch
    inside the bracket, the change is located first on ``loss_solver`` (default ``solver``; the
    scan's own, whose training losses carry the kink correction: :func:`change_of_minimum`), and the
    root is on the branch above the change, on the branch below it, or the change itself (where the
    test error jumps across the baseline). NaN, with the reason in ``note``, if a solve inside the
    bracket fails."""
    xtol = solver.tuning.thresholds.xtol if xtol is None else xtol
    try:
        return _linear_threshold(solver, branches, baseline_error, xtol, loss_solver or solver)
    except RuntimeError as error:
        return Threshold("alpha_l", float("nan"), None, f"not resolved: {error}", ThresholdStatus.UNRESOLVED)


class _Outside(Exception):
    """On the root's rule the global minimum's test error crosses the baseline below (``direction``
    -1) or above (+1) the bracket the scan's rule chose."""

    def __init__(self, direction: int) -> None:
        super().__init__(direction)
        self.direction = direction


def _linear_threshold(
    solver: SaddlePointSolver,
    branches: Sequence[tuple[Branch, BranchTrace]],
    baseline_error: float,
    xtol: float,
    loss_solver: SaddlePointSolver,
) -> Threshold:
    best = global_minimum([t for _, t in branches])
    alphas = list(best)
    above = [best[a].test_error < baseline_error for a in alphas]
    if not above or not above[-1]:
        return Threshold(
            "alpha_l",
            float("nan"),
            None,
            "the global minimum does not beat the baseline at the largest alpha",
            ThresholdStatus.ABSENT,
        )
    i = len(above) - 1
    while i > 0 and above[i - 1]:
        i -= 1
    if i == 0:
        return Threshold(
            "alpha_l",
            float("nan"),
            None,
            "the global minimum beats the baseline over the whole scanned range",
            ThresholdStatus.ABSENT,
        )
    by_name = {br.name: (br, _by_alpha(tr)) for br, tr in branches}
    tried = [i]
    while True:
        try:
            return _in_bracket(solver, loss_solver, by_name, best, i, baseline_error, xtol)
        except _Outside as outside:
            i += outside.direction
            if i in tried or not 0 < i < len(alphas) or len(tried) > solver.tuning.thresholds.max_bracket_moves:
                raise RuntimeError(
                    f"on {solver.settings.quadrature.label} the test error crosses the baseline outside the "
                    f"brackets tried ({', '.join(f'[{alphas[j - 1]:g}, {alphas[j]:g}]' for j in tried)})"
                ) from None
            tried.append(i)


def _in_bracket(
    solver: SaddlePointSolver,
    loss_solver: SaddlePointSolver,
    by_name: dict[str, tuple[Branch, dict[float, FixedPoint]]],
    best: dict[float, FixedPoint],
    i: int,
    baseline_error: float,
    xtol: float,
) -> Threshold:
    """alpha_l between the grid's ``i-1``-th and ``i``-th alphas: on the global minimum's branch
    if it is the same at both, else on the branch above the change of minimum, on the one below it,
    or at the change (:func:`linear_threshold`); :class:`_Outside` where ``solver``'s rule puts the
    crossing outside."""
    alphas = list(best)
    a, b = alphas[i - 1], alphas[i]
    lo, hi = best[a], best[b]
    rule = solver.settings.quadrature.label

    def excess(solve: _BranchSolver, alpha: float) -> float:
        return solve(alpha).test_error - baseline_error

    if lo.branch == hi.branch:
        solve = _BranchSolver(solver, by_name[hi.branch][0], lo, hi)
        same = [x for x in alphas if best[x].branch == hi.branch]
        try:
            value = _root(
                lambda x: excess(solve, x), same, [best[x].test_error - baseline_error for x in same], a, b, xtol
            )
        except RuntimeError:
            if excess(solve, a) < 0:
                raise _Outside(-1) from None
            if excess(solve, b) > 0:
                raise _Outside(+1) from None
            raise
        return Threshold("alpha_l", value, (a, b), f"on the {hi.branch} branch ({rule})")
    before, after = by_name[lo.branch], by_name[hi.branch]
    switch = change_of_minimum(loss_solver, before, after, a, b, xtol)
    solve_before, solve_after = _BranchSolver.inside(solver, *before, a, b), _BranchSolver.inside(solver, *after, a, b)
    step = 10 * xtol
    start, end = min(b, switch + step), max(a, switch - step)
    if excess(solve_after, start) >= 0:
        if excess(solve_after, b) >= 0:
            raise _Outside(+1)
        value = brentq(lambda x: excess(solve_after, x), start, b, xtol=xtol)
        return Threshold("alpha_l", float(value), (a, b), f"on the {hi.branch} branch ({rule})")
    if excess(solve_before, end) < 0:
        if excess(solve_before, a) < 0:
            raise _Outside(-1)
        value = brentq(lambda x: excess(solve_before, x), a, end, xtol=xtol)
        return Threshold("alpha_l", float(value), (a, b), f"on the {lo.branch} branch ({rule})")
    losses = loss_solver.settings.quadrature.label
    return Threshold(
        "alpha_l", switch, (a, b), f"at the change of global minimum from {lo.branch} to {hi.branch} ({losses})"
    )


def change_of_minimum(
    solver: SaddlePointSolver,
    before: tuple[Branch, dict[float, FixedPoint]],
    after: tuple[Branch, dict[float, FixedPoint]],
    a: float,
    b: float,
    xtol: float | None = None,
) -> float:
    """Where the global minimum changes from the branch ``before`` (the lowest at ``a``) to
    ``after`` (the lowest at ``b``), each given with its converged points by alpha: the root of
    ``eps_t(after) - eps_t(before)`` by Brent's method, where a branch that does not converge onto
    itself at an alpha (it ends inside the bracket, at a fold or a merger) counts as absent there,
    the other as the lower. The root is a crossing of the training losses (a first-order change)
    or the end of a branch (a merger, where the two losses meet). At ``a`` and ``b`` the given points
    (solved on ``solver``'s rule) stand for the solves."""
    xtol = solver.tuning.thresholds.xtol if xtol is None else xtol
    solve_before, solve_after = _BranchSolver.inside(solver, *before, a, b), _BranchSolver.inside(solver, *after, a, b)
    given = {x: (before[1].get(x), after[1].get(x)) for x in (a, b)}

    def difference(alpha: float) -> float:
        first, second = given.get(alpha) or (solve_before.on_branch(alpha), solve_after.on_branch(alpha))
        if first is None and second is None:
            raise RuntimeError(f"neither {before[0].name} nor {after[0].name} converged at alpha={alpha:.6g}")
        if first is None or second is None:
            return -1.0 if first is None else 1.0
        return second.train_loss - first.train_loss

    return float(brentq(difference, a, b, xtol=xtol, rtol=1e-12))
