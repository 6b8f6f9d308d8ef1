"""The training loss at fixed overlaps: the constrained saddle point (THEORY.md sec. 3-4).

Holding chosen order-parameter entries ``X`` at values ``X0`` and solving every other saddle-point
equation, with the conjugates of ``X`` as Lagrange multipliers
(:class:`~attnphase.replica.saddle_equations.ConstrainedSystem`), gives ``eps(X0) = -Phi``: the lowest
training loss among all weights whose overlaps are ``X0``. Its gradient ``-dPhi/dX`` comes with every
point, and its stationary points are the fixed points of the full system. The loss landscape in the
overlap plane, the rays between branches (:mod:`saddle.search.rays`) and the stability's Hessian from
constrained points (:mod:`saddle.stability.hessian`) are all made of these points.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import replace

import numpy as np

from attnphase.saddle.equations.residual import GuardedResidual
from attnphase.saddle.equations.saddle_map import Evaluation, MemoisedMap
from attnphase.saddle.points.fixed_point import ConstrainedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.passes import search_in_passes
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.validation import check_alpha


class Wanted(enum.Enum):
    """What a constrained point is solved for."""

    POINT = "point"  # a converged point: the landscape, a Hessian's columns
    GRADIENT = "gradient"  # only a usable gradient (a ray's): the search ends once it has one


class ConstrainedSolver:
    """Solve the saddle-point equations of ``solver``'s problem with the order-parameter entries ``fixed``
    held at given values (:meth:`ReplicaSystem.constrained`), on its rule, prox and root finder.

    The unknowns are the free order parameters and one multiplier per fixed entry; the equations are
    ``F(x) = x`` on the free entries, with the multipliers in place of the fixed entries' energetic
    conjugates, and ``order_updates[X] = X0`` on the fixed ones; their Jacobian is closed form
    (:meth:`equations_jacobian`), so Newton's method solves them like the fixed points' (a Broyden search
    starts from the previous solve's Jacobian estimate, so a sequence of neighbouring points, a grid or the
    columns of a Hessian, is solved as a continuation), in the passes of :mod:`saddle.search.passes`.
    """

    def __init__(self, solver: SaddlePointSolver, fixed: Sequence[str]) -> None:
        self.solver = solver
        self.problem = solver.problem
        layout = self.problem.layout
        self.system = self.problem.compiled.system.constrained(fixed)
        self.fixed_index = np.array([layout.index(e.name) for e in self.system.fixed])
        self.free = np.ones(len(layout.names), dtype=bool)
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
        wanted: Wanted = Wanted.POINT,
        verify: Effort = Effort.FULL,
    ) -> ConstrainedPoint:
        """The constrained saddle point at ``alpha`` with the fixed entries at ``held``, from the order
        parameters ``initial`` (and ``multipliers``, by default the energetic conjugates there), and if
        that fails from the generic guess (:func:`~attnphase.saddle.search.anchors.generic_guess`);
        ``correct_kinks``: correct ``E[M*]`` for the kinks along lines, as the fixed points' training losses
        are. ``wanted``: a :attr:`Wanted.GRADIENT` search ends, and its result is accepted, once its
        gradient is usable (residual at most the stability tuning's ``hessian_residual``): off the symmetric
        subspaces the map is not smooth below about 1e-6, and a search for 1e-9 there ends in the root
        finder's fallbacks and a second pass that cannot do better. ``verify``: the prox of the point's
        verification (:meth:`observe`): full, or quick, whose warm start carries the basins the last
        verification found (a ray's steps after its first)."""
        check_alpha(alpha)
        held = np.asarray(held, dtype=float)
        if held.shape != self.fixed_index.shape or not np.all(np.isfinite(held)):
            raise ValueError(f"held must be {self.fixed_index.size} finite values for {', '.join(self.fixed)}")
        initial = np.asarray(initial, dtype=float)
        point = self._solve_from(_HeldSearch(self, alpha, held, initial, correct_kinks, wanted, verify), multipliers)
        if not _HeldSearch.wants(point, wanted, self.solver.tuning.stability.hessian_residual):
            from attnphase.saddle.search.anchors import generic_guess

            self._jacobian = None  # the generic guess, and no Jacobian from elsewhere
            guess = _HeldSearch(self, alpha, held, generic_guess(self.solver), correct_kinks, wanted, verify)
            retry = self._solve_from(guess, None)
            point = retry if guess.accepted(retry) or retry.residual < point.residual else point
        return point

    def _solve_from(self, searcher: _HeldSearch, multipliers: np.ndarray | None) -> ConstrainedPoint:
        if multipliers is None:
            with np.errstate(all="ignore"):
                ev = self.problem.map.evaluate(searcher.start, searcher.alpha, Effort.QUICK)
                multipliers = ev.conjugates[self.fixed_index]
        start = np.concatenate([searcher.start[self.free], multipliers])
        return search_in_passes(searcher, start, self.solver.tuning.prox.warm_start)

    def params(self, free_values: np.ndarray, held: np.ndarray, like: np.ndarray) -> np.ndarray:
        """Every order parameter: ``like`` with ``free_values`` on the free entries and ``held`` on the fixed."""
        params = np.array(like, dtype=float)
        params[self.free] = free_values
        params[self.fixed_index] = held
        return params

    def _conjugates(self, ev: Evaluation, multipliers: np.ndarray) -> np.ndarray:
        conjugates = ev.conjugates.copy()
        conjugates[self.fixed_index] = multipliers
        return conjugates

    def equations_jacobian(self, ev: Evaluation, alpha: float, unknowns: np.ndarray, held: np.ndarray) -> np.ndarray:
        """``d equations / d unknowns`` at the evaluation ``ev`` at ``alpha``: the multipliers replace the
        fixed entries' conjugates, the other conjugates move with the free entries
        (:meth:`SaddleMap.conjugate_jacobian`), and the entropic update is closed form."""
        saddle_map, n_free = self.problem.map, int(self.free.sum())
        x, multipliers = unknowns[:n_free], unknowns[n_free:]
        conjugates = self._conjugates(ev, multipliers)
        moved = np.zeros((len(self.free), unknowns.size))  # d conjugates / d unknowns
        moved[:, :n_free] = saddle_map.conjugate_jacobian(ev, alpha)[:, self.free]
        moved[self.fixed_index] = 0.0
        moved[self.fixed_index, n_free + np.arange(self.fixed_index.size)] = 1.0
        orders = saddle_map.order_jacobian(conjugates) @ moved
        scale = 1.0 + np.abs(x)
        gap = saddle_map.orders(conjugates)[self.free] - x
        top = orders[self.free] / scale[:, None]
        top[:, :n_free] -= np.diag((1.0 + gap * np.sign(x) / scale) / scale)
        return np.vstack([top, orders[self.fixed_index] / (1.0 + np.abs(held))[:, None]])

    def equations(self, ev: Evaluation, unknowns: np.ndarray, held: np.ndarray) -> np.ndarray:
        """The scaled residuals of the free entries' updates and of the constraints."""
        n_free = int(self.free.sum())
        x, multipliers = unknowns[:n_free], unknowns[n_free:]
        updated = self.problem.map.orders(self._conjugates(ev, multipliers))
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
        verify: Effort = Effort.FULL,
    ) -> ConstrainedPoint:
        """The constrained point given by ``unknowns`` (free entries, then multipliers), with its training
        loss, gradient and every check, from one evaluation with the ``verify`` prox."""
        problem = self.problem
        n_free = int(self.free.sum())
        params = self.params(unknowns[:n_free], held, np.zeros(len(self.free)))
        with np.errstate(all="ignore"):
            ev = problem.map.evaluate(params, alpha, verify)
            conjugates = self._conjugates(ev, unknowns[n_free:])
            equations = self.equations(ev, unknowns, held)
            residual = float(np.abs(equations).max(initial=0.0)) if np.all(np.isfinite(equations)) else float("inf")
            stationary = correct_kinks and bool(residual <= self.solver.tuning.acceptance.residual)
            observables = problem.observables.loss_observables(params, conjugates, ev, alpha, correct_kinks=stationary)
            del observables["free_entropy"]  # -train_loss
            gradient = -problem.map.free_entropy_gradient(ev, alpha, conjugates)
            failures = problem.diagnosis(
                params, conjugates, residual, observables, ev.prox_unconverged, ev.prox_unconverged_weight
            )
        return ConstrainedPoint(
            alpha=float(alpha),
            fixed=self.fixed,
            held=held.copy(),
            names=problem.layout.names,
            conjugate_names=problem.layout.conjugate_names,
            values=params,
            conjugates=conjugates,
            gradient=np.asarray(gradient, dtype=float)[self.fixed_index],
            **observables,
            residual=residual,
            failures=failures,
            iterations=evaluations + 1,
            prox_unconverged=ev.prox_unconverged,
        )


class _HeldSearch:
    """The passes of a constrained solve at ``alpha`` with the fixed entries at ``held``, from ``initial``
    raised into the domain: the quick passes start from the owner's last Jacobian estimate and leave theirs
    to the next solve (a sequence of neighbouring points is solved as a continuation); counts the
    evaluations of ``F`` it made."""

    def __init__(
        self,
        owner: ConstrainedSolver,
        alpha: float,
        held: np.ndarray,
        initial: np.ndarray,
        correct_kinks: bool,
        wanted: Wanted,
        verify: Effort,
    ) -> None:
        self.owner, self.alpha, self.held, self.correct_kinks, self.wanted, self.effort = (
            owner,
            alpha,
            held,
            correct_kinks,
            wanted,
            verify,
        )
        self.start = owner.problem.geometry.raised_into_domain(
            owner.params(initial[owner.free], held, initial), owner.free
        )
        self.largest = owner.solver.tuning.stability.hessian_residual
        self.roots = owner.solver.roots
        if wanted is Wanted.GRADIENT:
            self.roots = replace(self.roots, tolerance=max(self.roots.tolerance, self.largest))
        self.evaluations = 0

    @staticmethod
    def wants(point: ConstrainedPoint, wanted: Wanted, largest: float) -> bool:
        """``point`` is what a solve for ``wanted`` is for: a usable gradient, or a converged point."""
        return point.usable_gradient(largest) if wanted is Wanted.GRADIENT else point.converged

    def accepted(self, verified: ConstrainedPoint) -> bool:
        return self.wants(verified, self.wanted, self.largest)

    def search(self, unknowns: np.ndarray, effort: Effort) -> tuple[np.ndarray, bool]:
        owner = self.owner
        evaluate = MemoisedMap(owner.problem.map, self.alpha, effort)
        residual = ConstrainedResidual(owner, evaluate, self.held, self.start)
        quick = effort is Effort.QUICK
        unknowns, jacobian = self.roots(residual, unknowns, owner._jacobian if quick else None)
        if quick and jacobian is not None:
            owner._jacobian = jacobian
        self.evaluations += len(evaluate)
        return unknowns, self.roots.settles(residual, unknowns)

    def verify(self, unknowns: np.ndarray) -> ConstrainedPoint:
        return self.owner.observe(self.alpha, self.held, unknowns, self.evaluations, self.correct_kinks, self.effort)


class ConstrainedResidual(GuardedResidual):
    """The constrained equations (:meth:`ConstrainedSolver.equations`) as a function of the unknowns (free
    entries, then multipliers), with their Jacobian."""

    def __init__(self, owner: ConstrainedSolver, evaluate: MemoisedMap, held: np.ndarray, like: np.ndarray) -> None:
        super().__init__(owner.solver.tuning.roots.outside_domain)
        self.owner, self.evaluate, self.held, self.like = owner, evaluate, held, like

    def _evaluation(self, unknowns: np.ndarray) -> Evaluation:
        return self.evaluate(self.owner.params(unknowns[: self.owner.free.sum()], self.held, self.like))

    def equations(self, unknowns: np.ndarray) -> np.ndarray:
        return self.owner.equations(self._evaluation(unknowns), unknowns, self.held)

    def equations_jacobian(self, unknowns: np.ndarray) -> np.ndarray:
        return self.owner.equations_jacobian(self._evaluation(unknowns), self.evaluate.alpha, unknowns, self.held)
