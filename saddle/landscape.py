"""The training loss at fixed overlaps, and the stability of fixed points (THEORY.md sec. 3-5).

Holding chosen order-parameter entries ``X`` at values ``X0`` and solving every other saddle-point
equation, with the conjugates of ``X`` as Lagrange multipliers
(:class:`~attnphase.replica.saddle_equations.ConstrainedSystem`), gives ``eps(X0) = -Phi``: the
lowest training loss among all weights whose overlaps are ``X0``. Over the overlap entries this is
the loss landscape in the overlap plane; its gradient ``-dPhi/dX`` comes with every point, and its
stationary points are the fixed points of the full system.

A fixed point is stable when the Hessian of ``eps`` in all overlap entries is positive definite
there (:func:`stability`): a local minimum of the training loss. The Hessian is found by elimination
from the Hessian of ``Phi`` (:func:`stability_by_elimination`: a few evaluations of the map at one
point) or, independently, from the gradients of constrained points around it
(:func:`stability_by_constraints`: a constrained solve per direction). ``eps`` is even in every overlap
family a branch holds at zero (the symmetry that flips the family), so the Hessian has no block
between such a family and the others; a negative curvature in that family means weights with lower
training loss off the branch, and where it changes sign along a branch a branch with that family
non-zero is born.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter

import numpy as np

from attnphase.saddle.fixed_point import (
    ASSESSED,
    CONVERGED,
    STATUS_SEPARATOR,
    UNASSESSED_UNCONVERGED,
    FixedPoint,
    failed_checks,
)
from attnphase.saddle.passes import search_in_passes
from attnphase.saddle.roots import largest_halving
from attnphase.saddle.saddle_map import Evaluation, MemoisedMap
from attnphase.saddle.solver import SaddlePointSolver
from attnphase.saddle.validation import check_alpha

#: Step of the finite differences of the gradient, as a fraction of each entry's Cauchy-Schwarz bound.
#: Its error, of order step^2, shifts where a curvature changes sign (a bifurcation): at omega = 0.3
#: a step of 5e-2 puts the agnostic point's sign change 6e-3 above where the semantic branch's theta
#: extrapolates to zero, 1e-2 within the 5e-3 that tests/test_landscape.py allows.
HESSIAN_STEP = 1e-2
#: Relative step of the differences of ``E[dM/dX]`` in the order parameters that are not overlaps
#: (``q``, ``V``: :func:`stability_by_elimination`). ``E[dM/dX]`` has a kink wherever the prox of a
#: node changes basin, so a difference must span many of them: near the fold of the positional
#: branch at omega = 0.2 (alpha = 1.74, default rule) the curvature in m moves by 4e-3 between
#: relative steps of 1e-2 and 5e-2 and by 2e-4 beyond; at regular points every step from 1e-2 to 1e-1
#: gives the curvatures of :func:`stability_by_constraints` to 1e-4 (docs/validation.md).
SMOOTHING_STEP = 5e-2
#: Largest spread of a Hessian by elimination (:attr:`Stability.spread`: the Hessians from the forward and
#: from the backward differences in ``q`` and ``V`` apart, relative to its largest entry) that is kept; past
#: it the Hessian is taken from constrained points, which need no differences in ``q`` and ``V``
#: (:func:`stability`). Measured at the fixed points of the paper's model at omega 0.1, 0.3, 0.5 with
#: both targets and of rank2 on Gauss-Hermite 6, at three or four alphas each: at most 0.041 wherever
#: the two routes agree (to 2.4e-3 of the largest entry; the one-sided differences' own error, of the
#: order of the smoothing step), and 0.22 to 3.7 at rank2's points where the Hessian by elimination was
#: off by 0.22 to 50 times its largest entry: there the eliminated block's softest directions
#: (eigenvalues 1e-6 against its largest, 500) lie along the second column's ``V``, whose differences
#: carry the rule's kinks (docs/validation.md, "Stability up to rotations").
ELIMINATION_SPREAD = 0.1
#: Largest residual of a constrained point a Hessian column is read from. Off the symmetric subspaces
#: the map is not smooth below about 1e-6 (the prox changes basin at some nodes), and a residual r
#: moves the curvature by about r / delta.
HESSIAN_RESIDUAL = 1e-5
#: Most halvings of a difference step whose moved point leaves the domain of the order parameters
#: (:func:`_within_domain`).
DOMAIN_HALVINGS = 20


@dataclass(frozen=True)
class ConstrainedPoint:
    """A saddle point with the entries ``fixed`` held at ``held`` (:class:`ConstrainedSolver`)."""

    alpha: float
    fixed: tuple[str, ...]
    held: np.ndarray
    names: tuple[str, ...]
    conjugate_names: tuple[str, ...]
    values: np.ndarray  # every order parameter, the fixed ones equal to ``held``
    conjugates: np.ndarray  # the multipliers in the places of the fixed entries' conjugates
    gradient: np.ndarray  # d eps / d held
    train_loss: float  # eps = -Phi
    energy: float  # alpha E[l(prox, h*)] + E[R]/d, equal to train_loss - line_correction
    line_correction: float
    residual: float  # max |F(x) - x| / (1 + |x|) over the free entries and the constraints
    converged: bool
    iterations: int
    prox_unconverged: int
    status: str = CONVERGED

    @property
    def usable_gradient(self) -> bool:
        """Its gradient can enter a Hessian: every check holds but perhaps the residual (at most
        ``HESSIAN_RESIDUAL``) and the energy identity it then misses by as little."""
        loose = set(failed_checks(self.status)) <= {"residual", "energy"}
        return loose and self.residual <= HESSIAN_RESIDUAL and bool(np.all(np.isfinite(self.gradient)))

    def row(self) -> dict[str, object]:
        """One tidy table row: the held values, every parameter, multiplier and gradient entry
        (``grad_<name>``), and the checks."""
        row: dict[str, object] = {"alpha": self.alpha}
        row.update({n: float(v) for n, v in zip(self.names, self.values, strict=True)})
        row.update({n: float(v) for n, v in zip(self.conjugate_names, self.conjugates, strict=True)})
        row.update({f"grad_{n}": float(g) for n, g in zip(self.fixed, self.gradient, strict=True)})
        row.update(
            train_loss=self.train_loss,
            energy=self.energy,
            line_correction=self.line_correction,
            converged=self.converged,
            status=self.status,
            residual=self.residual,
            iterations=self.iterations,
            prox_unconverged=self.prox_unconverged,
        )
        return row


class ConstrainedSolver:
    """Solve the saddle-point equations with the order-parameter entries ``fixed`` held at given
    values (:meth:`ReplicaSystem.constrained`), on the rule and prox policy of ``solver``.

    The unknowns are the free order parameters and one multiplier per fixed entry; the equations are
    ``F(x) = x`` on the free entries, with the multipliers in place of the fixed entries' energetic
    conjugates, and ``order_updates[X] = X0`` on the fixed ones; their Jacobian is closed form
    (:meth:`_equations_jacobian`), so Newton's method solves them like the fixed points' (with the
    settings' ``method``; a Broyden search starts from the previous solve's Jacobian estimate, so a
    sequence of neighbouring points, a grid or the columns of a Hessian, is solved as a continuation),
    in the passes of :mod:`saddle.passes`.
    """

    def __init__(self, solver: SaddlePointSolver, fixed: Sequence[str]) -> None:
        self.solver = solver
        self.system = solver.compiled.system.constrained(fixed)
        self.fixed_index = np.array([solver.names.index(e.name) for e in self.system.fixed])
        self.free = np.ones(len(solver.names), dtype=bool)
        self.free[self.fixed_index] = False
        self._jacobian: np.ndarray | None = None  # the last solve's, reused by the next (neighbouring) one

    @property
    def fixed(self) -> tuple[str, ...]:
        """The names of the held entries."""
        return tuple(e.name for e in self.system.fixed)

    def solve(
        self,
        alpha: float,
        held: Sequence[float],
        initial: np.ndarray,
        multipliers: np.ndarray | None = None,
        correct_kinks: bool = True,
        gradient_only: bool = False,
        every_start: bool = True,
    ) -> ConstrainedPoint:
        """The constrained saddle point at ``alpha`` with the fixed entries at ``held``, from the
        order parameters ``initial`` (and ``multipliers``, by default the energetic conjugates there),
        and if that fails from the generic guess (:meth:`SaddlePointSolver.generic_guess`);
        ``correct_kinks``: correct ``E[M*]`` for the kinks along lines (:meth:`SaddleMap.kink_correction`),
        as the fixed points' training losses are. ``gradient_only``: the point is wanted for its
        gradient alone (a ray's, :mod:`saddle.switching`), so a search ends, and its result is accepted,
        once its gradient is usable (:attr:`ConstrainedPoint.usable_gradient`, residual at most
        ``HESSIAN_RESIDUAL``): off the symmetric subspaces the map is not smooth below about 1e-6, and a
        search for 1e-9 there ends in the root finder's fallbacks and a second pass that cannot do better.
        ``every_start``: the point is verified with every prox start (:meth:`observe`); without it, with the
        quick starts, whose warm start carries the basins the last verification found (a ray's steps
        after its first)."""
        check_alpha(alpha)
        held = np.asarray(held, dtype=float)
        if held.shape != self.fixed_index.shape or not np.all(np.isfinite(held)):
            raise ValueError(f"held must be {self.fixed_index.size} finite values for {', '.join(self.fixed)}")
        wanted = attrgetter("usable_gradient" if gradient_only else "converged")
        roots = self.solver.roots
        if gradient_only:
            roots = replace(roots, tolerance=max(roots.tolerance, HESSIAN_RESIDUAL))
        initial = np.asarray(initial, dtype=float)
        point = self._solve_from(alpha, held, initial, multipliers, correct_kinks, roots, wanted, every_start)
        if not wanted(point):  # the generic guess, and no Jacobian from elsewhere
            self._jacobian = None
            guess = self.solver.generic_guess()
            retry = self._solve_from(alpha, held, guess, None, correct_kinks, roots, wanted, every_start)
            point = retry if wanted(retry) or retry.residual < point.residual else point
        return point

    def _solve_from(
        self, alpha, held, initial, multipliers, correct_kinks, roots, wanted, every_start
    ) -> ConstrainedPoint:
        start = self.solver.overlaps.raised_into_domain(self._params(initial[self.free], held, initial), self.free)
        if multipliers is None:
            with np.errstate(all="ignore"):
                multipliers = self.solver.map.evaluate(start, alpha, thorough=False).conjugates[self.fixed_index]
        evaluations = 0

        def search(unknowns: np.ndarray, thorough: bool) -> tuple[np.ndarray, bool]:
            nonlocal evaluations
            evaluate = MemoisedMap(self.solver.map, alpha, thorough)
            residual = _ConstrainedResidual(self, evaluate, held, start)
            unknowns, jacobian = roots(residual, unknowns, None if thorough else self._jacobian)
            if not thorough and jacobian is not None:
                self._jacobian = jacobian
            evaluations += len(evaluate)
            return unknowns, roots.settles(residual, unknowns)

        return search_in_passes(
            search,
            lambda unknowns: self.observe(alpha, held, unknowns, evaluations, correct_kinks, every_start),
            wanted,
            np.concatenate([start[self.free], multipliers]),
            self.solver.settings.prox.warm_start,
        )

    def _params(self, free_values: np.ndarray, held: np.ndarray, like: np.ndarray) -> np.ndarray:
        params = np.array(like, dtype=float)
        params[self.free] = free_values
        params[self.fixed_index] = held
        return params

    def _conjugates(self, ev: Evaluation, multipliers: np.ndarray) -> np.ndarray:
        conjugates = ev.conjugates.copy()
        conjugates[self.fixed_index] = multipliers
        return conjugates

    def _equations_jacobian(self, ev: Evaluation, alpha: float, unknowns: np.ndarray, held: np.ndarray) -> np.ndarray:
        """``d _equations / d unknowns`` at the evaluation ``ev`` at ``alpha``: the multipliers replace the
        fixed entries' conjugates, the other conjugates move with the free entries
        (:meth:`SaddleMap.conjugate_jacobian`), and the entropic update is closed form."""
        solver, n_free = self.solver, int(self.free.sum())
        x, multipliers = unknowns[:n_free], unknowns[n_free:]
        conjugates = self._conjugates(ev, multipliers)
        moved = np.zeros((len(solver.names), unknowns.size))  # d conjugates / d unknowns
        moved[:, :n_free] = solver.map.conjugate_jacobian(ev, alpha)[:, self.free]
        moved[self.fixed_index] = 0.0
        moved[self.fixed_index, n_free + np.arange(self.fixed_index.size)] = 1.0
        orders = solver.compiled.order_jacobian(conjugates, solver.consts) @ moved
        scale = 1.0 + np.abs(x)
        gap = solver.compiled.orders(conjugates, solver.consts)[self.free] - x
        top = orders[self.free] / scale[:, None]
        top[:, :n_free] -= np.diag((1.0 + gap * np.sign(x) / scale) / scale)
        return np.vstack([top, orders[self.fixed_index] / (1.0 + np.abs(held))[:, None]])

    def _equations(self, ev: Evaluation, unknowns: np.ndarray, held: np.ndarray) -> np.ndarray:
        """The scaled residuals of the free entries' updates and of the constraints."""
        n_free = int(self.free.sum())
        x, multipliers = unknowns[:n_free], unknowns[n_free:]
        updated = self.solver.compiled.orders(self._conjugates(ev, multipliers), self.solver.consts)
        return np.concatenate(
            [(updated[self.free] - x) / (1.0 + np.abs(x)), (updated[self.fixed_index] - held) / (1.0 + np.abs(held))]
        )

    def observe(
        self,
        alpha: float,
        held: np.ndarray,
        unknowns: np.ndarray,
        evaluations: int = 0,
        correct_kinks: bool = True,
        every_start: bool = True,
    ) -> ConstrainedPoint:
        """The constrained point given by ``unknowns`` (free entries, then multipliers), with its
        training loss, gradient and the checks of :meth:`SaddlePointSolver.diagnose`, from one
        evaluation with all prox starts (with the quick ones, without ``every_start``)."""
        solver, compiled = self.solver, self.solver.compiled
        n_free = int(self.free.sum())
        params = self._params(unknowns[:n_free], held, np.zeros(len(solver.names)))
        with np.errstate(all="ignore"):
            ev = solver.map.evaluate(params, alpha, thorough=every_start)
            conjugates = self._conjugates(ev, unknowns[n_free:])
            equations = self._equations(ev, unknowns, held)
            residual = float(np.abs(equations).max(initial=0.0)) if np.all(np.isfinite(equations)) else float("inf")
            stationary = correct_kinks and bool(residual <= solver.settings.accept)
            observables = solver.map.loss_observables(params, conjugates, ev, alpha, correct_kinks=stationary)
            del observables["free_entropy"]  # -train_loss
            gradient = -compiled.gradient(np.array([alpha]), ev.expectations, params, conjugates, solver.consts)
            failed = solver.diagnose(params, replace(ev, conjugates=conjugates), residual, observables)
        return ConstrainedPoint(
            alpha=float(alpha),
            fixed=self.fixed,
            held=held.copy(),
            names=solver.names,
            conjugate_names=compiled.conjugate_names,
            values=params,
            conjugates=conjugates,
            gradient=np.asarray(gradient, dtype=float)[self.fixed_index],
            **observables,
            residual=residual,
            converged=not failed,
            iterations=evaluations + 1,
            prox_unconverged=ev.prox_unconverged,
            status=STATUS_SEPARATOR.join(failed) if failed else CONVERGED,
        )


@dataclass(frozen=True)
class Stability:
    """The Hessian of the training loss in the overlap entries at a fixed point (:func:`stability`)."""

    names: tuple[str, ...]  # the overlap entries, in the order of the Hessian's rows
    families: tuple[str, ...]  # the family of each entry
    hessian: np.ndarray
    problem: str = ""  # why the Hessian is not usable ("" when every evaluation behind it is)
    #: By elimination: the largest difference between the Hessians from the forward and from the backward
    #: differences of ``E[dM/dX]`` in ``q`` and ``V``, relative to the largest entry; a measure of their
    #: error and of how much the elimination amplifies it.
    spread: float = 0.0

    @property
    def converged(self) -> bool:
        """Every evaluation behind the Hessian is usable and the Hessian is finite."""
        return not self.problem

    def curvature(self, family: str) -> float:
        """The smallest eigenvalue of the Hessian's block of ``family``: negative means weights with a
        lower training loss nearby, along that family (``inf`` at a cusp, :func:`stability_at_a_cusp`)."""
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


def stability(solver: SaddlePointSolver, point: FixedPoint, step: float = HESSIAN_STEP) -> Stability:
    """The Hessian of ``eps`` in every overlap entry at the fixed point ``point`` (THEORY.md sec. 3):
    by elimination from the Hessian of ``Phi`` (:func:`stability_by_elimination`), or, at a vanishing
    student (:meth:`OverlapGeometry.vanishes`), where ``Psi_out`` cannot be differenced in ``q``
    (``q >= 0``), from the gradients of constrained points (:func:`stability_by_constraints`), unless the
    regulariser has a kink there (:func:`stability_at_a_cusp`), and from constrained points too where the
    elimination's forward and backward differences in ``q`` and ``V`` disagree by more than
    ``ELIMINATION_SPREAD`` (:attr:`Stability.spread`). Where the declaration has rotations, the Hessian is
    taken on the slice of the gauge of the point's branch (:func:`_gauge_of`)."""
    if solver.overlaps.vanishes(point.values):
        if solver.compiled.regulariser_slope(solver.consts) > 0:
            return stability_at_a_cusp(solver)
        return stability_by_constraints(solver, point, step)
    found = stability_by_elimination(solver, point, step)
    if found.spread > ELIMINATION_SPREAD:
        return stability_by_constraints(solver, point, step)
    return found


def stability_at_a_cusp(solver: SaddlePointSolver) -> Stability:
    """The vanishing student ``W = 0`` under a regulariser that grows from it at a positive rate
    (``regulariser_slope``, e.g. the l1 part of the elastic net): a strict local minimum with infinite
    curvature in every overlap entry. The scores are quadratic in ``W``, so the data term of the training
    loss rises from ``W = 0`` at second order only, while the regulariser rises at first order: near
    ``W = 0`` every move raises the loss, and in the overlaps, which move with ``W``, the constrained
    loss has a cusp rather than a curvature. (Its constrained points have ``V`` of order the root
    finder's tolerance, the prox zero around every field, and their solves stall:
    docs/validation.md, "The elastic net"; proximal gradient descent from a random start ends at
    ``W = 0`` exactly, tests/test_vanishing.py.)"""
    index = _overlap_entries(solver)
    names = tuple(solver.names[i] for i in index)
    families = tuple(solver.families[i] for i in index)
    return Stability(names, families, np.diag(np.full(len(index), np.inf)))


def stability_by_elimination(solver: SaddlePointSolver, point: FixedPoint, step: float = HESSIAN_STEP) -> Stability:
    """The Hessian of ``eps`` in the overlap entries ``X`` at the fixed point ``point``, from the
    Hessian ``H`` of ``Phi(x, xhat) = trace(x, xhat) + Psi_w(xhat) + alpha Psi_out(x)`` in all its
    variables (THEORY.md sec. 3): ``eps(X) = -Phi`` made stationary in the other variables ``Y`` (every
    other order parameter and every conjugate), so ``d^2 eps / dX^2 = -(H_XX - H_XY H_YY^-1 H_YX)``.
    The blocks: ``d^2 trace / dx dxhat`` is constant and ``Psi_w''`` closed form
    (:attr:`~attnphase.replica.saddle_equations.ReplicaSystem.coupling`, ``entropic_hessian``);
    ``Psi_out'' = -d E[dM/dX] / dx`` is the one numerical block, by central differences of the
    expectations of an evaluation of the map, each entry moved by ``step`` times its Cauchy-Schwarz
    bound (an overlap) or ``SMOOTHING_STEP`` times its magnitude (``q``, ``V``). In a family that is zero at the point,
    ``Psi_out`` is even: the difference is one-sided (``E[dM/dX](delta) / delta`` within the family, the
    expectation vanishing at zero) and the family has no mixed derivative with any other; both are
    exact to order ``delta^2``. Every mixed derivative of ``Phi`` between a variable odd in a held
    family (its entries and their conjugates) and one even in it vanishes, so the held families' block
    of the eliminated Hessian does not see the other entries: where every overlap family is held (the
    most symmetric point) those are not moved at all (their columns change that block by 1e-33 of its
    largest entry at the paper's agnostic points and L3's: docs/validation.md). The evaluations are
    quick ones, their prox started from every minimum the point's own (one evaluation with every
    start there) found at each node, then from ``+-omega``;
    a move that leaves the point's zero pattern also from those minima's mirror images
    (:meth:`SaddleMap.prox` with ``around``). Where the declaration has rotations, the entries the gauge
    of the point's branch holds at zero stay there, neither moved nor eliminated (:func:`_gauge_of`)."""
    compiled = solver.compiled
    x, alpha = point.values, point.alpha
    families = np.array(solver.families)
    overlaps, held, overlap_deltas, gauge = _overlap_moves(solver, x, step)
    in_held = np.isin(families, list(held))
    free_overlaps = not np.all(in_held[overlaps])
    deltas = SMOOTHING_STEP * np.abs(x)
    deltas[overlaps] = overlap_deltas
    deltas = np.where(deltas > 0, deltas, step)
    deltas = np.array([_within_domain(solver, x, j, delta, one_sided=in_held[j]) for j, delta in enumerate(deltas)])
    with np.errstate(all="ignore"):
        centre = solver.map.evaluate(x, alpha, thorough=True)  # the warm prox start of the others
        evaluations = [centre]
        second = np.zeros((x.size, x.size))
        forward, backward = second.copy(), second.copy()  # the columns of q and V one-sided, for the spread
        for j, delta in enumerate(deltas):
            moved = np.eye(x.size)[j] * delta
            if gauge[j]:
                continue  # held on the gauge's slice: not a variable of eps there
            if in_held[j]:
                evaluations.append(solver.map.evaluate(x + moved, alpha, thorough=False, around=centre))
                second[:, j] = np.where(families == families[j], evaluations[-1].expectations / delta, 0.0)
                continue
            if not free_overlaps:
                continue  # the held families' block does not see this entry (docstring)
            evaluations += [solver.map.evaluate(x + sign * moved, alpha, thorough=False) for sign in (1.0, -1.0)]
            second[:, j] = (evaluations[-2].expectations - evaluations[-1].expectations) / (2 * delta)
            second[in_held, j] = 0.0  # eps is even in a held family: no mixed derivative
            forward[:, j] = (evaluations[-2].expectations - centre.expectations) / delta
            backward[:, j] = (centre.expectations - evaluations[-1].expectations) / delta
            forward[in_held, j] = backward[in_held, j] = 0.0
        eliminate = _Elimination(compiled.coupling, compiled.entropic_hessian(point.conjugates, solver.consts), alpha)
        others = np.setdiff1d(np.arange(2 * x.size), np.concatenate([overlaps, np.flatnonzero(gauge)]))
        hessian = eliminate(second, overlaps, others)
        central = np.isin(np.arange(x.size), overlaps)  # the overlaps' columns stay central in both
        forward[:, central], backward[:, central] = second[:, central], second[:, central]
        apart = eliminate(forward, overlaps, others) - eliminate(backward, overlaps, others)
        spread = float(np.abs(apart).max() / max(np.abs(hessian).max(), np.finfo(float).tiny))
    hessian[np.ix_(in_held[overlaps], ~in_held[overlaps])] = 0.0
    hessian[np.ix_(~in_held[overlaps], in_held[overlaps])] = 0.0
    names = tuple(solver.names[i] for i in overlaps)
    unconverged = max(ev.prox_unconverged_weight for ev in evaluations)
    problem = _hessian_problem(hessian)
    if unconverged > solver.settings.prox_tolerance:
        problem = (
            f"prox: unconverged on weight {unconverged:.1e} > {solver.settings.prox_tolerance:g} "
            f"in one of the Hessian's {len(evaluations)} evaluations"
        )
    return Stability(names, tuple(families[overlaps]), (hessian + hessian.T) / 2, problem, spread)


class _Elimination:
    """``d^2 eps / dX^2 = -(H_XX - H_XY H_YY^-1 H_YX)`` from ``Psi_out''`` (``second``, the differences of
    ``E[dM/dX]``), the constant coupling of ``x`` and ``xhat`` in the trace and ``Psi_w''`` (the
    entropic Hessian), at ``alpha`` (:func:`stability_by_elimination`)."""

    def __init__(self, coupling: np.ndarray, entropic: np.ndarray, alpha: float) -> None:
        self.coupling, self.entropic, self.alpha = coupling, entropic, alpha

    def __call__(self, second: np.ndarray, kept: np.ndarray, others: np.ndarray) -> np.ndarray:
        """The Hessian of ``eps`` in the variables ``kept`` of ``Phi``, the variables ``others`` eliminated."""
        phi = np.block([[-self.alpha * (second + second.T) / 2, self.coupling], [self.coupling.T, self.entropic]])
        eliminated = phi[np.ix_(kept, others)] @ np.linalg.solve(phi[np.ix_(others, others)], phi[np.ix_(others, kept)])
        return -(phi[np.ix_(kept, kept)] - eliminated)


def stability_by_constraints(solver: SaddlePointSolver, point: FixedPoint, step: float = HESSIAN_STEP) -> Stability:
    """The Hessian of ``eps`` in every overlap entry at the fixed point ``point`` (THEORY.md sec. 3):
    every overlap entry held at its value, each moved in turn by ``delta``, ``step`` times its
    Cauchy-Schwarz bound, and the column read off the gradients at the moved points. In a family that
    is zero at the point ``eps`` is even, and the column is ``gradient(delta) / delta`` (the gradient
    vanishes at the fixed point) within the family and zero outside it; elsewhere it is the central
    difference. Both are exact to order ``delta^2``. The constrained points need only their
    gradient, so their ``E[M*]`` is not corrected for kinks. Around a vanishing student
    (:meth:`OverlapGeometry.vanishes`) they have ``q`` of order ``delta^2``, where the score form's
    error grows as ``1/q``; they are solved in the envelope form, continuous there (the prox stays
    near ``z = 0``). The entries the gauge of the point's branch holds at zero are held there too, and
    not moved (:func:`_gauge_of`). An independent route to :func:`stability_by_elimination`
    (tests/test_landscape.py)."""
    if solver.overlaps.vanishes(point.values):
        solver = solver.in_form("envelope")
    index, held_at_zero, deltas, gauge = _overlap_moves(solver, point.values, step)
    names = tuple(solver.names[i] for i in index)
    families = tuple(solver.families[i] for i in index)
    fixed = np.concatenate([index, np.flatnonzero(gauge)])  # the moved entries, then the gauge's, held at zero
    constrained = ConstrainedSolver(solver, [solver.names[i] for i in fixed])
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
            if not moved.usable_gradient:
                unusable.append(moved)
            gradients.append(sign * moved.gradient[: len(index)])
        hessian[:, j] = np.mean(gradients, axis=0) / delta
        if families[j] in held_at_zero:  # no mixed derivative with another family: eps is even in this one
            hessian[np.array(families) != families[j], j] = 0.0
    problem = _hessian_problem(hessian)
    if unusable:
        worst = max(unusable, key=lambda p: p.residual)
        failed = ", ".join(failed_checks(worst.status)) or "none, the gradient is not finite"
        problem = (
            f"constrained: {len(unusable)} of {solves} constrained points without a usable gradient "
            f"(largest residual {worst.residual:.1e}; failed checks: {failed})"
        )
    return Stability(names, families, (hessian + hessian.T) / 2, problem)


def _within_domain(solver: SaddlePointSolver, x: np.ndarray, j: int, delta: float, one_sided: bool) -> float:
    """``delta`` halved until the difference's moved points ``x + delta e_j`` (and ``x - delta e_j``
    unless ``one_sided``) lie in the domain of the order parameters (:meth:`OverlapGeometry.in_domain`):
    near the edge of the domain, e.g. ``theta`` close to its bound ``sqrt(q rho)``, a step of ``q``
    relative to its size crosses ``theta^2 = q rho``, where the quadrature's covariance is not positive."""
    moves = np.eye(x.size)[j] * delta * np.array([[1.0]] if one_sided else [[1.0], [-1.0]])
    return delta * largest_halving(lambda t: all(solver.overlaps.in_domain(x + t * m) for m in moves), DOMAIN_HALVINGS)


def _hessian_problem(hessian: np.ndarray) -> str:
    """``"hessian: not finite"`` if an entry of ``hessian`` is NaN or infinite, else ``""``."""
    return "" if np.all(np.isfinite(hessian)) else "hessian: not finite"


def assess(solver: SaddlePointSolver, point: FixedPoint) -> FixedPoint:
    """``point`` with its curvature per overlap family and whether it is a minimum (:func:`stability`);
    NaN and ``None`` for a point that has not converged, or whose Hessian could not be computed, with
    the reason in ``stability_status`` (:data:`~attnphase.saddle.fixed_point.ASSESSED` otherwise)."""
    families = solver.compiled.system.overlap_families
    unassessed = dict(curvature=dict.fromkeys(families, float("nan")), stable=None)
    if not point.converged:
        return replace(point, **unassessed, stability_status=UNASSESSED_UNCONVERGED)
    found = stability(solver, point)
    if not found.converged:
        return replace(point, **unassessed, stability_status=found.problem)
    curvature = {f: found.curvature(f) for f in families}
    return replace(point, curvature=curvature, stable=found.stable, stability_status=ASSESSED)


def _overlap_moves(
    solver: SaddlePointSolver, values: np.ndarray, step: float
) -> tuple[np.ndarray, frozenset[str], np.ndarray, np.ndarray]:
    """The indices of the overlap entries the Hessian is taken in, the overlap families that are zero at
    ``values`` (held there by the branch: every entry in the point's zero pattern,
    :meth:`OverlapGeometry.zero_pattern`, so that rounding residue left by a solve that converged into
    the family's subspace counts as zero), each of those entries' move for a Hessian column: ``step``
    times its Cauchy-Schwarz bound (:func:`_bounds`), and the mask of the entries the gauge holds at zero
    (:func:`_gauge_of`), which are none of those entries."""
    system = solver.compiled.system
    families = np.array(solver.families)
    zero = np.array(solver.overlaps.zero_pattern(values))
    held = frozenset(f for f in system.overlap_families if np.all(zero[families == f]))
    gauge = _gauge_of(solver, held)
    index = np.array([i for i in _overlap_entries(solver) if not gauge[i]], dtype=int)
    return index, held, step * _bounds(solver, values, index, tuple(families[index])), gauge


def _gauge_of(solver: SaddlePointSolver, held: frozenset[str]) -> np.ndarray:
    """The entries held at zero by the gauge of the branch whose held overlap families are ``held``
    (:attr:`Branch.gauge`; none without rotations). A rotation ``W -> W R`` leaves the training loss
    unchanged and moves a fixed point along its orbit, so the Hessian of ``eps`` in every overlap
    entry has a zero eigenvalue along the orbit (THEORY.md sec. 3), whose sign only the rule's
    error decides. On the gauge's slice, which cuts every orbit once, the Hessian is the induced form
    on the directions across the orbits: the point is a minimum up to rotations where it is positive
    definite (docs/validation.md, "Stability up to rotations")."""
    branch = next((b for b in solver.branches if set(b.zero) == held), None)
    return np.zeros(len(solver.names), dtype=bool) if branch is None else solver.overlaps.gauge_mask(branch)


def _overlap_entries(solver: SaddlePointSolver) -> np.ndarray:
    """The indices of the overlap entries (the families of ``ReplicaSystem.overlap_families``)."""
    return np.flatnonzero(np.isin(np.array(solver.families), solver.compiled.system.overlap_families))


def _bounds(solver: SaddlePointSolver, values: np.ndarray, index: Sequence[int], families: Sequence[str]) -> np.ndarray:
    """Each overlap entry's Cauchy-Schwarz bound, or the largest bound of its family's leading
    entries where the entry has none of its own."""
    bound = solver.overlaps.overlap_bounds(values)[list(index)]
    by_family: Mapping[str, float] = {f: bound[np.array(families) == f].max() for f in set(families)}
    return np.array([b if b > 0 else by_family[f] or 1.0 for b, f in zip(bound, families, strict=True)])


class _ConstrainedResidual:
    """The constrained equations (:meth:`ConstrainedSolver._equations`) as a function of the unknowns
    (free entries, then multipliers), with their Jacobian; 1e6 where they are not finite."""

    def __init__(self, owner: ConstrainedSolver, evaluate: MemoisedMap, held: np.ndarray, like: np.ndarray) -> None:
        self.owner, self.evaluate, self.held, self.like = owner, evaluate, held, like

    def _evaluation(self, unknowns: np.ndarray) -> Evaluation:
        return self.evaluate(self.owner._params(unknowns[: self.owner.free.sum()], self.held, self.like))

    def __call__(self, unknowns: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):  # a root search's trial point out of range: flagged by the value
            g = self.owner._equations(self._evaluation(unknowns), unknowns, self.held)
        return g if np.all(np.isfinite(g)) else np.full_like(g, 1e6)

    def jacobian(self, unknowns: np.ndarray) -> np.ndarray | None:
        """``d/d unknowns`` of the equations; ``None`` where it is not finite."""
        with np.errstate(all="ignore"):
            ev = self._evaluation(unknowns)
            jacobian = self.owner._equations_jacobian(ev, self.evaluate.alpha, unknowns, self.held)
        return jacobian if np.all(np.isfinite(jacobian)) else None
