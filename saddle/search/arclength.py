"""Pseudo-arclength continuation of a branch around a fold (THEORY.md sec. 4, 6).

Continuation in alpha (:mod:`saddle.search.tracer`) solves ``G(x, alpha) = 0`` at the next alpha,
``G`` the scaled residual ``(F(x) - x) / (1 + |x|)`` on the branch's free order parameters. At a
fold (a saddle-node) two fixed points of the branch meet and ``dG/dx`` is singular, so that step
fails however small it is. Parametrised by its arclength ``s`` instead, the branch ``(x(s),
alpha(s))`` is smooth through the fold: each step predicts along the secant ``t`` of the last two
points, ``y_pred = y + ds t``, and corrects by solving the bordered system

    G(x, alpha) = 0,    t . W (y - y_pred) = 0,

with ``y = (x, alpha)`` and ``W`` the metric in which the residual is measured (``1 / (1 + |x|)``
per order parameter, 1 for alpha). The fold is passed when the secant's alpha component changes
sign; its alpha is the extremum of the parabola through the last three points in ``s``. Beyond it
the branch runs back in alpha (the other *sheet*, with one more unstable direction), and the first
points it reaches on the grid are solved exactly at those alphas, to be continued in alpha again.
The path merges into a more symmetric branch (a pitchfork) where an overlap family it holds free
changes sign or vanishes: either a step crosses zero, or a step and its halving both converge onto
the symmetric branch; the merger's alpha is where the family's square, linear in alpha at a
pitchfork, vanishes.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from attnphase.saddle.equations.residual import ScaledResidual
from attnphase.saddle.equations.saddle_map import MemoisedMap
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.checks import Check, Failure
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.passes import search_in_passes
from attnphase.saddle.search.solver import SaddlePointSolver


@dataclass(frozen=True)
class ArcOutcome:
    """What the arclength continuation past a failed step found.

    ``fold``: the alpha of the fold it passed (NaN if none); ``points``: the points it solved on the
    grid, in order (the failed target itself if the branch goes on through it without a fold, or the
    first grid alpha beyond it where a solve converges; else the first points of the returning
    sheet); ``merged``: the label of the more symmetric branch the path converged onto or crossed
    (``None`` if it did neither), crossed at ``merged_at``; ``status`` the checks the last attempt
    failed."""

    fold: float
    points: tuple[FixedPoint, ...]
    merged: str | None = None
    merged_at: float = float("nan")  # where the path crossed the more symmetric branch, if it did
    status: str = ""

    @property
    def folded(self) -> bool:
        """The path turned back at a fold."""
        return bool(np.isfinite(self.fold))


class AlphaParameter:
    """Continuation in alpha: the path's parameter is alpha itself, on ``solver``."""

    name = "alpha"

    def __init__(self, solver: SaddlePointSolver) -> None:
        self.solver = solver

    def at(self, value: float) -> tuple[SaddlePointSolver, float] | None:
        """The solver and alpha at parameter ``value`` (``None`` outside alpha > 0)."""
        return (self.solver, value) if value > 0 else None

    @staticmethod
    def drift(evaluate: MemoisedMap, params: np.ndarray) -> np.ndarray | None:
        """``dF/dp`` at ``params``: in closed form (:meth:`SaddleMap.alpha_derivative`)."""
        return evaluate.alpha_derivative(params)


class ConstantParameter:
    """Continuation in the declaration's named constant ``name`` (e.g. ``omega``) at fixed ``alpha``,
    within ``[low, high]``: one :meth:`SaddlePointSolver.with_constants` per value."""

    def __init__(
        self, solver: SaddlePointSolver, name: str, alpha: float, low: float = -np.inf, high: float = np.inf
    ) -> None:
        self.solver, self.name, self.alpha, self.low, self.high = solver, name, alpha, low, high
        self._solvers: dict[float, SaddlePointSolver] = {}

    def at(self, value: float) -> tuple[SaddlePointSolver, float] | None:
        """The solver and alpha at parameter ``value`` (``None`` outside ``[low, high]``)."""
        if not self.low <= value <= self.high:
            return None
        if value not in self._solvers:
            self._solvers[value] = self.solver.with_constants({self.name: value})
        return self._solvers[value], self.alpha

    @staticmethod
    def drift(evaluate: MemoisedMap, params: np.ndarray) -> np.ndarray | None:
        """``None``: the derivative of ``F`` in a constant is not derived, the path differences it."""
        return None


