"""One compiled model on one rule at given constants, with every collaborator a search needs.

A :class:`Problem` is built once (:meth:`Problem.build`) from a compiled system, its
:class:`~attnphase.saddle.settings.SolverSettings` and the constants' values, and wires the rooms
together: the layout and geometry of the order parameters, the symmetry patterns and the gauge, the
prox engine with its policy and folds, the map ``F``, the free-entropy observables and the checks. It
holds no search state itself; its copies (:meth:`renewed`, :meth:`at`, :meth:`in_form`, :meth:`on_rule`)
say which memories they keep.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.compilation.compiled import CompiledSystem
from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.equations.observables import FreeEntropy
from attnphase.saddle.equations.saddle_map import SaddleMap
from attnphase.saddle.geometry.branches import Branch, branches_of
from attnphase.saddle.geometry.gauge import Gauge
from attnphase.saddle.geometry.layout import ParameterLayout
from attnphase.saddle.geometry.overlaps import OverlapGeometry
from attnphase.saddle.geometry.patterns import SymmetryPatterns
from attnphase.saddle.geometry.seeds import Seeds
from attnphase.saddle.points.diagnosis import Diagnosis
from attnphase.saddle.prox.engine import ProxEngine
from attnphase.saddle.prox.folding import FoldFinder
from attnphase.saddle.prox.kernel import NodeKernel
from attnphase.saddle.prox.policy import ProxChoice, disagreement_weight, make_policy
from attnphase.saddle.quadrature.rules import QuadratureRule
from attnphase.saddle.settings import SolverSettings


@dataclass(frozen=True, eq=False)
class Problem:
    """The collaborators of a search on ``compiled`` at ``consts`` under ``settings`` (module docstring)."""

    compiled: CompiledSystem
    settings: SolverSettings
    consts: np.ndarray
    layout: ParameterLayout
    geometry: OverlapGeometry
    patterns: SymmetryPatterns
    gauge: Gauge
    seeds: Seeds
    engine: ProxEngine
    map: SaddleMap
    observables: FreeEntropy
    diagnosis: Diagnosis
    branches: tuple[Branch, ...]

    @classmethod
    def build(cls, compiled: CompiledSystem, settings: SolverSettings, consts: np.ndarray | None = None) -> Problem:
        """Every collaborator, fresh (no memory of earlier solves), at ``consts`` (default: the constants
        the declaration declares)."""
        system, tuning = compiled.system, settings.tuning
        consts = compiled.constant_vector() if consts is None else consts
        layout = ParameterLayout(system)
        geometry = OverlapGeometry(system, layout, consts, tuning.geometry)
        patterns = SymmetryPatterns(geometry)
        nodes, weights = compiled.rule(settings.quadrature)
        kernel = NodeKernel(compiled, consts, tuning.prox)
        policy = make_policy(settings.prox, kernel, geometry.largest_response, tuning.prox, settings.seed)
        folds = FoldFinder(
            system,
            kernel,
            patterns,
            nodes,
            weights,
            settings.seed,
            tuning.prox.invariance_tolerance,
            settings.fold_symmetries,
        )
        engine = ProxEngine(kernel, policy, geometry, patterns, folds, nodes)
        observables = FreeEntropy(
            compiled,
            consts,
            engine,
            geometry,
            settings.quadrature,
            (nodes, weights),
            compiled.rule(settings.test_quadrature),
            settings.error_check,
            # the local policy's M* jumps (in value) where the descent's basin changes: no kink to correct
            settings.line_correction and settings.prox is ProxChoice.GLOBAL,
            tuning.quadrature,
        )
        return cls(
            compiled=compiled,
            settings=settings,
            consts=consts,
            layout=layout,
            geometry=geometry,
            patterns=patterns,
            gauge=Gauge(system, layout, tuning.geometry.gauge_angles),
            seeds=Seeds(geometry),
            engine=engine,
            map=cls._map(compiled, settings, consts, engine, geometry, (nodes, weights)),
            observables=observables,
            diagnosis=cls._diagnosis(settings, layout, geometry),
            branches=branches_of(system),
        )

    @property
    def model(self) -> AttentionModel:
        """The declaration this problem was compiled from."""
        return self.compiled.system.model

    @staticmethod
    def _map(
        compiled: CompiledSystem,
        settings: SolverSettings,
        consts: np.ndarray,
        engine: ProxEngine,
        geometry: OverlapGeometry,
        rule: tuple[np.ndarray, np.ndarray],
    ) -> SaddleMap:
        form, converged = settings.conjugate_form, settings.tuning.prox.converged_gradient
        return SaddleMap(compiled, consts, engine, geometry, *rule, form, converged)

    @staticmethod
    def _diagnosis(settings: SolverSettings, layout: ParameterLayout, geometry: OverlapGeometry) -> Diagnosis:
        acceptance = settings.tuning.acceptance
        return Diagnosis(acceptance, layout.names, layout.conjugate_names, geometry.domain_violations)

    def _rule(self) -> tuple[np.ndarray, np.ndarray]:
        return self.map.nodes, self.map.weights

    def _with_engine(self, engine: ProxEngine, settings: SolverSettings | None = None) -> Problem:
        settings = settings or self.settings
        return replace(
            self,
            settings=settings,
            engine=engine,
            map=self._map(self.compiled, settings, self.consts, engine, self.geometry, self._rule()),
            observables=self.observables.on(engine, self.geometry, self.consts),
        )

    def renewed(self) -> Problem:
        """This problem without warm prox starts (:meth:`ProxEngine.renewed`): the same rule, folds and
        memory of full proxes, so what it computes depends only on what it is asked."""
        return self._with_engine(self.engine.renewed())

    def in_form(self, form: ConjugateForm) -> Problem:
        """This problem, renewed, integrating the conjugates in ``form``."""
        return self._with_engine(self.engine.renewed(), replace(self.settings, conjugate_form=form))

    def at(self, consts: np.ndarray) -> Problem:
        """This problem, renewed, at other values ``consts`` of the declaration's constants: the same compiled
        kernels, rule and settings, and the symmetry folds found so far (their groups, found at generic
        values, hold at other generic values)."""
        geometry = self.geometry.at(consts)
        patterns = SymmetryPatterns(geometry)
        engine = self.engine.at(consts, geometry, patterns)
        return replace(
            self,
            consts=consts,
            geometry=geometry,
            patterns=patterns,
            seeds=Seeds(geometry),
            engine=engine,
            map=self._map(self.compiled, self.settings, consts, engine, geometry, self._rule()),
            observables=self.observables.on(engine, geometry, consts),
            diagnosis=self._diagnosis(self.settings, self.layout, geometry),
        )

    def on_rule(self, rule: QuadratureRule) -> Problem:
        """A fresh problem at the same constants on ``rule`` (for the map and the test error alike)."""
        settings = replace(self.settings, quadrature=rule, test_quadrature=rule)
        return Problem.build(self.compiled, settings, self.consts.copy())

    def prox_disagreement(self, params: np.ndarray, values: np.ndarray) -> float:
        """The share of the rule's weight where the local and the global policies' stationary points differ
        at ``params`` (:func:`~attnphase.saddle.prox.policy.disagreement_weight`), ``values`` the envelope at
        this problem's own policy's prox on the rule; the other policy's prox is computed in full."""
        other = ProxChoice.GLOBAL if self.settings.prox is ProxChoice.LOCAL else ProxChoice.LOCAL
        kernel = self.engine.kernel
        policy = make_policy(other, kernel, self.geometry.largest_response, kernel.tuning, self.settings.seed)
        others = self.engine.full_on(self.map.nodes, params, policy).value
        local, lowest = (values, others) if other is ProxChoice.GLOBAL else (others, values)
        return disagreement_weight(self.map.weights, local, lowest)

    def constant(self, name: str) -> float:
        """The value of the declaration's named constant ``name`` in this problem."""
        names = [str(c) for c in self.compiled.system.constants]
        if name not in names:
            raise ValueError(f"constant must be one of {', '.join(names)}; got {name!r}")
        return float(self.consts[names.index(name)])

    def branch(self, name: str) -> Branch:
        """The branch called ``name`` (``ValueError`` naming the choices otherwise)."""
        for branch in self.branches:
            if branch.name == name:
                return branch
        raise ValueError(f"branch must be one of {', '.join(b.name for b in self.branches)}; got {name!r}")
