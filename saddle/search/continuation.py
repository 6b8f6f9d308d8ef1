"""Carrying a branch from its last points to another alpha (THEORY.md sec. 4, 6): in alpha, and in
pseudo-arclength where a step in alpha fails.

:class:`Continuation` is the one interface the tracer (:mod:`saddle.search.tracer`) uses: a step in
alpha (:meth:`Continuation.step`: predict by extrapolation, correct by the solver's root search, halve
on failure), a point behind a lone anchor (:meth:`Continuation.behind`), and the arclength passage past a
failed step (:meth:`Continuation.past`, :func:`~attnphase.saddle.search.arclength.continue_past`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.arclength import ArcOutcome, continue_past
from attnphase.saddle.search.extrapolation import lagrange
from attnphase.saddle.search.solver import SaddlePointSolver


def predict(history: Sequence[FixedPoint], target: float, slope: np.ndarray | None = None) -> np.ndarray:
    """Lagrange extrapolation through the last (up to three) points of the branch; from a single point,
    along its ``slope`` ``dx/dalpha`` if known (else the point itself)."""
    if len(history) == 1 and slope is not None:
        return history[0].values + (target - history[0].alpha) * slope
    recent = history[-3:]
    return lagrange([p.alpha for p in recent], [p.values for p in recent], target)


class Continuation:
    """Continuation of ``branch`` on ``solver`` (module docstring), with the solver's tuning."""

    def __init__(self, solver: SaddlePointSolver, branch: Branch) -> None:
        self.solver, self.branch = solver, branch
        self.tuning = solver.tuning.continuation

    def on_branch(self, point: FixedPoint) -> bool:
        """``point`` is a converged point of the branch."""
        return self.solver.on_branch(point, self.branch)

    def step(
        self,
        history: Sequence[FixedPoint],
        target: float,
        jacobian: np.ndarray | None,
        slope: np.ndarray | None = None,
        halvings: int | None = None,
    ) -> tuple[FixedPoint, np.ndarray | None]:
        """From ``history[-1]`` to ``target``: a solve from the prediction (:func:`predict`; ``slope``, the
        branch's direction at ``history[0]``, while the history is that point alone), then from the last
        point itself, then, where both fail to converge, through the middle, halving up to ``halvings``
        times (default: the tuning's). A step that changes alpha by more than the tuning's
        ``max_relative_step`` goes through its geometric middle first. Returns the point (on the branch,
        or the last attempt) and the Jacobian estimate for the next step."""
        halvings = self.tuning.max_halvings if halvings is None else halvings
        last = history[-1]
        if abs(target - last.alpha) > self.tuning.max_relative_step * min(target, last.alpha):
            middle = float(np.sqrt(target * last.alpha))
            mid_point, mid_jac = self.step(history, middle, jacobian, slope, halvings)
            if not self.on_branch(mid_point):
                return mid_point, mid_jac
            history = [*history, mid_point]
            last = mid_point
            jacobian = mid_jac
        point, jac = self.solver.solve(target, self.branch, initial=predict(history, target, slope), jacobian=jacobian)
        if self.on_branch(point):
            return point, jac
        point, jac = self.solver.solve(target, self.branch, initial=last.values)
        if self.on_branch(point) or point.converged or halvings == 0:
            return point, jac  # a fixed point off the branch from both starts: it has merged
        middle = 0.5 * (last.alpha + target)
        mid_point, mid_jac = self.step(history, middle, None, slope, halvings - 1)
        if not self.on_branch(mid_point):
            return point, jac
        return self.step([*history, mid_point], target, mid_jac, None, halvings - 1)

    def behind(self, point: FixedPoint, target: float, slope: np.ndarray | None) -> list[FixedPoint]:
        """A point of the branch as far behind ``point`` in alpha as ``target`` is ahead of it (half-way to
        alpha = 0 if that is nearer), predicted along the branch's ``slope`` there; empty if that solve leaves
        the branch. With it a piece of a single point (an anchor whose first step failed) can be followed in
        arclength, which tells a fold between the two from a failure. It is not kept."""
        back = point.alpha - (target - point.alpha)
        back = back if back > 0 else 0.5 * point.alpha
        behind, _ = self.solver.solve(back, self.branch, initial=predict([point], back, slope), error_check=False)
        return [behind] if self.on_branch(behind) else []

    def past(self, history: Sequence[FixedPoint], grid: Sequence[float], direction: int) -> ArcOutcome:
        """The branch followed in arclength from the last two points of ``history`` in ``direction`` of alpha
        (:func:`~attnphase.saddle.search.arclength.continue_past`)."""
        return continue_past(self.solver, self.branch, history, grid, direction)

    def solve(self, alpha: float, initial: np.ndarray) -> FixedPoint:
        """The branch's point at ``alpha`` from ``initial`` (:meth:`SaddlePointSolver.solve`), checked."""
        return self.solver.solve(alpha, self.branch, initial=initial)[0]

    def tangent(self, point: FixedPoint) -> np.ndarray | None:
        """The branch's direction ``dx/dalpha`` at ``point`` (:meth:`SaddlePointSolver.tangent`)."""
        return self.solver.tangent(point, self.branch)