class ArclengthPath:
    """A branch followed in arclength in the states ``(x, p)``: the branch's free order parameters and
    a parameter ``p`` (alpha, :class:`AlphaParameter`, or a constant, :class:`ConstantParameter`),
    from two starting ``(values, p)`` pairs (module docstring). Evaluations of ``F`` are memoised
    per parameter value."""

    def __init__(
        self,
        branch: Branch,
        start: Sequence[tuple[np.ndarray, float]],
        parameter: AlphaParameter | ConstantParameter,
    ) -> None:
        self.branch, self.parameter = branch, parameter
        self.solver = parameter.solver
        self.tuning = self.solver.tuning.arclength
        self.outside = self.solver.tuning.roots.outside_domain
        self.problem = self.solver.problem
        self.free = self.problem.layout.free_mask(branch)
        self.like = np.array(start[-1][0], dtype=float)
        self.weights = np.append(1.0 / (1.0 + np.abs(self.like[self.free])), 1.0)
        self.points = [np.append(np.asarray(values)[self.free], p) for values, p in start[-2:]]
        self._maps: dict[tuple[float, Effort], MemoisedMap] = {}

    def full(self, state: np.ndarray) -> np.ndarray:
        """Every order parameter at the path state ``state`` (the entries the branch holds at zero stay zero)."""
        full = self.like.copy()
        full[self.free] = state[:-1]
        return full

    def _residual_at(self, p: float, effort: Effort) -> ScaledResidual | None:
        """``G(., p)`` on the branch's free order parameters (``None`` if ``p`` is out of range)."""
        where = self.parameter.at(p)
        if where is None:
            return None
        solver, alpha = where
        evaluate = self._maps.setdefault((p, effort), MemoisedMap(solver.problem.map, alpha, effort))
        return ScaledResidual(evaluate, self.free, self.like, self.outside)

    def residual(self, state: np.ndarray, effort: Effort) -> np.ndarray:
        """``G(x, p)`` (module docstring); the guard's ``outside`` value where ``p`` is out of range
        (and, through :class:`ScaledResidual`, where ``x`` leaves the domain or ``F`` is not finite)."""
        residual = self._residual_at(float(state[-1]), effort)
        return np.full(state.size - 1, self.outside) if residual is None else residual(state[:-1])

    def jacobian(self, state: np.ndarray, effort: Effort) -> np.ndarray | None:
        """``dG/d(x, p)`` at ``state``: in ``x`` in closed form (:meth:`ScaledResidual.jacobian`), in ``p``
        from the parameter's ``drift`` or, where it has none, by a forward difference; ``None`` where
        either is not finite or ``p`` is out of range."""
        x, p = state[:-1], float(state[-1])
        residual = self._residual_at(p, effort)
        in_x = None if residual is None else residual.jacobian(x)
        if in_x is None:
            return None
        drift = self.parameter.drift(residual.evaluate, self.full(state))
        if drift is None:
            h = 1e-6 * max(abs(p), 1e-2)
            in_p = (self.residual(np.append(x, p + h), effort) - residual(x)) / h
        else:
            in_p = drift[self.free] / (1.0 + np.abs(x))
        jacobian = np.column_stack([in_x, in_p])
        return jacobian if np.all(np.isfinite(jacobian)) else None

    def observe(self, state: np.ndarray) -> FixedPoint:
        """The fixed point at ``state`` with every check (:meth:`SaddlePointSolver.observe`); flagged if
        its parameter is out of range."""
        p = float(state[-1])
        where = self.parameter.at(p) if np.all(np.isfinite(state)) else None
        if where is None:  # the corrector left the parameter's range
            solver, alpha = self.parameter.at(float(self.points[-1][-1]))
            last = solver.observe(self.full(self.points[-1]), alpha, self.branch)
            left = Failure(Check.RESIDUAL, f"the corrector left the range of {self.parameter.name}")
            return replace(last, failures=(left,))
        solver, alpha = where
        return solver.observe(self.full(state), alpha, self.branch)

    def secant(self) -> tuple[np.ndarray, float]:
        """The unit secant of the last two points in the metric ``W`` and their distance."""
        step = self.weights * (self.points[-1] - self.points[-2])
        length = float(np.linalg.norm(step))
        return step / length, length

    def cosine(self, state: np.ndarray) -> float:
        """The cosine between the last secant and the step from the last point to ``state``."""
        tangent, _ = self.secant()
        step = self.weights * (state - self.points[-1])
        return float(tangent @ step / max(float(np.linalg.norm(step)), 1e-300))

    def advance(self, ds: float) -> tuple[np.ndarray, FixedPoint]:
        """One predictor-corrector step of length ``ds``: the new state and its point (observed
        with every check of :meth:`SaddlePointSolver.observe`). Not appended to the path. As in
        :meth:`SaddlePointSolver.solve`, the corrector runs with the quick prox starts and, if the
        point does not pass the checks with all of them, in the passes of :mod:`saddle.search.passes`. (The
        path memoises the quick map per parameter value, :meth:`_residual_at`, so the refreshed pass
        replays the quick one from memory, at no cost, and the corrector goes on to the full map as
        it did with two passes.)"""
        tangent, _ = self.secant()
        predicted = self.points[-1] + ds * tangent / self.weights
        return search_in_passes(_Corrector(self, tangent, predicted), predicted, self.solver.tuning.prox.warm_start)

    def step(self, ds: float, longest: float) -> tuple[np.ndarray, FixedPoint, float, str]:
        """One accepted step from a first length ``ds``, halved (up to the tuning's ``max_halvings`` times)
        while the point leaves the branch or the path turns by more than ``min_cosine`` allows (unless
        it crosses a more symmetric branch, :meth:`flipped`): the
        state, its point, the next step's length (grown by ``step_growth`` up to ``longest``) and
        an empty status; or, if every length failed, the last attempt and the reason it failed."""
        status, symmetric = "", 0
        for _halving in range(self.tuning.max_halvings + 1):
            state, point = self.advance(ds)
            if self.solver.on_branch(point, self.branch):
                # through the more symmetric branch (a pitchfork) the path may turn sharply: the
                # crossing is what the caller looks for, so it is accepted whatever the angle
                if self.cosine(state) >= self.tuning.min_cosine or self.flipped(state)[0]:
                    return state, point, min(self.tuning.step_growth * ds, longest), ""
                turn = np.degrees(np.arccos(self.tuning.min_cosine))
                status = f"residual: the path turns by more than {turn:.0f} degrees"
            elif self._more_symmetric(point):
                # converged onto the branch the path is heading into: from a halved step too, it has
                # reached it (a pitchfork, where the family vanishes); the caller records the merger
                symmetric += 1
                if symmetric == 2:
                    return state, point, ds, ""
                status = point.status
            else:
                status = point.status
            ds /= 2
        return state, point, ds, status

    def _more_symmetric(self, point: FixedPoint) -> bool:
        """``point`` converged onto a more symmetric branch than the path's: some overlap family the
        path's branch leaves free vanishes there, and no other family is non-zero."""
        free = set(self.problem.layout.free_families(self.branch))
        return point.converged and set(self.problem.geometry.nonzero_families(point.values)) < free

    def flipped(self, state: np.ndarray) -> tuple[tuple[str, ...], float]:
        """The overlap families whose leading entry changes sign between the last point and ``state``
        or vanishes at ``state`` (:meth:`OverlapGeometry.nonzero_families`), and the alpha where the
        first of them crosses zero (linear interpolation; NaN if none does)."""
        before, after = self.full(self.points[-1]), self.full(state)
        geometry, layout = self.problem.geometry, self.problem.layout
        bound = geometry.overlap_bounds(before)
        # onto the symmetric branch: a family non-zero at the last point vanishes (as a point's label reads it)
        gone = set(geometry.nonzero_families(before)) - set(geometry.nonzero_families(after))
        reached = np.isin(layout.families, list(gone))
        flips = np.flatnonzero((bound != 0) & ((np.sign(before) * np.sign(after) < 0) | reached))
        if flips.size == 0:
            return (), float("nan")
        i = flips[0]
        families = tuple(dict.fromkeys(str(layout.families[j]) for j in flips))
        if reached[i] and len(self.points) >= 2:
            # onto the symmetric branch at a pitchfork, where the square of the family's entry is
            # linear in alpha: its zero from the last two points, within the step
            earlier = self.full(self.points[-2])
            (a0, s0), (a1, s1) = (self.points[-2][-1], earlier[i] ** 2), (self.points[-1][-1], before[i] ** 2)
            if s0 != s1:
                at = a1 + s1 * (a1 - a0) / (s0 - s1)
                low, high = sorted((float(a1), float(state[-1])))
                return families, float(min(max(at, low), high))
        w = before[i] / (before[i] - after[i])
        at = float(self.points[-1][-1] + w * (state[-1] - self.points[-1][-1]))
        return families, at

    def remaining_label(self, state: np.ndarray, flipped: Sequence[str]) -> str:
        """The declaration's label of the families non-zero at ``state`` but those ``flipped``: the branch
        the path merges into."""
        kept = [f for f in self.problem.geometry.nonzero_families(self.full(state)) if f not in flipped]
        return self.problem.compiled.system.label(kept)

    def turned(self, extreme: int, direction: int, wiggle: float) -> bool:
        """The path has come back from its extreme point (index ``extreme``) by more than ``wiggle``."""
        return bool(direction * (self.points[extreme][-1] - self.points[-1][-1]) > wiggle)

    def fold(self, extreme: int, direction: int, wiggle: float) -> float:
        """The alpha of the fold if the path has turned: the extremum of the parabola in arclength
        through the extreme point and its neighbours (their largest alpha if the fit does not peak
        between them); NaN if it has not turned."""
        if not self.turned(extreme, direction, wiggle):
            return float("nan")
        near = np.array(self.points[extreme - 1 : extreme + 2])
        alphas = near[:, -1]
        if len(near) < 3:
            return float(self.points[extreme][-1])
        steps = np.linalg.norm(np.diff(near * self.weights, axis=0), axis=1)
        s = np.concatenate([[0.0], np.cumsum(steps)])
        coefficients = np.polyfit(s, alphas, 2)
        a, b = coefficients[0], coefficients[1]
        if a == 0 or not s[0] <= -b / (2 * a) <= s[-1]:
            return float(self.points[extreme][-1])
        return float(np.polyval(coefficients, -b / (2 * a)))


