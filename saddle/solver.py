"""Fixed points of the saddle-point equations on a branch (THEORY.md sec. 4, 5, 6).

A fixed point is a root of ``F(x) - x`` (:class:`~attnphase.saddle.saddle_map.ScaledResidual`) on the
entries a branch leaves free, found by :class:`~attnphase.saddle.roots.RootFinder`. Every result
records its residual ``max |F(x) - x| / (1 + |x|)`` over the branch's free order parameters, its
symmetry defect ``max |F(x)|`` over those the branch holds at zero (zero up to rounding for a
sign-symmetric rule such as Gauss-Hermite: the subspace is invariant; of the order of the
quadrature error for a randomised rule, and for the entries a gauge holds at zero: their equations
follow from the others where the integrals are exact, but no rule is invariant under the continuous
rotations the gauge fixes, :meth:`~attnphase.replica.saddle_equations.ReplicaSystem.gauge`),
whether it converged, and how many evaluations of ``F`` it took. The root is sought with the quick
prox starts (``+-omega`` and the last prox with all starts) and verified with all of them
(:meth:`SaddleMap.prox`), in the passes of :mod:`saddle.passes`.

:class:`SaddlePointSolver` puts the parts together: the map (:attr:`SaddlePointSolver.map`), the
geometry of the order parameters (:attr:`SaddlePointSolver.overlaps`), the root finder, and the
searches from nothing (:meth:`SaddlePointSolver.anchor`) and from a start (:meth:`SaddlePointSolver.solve`).
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Mapping
from dataclasses import replace
from typing import Literal

import numpy as np

from attnphase.saddle.branches import Branch, branches_of
from attnphase.saddle.compiled import CompiledSystem
from attnphase.saddle.fixed_point import CONVERGED, STATUS_SEPARATOR, FixedPoint
from attnphase.saddle.overlaps import OverlapGeometry
from attnphase.saddle.passes import search_in_passes
from attnphase.saddle.roots import RootFinder
from attnphase.saddle.saddle_map import Evaluation, MemoisedMap, SaddleMap, ScaledResidual, residual_norm
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.validation import check_alpha

#: The conjugates ``qhat`` and ``Vhat`` of the generic guess where the equations have no finite value at zero conjugates
#: (:meth:`SaddlePointSolver.generic_guess`).
GUESS_SPREAD = 1e-2
#: Evaluations of ``F`` after which a seeded trial of an anchor search gives way to the next seed
#: (:meth:`SaddlePointSolver.anchor`): over the anchor searches of 20-alpha scans of the paper's model
#: (omega 0.1 to 0.5, sigma 1.0, the other target), four-dimension and six-dimension variants, every
#: seed that landed on its branch did within 22 (docs/validation.md, "Seeded trials within an
#: evaluation budget").
SEEDED_TRIAL_EVALUATIONS = 30


class SaddlePointSolver:
    """Find the fixed points of ``F`` of one compiled model: on a branch from a start (:meth:`solve`), or
    from nothing (:meth:`anchor`); each checked and observed (:meth:`observe`). ``consts``: the values of
    the declaration's constants (default: those it declares)."""

    def __init__(
        self, compiled: CompiledSystem, settings: SolverSettings | None = None, consts: np.ndarray | None = None
    ) -> None:
        self.compiled = compiled
        settings = settings or SolverSettings()
        self.map = SaddleMap(compiled, settings, compiled.constant_vector() if consts is None else consts)
        s = settings
        self.roots = RootFinder(s.method, s.tolerance, s.max_evaluations, s.damping)
        self.names, self.families = compiled.names, compiled.families
        branches = branches_of(compiled.system)
        self.branches = branches  # every invariant subspace, the most symmetric first, the unconstrained last
        self.most_symmetric, self.unconstrained = branches[0], branches[-1]
        self._symmetric: dict[float, FixedPoint] = {}
        self._coarse: SaddlePointSolver | None = None

    @property
    def settings(self) -> SolverSettings:
        """How fixed points are computed: the settings of this solver's map (one copy, never two to keep
        in step)."""
        return self.map.settings

    @property
    def consts(self) -> np.ndarray:
        """The values of the declaration's constants (``ReplicaSystem.constants``) this solver uses."""
        return self.map.consts

    @property
    def overlaps(self) -> OverlapGeometry:
        """Bounds, domain, labels and branch masks of the order parameters at this solver's constants."""
        return self.map.overlaps

    # ------------------------------------------------------------------ copies
    def with_constants(self, values: Mapping[str, float]) -> SaddlePointSolver:
        """This solver with some of the declaration's named constants (``AttentionModel.constants()``,
        e.g. ``omega``) set to other finite ``values``: the same compiled kernels, rule and settings,
        for continuation in a constant (:func:`saddle.arclength.continue_in_constant`). The symmetry
        folds found so far are kept (their groups, found at generic values, hold at other generic
        values); every other cache starts empty."""
        names = [str(c) for c in self.compiled.system.constants]
        consts = self.consts.copy()
        for name, value in values.items():
            if name not in names:
                raise ValueError(f"constant must be one of {', '.join(names)}; got {name!r}")
            if not np.isfinite(value):
                raise ValueError(f"{name} must be finite; got {value!r}")
            consts[names.index(name)] = float(value)
        other = self.renewed()
        other.map = self.map.with_constants(consts)
        return other

    def renewed(self) -> SaddlePointSolver:
        """This solver without the memory of what it solved before: the same kernels, rule, settings and
        constants, the same symmetry folds (found at generic points, whatever was solved) and the same
        memory of thorough proxes (a function of the point alone), but no warm prox starts, no cached
        symmetric points and a new coarse solver (:meth:`SaddleMap.renewed`). What a renewed solver
        computes depends only on what it is asked, so a scan's branch traced on one is reproduced
        exactly when the scan is resumed (:func:`saddle.scan.run_scan`)."""
        other = copy.copy(self)
        other._symmetric, other._coarse, other.map = {}, None, self.map.renewed()
        return other

    def in_form(self, conjugate_form: Literal["score", "envelope"]) -> SaddlePointSolver:
        """This solver, renewed (:meth:`renewed`), evaluating the conjugates in ``conjugate_form``."""
        other = self.renewed()
        other.map.settings = replace(self.settings, conjugate_form=conjugate_form)
        return other

    def coarse(self) -> SaddlePointSolver | None:
        """The same solver on the rule's coarser rule of its own kind (``coarser()`` of
        :class:`~attnphase.saddle.quadrature.GaussHermite` or ``ScrambledSobol``; ``None`` if this rule
        is already the coarsest), at the same constants: anchors are searched there, where evaluations
        are cheap."""
        rule = self.settings.quadrature.coarser()
        if rule is None:
            return None
        if self._coarse is None:
            settings = replace(self.settings, quadrature=rule, test_quadrature=rule)
            self._coarse = SaddlePointSolver(self.compiled, settings, self.consts.copy())
        return self._coarse

    # ------------------------------------------------------------------ branches
    def branch(self, name: str) -> Branch:
        """The branch called ``name`` (``ValueError`` naming the choices otherwise)."""
        for branch in self.branches:
            if branch.name == name:
                return branch
        raise ValueError(f"branch must be one of {', '.join(b.name for b in self.branches)}; got {name!r}")

    def on_branch(self, point: FixedPoint, branch: Branch) -> bool:
        """``point`` is a converged point of ``branch``: every check of :meth:`diagnose` holds and
        its label (what it converged to) is the branch's."""
        return point.converged and point.branch == branch.name

    # ------------------------------------------------------------------ starts
    def generic_guess(self) -> np.ndarray:
        """The alpha -> 0 limit of the equations (conjugates zero) with ``q = rho/2``; where that limit
        is not finite (no ridge term: ``V`` is infinite; the elastic net's potential is a function of
        the field's spread, zero there), the equations at ``qhat = Vhat = GUESS_SPREAD`` instead."""
        overlaps = self.overlaps
        conjugates = np.zeros(len(self.names))
        with np.errstate(all="ignore"):  # at lambda = 0 the limit is not finite: the solve reports it
            x = self.compiled.orders(conjugates, self.consts)
            if not np.isfinite(x).all():
                conjugates[overlaps.q_entries | overlaps.responses] = GUESS_SPREAD
                x = self.compiled.orders(conjugates, self.consts)
        for i, e in enumerate(self.compiled.system.entries):
            if e.family == "q" and e.entry[0] == e.entry[1]:
                x[i] = 0.5 * overlaps.rho(e.group)
            elif e.family in ("m", "theta"):
                x[i] = 0.0
        return x

    def symmetric_point(self, alpha: float) -> FixedPoint:
        """The fixed point with all overlaps zero (``m = theta = 0``) at ``alpha``, from the
        generic guess, or the vanishing student (:meth:`vanishing_point`) if that search does not
        converge and the vanishing student does; cached, since every branch's anchor starts from it."""
        if alpha not in self._symmetric:
            point, _ = self.solve(alpha, self.most_symmetric, initial=self.generic_guess(), error_check=False)
            if not point.converged:
                vanishing = self.vanishing_point(alpha)
                point = vanishing if vanishing.converged else point
            self._symmetric[alpha] = point
        return self._symmetric[alpha]

    def vanishing_point(self, alpha: float) -> FixedPoint:
        """The vanishing student ``W = 0`` at ``alpha``: ``q``, every overlap and every conjugate
        but the responses' zero, the responses ``V`` solved from the generic guess's. ``W = 0`` is
        a stationary point of the training loss when the scores are quadratic in the weights, and
        ``q = 0`` an invariant set of ``F`` (:meth:`OverlapGeometry.kernel_point`); the point is a fixed
        point where the prox stays at ``z = 0`` and the responses' equations have a root (its checks
        say)."""
        start = np.where(self.overlaps.responses, self.generic_guess(), 0.0)
        point, _ = self.solve(alpha, self.most_symmetric, initial=start, error_check=False)
        return point

    # ------------------------------------------------------------------ searches
    def anchor(self, alpha: float, branch: Branch) -> FixedPoint:
        """A first point on ``branch`` at ``alpha`` without any prior solution.

        The point is first searched on the coarse rule (:meth:`coarse`) and refined on this one. If
        the coarse search finds no point of the branch, the search is not repeated on this rule: the
        point it found is refined and returned, or the symmetric point if the refinement does not
        converge and that does (docs/validation.md, "A coarse search that finds nothing, and rays
        that leave the branch's subspace"). If the coarse search found a point of the branch and its
        refinement converges onto a more symmetric point (the branch's subspace holds the refinement,
        so a converged point off the branch is one of the branches the branch contains), that point is
        returned: the coarse rule's point lies in the basin of the contained point on this rule, and
        where this rule has a point of the branch beside it, the rays from the contained branches'
        points are the search for it (:func:`saddle.switching.anchor`; docs/validation.md, "Coarse
        points that refine onto a more symmetric one"). If the refinement does not converge, or the
        coarse search found the vanishing student (an invariant set of the map, which a refinement
        from it cannot leave), the search is repeated on this rule.

        A search tries informed starts in turn until one converges onto the branch: the fully
        symmetric point (all overlaps zero, a fixed point of every branch's subspace) with the
        branch's overlaps seeded at each of ``branch.seeds`` times their Cauchy-Schwarz bound, then
        the generic guess seeded the same way; it does so for each way to put the seeds on the
        student's columns (:meth:`OverlapGeometry.seed_columns`; one at rank 1) and returns the point
        of lowest training loss among those it finds on the branch. A seed from which Newton's method
        finds no root of the quick map, or none within :data:`SEEDED_TRIAL_EVALUATIONS` evaluations,
        gives way to the next without the refreshed pass (``persist`` of :meth:`solve`): over the anchor
        searches of scans of the paper's model and of the variants, every seed that landed on its branch
        found its root in the quick pass (docs/validation.md, "Seeds that give way"), within 22
        evaluations ("Seeded trials within an evaluation budget"). If none lands on the branch, the best
        point found is returned, labelled by what it converged to, and if none converges, the symmetric
        point (if that has). Only the point returned is checked for its quadrature error
        (:meth:`checked`).
        """
        return self.checked(self._anchored(alpha, branch))

    def _anchored(self, alpha: float, branch: Branch) -> FixedPoint:
        coarse = self.coarse()
        rough = None if coarse is None else coarse._anchored(alpha, branch)
        # the vanishing student is an invariant set of the map (OverlapGeometry.kernel_point): a search
        # refined from it stays there, so where the coarse search found it this rule searches afresh
        if rough is not None and not self.overlaps.vanishes(rough.values):
            point, _ = self.solve(alpha, branch, initial=rough.values, error_check=False)
            if point.converged:  # on the branch, or (its subspace holds the refinement) a more symmetric point
                return point
            if not coarse.on_branch(rough, branch):  # the coarse search found no point of the branch
                return self._best_of(alpha, [point])
        parent = self.symmetric_point(alpha)
        if not self.overlaps.free_families(branch):
            return parent
        tried: list[FixedPoint] = []
        found: list[FixedPoint] = []
        for columns in self.overlaps.seed_columns(branch):
            for base, strength in itertools.product((parent.values, self.generic_guess()), branch.seeds):
                seeded = self.overlaps.seeded(base, branch, strength, columns)
                point, _ = self.solve(alpha, branch, initial=seeded, error_check=False, persist=False)
                tried.append(point)
                if self.on_branch(point, branch):
                    found.append(point)
                    break
        if found:
            return min(found, key=lambda p: p.train_loss)
        return self._best_of(alpha, tried)

    def _best_of(self, alpha: float, tried: list[FixedPoint]) -> FixedPoint:
        """Where no search for a branch at ``alpha`` landed on it: the best point ``tried``, labelled by
        what it converged to, and where none converged, the symmetric point (:meth:`symmetric_point`)
        if that has."""
        if not any(p.converged for p in tried):
            parent = self.symmetric_point(alpha)
            if parent.converged:
                return parent  # where every search stalls, the point they started from, converged
        return min(tried, key=lambda p: (not p.converged, p.residual))

    def solve(
        self,
        alpha: float,
        branch: Branch,
        initial: np.ndarray,
        jacobian: np.ndarray | None = None,
        error_check: bool = True,
        persist: bool = True,
    ) -> tuple[FixedPoint, np.ndarray | None]:
        """Fixed point on ``branch`` at ``alpha`` from ``initial`` (rotated onto the branch's gauge,
        :meth:`OverlapGeometry.in_gauge`); returns it and the final Jacobian estimate of ``F(x) - x`` on
        the free entries (reusable by a neighbour). ``error_check``: check a converged point's quadrature
        error (:meth:`checked`; a search that only passes through the point may skip it). ``persist``:
        search on after a quick search that finds no root (:func:`saddle.passes.search_in_passes`) and
        past :data:`SEEDED_TRIAL_EVALUATIONS` evaluations of ``F`` per pass (a seeded trial of
        :meth:`anchor` gives way instead)."""
        check_alpha(alpha)
        overlaps = self.overlaps
        start = overlaps.in_gauge(np.array(initial, dtype=float), branch)
        free = overlaps.moved_entries(start, branch)
        start[~free] = 0.0
        # quick, refreshed and full passes (saddle/passes.py); after a search that reaches no root the
        # full pass costs four times as much and rescued 4 of 29 searches at omega = 0.2, none of them
        # on a branch's trace
        evaluations = 0

        roots = self.roots if persist else replace(self.roots, evaluation_budget=SEEDED_TRIAL_EVALUATIONS)

        def search(x0: np.ndarray, thorough: bool) -> tuple[np.ndarray, bool]:
            nonlocal evaluations, jacobian
            x, jacobian, used, settled = self._find_root(roots, alpha, free, x0, jacobian, thorough)
            evaluations += used
            return x, settled

        point = search_in_passes(
            search,
            lambda x: self.observe(x, alpha, branch, evaluations, error_check),
            lambda p: p.converged,
            start,
            self.settings.prox.warm_start,
            persist,
        )
        if not point.converged and overlaps.nearly_vanishes(point.values):
            # q runs to the edge of its domain: F vanishes linearly in q there, and the root is W = 0
            start = np.where(overlaps.responses, point.values, 0.0)
            vanishing, _ = self.solve(alpha, branch, initial=start, error_check=error_check)
            if vanishing.converged:
                return vanishing, None
        return point, jacobian

    def _find_root(self, roots: RootFinder, alpha, free, start, jacobian, thorough):
        evaluate = MemoisedMap(self.map, alpha, thorough)
        residual = ScaledResidual(evaluate, free, start)
        x, jac_out = roots(residual, start[free], jacobian)
        full = start.copy()
        full[free] = x
        return full, jac_out, len(evaluate), roots.settles(residual, x)

    def tangent(self, point: FixedPoint, branch: Branch) -> np.ndarray | None:
        """The branch's direction at ``point``: ``dx/dalpha = -(dG/dx)^-1 dG/dalpha`` (zero on the
        entries the branch holds), with ``G`` the scaled residual ``(F(x) - x) / (1 + |x|)`` on its free
        order parameters (THEORY.md sec. 4), both derivatives of the quick map in closed form
        (:meth:`SaddleMap.map_jacobian`, :meth:`SaddleMap.alpha_derivative`). ``None`` where ``dG/dx`` is
        singular (a fold or a bifurcation) or not finite. A continuation step from a single point
        predicts along it instead of from the point's own values (:mod:`saddle.continuation`)."""
        free = self.overlaps.moved_entries(point.values, branch)
        evaluate = MemoisedMap(self.map, point.alpha, False)
        x = point.values[free]
        jacobian = ScaledResidual(evaluate, free, point.values).jacobian(x)
        if jacobian is None:
            return None
        with np.errstate(all="ignore"):
            drift = self.map.alpha_derivative(evaluate(point.values), point.alpha)[free] / (1.0 + np.abs(x))
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
    def diagnose(
        self,
        params: np.ndarray,
        ev: Evaluation,
        residual: float,
        observables: dict[str, float],
    ) -> list[str]:
        """Every failed check of a candidate fixed point, as ``"check: detail"`` (empty if it has
        converged): ``residual`` at most ``accept``; ``finite`` order parameters, conjugates and
        observables; order parameters in their ``domain`` (:meth:`OverlapGeometry.domain_violations`); the
        ``energy`` identity ``energy = eps_t - line_correction`` (THEORY.md sec. 5) to
        ``energy_tolerance`` relative; the ``prox`` converged at all nodes but a quadrature weight
        of at most ``prox_tolerance``; the ``kink`` correction of eps_t (:mod:`saddle.line_correction`)
        at most ``kink_tolerance`` of the energy (it refines the rule's eps_t by about 1e-3 relative,
        docs/validation.md; a larger one means the correction itself has failed). A point needs no
        check of its label: it is labelled by what it converged to (:meth:`OverlapGeometry.label_of`).
        """
        s = self.settings
        failed = []
        if not residual <= s.accept:
            failed.append(f"residual: {residual:.1e} > {s.accept:.0e}")
        numbers = dict(zip(self.names, params, strict=True))
        numbers.update(zip(self.compiled.conjugate_names, ev.conjugates, strict=True))
        numbers.update(observables)
        infinite = [name for name, value in numbers.items() if not np.isfinite(value)]
        if infinite:
            failed.append(f"finite: {', '.join(infinite)} not finite")
        domain = self.overlaps.domain_violations(params) if np.all(np.isfinite(params)) else []
        if domain:
            failed.append(f"domain: {', '.join(domain)}")
        expected = observables["train_loss"] - observables["line_correction"]
        gap = abs(observables["energy"] - expected)
        if np.isfinite(gap) and not gap <= s.energy_tolerance * abs(expected):
            failed.append(f"energy: energy - (eps_t - line_correction) = {gap:.1e}, relative {gap / abs(expected):.1e}")
        kink, energy = observables["line_correction"], observables["energy"]
        if not abs(kink) <= s.kink_tolerance * abs(energy):
            failed.append(f"kink: line_correction = {kink:.2e} exceeds {s.kink_tolerance:g} of the energy {energy:.2e}")
        if not ev.prox_unconverged_weight <= s.prox_tolerance:
            failed.append(f"prox: {ev.prox_unconverged} nodes of weight {ev.prox_unconverged_weight:.1e} unconverged")
        return failed

    def observe(
        self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int = 0, error_check: bool = True
    ) -> FixedPoint:
        """The candidate fixed point ``params`` of ``branch`` at ``alpha`` with its observables
        (THEORY.md sec. 5) and every check of :meth:`diagnose`, from one evaluation of the map
        with all prox starts (``evaluations``: the evaluations that found it, for the record), and, if
        it converged and ``error_check``, its quadrature error (:meth:`checked`). A point read back
        from a table is re-checked this way before it is trusted."""
        check_alpha(alpha)
        with np.errstate(all="ignore"):  # non-finite values are reported in the status, not printed
            point = self._observed(np.asarray(params, dtype=float), alpha, branch, evaluations)
        return self.checked(point) if error_check else point

    def checked(self, point: FixedPoint) -> FixedPoint:
        """``point`` with its training loss evaluated again on the settings' ``error_check`` rules
        (:meth:`SaddleMap.train_loss_check`): the estimate of its quadrature error
        (:attr:`FixedPoint.train_loss_error`). Points that have not converged, or have been checked,
        are returned as they are, as is every point without an ``error_check``."""
        check = self.settings.error_check
        if check is None or not point.converged or point.error_check == check.label:
            return point
        with np.errstate(all="ignore"):
            mean, se = self.map.train_loss_check(point.values, point.conjugates, point.alpha)
        return replace(point, train_loss_check=mean, train_loss_check_se=se, error_check=check.label)

    def _observed(self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int) -> FixedPoint:
        ev = self.map.evaluate(params, alpha, thorough=True)
        free = self.overlaps.free_mask(branch)
        residual = residual_norm(params[free], ev.updated[free])
        defect = residual_norm(params[~free], ev.updated[~free])
        # the kink correction refines eps_t at a fixed point (Phi is stationary there only)
        stationary = bool(residual <= self.settings.accept and np.all(np.isfinite(params)))
        observables = self.map.loss_observables(params, ev.conjugates, ev, alpha, correct_kinks=stationary)
        observables["test_error"] = self.map.test_error(params)
        failed = self.diagnose(params, ev, residual, observables)
        return FixedPoint(
            alpha=float(alpha),
            branch=self.overlaps.label_of(params),
            names=self.names,
            conjugate_names=self.compiled.conjugate_names,
            values=params.copy(),
            conjugates=ev.conjugates.copy(),
            **observables,
            residual=residual,
            symmetry_defect=defect,
            converged=not failed,
            iterations=evaluations + 1,
            prox_unconverged=ev.prox_unconverged,
            quadrature=self.settings.quadrature.label,
            conjugate_form=self.settings.conjugate_form,
            status=STATUS_SEPARATOR.join(failed) if failed else CONVERGED,
        )
