"""Anchors of a branch found from the branches it contains: rays in the loss landscape (THEORY.md sec. 3, 6).

A branch that leaves an overlap family free contains, as its subspace, the branch that holds that
family at zero too (the paper's mixed branch contains the positional and the semantic ones). From a
converged point ``P`` of such a subspace branch, a ray holds the family's leading entry at ``s``
times its Cauchy-Schwarz bound and solves every other saddle-point equation
(:class:`~attnphase.saddle.search.constrained.ConstrainedSolver`): along it the training loss ``eps(s)`` is
the lowest among weights with that overlap, and ``d eps / d s`` vanishes at ``s = 0`` (the loss is
even in the family). Where it vanishes again at ``s* > 0`` every equation holds: a fixed point with
the family non-zero. From a minimum (``eps`` rises first) it is the barrier towards another minimum,
a saddle; from a point unstable along the family (it falls first) it is the minimum the fall ends
in. ``s`` grows along the tuning's ``ray`` steps, and on along its ``falling`` steps while the ray still
falls there (the bound is the family's at ``P``, and q grows along a falling ray, so the minimum may lie beyond it),
each solve starting from the secant extrapolation of the two before (order parameters and
multipliers; from the last point where that leaves the domain); the root is bracketed by the first
sign change of the gradient. A ray ends, meeting nothing, at a constrained point where another
family the branch leaves free vanishes: that point lies in a smaller invariant subspace of the map,
which the ray's later solves, started from it, do not leave, and in which the branch has no point.
The first step is verified with every prox start, the later ones with the quick starts
only, whose warm start carries the basins the first step found: a ray only brackets a root, and the
fixed point it meets is solved and verified with every start. A solve of the containing branch from
the secant estimate of the root (the bracket's two constrained points, interpolated where the
gradient's chord vanishes) must converge onto the branch; if it does not, the root is refined by
Brent's method and the solve repeated from there (where the ray's solves jump between sheets the
bracket may hold no root, and then no point of the branch is found).

Like the anchor search (:class:`~attnphase.saddle.search.anchors.RefineCoarse`), the ray is followed on
the anchor search's coarse rule (:meth:`AnchorSearch.coarse`), where evaluations are cheap, and the
point it meets is refined
on the solver's rule; if that refinement leaves the branch, or the coarse ray stalls (a constrained
solve gives no usable gradient), the ray is followed again on the solver's rule. A coarse ray that
meets nothing, or leaves the branch's subspace, is not.
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import ConstrainedPoint, FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.constrained import ConstrainedSolver, Wanted
from attnphase.saddle.search.extrapolation import lagrange
from attnphase.saddle.search.solver import SaddlePointSolver


def along_ray(search: AnchorSearch, point: FixedPoint, family: str, target: Branch) -> FixedPoint | None:
    """The fixed point of ``target`` (which leaves ``family`` free) that the ray from ``point`` (a
    converged point at which ``family`` is zero) along ``family`` meets first (module docstring), on the
    solver of the anchor ``search`` and its coarse search's, or ``None`` if the ray meets none."""
    solver, coarse = search.solver, search.coarse()
    if coarse is None:
        return _follow(solver, point, family, target)[0]
    rough, stalled = _follow(coarse.solver, point, family, target)
    if rough is None and not stalled:
        return None  # the coarse ray meets no point of the branch: neither does this one
    if rough is not None:
        found, _ = solver.solve(point.alpha, target, initial=rough.values)
        if solver.on_branch(found, target):
            return found
    return _follow(solver, point, family, target)[0]


