"""Fixed points of the saddle-point equations on a branch (THEORY.md sec. 4, 5, 6).

A fixed point is a root of ``F(x) - x`` (:class:`~attnphase.saddle.equations.residual.ScaledResidual`) on
the entries a branch leaves free, found by :class:`~attnphase.saddle.search.roots.RootFinder` in the passes
of :mod:`saddle.search.passes`: sought with the quick prox starts and verified with the full ones. Every
result records its residual ``max |F(x) - x| / (1 + |x|)`` over the branch's free order parameters, its
symmetry defect ``max |F(x)|`` over those the branch holds at zero (zero up to rounding for a
sign-symmetric rule such as Gauss-Hermite; of the order of the quadrature error for a randomised rule,
and for the entries a gauge holds at zero, whose equations follow from the others only where the
integrals are exact), the checks it failed and how many evaluations of ``F`` it took.

:class:`SaddlePointSolver` solves (:meth:`SaddlePointSolver.solve`), observes a candidate with every check
(:meth:`SaddlePointSolver.observe`) and gives a branch's direction (:meth:`SaddlePointSolver.tangent`); the
search for a first point without a start is :mod:`saddle.search.anchors`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.equations.problem import Problem
from attnphase.saddle.equations.residual import ScaledResidual, residual_norm
from attnphase.saddle.equations.saddle_map import MemoisedMap
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import QuadratureRule
from attnphase.saddle.search.passes import search_in_passes
from attnphase.saddle.search.roots import RootFinder
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning
from attnphase.saddle.validation import check_alpha


class SaddlePointSolver:
    """Fixed points of the ``problem``'s map on a branch from a start, each checked and observed; the root
    search is ``roots`` (by default the one the problem's tuning describes)."""

    def __init__(self, problem: Problem, roots: RootFinder | None = None) -> None:
        self.problem = problem
        self.roots = roots or RootFinder.of(problem.settings.tuning.roots)

    @classmethod
    def of(cls, compiled, settings: SolverSettings | None = None, consts: np.ndarray | None = None):
        """A solver of ``compiled`` under ``settings`` (default: the package's) at ``consts``."""
        return cls(Problem.build(compiled, settings or SolverSettings(), consts))

    @property
    def settings(self) -> SolverSettings:
        """How fixed points are computed."""
        return self.problem.settings

    @property
    def tuning(self) -> Tuning:
        """The numerical choices of the solver."""
        return self.problem.settings.tuning

    @property
    def branches(self) -> tuple[Branch, ...]:
        """Every invariant subspace, the most symmetric first, the unconstrained last."""
        return self.problem.branches

    # ------------------------------------------------------------------ copies
    def renewed(self) -> SaddlePointSolver:
        """This solver without the memory of what it solved before (:meth:`Problem.renewed`): what a renewed
        solver computes depends only on what it is asked, so a scan's branch traced on one is reproduced
        exactly when the scan is resumed."""
        return SaddlePointSolver(self.problem.renewed(), self.roots)

    def with_constants(self, values: Mapping[str, float]) -> SaddlePointSolver:
        """This solver, renewed, with some of the declaration's named constants (``AttentionModel.constants()``,
        e.g. ``omega``) set to other finite ``values`` (:meth:`Problem.at`)."""
        names = [str(c) for c in self.problem.compiled.system.constants]
        consts = self.problem.consts.copy()
        for name, value in values.items():
            if name not in names:
                raise ValueError(f"constant must be one of {', '.join(names)}; got {name!r}")
            if not np.isfinite(value):
                raise ValueError(f"{name} must be finite; got {value!r}")
            consts[names.index(name)] = float(value)
        return SaddlePointSolver(self.problem.at(consts), self.roots)

    def in_form(self, conjugate_form: ConjugateForm) -> SaddlePointSolver:
        """This solver, renewed, evaluating the conjugates in ``conjugate_form``."""
        return SaddlePointSolver(self.problem.in_form(ConjugateForm(conjugate_form)), self.roots)

    def on_rule(self, rule: QuadratureRule) -> SaddlePointSolver:
        """A fresh solver at the same constants on ``rule``."""
        return SaddlePointSolver(self.problem.on_rule(rule), self.roots)

    # ------------------------------------------------------------------ branches
    def branch(self, name: str) -> Branch:
        """The branch called ``name`` (``ValueError`` naming the choices otherwise)."""
        return self.problem.branch(name)

    @staticmethod
    def on_branch(point: FixedPoint, branch: Branch) -> bool:
        """``point`` is a converged point of ``branch``: every check holds and its label (what it converged
        to) is the branch's."""
        return point.converged and point.branch == branch.name

    # ------------------------------------------------------------------ searches
    def solve(
        self,
        alpha: float,
        branch: Branch,
        initial: np.ndarray,
        jacobian: np.ndarray | None = None,
        error_check: bool = True,
        budget: int | None = None,
    ) -> tuple[FixedPoint, np.ndarray | None]:
        """Fixed point on ``branch`` at ``alpha`` from ``initial`` (rotated onto the branch's gauge,
        :meth:`Gauge.onto`); returns it and the final Jacobian estimate of ``F(x) - x`` on the free entries
        (reusable by a neighbour). ``error_check``: check a converged point's quadrature error
        (:meth:`checked`; a search that only passes through the point may skip it). ``budget``: a trial
        that gives way (a seeded trial of an anchor search, which the next seed or a ray follows): at most
        this many evaluations of ``F`` per pass, and no pass after a quick one that settles on no root
        (:func:`saddle.search.passes.search_in_passes`). A search that ends unconverged with ``q`` nearly
        zero is repeated from the vanishing student (``q`` runs to the edge of its domain: ``F`` vanishes
        linearly in ``q`` there, and the root is W = 0)."""
        check_alpha(alpha)
        problem = self.problem
        start = problem.gauge.onto(np.array(initial, dtype=float), branch)
        free = problem.layout.moved_entries(start, branch)
        start[~free] = 0.0
        roots = self.roots if budget is None else replace(self.roots, evaluation_budget=budget)
        searcher = _BranchSearch(self, alpha, branch, free, roots, jacobian, error_check)
        point = search_in_passes(searcher, start, self.tuning.prox.warm_start, persist=budget is None)
        jacobian = searcher.jacobian
        if not point.converged and problem.geometry.nearly_vanishes(point.values):
            start = np.where(problem.layout.responses, point.values, 0.0)
            vanishing, _ = self.solve(alpha, branch, initial=start, error_check=error_check)
            if vanishing.converged:
                return vanishing, None
        return point, jacobian

    def tangent(self, point: FixedPoint, branch: Branch) -> np.ndarray | None:
        """The branch's direction at ``point``: ``dx/dalpha = -(dG/dx)^-1 dG/dalpha`` (zero on the entries
        the branch holds), with ``G`` the scaled residual on its free order parameters (THEORY.md sec. 4),
        both derivatives of the quick map in closed form. ``None`` where ``dG/dx`` is singular (a fold or a
        bifurcation) or not finite."""
        free = self.problem.layout.moved_entries(point.values, branch)
        evaluate = MemoisedMap(self.problem.map, point.alpha, Effort.QUICK)
        residual = ScaledResidual(evaluate, free, point.values, self.tuning.roots.outside_domain)
        x = point.values[free]
        jacobian = residual.jacobian(x)
        if jacobian is None:
            return None
        with np.errstate(all="ignore"):
            drift = residual.drift(x)
        try:
            slope = -np.linalg.solve(jacobian, drift)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(slope)):
            return None
        full = np.zeros_like(point.values)
        full[free] = slope
        return full

    # ------------------------------------------------------------------ checks and observables
    def observe(
        self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int = 0, error_check: bool = True
    ) -> FixedPoint:
        """The candidate fixed point ``params`` of ``branch`` at ``alpha`` with its observables (THEORY.md
        sec. 5) and every check (:class:`~attnphase.saddle.points.diagnosis.Diagnosis`), from one evaluation
        of the map with the full prox (``evaluations``: those that found it, for the record), and, if it
        converged and ``error_check``, its quadrature error (:meth:`checked`). A point read back from a table
        is observed again this way before it is trusted."""
        check_alpha(alpha)
        with np.errstate(all="ignore"):  # non-finite values are reported as failed checks, not printed
            point = self._observed(np.asarray(params, dtype=float), alpha, branch, evaluations)
        return self.checked(point) if error_check else point

    def checked(self, point: FixedPoint) -> FixedPoint:
        """``point`` with its training loss evaluated again on the settings' ``error_check`` rules
        (:meth:`FreeEntropy.train_loss_check`): the estimate of its quadrature error, and the ``quadrature``
        check on it. Points that have not converged, or have been checked, are returned as they are, as is
        every point without an ``error_check``."""
        check = self.settings.error_check
        if check is None or not point.converged or point.error_check == check.label:
            return point
        with np.errstate(all="ignore"):
            mean, se = self.problem.observables.train_loss_check(point.values, point.conjugates, point.alpha)
        checked = replace(point, train_loss_check=mean, train_loss_check_se=se, error_check=check.label)
        failure = self.problem.diagnosis.quadrature(
            checked.train_loss, checked.train_loss_error_bound, checked.quadrature, check.label
        )
        return checked if failure is None else replace(checked, failures=(failure,))

    def _observed(self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int) -> FixedPoint:
        problem = self.problem
        ev = problem.map.evaluate(params, alpha, Effort.FULL)
        free = problem.layout.free_mask(branch)
        residual = residual_norm(params[free], ev.updated[free])
        defect = residual_norm(params[~free], ev.updated[~free])
        # the kink correction refines eps_t at a fixed point (Phi is stationary there only)
        stationary = bool(residual <= self.tuning.acceptance.residual and np.all(np.isfinite(params)))
        observables = problem.observables.loss_observables(params, ev.conjugates, ev, alpha, correct_kinks=stationary)
        observables["test_error"] = problem.observables.test_error(params)
        failures = problem.diagnosis(
            params, ev.conjugates, residual, observables, ev.prox_unconverged, ev.prox_unconverged_weight
        )
        return FixedPoint(
            alpha=float(alpha),
            branch=problem.geometry.label_of(params),
            names=problem.layout.names,
            conjugate_names=problem.layout.conjugate_names,
            values=params.copy(),
            conjugates=ev.conjugates.copy(),
            **observables,
            residual=residual,
            symmetry_defect=defect,
            failures=failures,
            iterations=evaluations + 1,
            prox_unconverged=ev.prox_unconverged,
            quadrature=self.settings.quadrature.label,
            conjugate_form=self.settings.conjugate_form.value,
            prox=self.settings.prox.value,
            prox_disagreement=problem.prox_disagreement(params, ev.envelope_values) if stationary else float("nan"),
        )


