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

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq

from attnphase.saddle.branches import Branch
from attnphase.saddle.continuation import BranchTrace
from attnphase.saddle.fixed_point import FixedPoint
from attnphase.saddle.solver import SaddlePointSolver

#: How a threshold came out: found (``value`` finite), absent from the scanned range, or bracketed
#: on the grid but not resolved because a solve inside the bracket failed.
FOUND, ABSENT, UNRESOLVED = "found", "absent in range", "not converged"


@dataclass(frozen=True)
class Threshold:
    """A threshold in alpha; ``value`` is NaN unless ``status`` is :data:`FOUND` (``note`` says why);
    ``bracket``: the neighbouring grid alphas it lies between, when the grid brackets it."""

    name: str
    value: float
    bracket: tuple[float, float] | None
    note: str
    status: str = FOUND


def _by_alpha(trace: BranchTrace) -> dict[float, FixedPoint]:
    """The branch's converged point at each alpha, the lowest in training loss where the branch has
    several sheets there (folds, :mod:`saddle.arclength`)."""
    return global_minimum([trace])


class _BranchSolver:
    """Solves one branch at alphas inside a bracket, starting from the interpolation of the
    bracket's end points and reusing the last Jacobian estimate."""

    def __init__(self, solver: SaddlePointSolver, branch: Branch, lo: FixedPoint, hi: FixedPoint) -> None:
        self.solver, self.branch, self.lo, self.hi = solver, branch, lo, hi
        self.jacobian: np.ndarray | None = None

    def __call__(self, alpha: float) -> FixedPoint:
        w = (alpha - self.lo.alpha) / (self.hi.alpha - self.lo.alpha)
        initial = (1 - w) * self.lo.values + w * self.hi.values
        # a point of the root search for a crossing, not reported: no quadrature error check
        point, jacobian = self.solver.solve(
            alpha, self.branch, initial=initial, jacobian=self.jacobian, error_check=False
        )
        if not point.converged:
            raise RuntimeError(
                f"{self.branch.name} branch did not converge at alpha={alpha:.6g} (residual {point.residual:.1e})"
            )
        self.jacobian = jacobian if jacobian is not None else self.jacobian
        return point


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
    xtol: float = 1e-7,
) -> Threshold:
    """Alpha where ``eps_t(high_branch) - eps_t(low_branch)`` changes sign from + to -
    (NaN, with the reason in ``note``, if there is no crossing or a solve inside the
    bracket fails)."""
    (b_low, t_low), (b_high, t_high) = low_branch, high_branch
    low, high = _by_alpha(t_low), _by_alpha(t_high)
    common = sorted(set(low) & set(high))
    diff = [high[a].train_loss - low[a].train_loss for a in common]
    for i in range(len(common) - 1):
        if diff[i] > 0 >= diff[i + 1]:
            a, b = common[i], common[i + 1]
            break
    else:
        return Threshold(
            "alpha_c", float("nan"), None, "no crossing of the training losses in the scanned range", ABSENT
        )
    solve_low = _BranchSolver(solver, b_low, low[a], low[b])
    solve_high = _BranchSolver(solver, b_high, high[a], high[b])
    try:
        value = _root(lambda x: solve_high(x).train_loss - solve_low(x).train_loss, common, diff, a, b, xtol)
    except RuntimeError as error:
        return Threshold("alpha_c", float("nan"), (a, b), f"not resolved inside the bracket: {error}", UNRESOLVED)
    return Threshold("alpha_c", value, (a, b), f"{b_high.name} eps_t crosses below {b_low.name}")


@dataclass(frozen=True)
class Transition:
    """A change of the global minimum between two neighbouring alphas of the grid: from the branch
    ``before`` (lowest training loss at ``below``) to ``after`` (lowest at ``above``)."""

    below: float
    above: float
    before: str
    after: str


def transitions(traces: Sequence[BranchTrace]) -> tuple[Transition, ...]:
    """Every change of the global minimum's branch between neighbouring alphas (:func:`global_minimum`)."""
    best = global_minimum(traces)
    alphas = list(best)
    return tuple(
        Transition(a, b, best[a].branch, best[b].branch)
        for a, b in zip(alphas, alphas[1:], strict=False)
        if best[a].branch != best[b].branch
    )


def global_minimum(traces: Sequence[BranchTrace]) -> dict[float, FixedPoint]:
    """At every alpha, the converged point with the lowest training loss."""
    best: dict[float, FixedPoint] = {}
    for trace in traces:
        for p in trace.converged():
            if p.alpha not in best or p.train_loss < best[p.alpha].train_loss:
                best[p.alpha] = p
    return dict(sorted(best.items()))


def linear_threshold(
    solver: SaddlePointSolver,
    branches: Sequence[tuple[Branch, BranchTrace]],
    baseline_error: float,
    switch: float,
    xtol: float = 1e-7,
) -> Threshold:
    """Smallest alpha above which the global minimum beats the baseline's test error for
    every larger scanned alpha; the root is solved with ``solver``, which may use a finer rule
    than the scan (:func:`saddle.scan.threshold_solver`). ``switch`` is where the global minimum changes branch
    (``alpha_c``). NaN, with the reason in ``note``, if a solve inside the bracket fails."""
    try:
        return _linear_threshold(solver, branches, baseline_error, switch, xtol)
    except RuntimeError as error:
        return Threshold("alpha_l", float("nan"), None, f"not resolved: {error}", UNRESOLVED)


def _linear_threshold(
    solver: SaddlePointSolver,
    branches: Sequence[tuple[Branch, BranchTrace]],
    baseline_error: float,
    switch: float,
    xtol: float,
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
            ABSENT,
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
            ABSENT,
        )
    a, b = alphas[i - 1], alphas[i]
    by_name = {br.name: (br, tr) for br, tr in branches}
    lo, hi = best[a], best[b]
    on_branch = f"on the {hi.branch} branch ({solver.settings.quadrature.label})"
    if lo.branch == hi.branch:
        branch, trace = by_name[hi.branch]
        solve = _BranchSolver(solver, branch, lo, hi)
        same = [x for x in alphas if best[x].branch == hi.branch]
        value = _root(
            lambda x: solve(x).test_error - baseline_error,
            same,
            [best[x].test_error - baseline_error for x in same],
            a,
            b,
            xtol,
        )
        return Threshold("alpha_l", value, (a, b), on_branch)
    # the global minimum changes branch inside the bracket, at alpha_c: the crossing is on the
    # upper branch above alpha_c, or at the switch itself
    branch, trace = by_name[hi.branch]
    points = _by_alpha(trace)
    if a not in points or not np.isfinite(switch):
        return Threshold(
            "alpha_l", float("nan"), (a, b), "the global minimum changes branch inside the bracket", UNRESOLVED
        )
    solve = _BranchSolver(solver, branch, points[a], hi)
    if points[a].test_error - baseline_error > 0:
        upper = sorted(points)
        value = _root(
            lambda x: solve(x).test_error - baseline_error,
            upper,
            [points[x].test_error - baseline_error for x in upper],
            a,
            b,
            xtol,
        )
        if value >= switch:
            return Threshold("alpha_l", value, (a, b), on_branch)
    return Threshold("alpha_l", float(switch), (a, b), "at the change of global minimum (alpha_l = alpha_c)")
