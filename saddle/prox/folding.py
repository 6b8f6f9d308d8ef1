"""The fold of a rule under the envelope's symmetries, found once per symmetry pattern (THEORY.md sec. 3).

:class:`FoldFinder` tests the envelope at two generic points of a point's pattern
(:meth:`~attnphase.saddle.geometry.patterns.SymmetryPatterns.generic_points`), keeps the symmetries
found at both, and folds the rule's nodes under them (:func:`~attnphase.saddle.prox.symmetry.fold_nodes`).
"""

from __future__ import annotations

import numpy as np

from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.geometry.patterns import SymmetryPattern, SymmetryPatterns
from attnphase.saddle.prox.kernel import NodeKernel
from attnphase.saddle.prox.symmetry import Fold, envelope_symmetries, fold_nodes


class FoldFinder:
    """Folds of the rule ``(nodes, weights)`` of ``system``'s envelope (evaluated by ``kernel``), one per
    symmetry pattern (``patterns``), the symmetries tested with random points drawn from ``seed`` to the
    relative ``tolerance``; ``enabled`` off: nothing is folded."""

    def __init__(
        self,
        system: ReplicaSystem,
        kernel: NodeKernel,
        patterns: SymmetryPatterns,
        nodes: np.ndarray,
        weights: np.ndarray,
        seed: int,
        tolerance: float,
        enabled: bool = True,
    ) -> None:
        self.system, self.kernel, self.patterns = system, kernel, patterns
        self.nodes, self.weights, self.seed, self.tolerance, self.enabled = nodes, weights, seed, tolerance, enabled
        self._folds: dict[SymmetryPattern, Fold | None] = {}

    def copy(self, kernel: NodeKernel | None = None, patterns: SymmetryPatterns | None = None) -> FoldFinder:
        """A finder that starts from the folds found so far (their groups, found at generic points, hold at
        other generic values of the constants), with another ``kernel`` and ``patterns`` if given."""
        other = FoldFinder(
            self.system,
            kernel or self.kernel,
            patterns or self.patterns,
            self.nodes,
            self.weights,
            self.seed,
            self.tolerance,
            self.enabled,
        )
        other._folds = dict(self._folds)
        return other

    def __call__(self, params: np.ndarray) -> Fold | None:
        """The fold of the rule at overlaps with the symmetry pattern of ``params``; ``None`` if there is
        nothing to fold (or ``params`` lies outside the domain, where the envelope is not finite)."""
        if not self.enabled:
            return None
        pattern = self.patterns.symmetry_pattern(params)
        if pattern in self._folds:
            return self._folds[pattern]
        system = self.system
        L = system.sigma_tilde.shape[0]
        r = len(system.z) // L
        t = system.gaussian_dimension // L - r
        rng = np.random.default_rng(self.seed)
        pairs = system.labels.pairs
        values, probabilities = system.label_rule()
        labels = (pairs, np.array(values, dtype=float).reshape(len(pairs), len(probabilities)))
        groups = []
        for point in self.patterns.generic_points(params, rng):
            found = envelope_symmetries(self.kernel.envelope(point), L, r, t, rng, self.tolerance, labels=labels)
            if found is not None:  # None: M is not finite there (overlaps out of range)
                groups.append(set(found))
        if not groups:  # an iterate outside the domain: no fold here, and none remembered for the pattern
            return None
        group = sorted(set.intersection(*groups), key=repr)
        self._folds[pattern] = fold_nodes(self.nodes, self.weights, group, r, t, pairs)
        return self._folds[pattern]