class _BranchSearch:
    """The passes of :meth:`SaddlePointSolver.solve`: a root of the scaled residual on the ``free`` entries,
    each pass starting from the last one's Jacobian estimate; counts the evaluations of ``F`` it made."""

    def __init__(
        self,
        solver: SaddlePointSolver,
        alpha: float,
        branch: Branch,
        free: np.ndarray,
        roots: RootFinder,
        jacobian: np.ndarray | None,
        error_check: bool,
    ) -> None:
        self.solver, self.alpha, self.branch, self.free, self.roots = solver, alpha, branch, free, roots
        self.jacobian, self.error_check, self.evaluations = jacobian, error_check, 0

    def search(self, start: np.ndarray, effort: Effort) -> tuple[np.ndarray, bool]:
        evaluate = MemoisedMap(self.solver.problem.map, self.alpha, effort)
        residual = ScaledResidual(evaluate, self.free, start, self.solver.tuning.roots.outside_domain)
        x, self.jacobian = self.roots(residual, start[self.free], self.jacobian)
        self.evaluations += len(evaluate)
        return residual.full(x), self.roots.settles(residual, x)

    def verify(self, x: np.ndarray) -> FixedPoint:
        return self.solver.observe(x, self.alpha, self.branch, self.evaluations, self.error_check)

    def accepted(self, verified: FixedPoint) -> bool:
        return verified.converged