def continue_past(
    solver: SaddlePointSolver, branch: Branch, history: Sequence[FixedPoint], grid: Sequence[float], direction: int
) -> ArcOutcome:
    """Follow ``branch`` in arclength from the last two points of ``history`` (going in ``direction``
    of alpha) after a continuation step in alpha failed: until the path reaches the next ``grid``
    alpha in ``direction`` (that point, or if no solve converges there the first grid alpha beyond it
    where one does, is solved and returned: the branch goes on), or turns at a
    fold and comes back across the tuning's ``return_points`` grid alphas (solved and returned, with the
    fold's alpha), or leaves the branch.

    Near a fold the path may wiggle in alpha by a little (the map is only piecewise smooth where the
    prox changes basin at some nodes), so the fold is where alpha is extremal on the path, and the
    path has turned once it has come back by the tuning's ``wiggle`` of the last grid step."""
    path = ArclengthPath(branch, [(p.values, p.alpha) for p in history[-2:]], AlphaParameter(solver))
    tuning = path.tuning
    _, longest = path.secant()
    ds = tuning.first_step * longest
    begin = history[-1].alpha
    wiggle = tuning.wiggle * abs(begin - history[-2].alpha)
    extreme = len(path.points) - 1  # the path's point furthest in ``direction``
    returned: list[FixedPoint] = []
    solved: set[float] = set()
    status = ""
    for _ in range(tuning.max_steps):
        state, point, ds, status = path.step(ds, longest)
        if status:  # off the branch at the shortest step: converged onto a more symmetric branch, or failed
            merged = point.branch if point.converged and point.branch != branch.name else None
            return ArcOutcome(path.fold(extreme, direction, wiggle), tuple(returned), merged=merged, status=status)
        previous = path.points[-1]
        flipped, at = path.flipped(state)
        if flipped:  # through zero: the path crossed the more symmetric branch at a pitchfork
            merged = path.remaining_label(previous, flipped)
            return ArcOutcome(path.fold(extreme, direction, wiggle), tuple(returned), merged=merged, merged_at=at)
        path.points.append(state)
        if direction * (state[-1] - path.points[extreme][-1]) > 0:
            extreme = len(path.points) - 1
        forward = direction * (state[-1] - previous[-1]) > 0
        for target in _crossed(grid, float(previous[-1]), float(state[-1])):
            ahead = direction * (target - begin) > 0
            if target in solved or forward != ahead or not (forward or path.turned(extreme, direction, wiggle)):
                continue
            found = _solve_between(solver, branch, path, previous, state, target)
            if found is None:
                continue
            solved.add(target)
            if forward:  # the branch goes on through the target
                return ArcOutcome(float("nan"), (found,))
            returned.append(found)
            if len(returned) == tuning.return_points:
                break
        if len(returned) == tuning.return_points:
            break
    else:
        status = status or "no fold within the arclength steps"
    return ArcOutcome(path.fold(extreme, direction, wiggle), tuple(returned), status=status)