def _follow(
    solver: SaddlePointSolver, point: FixedPoint, family: str, target: Branch
) -> tuple[FixedPoint | None, bool]:
    """:func:`along_ray` on ``solver``'s own rule, and whether the ray stalled: a constrained solve
    along it gave no usable gradient before it met the branch or ended (the coarse rule's solves may
    stall where the solver's own do not)."""
    problem = solver.problem
    layout, geometry = problem.layout, problem.geometry
    index = next(i for i, e in enumerate(layout.entries) if e.family == family and e.entry == (0, 0))
    bound = float(geometry.overlap_bounds(point.values)[index])
    if not bound > 0:
        return None, False
    ray = ConstrainedSolver(solver, (layout.names[index],))
    largest = solver.tuning.stability.hessian_residual
    others = set(layout.free_families(target)) - {family}
    steps, falling = solver.tuning.anchors.ray, solver.tuning.anchors.falling
    previous: tuple[float, ConstrainedPoint] | None = None
    before: tuple[float, ConstrainedPoint] | None = None
    for s in (*steps, *falling):
        if s > steps[-1] and previous is not None and previous[1].gradient[0] >= 0:
            return None, False  # a rising ray that met nothing ends at the last of its steps
        initial, multipliers = _predicted(solver, ray, s, before, previous, point.values)
        verify = Effort.FULL if previous is None else Effort.QUICK  # the later steps start from its basins
        here = ray.solve(point.alpha, [s * bound], initial, multipliers, False, Wanted.GRADIENT, verify)
        usable = here.usable_gradient(largest)
        if usable and previous is not None and np.sign(here.gradient[0]) != np.sign(previous[1].gradient[0]):
            return _polish(solver, ray, point.alpha, bound, previous, (s, here), target), False
        if others - set(geometry.nonzero_families(here.values)):
            return None, False  # the ray has left the branch's subspace for a smaller invariant one
        if not usable:
            return None, True
        before, previous = previous, (s, here)
    return None, False


def _predicted(solver, ray, s, before, previous, origin) -> tuple[np.ndarray, np.ndarray | None]:
    """The start of the ray's solve at ``s``: the secant extrapolation of the last two ray points
    (order parameters and multipliers) where it stays in the order parameters' domain, else the last
    point, else ``origin`` (the fixed point the ray leaves) with its own conjugates as multipliers."""
    if previous is None:
        return origin, None
    s1, last = previous
    values, multipliers = last.values, last.conjugates[ray.fixed_index]
    if before is None:
        return values, multipliers
    s0, first = before
    stacked = [np.concatenate([p.values, p.conjugates[ray.fixed_index]]) for p in (first, last)]
    extrapolated = lagrange([s0, s1], stacked, s)
    n = values.size
    if solver.problem.geometry.domain_violations(extrapolated[:n]):
        return values, multipliers
    return extrapolated[:n], extrapolated[n:]


def _polish(solver, ray, alpha, bound, low, high, target) -> FixedPoint | None:
    """A solve of ``target`` from the secant estimate of the gradient's root between the ray points
    ``low`` and ``high`` (pairs of ``s`` and the constrained point); if it lands off the branch,
    Brent's method for the root and a solve of ``target`` from the constrained point there."""
    (_, below), (_, above) = low, high
    slope = below.gradient[0] - above.gradient[0]
    weight = below.gradient[0] / slope
    found, _ = solver.solve(alpha, target, initial=(1.0 - weight) * below.values + weight * above.values)
    if solver.on_branch(found, target):
        return found
    near = {low[0]: low[1], high[0]: high[1]}
    largest = solver.tuning.stability.hessian_residual

    def gradient(s: float) -> float:
        closest = near[min(near, key=lambda t: abs(t - s))]
        multipliers = closest.conjugates[ray.fixed_index]
        here = ray.solve(alpha, [s * bound], closest.values, multipliers, False, Wanted.GRADIENT, Effort.QUICK)
        if not here.usable_gradient(largest):
            raise _Unusable
        near[s] = here
        return float(here.gradient[0])

    try:
        root = scipy.optimize.brentq(gradient, low[0], high[0], xtol=1e-4 * high[0])
    except _Unusable:
        return None
    found, _ = solver.solve(alpha, target, initial=near[root].values)
    return found if solver.on_branch(found, target) else None


class _Unusable(Exception):
    """A constrained solve inside the bracket gave no usable gradient."""
