"""The compiled prox kernel at fixed constants: Newton from given starts at every node (THEORY.md sec. 3).

:class:`NodeKernel` is the one door to :func:`saddle.compilation.templates.prox_kernel` and to the
declaration's deterministic starts: it knows the constants and the Newton tolerances, and nothing of
which starts a policy chooses.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from attnphase.saddle.compilation.compiled import CompiledSystem
from attnphase.saddle.tuning import ProxTuning


class ProxResult(NamedTuple):
    """The prox at every node: ``z (k, N)``, ``M* (N,)``, ``|grad M| (N,)``, and every distinct minimum the
    starts found at each node, the lowest first (``(S, k, N)``; NaN where a slot holds none)."""

    z: np.ndarray
    value: np.ndarray
    gradient: np.ndarray
    minima: np.ndarray


class NodeKernel:
    """Newton refined from starts at every node, on the envelope of ``compiled`` at constants ``consts``,
    to the gradient and iteration limits of ``tuning``."""

    def __init__(self, compiled: CompiledSystem, consts: np.ndarray, tuning: ProxTuning) -> None:
        self.compiled, self.consts, self.tuning = compiled, consts, tuning

    def at(self, consts: np.ndarray) -> NodeKernel:
        """The same kernel at other values of the constants."""
        return NodeKernel(self.compiled, consts, self.tuning)

    def minimise(
        self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float | None = None
    ) -> ProxResult:
        """The best of Newton refined from ``starts (S, k, N)`` at ``nodes (D, N)`` to a gradient of
        ``tolerance`` (by default the tuning's), and every distinct minimum found at each node."""
        found = self.compiled.prox(
            np.ascontiguousarray(nodes),
            params,
            self.consts,
            np.ascontiguousarray(starts),
            self.tuning.gradient_tolerance if tolerance is None else tolerance,
            self.tuning.max_iterations,
        )
        return ProxResult(*found)

    def declared_starts(self, nodes: np.ndarray, params: np.ndarray, first: int | None = None) -> np.ndarray:
        """The declaration's deterministic starts ``(S, k, N)`` (the first two ``+-omega``; the ``first`` of
        them if given)."""
        return self.compiled.starts(nodes, params, self.consts, first=first)

    def envelope(self, params: np.ndarray):
        """``M(z, n)`` at ``params`` for every column of ``z`` and ``nodes``: the kernel with the given ``z``
        as its one start and no Newton step (for the envelope's symmetry test)."""

        def envelope(z: np.ndarray, nodes: np.ndarray) -> np.ndarray:
            starts = np.ascontiguousarray(z, dtype=float)[None]
            columns = np.ascontiguousarray(nodes, dtype=float)
            _, values, _, _ = self.compiled.prox(columns, params, self.consts, starts, 0.0, 0)
            return values

        return envelope