def _crossed(grid: Sequence[float], start: float, stop: float) -> list[float]:
    """The grid alphas strictly after ``start`` up to ``stop``, in the order the path meets them."""
    low, high = sorted((start, stop))
    inside = [a for a in grid if low < a <= high] if stop > start else [a for a in grid if low <= a < high]
    return sorted(inside, reverse=stop < start)


def _solve_between(solver, branch, path, before, after, target) -> FixedPoint | None:
    """The point of the branch at ``target`` from the linear interpolation of two path states, if it
    is the path's (within half the distance between the two states: not another sheet's point)."""
    w = (target - before[-1]) / (after[-1] - before[-1])
    between = before + w * (after - before)
    point, _ = solver.solve(target, branch, initial=path.full(between))
    if not solver.on_branch(point, branch):
        return None
    distance = np.linalg.norm(path.weights * (np.append(point.values[path.free], target) - between))
    if distance > 0.5 * np.linalg.norm(path.weights * (after - before)) + 1e-6:
        return None
    return replace(point, alpha=float(target))


class PathEnd(enum.StrEnum):
    """Why a path in a constant stopped (:class:`ConstantPath`)."""

    REACHED = "reached"  # the constant reached the value asked for
    MERGED = "merged"  # the path crossed a more symmetric branch, named in the detail
    OUT_OF_RANGE = "out of range"  # the first step leaves the constant's bounds
    FAILED = "failed"  # a step failed; the detail names the checks
    STEPS = "steps"  # the most steps were taken


