"""Continuation of fixed-point branches in alpha (THEORY.md sec. 4, 6).

A branch is started at an anchor alpha (:meth:`SaddlePointSolver.anchor`) and followed to
the other alphas in both directions. Each step predicts the next point by quadratic
extrapolation of the last three and corrects it with the quasi-Newton solver, reusing the
previous Jacobian. A failed step is retried from the last point with a fresh Jacobian, then
halved (up to ``max_halvings`` times). If that fails too, the branch *ends* there and the
failed point is kept with ``converged = False``; if instead the solution converges with the
branch's defining overlaps vanishing, the branch has merged into a more symmetric one (e.g.
the semantic branch into the agnostic one at a pitchfork), and ends there too. Either way
the end is recorded in the :class:`BranchTrace`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from attnphase.saddle.fixed_point import Branch, FixedPoint, SaddlePointSolver

PointCallback = Callable[[FixedPoint], None]
MAX_RELATIVE_STEP = 0.5  # |delta alpha| / alpha of one continuation step


@dataclass(frozen=True)
class BranchTrace:
    """The points of one branch over alpha, and where the branch could not be continued."""

    branch: str
    points: tuple[FixedPoint, ...]
    ended_below: float | None  # the branch could not be continued below this alpha
    ended_above: float | None  # ... nor above this one

    def converged(self) -> tuple[FixedPoint, ...]:
        """The points of the trace that converged."""
        return tuple(p for p in self.points if p.converged)

    def missing(self, alphas: Iterable[float]) -> dict[float, str]:
        """Why the branch has no point at each of ``alphas`` that it has no point at: it could not
        be continued past the alpha where it ended, with the checks the point there failed."""
        have = {p.alpha for p in self.points}
        flagged = [p for p in self.points if not p.converged]
        reasons = {}
        for alpha in sorted({float(a) for a in alphas} - have):
            if self.ended_below is not None and alpha < self.ended_below:
                side, edge = "below", self.ended_below
                ends = [p for p in flagged if p.alpha <= edge]
            elif self.ended_above is not None and alpha > self.ended_above:
                side, edge = "above", self.ended_above
                ends = [p for p in flagged if p.alpha >= edge]
            else:
                reasons[alpha] = "not computed"
                continue
            reason = f"the {self.branch} branch could not be continued {side} alpha = {edge:g}"
            if ends:
                end = min(ends, key=lambda p: abs(p.alpha - alpha))
                reason += f" (at alpha = {end.alpha:g}: {end.status})"
            reasons[alpha] = reason
        return reasons


def _sweep(
    solver: SaddlePointSolver,
    branch: Branch,
    start: FixedPoint,
    targets: Sequence[float],
    known: dict[float, FixedPoint],
    on_point: PointCallback,
    max_halvings: int,
) -> tuple[list[FixedPoint], float | None]:
    history = [start]
    jacobian: np.ndarray | None = None
    found: list[FixedPoint] = []
    for target in targets:
        if target in known and known[target].converged:
            history.append(known[target])
            jacobian = None
            continue
        point, jacobian = _step(solver, branch, history, target, jacobian, max_halvings)
        if not point.converged:  # reported, so that non-convergence is never silent
            found.append(point)
            on_point(point)
        if not solver.on_branch(point, branch):
            return found, history[-1].alpha
        found.append(point)
        on_point(point)
        history.append(point)
    return found, None


def _step(solver, branch, history, target, jacobian, max_halvings):
    """Continue from ``history[-1]`` to ``target``, halving the step on failure. Steps that
    change alpha by more than ``MAX_RELATIVE_STEP`` go through intermediate points first."""
    last = history[-1]
    if abs(target - last.alpha) > MAX_RELATIVE_STEP * min(target, last.alpha):
        middle = float(np.sqrt(target * last.alpha))
        mid_point, mid_jac = _step(solver, branch, history, middle, jacobian, max_halvings)
        if not solver.on_branch(mid_point, branch):
            return mid_point, mid_jac
        history = [*history, mid_point]
        last = mid_point
        jacobian = mid_jac
    predicted = _predict(history, target)
    point, jac = solver.solve(target, branch, initial=predicted, jacobian=jacobian)
    if solver.on_branch(point, branch):
        return point, jac
    point, jac = solver.solve(target, branch, initial=last.values)
    if solver.on_branch(point, branch) or point.solved or max_halvings == 0:
        return point, jac  # a fixed point off the branch from both starts: it has merged
    middle = 0.5 * (last.alpha + target)
    mid_point, mid_jac = _step(solver, branch, history, middle, None, max_halvings - 1)
    if not solver.on_branch(mid_point, branch):
        return point, jac
    return _step(solver, branch, [*history, mid_point], target, mid_jac, max_halvings - 1)


def _predict(history: Sequence[FixedPoint], target: float) -> np.ndarray:
    """Lagrange extrapolation through the last (up to three) points of the branch."""
    recent = history[-3:]
    prediction = np.zeros_like(recent[-1].values)
    for i, p in enumerate(recent):
        weight = 1.0
        for j, other in enumerate(recent):
            if j != i:
                weight *= (target - other.alpha) / (p.alpha - other.alpha)
        prediction += weight * p.values
    return prediction


def trace_branch(
    solver: SaddlePointSolver,
    branch: Branch,
    alphas: Iterable[float],
    anchor_alpha: float | None = None,
    known: Iterable[FixedPoint] = (),
    on_point: PointCallback | None = None,
    max_halvings: int = 2,
) -> BranchTrace:
    """All points of ``branch`` at ``alphas``, continued from ``anchor_alpha`` (default: the
    largest alpha). ``known`` points (e.g. from an interrupted run) are reused, not
    recomputed; ``on_point`` is called with every newly computed point."""
    grid = sorted({float(a) for a in alphas})
    anchor_alpha = grid[-1] if anchor_alpha is None else float(anchor_alpha)
    known_map = {p.alpha: p for p in known if p.branch == branch.name}
    notify = on_point or (lambda _p: None)
    if anchor_alpha in known_map and known_map[anchor_alpha].converged:
        anchor = known_map[anchor_alpha]
        new_points: list[FixedPoint] = []
    else:
        anchor = solver.anchor(anchor_alpha, branch)
        notify(anchor)
        new_points = [anchor]
    if not solver.on_branch(anchor, branch):
        return BranchTrace(branch.name, tuple(new_points), anchor_alpha, anchor_alpha)
    below = [a for a in grid if a < anchor_alpha][::-1]
    above = [a for a in grid if a > anchor_alpha]
    down, ended_below = _sweep(solver, branch, anchor, below, known_map, notify, max_halvings)
    up, ended_above = _sweep(solver, branch, anchor, above, known_map, notify, max_halvings)
    reused = [p for a, p in known_map.items() if a in grid]
    points = {p.alpha: p for p in [*reused, *new_points, *down, *up]}
    return BranchTrace(branch.name, tuple(points[a] for a in sorted(points)), ended_below, ended_above)
