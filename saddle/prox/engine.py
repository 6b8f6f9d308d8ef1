"""The prox at every node of a rule (THEORY.md sec. 3): the policy's starts, the fold, and the memories.

:class:`ProxEngine` evaluates the prox of a policy (:mod:`saddle.prox.policy`) on one node per orbit
of the envelope's symmetries (:class:`~attnphase.saddle.prox.folding.FoldFinder`), unfolds it, and
remembers two things: the minima of the last full prox per symmetry pattern (the quick starts of the
next evaluations) and the last few full proxes themselves (a function of the point and the constants
alone, so a point verified twice, or assessed just after its verification, costs one full prox). A
renewed engine forgets the first and shares the second, so what it computes depends only on what it
is asked.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from attnphase.saddle.geometry.overlaps import OverlapGeometry
from attnphase.saddle.geometry.patterns import SymmetryPattern, SymmetryPatterns
from attnphase.saddle.prox.folding import FoldFinder
from attnphase.saddle.prox.kernel import NodeKernel, ProxResult
from attnphase.saddle.prox.policy import Effort, ProxPolicy
from attnphase.saddle.prox.symmetry import Fold

#: Full proxes an engine and its renewed copies remember (a cache size; it changes no result).
FULL_MEMORY = 4


def _slots_used(minima: np.ndarray) -> int:
    """The number of leading slots of ``minima (S, k, N)`` that hold a minimum at some node."""
    used = np.flatnonzero(np.isfinite(minima[:, 0, :]).any(axis=1))
    return int(used[-1]) + 1 if used.size else 1


class FullMemory:
    """The last :data:`FULL_MEMORY` full proxes, by point and constants, shared by renewed engines."""

    def __init__(self) -> None:
        self._found: dict[tuple[bytes, bytes], ProxResult] = {}

    def get(self, key: tuple[bytes, bytes]) -> ProxResult | None:
        """The prox remembered at ``key`` (a point's and the constants' bytes), or ``None``."""
        return self._found.get(key)

    def put(self, key: tuple[bytes, bytes], found: ProxResult) -> None:
        """Remember ``found`` at ``key``, read-only, forgetting the oldest beyond :data:`FULL_MEMORY`."""
        for array in found:
            array.setflags(write=False)  # shared by every caller
        self._found[key] = found
        while len(self._found) > FULL_MEMORY:
            del self._found[next(iter(self._found))]


class ProxEngine:
    """The prox of ``policy`` at every node of the rule ``(nodes, weights)``, at the constants of
    ``kernel`` and the order parameters' ``geometry``; ``folds`` folds the rule per symmetry pattern."""

    def __init__(
        self,
        kernel: NodeKernel,
        policy: ProxPolicy,
        geometry: OverlapGeometry,
        patterns: SymmetryPatterns,
        folds: FoldFinder,
        nodes: np.ndarray,
        memory: FullMemory | None = None,
    ) -> None:
        self.kernel, self.policy, self.geometry, self.patterns, self.folds = kernel, policy, geometry, patterns, folds
        self.nodes = nodes
        self.memory = memory or FullMemory()
        self._warm: dict[SymmetryPattern, np.ndarray] = {}  # the last full prox's minima per symmetry pattern

    def renewed(self) -> ProxEngine:
        """This engine without warm starts, keeping the folds found so far and sharing the memory of full
        proxes (which therefore changes none of its results)."""
        folds = self.folds.copy()
        return ProxEngine(self.kernel, self.policy, self.geometry, self.patterns, folds, self.nodes, self.memory)

    def at(self, consts: np.ndarray, geometry: OverlapGeometry, patterns: SymmetryPatterns) -> ProxEngine:
        """This engine, renewed, at other values of the constants (with their ``geometry`` and ``patterns``)."""
        kernel = self.kernel.at(consts)
        policy = self.policy.at(kernel, geometry.largest_response)
        folds = self.folds.copy(kernel, patterns)
        return ProxEngine(kernel, policy, geometry, patterns, folds, self.nodes, self.memory)

    def fold(self, point: np.ndarray) -> Fold | None:
        """The fold of the rule at the kernel point ``point`` (:meth:`OverlapGeometry.kernel_point`)."""
        return self.folds(point)

    def tolerance(self, params: np.ndarray) -> float:
        """The prox's gradient tolerance at ``params``, scaled where the student vanishes."""
        return self.kernel.tuning.gradient_tolerance * self.geometry.prox_scale(params)

    def __call__(self, params: np.ndarray, effort: Effort, around: ProxAround | None = None) -> ProxResult:
        """The prox at every node for ``params`` (at a vanishing student, at its kernel point), unfolded, with
        the distinct minima found on the fold's representatives. ``around``: a full evaluation on this rule
        at a point near ``params`` (a difference step away, which may leave its zero pattern), whose minima
        and their images under the symmetries of its fold start the prox (:meth:`GlobalMinimum.starts_around`).
        A full evaluation's minima are the quick starts of the next ones of its pattern."""
        point = self.geometry.kernel_point(params)
        tolerance = self.tolerance(params)
        fold = self.fold(point)
        nodes = self.nodes if fold is None else fold.nodes
        pattern = self.patterns.symmetry_pattern(point)
        if around is not None and self.policy.follows_around(effort):
            starts = self.policy.starts_around(self._near(around, fold), nodes, point, effort)
            found = self.kernel.minimise(nodes, point, starts, tolerance)
        else:
            starts = self.policy.starts(nodes, point, effort, self._warm.get(pattern))
            if effort is Effort.FULL:
                found = self._remembered(nodes, point, starts, tolerance)
            else:
                found = self.policy.minimise(nodes, point, starts, tolerance, effort)
        z, value, grad, minima = found
        minima = minima[: _slots_used(minima)]
        if effort is Effort.FULL and self.kernel.tuning.warm_start:
            self._warm[pattern] = minima
        if fold is None:
            return ProxResult(z, value, grad, minima)
        return ProxResult(fold.unfold_z(z), fold.unfold(value), fold.unfold(grad), minima)

    def full_on(self, nodes: np.ndarray, params: np.ndarray, policy: ProxPolicy | None = None) -> ProxResult:
        """The full prox of ``policy`` (default: this engine's) on ``nodes`` (an error check's rule, or
        this one's), unfolded and unremembered."""
        policy = policy or self.policy
        point = self.geometry.kernel_point(params)
        starts = policy.starts(nodes, point, Effort.FULL, None)
        return policy.minimise(nodes, point, starts, self.tolerance(params), Effort.FULL)

    def from_starts(self, nodes: np.ndarray, point: np.ndarray, starts: np.ndarray) -> ProxResult:
        """Newton from ``starts`` at ``nodes`` at the kernel point ``point``, to the tuning's tolerance."""
        return self.kernel.minimise(nodes, point, starts)

    def _remembered(self, nodes: np.ndarray, point: np.ndarray, starts: np.ndarray, tolerance: float) -> ProxResult:
        key = (point.tobytes(), self.kernel.consts.tobytes())
        found = self.memory.get(key)
        if found is None:
            found = self.policy.minimise(nodes, point, starts, tolerance, Effort.FULL)
            self.memory.put(key, found)
        return found

    def _near(self, around: ProxAround, fold: Fold | None) -> np.ndarray:
        """Every minimum the full prox ``around`` found at each node, each followed by its images under the
        symmetries of ``around``'s fold, at the nodes ``fold`` computes the prox on: ``(S, k, N)``."""
        if around.z.shape[1] != self.nodes.shape[1]:
            raise ValueError("around: an evaluation on another rule than this engine's")
        if around.minima is None:
            raise ValueError("around: an evaluation with every prox start (full)")
        around_fold = self.fold(self.geometry.kernel_point(around.params))
        starts = []
        for minimum in around.minima:
            z = minimum if around_fold is None else around_fold.unfold_z(minimum)
            z = z if fold is None else z[:, fold.representatives]
            starts += [z, *([] if around_fold is None else around_fold.images(z))]
        return np.stack(starts)


class ProxAround(Protocol):
    """What a nearby full evaluation gives the prox of a difference step: its point, its prox and its
    distinct minima (on its fold's representatives)."""

    params: np.ndarray
    z: np.ndarray
    minima: np.ndarray | None
