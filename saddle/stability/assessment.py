"""The stability of a fixed point as part of its record (THEORY.md sec. 3): its curvature per overlap
family and whether it is a local minimum of the training loss (:mod:`saddle.stability.hessian`)."""

from __future__ import annotations

from dataclasses import replace

from attnphase.saddle.points.checks import Assessment
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.stability.hessian import stability


def assess(solver: SaddlePointSolver, point: FixedPoint) -> FixedPoint:
    """``point`` with its curvature per overlap family and whether it is a minimum
    (:func:`~attnphase.saddle.stability.hessian.stability` on ``solver``); NaN curvatures and ``stable``
    ``None`` for a point that has not converged or whose Hessian could not be computed, the assessment
    saying which (:class:`~attnphase.saddle.points.checks.Assessment`)."""
    families = solver.problem.layout.overlap_families
    unassessed = dict(curvature=dict.fromkeys(families, float("nan")), stable=None)
    if not point.converged:
        return replace(point, **unassessed, assessment=Assessment.UNCONVERGED, stability_problem=None)
    found = stability(solver, point)
    if not found.converged:
        return replace(point, **unassessed, assessment=Assessment.FAILED, stability_problem=found.problem)
    curvature = {f: found.curvature(f) for f in families}
    return replace(point, curvature=curvature, stable=found.stable, assessment=Assessment.ASSESSED)
