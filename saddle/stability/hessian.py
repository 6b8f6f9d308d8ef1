"""The Hessian of the training loss in the overlaps at a fixed point (THEORY.md sec. 3-5).

A fixed point is stable when the Hessian of ``eps`` in all overlap entries is positive definite there: a
local minimum of the training loss. The Hessian is found by elimination from the Hessian of ``Phi``
(:func:`by_elimination`: a few evaluations of the map at one point) or, independently, from the
gradients of constrained points around it (:func:`by_constraints`: a constrained solve per direction);
at a vanishing student under a regulariser with a kink there it is a cusp (:func:`at_a_cusp`). ``eps`` is
even in every overlap family a branch holds at zero (the symmetry that flips the family), so the Hessian
has no block between such a family and the others; a negative curvature in that family means weights
with lower training loss off the branch, and where it changes sign along a branch a branch with that
family non-zero is born. Where the declaration has rotations, the Hessian is taken on the slice of the
gauge of the point's branch: along an orbit the loss is flat, and only the rule's error would sign that
curvature.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.points.checks import Failure, HessianCheck
from attnphase.saddle.points.fixed_point import ConstrainedPoint, FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.constrained import ConstrainedSolver
from attnphase.saddle.search.roots import largest_halving
from attnphase.saddle.search.solver import SaddlePointSolver


@dataclass(frozen=True)
class Stability:
    """The Hessian of the training loss in the overlap entries at a fixed point."""

    names: tuple[str, ...]  # the overlap entries, in the order of the Hessian's rows
    families: tuple[str, ...]  # the family of each entry
    hessian: np.ndarray
    problem: Failure | None = None  # why the Hessian is not usable (None when every evaluation is)
    #: By elimination: the largest difference between the Hessians from the forward and from the backward
    #: differences of ``E[dM/dX]`` in ``q`` and ``V``, relative to the largest entry; a measure of their
    #: error and of how much the elimination amplifies it.
    spread: float = 0.0

    @property
    def converged(self) -> bool:
        """Every evaluation behind the Hessian is usable and the Hessian is finite."""
        return self.problem is None

    def curvature(self, family: str) -> float:
        """The smallest eigenvalue of the Hessian's block of ``family``: negative means weights with a
        lower training loss nearby, along that family (``inf`` at a cusp, :func:`at_a_cusp`)."""
        rows = [i for i, f in enumerate(self.families) if f == family]
        return _smallest_eigenvalue(self.hessian[np.ix_(rows, rows)])

    @property
    def stable(self) -> bool:
        """The Hessian is positive definite: a local minimum of the training loss."""
        return bool(_smallest_eigenvalue(self.hessian) > 0)


def _smallest_eigenvalue(symmetric: np.ndarray) -> float:
    """The smallest eigenvalue of ``symmetric``; of a diagonal one (a cusp's infinite curvatures), its
    smallest diagonal entry."""
    if not symmetric[~np.eye(len(symmetric), dtype=bool)].any():
        return float(np.diag(symmetric).min())
    return float(np.linalg.eigvalsh(symmetric).min())


def stability(solver: SaddlePointSolver, point: FixedPoint) -> Stability:
    """The Hessian of ``eps`` in every overlap entry at the fixed point ``point`` (THEORY.md sec. 3): by
    elimination (:func:`by_elimination`), or, at a vanishing student, where ``Psi_out`` cannot be
    differenced in ``q`` (``q >= 0``), from the gradients of constrained points (:func:`by_constraints`),
    unless the regulariser has a kink there (:func:`at_a_cusp`), and from constrained points too where the
    elimination's forward and backward differences in ``q`` and ``V`` disagree by more than the tuning's
    ``elimination_spread`` (:attr:`Stability.spread`)."""
    problem = solver.problem
    if problem.layout.vanishes(point.values):
        if problem.observables.regulariser_slope() > 0:
            return at_a_cusp(solver)
        return by_constraints(solver, point)
    found = by_elimination(solver, point)
    if found.spread > solver.tuning.stability.elimination_spread:
        return by_constraints(solver, point)
    return found


def at_a_cusp(solver: SaddlePointSolver) -> Stability:
    """The vanishing student ``W = 0`` under a regulariser that grows from it at a positive rate (the l1
    part of the elastic net): a strict local minimum with infinite curvature in every overlap entry. The
    scores are quadratic in ``W``, so the data term of the training loss rises from ``W = 0`` at second
    order only, while the regulariser rises at first order: near ``W = 0`` every move raises the loss, and
    in the overlaps, which move with ``W``, the constrained loss has a cusp rather than a curvature (its
    constrained points have ``V`` of order the root finder's tolerance and their solves stall; proximal
    gradient descent from a random start ends at ``W = 0`` exactly, tests/test_vanishing.py)."""
    layout = solver.problem.layout
    index = layout.overlap_entries
    names = tuple(layout.names[i] for i in index)
    families = tuple(str(layout.families[i]) for i in index)
    return Stability(names, families, np.diag(np.full(len(index), np.inf)))


def by_elimination(solver: SaddlePointSolver, point: FixedPoint) -> Stability:
    """The Hessian of ``eps`` in the overlap entries ``X`` at the fixed point ``point``, from the Hessian
    ``H`` of ``Phi(x, xhat) = trace(x, xhat) + Psi_w(xhat) + alpha Psi_out(x)`` in all its variables
    (THEORY.md sec. 3): ``eps(X) = -Phi`` made stationary in the other variables ``Y`` (every other order
    parameter and every conjugate), so ``d^2 eps / dX^2 = -(H_XX - H_XY H_YY^-1 H_YX)``. The blocks:
    ``d^2 trace / dx dxhat`` is constant and ``Psi_w''`` closed form; ``Psi_out'' = -d E[dM/dX] / dx`` is
    the one numerical block, by central differences of the expectations of an evaluation of the map, each
    entry moved by the tuning's ``hessian_step`` times its Cauchy-Schwarz bound (an overlap) or
    ``smoothing_step`` times its magnitude (``q``, ``V``; the differences must span many of the prox's
    kinks). In a family that is zero at the point, ``Psi_out`` is even: the difference is one-sided
    (``E[dM/dX](delta) / delta`` within the family, the expectation vanishing at zero) and the family has
    no mixed derivative with any other; both are exact to order ``delta^2``. Every mixed derivative of
    ``Phi`` between a variable odd in a held family and one even in it vanishes, so where every overlap
    family is held (the most symmetric point) the other entries are not moved at all. The evaluations are
    quick ones, their prox started from every minimum the point's own full prox found at each node, then
    from ``+-omega``; a move that leaves the point's zero pattern also from those minima's mirror images.
    The entries the gauge of the point's branch holds at zero stay there, neither moved nor eliminated."""
    problem, tuning = solver.problem, solver.tuning.stability
    saddle_map = problem.map
    x, alpha = point.values, point.alpha
    families = problem.layout.families
    overlaps, held, overlap_deltas, gauge = _overlap_moves(solver, x, tuning.hessian_step)
    in_held = np.isin(families, list(held))
    free_overlaps = not np.all(in_held[overlaps])
    deltas = tuning.smoothing_step * np.abs(x)
    deltas[overlaps] = overlap_deltas
    deltas = np.where(deltas > 0, deltas, tuning.hessian_step)
    deltas = np.array([_within_domain(solver, x, j, delta, one_sided=in_held[j]) for j, delta in enumerate(deltas)])
    with np.errstate(all="ignore"):
        centre = saddle_map.evaluate(x, alpha, Effort.FULL)  # the warm prox start of the others
        evaluations = [centre]
        second = np.zeros((x.size, x.size))
        forward, backward = second.copy(), second.copy()  # the columns of q and V one-sided, for the spread
        for j, delta in enumerate(deltas):
            moved = np.eye(x.size)[j] * delta
            if gauge[j]:
                continue  # held on the gauge's slice: not a variable of eps there
            if in_held[j]:
                evaluations.append(saddle_map.evaluate(x + moved, alpha, Effort.QUICK, around=centre))
                second[:, j] = np.where(families == families[j], evaluations[-1].expectations / delta, 0.0)
                continue
            if not free_overlaps:
                continue  # the held families' block does not see this entry (docstring)
            evaluations += [saddle_map.evaluate(x + sign * moved, alpha, Effort.QUICK) for sign in (1.0, -1.0)]
            second[:, j] = (evaluations[-2].expectations - evaluations[-1].expectations) / (2 * delta)
            second[in_held, j] = 0.0  # eps is even in a held family: no mixed derivative
            forward[:, j] = (evaluations[-2].expectations - centre.expectations) / delta
            backward[:, j] = (centre.expectations - evaluations[-1].expectations) / delta
            forward[in_held, j] = backward[in_held, j] = 0.0
        observables = problem.observables
        eliminate = Elimination(observables.coupling, observables.entropic_hessian(point.conjugates), alpha)
        others = np.setdiff1d(np.arange(2 * x.size), np.concatenate([overlaps, np.flatnonzero(gauge)]))
        hessian = eliminate(second, overlaps, others)
        central = np.isin(np.arange(x.size), overlaps)  # the overlaps' columns stay central in both
        forward[:, central], backward[:, central] = second[:, central], second[:, central]
        apart = eliminate(forward, overlaps, others) - eliminate(backward, overlaps, others)
        spread = float(np.abs(apart).max() / max(np.abs(hessian).max(), np.finfo(float).tiny))
    hessian[np.ix_(in_held[overlaps], ~in_held[overlaps])] = 0.0
    hessian[np.ix_(~in_held[overlaps], in_held[overlaps])] = 0.0
    names = tuple(problem.layout.names[i] for i in overlaps)
    unconverged = max(ev.prox_unconverged_weight for ev in evaluations)
    failure = _hessian_problem(hessian)
    allowed = solver.tuning.acceptance.prox_weight
    if unconverged > allowed:
        count = len(evaluations)
        detail = f"unconverged on weight {unconverged:.1e} > {allowed:g} in one of the Hessian's {count} evaluations"
        failure = Failure(HessianCheck.PROX, detail)
    return Stability(names, tuple(str(f) for f in families[overlaps]), (hessian + hessian.T) / 2, failure, spread)


class Elimination:
    """``d^2 eps / dX^2 = -(H_XX - H_XY H_YY^-1 H_YX)`` from ``Psi_out''`` (``second``, the differences of
    ``E[dM/dX]``), the constant coupling of ``x`` and ``xhat`` in the trace and ``Psi_w''`` (the entropic
    Hessian), at ``alpha`` (:func:`by_elimination`)."""

    def __init__(self, coupling: np.ndarray, entropic: np.ndarray, alpha: float) -> None:
        self.coupling, self.entropic, self.alpha = coupling, entropic, alpha

    def __call__(self, second: np.ndarray, kept: np.ndarray, others: np.ndarray) -> np.ndarray:
        """The Hessian of ``eps`` in the variables ``kept`` of ``Phi``, the variables ``others`` eliminated."""
        phi = np.block([[-self.alpha * (second + second.T) / 2, self.coupling], [self.coupling.T, self.entropic]])
        eliminated = phi[np.ix_(kept, others)] @ np.linalg.solve(phi[np.ix_(others, others)], phi[np.ix_(others, kept)])
        return -(phi[np.ix_(kept, kept)] - eliminated)


def by_constraints(solver: SaddlePointSolver, point: FixedPoint) -> Stability:
    """The Hessian of ``eps`` in every overlap entry at the fixed point ``point`` (THEORY.md sec. 3): every
    overlap entry held at its value, each moved in turn by ``delta``, the tuning's ``hessian_step`` times
    its Cauchy-Schwarz bound, and the column read off the gradients at the moved points. In a family that
    is zero at the point ``eps`` is even, and the column is ``gradient(delta) / delta`` (the gradient
    vanishes at the fixed point) within the family and zero outside it; elsewhere it is the central
    difference. Both are exact to order ``delta^2``. The constrained points need only their gradient, so
    their ``E[M*]`` is not corrected for kinks. Around a vanishing student they have ``q`` of order
    ``delta^2``, where the score form's error grows as ``1/q``; they are solved in the envelope form,
    continuous there (the prox stays near ``z = 0``). The entries the gauge of the point's branch holds at
    zero are held there too, and not moved. An independent route to :func:`by_elimination`."""
    if solver.problem.layout.vanishes(point.values):
        solver = solver.in_form(ConjugateForm.ENVELOPE)
    layout = solver.problem.layout
    largest = solver.tuning.stability.hessian_residual
    index, held_at_zero, deltas, gauge = _overlap_moves(solver, point.values, solver.tuning.stability.hessian_step)
    names = tuple(layout.names[i] for i in index)
    families = tuple(str(layout.families[i]) for i in index)
    fixed = np.concatenate([index, np.flatnonzero(gauge)])  # the moved entries, then the gauge's, held at zero
    constrained = ConstrainedSolver(solver, [layout.names[i] for i in fixed])
    centre = point.values[fixed]
    hessian = np.zeros((len(index), len(index)))
    unusable: list[ConstrainedPoint] = []
    solves = 0
    for j, delta in enumerate(deltas):
        gradients = []
        for sign in (1.0,) if families[j] in held_at_zero else (1.0, -1.0):
            held = centre.copy()
            held[j] += sign * delta
            moved = constrained.solve(point.alpha, held, point.values, point.conjugates[fixed], correct_kinks=False)
            solves += 1
            if not moved.usable_gradient(largest):
                unusable.append(moved)
            gradients.append(sign * moved.gradient[: len(index)])
        hessian[:, j] = np.mean(gradients, axis=0) / delta
        if families[j] in held_at_zero:  # no mixed derivative with another family: eps is even in this one
            hessian[np.array(families) != families[j], j] = 0.0
    failure = _hessian_problem(hessian)
    if unusable:
        worst = max(unusable, key=lambda p: p.residual)
        failed = ", ".join(worst.failed_checks) or "none, the gradient is not finite"
        detail = (
            f"{len(unusable)} of {solves} constrained points without a usable gradient "
            f"(largest residual {worst.residual:.1e}; failed checks: {failed})"
        )
        failure = Failure(HessianCheck.CONSTRAINED, detail)
    return Stability(names, families, (hessian + hessian.T) / 2, failure)


def _within_domain(solver: SaddlePointSolver, x: np.ndarray, j: int, delta: float, one_sided: bool) -> float:
    """``delta`` halved (up to the tuning's ``domain_halvings`` times) until the difference's moved points
    ``x + delta e_j`` (and ``x - delta e_j`` unless ``one_sided``) lie in the domain of the order parameters:
    near the edge of the domain, e.g. ``theta`` close to its bound ``sqrt(q rho)``, a step of ``q`` relative
    to its size crosses ``theta^2 = q rho``, where the quadrature's covariance is not positive."""
    geometry = solver.problem.geometry
    moves = np.eye(x.size)[j] * delta * np.array([[1.0]] if one_sided else [[1.0], [-1.0]])
    halvings = solver.tuning.stability.domain_halvings
    return delta * largest_halving(lambda t: all(geometry.in_domain(x + t * m) for m in moves), halvings)


def _hessian_problem(hessian: np.ndarray) -> Failure | None:
    """A :attr:`HessianCheck.NOT_FINITE` failure if an entry of ``hessian`` is NaN or infinite."""
    return None if np.all(np.isfinite(hessian)) else Failure(HessianCheck.NOT_FINITE, "not finite")


def _overlap_moves(
    solver: SaddlePointSolver, values: np.ndarray, step: float
) -> tuple[np.ndarray, frozenset[str], np.ndarray, np.ndarray]:
    """The indices of the overlap entries the Hessian is taken in, the overlap families that are zero at
    ``values`` (held there by the branch: every entry in the point's zero pattern, so that rounding residue
    left by a solve that converged into the family's subspace counts as zero), each of those entries' move
    for a Hessian column: ``step`` times its Cauchy-Schwarz bound (:func:`_bounds`), and the mask of the
    entries the gauge holds at zero (:func:`_gauge_of`), which are none of those entries."""
    layout = solver.problem.layout
    families = layout.families
    zero = np.array(solver.problem.patterns.zero_pattern(values))
    held = frozenset(f for f in layout.overlap_families if np.all(zero[families == f]))
    gauge = _gauge_of(solver, held)
    index = np.array([i for i in layout.overlap_entries if not gauge[i]], dtype=int)
    return index, held, step * _bounds(solver, values, index, tuple(families[index])), gauge


def _gauge_of(solver: SaddlePointSolver, held: frozenset[str]) -> np.ndarray:
    """The entries held at zero by the gauge of the branch whose held overlap families are ``held`` (none
    without rotations). A rotation ``W -> W R`` leaves the training loss unchanged and moves a fixed point
    along its orbit, so the Hessian of ``eps`` in every overlap entry has a zero eigenvalue along the orbit,
    whose sign only the rule's error decides. On the gauge's slice, which cuts every orbit once, the Hessian
    is the induced form on the directions across the orbits: the point is a minimum up to rotations where
    it is positive definite."""
    layout = solver.problem.layout
    branch = next((b for b in solver.branches if set(b.zero) == held), None)
    return np.zeros(len(layout.names), dtype=bool) if branch is None else layout.gauge_mask(branch)


def _bounds(solver: SaddlePointSolver, values: np.ndarray, index: Sequence[int], families: Sequence[str]) -> np.ndarray:
    """Each overlap entry's Cauchy-Schwarz bound, or the largest bound of its family's leading entries where
    the entry has none of its own."""
    bound = solver.problem.geometry.overlap_bounds(values)[list(index)]
    by_family: Mapping[str, float] = {f: bound[np.array(families) == f].max() for f in set(families)}
    return np.array([b if b > 0 else by_family[f] or 1.0 for b, f in zip(bound, families, strict=True)])