@dataclass(frozen=True)
class ConstantPath:
    """A fixed point followed in the constant ``name`` at fixed alpha (:func:`continue_in_constant`):
    the constant's ``values`` along the path and the ``points`` there (in path order, every one
    converged), the ``folds`` passed (the constant's value at each), why the path stopped (``end``, with
    its ``detail``: the branch merged into at ``merged_at``, or the checks the last step failed)."""

    name: str
    values: tuple[float, ...]
    points: tuple[FixedPoint, ...]
    folds: tuple[float, ...]
    end: PathEnd
    detail: str = ""
    merged_at: float = float("nan")


def continue_in_constant(
    solver: SaddlePointSolver,
    point: FixedPoint,
    name: str,
    stop: float,
    step: float = 0.02,
    bounds: tuple[float, float] = (-np.inf, np.inf),
    max_steps: int | None = None,
) -> ConstantPath:
    """Follow the converged fixed point ``point`` of ``solver`` in the declaration's constant ``name``
    from its value towards ``stop``, at the point's alpha, in pseudo-arclength (module docstring):
    through folds, where the constant turns back (each recorded), until the constant reaches
    ``stop``, the path crosses a more symmetric branch or a step fails. ``step``: the first change
    of the constant; ``bounds``: the constant's allowed range (e.g. ``(0, 1)`` for omega); ``max_steps``:
    the most arclength steps (default: the tuning's)."""
    branch = solver.branch(point.branch)
    parameter = ConstantParameter(solver, name, point.alpha, *bounds)
    start = solver.problem.constant(name)
    max_steps = solver.tuning.arclength.max_steps if max_steps is None else max_steps
    direction = 1 if stop > start else -1
    first = start + direction * step
    where = parameter.at(first)
    if where is None:
        return ConstantPath(name, (start,), (point,), (), PathEnd.OUT_OF_RANGE, f"{name} = {first:g}")
    second, _ = where[0].solve(point.alpha, branch, initial=point.values)
    if not solver.on_branch(second, branch):
        if second.converged:
            return ConstantPath(name, (start,), (point,), (), PathEnd.MERGED, second.branch)
        return ConstantPath(name, (start,), (point,), (), PathEnd.FAILED, second.status)
    path = ArclengthPath(branch, [(point.values, start), (second.values, first)], parameter)
    _, longest = path.secant()
    ds, heading, extreme = longest, direction, 1
    wiggle = path.tuning.wiggle * step
    values, points, folds = [start, first], [point, second], []
    end, detail, merged_at = PathEnd.STEPS, f"{max_steps} steps", float("nan")
    for _ in range(max_steps):
        if direction * (values[-1] - stop) >= 0 and heading == direction:
            end, detail = PathEnd.REACHED, ""
            break
        state, found, ds, status = path.step(ds, longest)
        if status:
            end, detail = PathEnd.FAILED, status
            break
        flipped, at = path.flipped(state)
        if flipped:
            end, detail, merged_at = PathEnd.MERGED, path.remaining_label(path.points[-1], flipped), at
            break
        path.points.append(state)
        values.append(float(state[-1]))
        points.append(found)
        if heading * (values[-1] - values[extreme]) > 0:
            extreme = len(values) - 1
        elif path.turned(extreme, heading, wiggle):  # the constant came back: a fold at its extreme
            folds.append(path.fold(extreme, heading, wiggle))
            heading, extreme = -heading, len(values) - 1
    return ConstantPath(name, tuple(values), tuple(points), tuple(folds), end, detail, merged_at)


