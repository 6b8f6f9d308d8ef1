"""The stability of a fixed point as part of its record (THEORY.md sec. 3, 12): its curvature per overlap
family and whether it is a local minimum of the training loss (:mod:`saddle.stability.hessian`), and
whether the replica-symmetric point is stable against replica-symmetry breaking
(:mod:`saddle.stability.replicon`)."""

from __future__ import annotations

from dataclasses import replace

from attnphase.saddle.points.checks import Assessment
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.stability.hessian import stability
from attnphase.saddle.stability.replicon import replica_symmetry


def assess(solver: SaddlePointSolver, point: FixedPoint) -> FixedPoint:
    """``point`` with its curvature per overlap family and whether it is a minimum
    (:func:`~attnphase.saddle.stability.hessian.stability` on ``solver``); NaN curvatures and ``stable``
    ``None`` for a point that has not converged or whose Hessian could not be computed, the assessment
    saying which (:class:`~attnphase.saddle.points.checks.Assessment`); every converged point also with its
    replica symmetry (:func:`~attnphase.saddle.stability.replicon.replica_symmetry`)."""
    families = solver.problem.layout.overlap_families
    unassessed = dict(curvature=dict.fromkeys(families, float("nan")), stable=None)
    if not point.converged:
        return replace(point, **unassessed, assessment=Assessment.UNCONVERGED, stability_problem=None)
    symmetry = replica_symmetry(solver.problem, point, solver.tuning.replicon)
    point = replace(
        point,
        replicon=symmetry.replicon,
        replicon_smooth=symmetry.replicon_smooth,
        jump_ratio=symmetry.jump_ratio,
        rs_stable=symmetry.stable,
    )
    found = stability(solver, point)
    if not found.converged:
        return replace(point, **unassessed, assessment=Assessment.FAILED, stability_problem=found.problem)
    curvature = {f: found.curvature(f) for f in families}
    return replace(point, curvature=curvature, stable=found.stable, assessment=Assessment.ASSESSED)