class _Corrector:
    """The passes of one corrector step of ``path`` (:meth:`ArclengthPath.advance`): the bordered system at
    the ``predicted`` state, the verification a ``(state, point)`` pair."""

    def __init__(self, path: ArclengthPath, tangent: np.ndarray, predicted: np.ndarray) -> None:
        self.path, self.tangent, self.predicted = path, tangent, predicted

    def search(self, state: np.ndarray, effort: Effort) -> tuple[np.ndarray, bool]:
        system = _Bordered(self.path, effort, self.tangent, self.predicted)
        roots = self.path.solver.roots
        state, _ = roots(system, state)
        return state, roots.settles(system, state)

    def verify(self, state: np.ndarray) -> tuple[np.ndarray, FixedPoint]:
        return state, self.path.observe(state)

    def accepted(self, found: tuple[np.ndarray, FixedPoint]) -> bool:
        return found[1].converged or not np.all(np.isfinite(found[0]))


class _Bordered:
    """The corrector's system at a predicted state: ``G(y) = 0`` and ``t . W (y - y_pred) = 0`` (module
    docstring), with its Jacobian (:meth:`ArclengthPath.jacobian` and the constant row ``t W``)."""

    def __init__(self, path: ArclengthPath, effort: Effort, tangent: np.ndarray, predicted: np.ndarray) -> None:
        self.path, self.effort, self.tangent, self.predicted = path, effort, tangent, predicted

    def __call__(self, state: np.ndarray) -> np.ndarray:
        arc = self.tangent @ (self.path.weights * (state - self.predicted))
        return np.append(self.path.residual(state, self.effort), arc)

    def jacobian(self, state: np.ndarray) -> np.ndarray | None:
        """``d/dy`` of the system; ``None`` where ``dG/dy`` is not available."""
        top = self.path.jacobian(state, self.effort)
        return None if top is None else np.vstack([top, self.tangent * self.path.weights])
