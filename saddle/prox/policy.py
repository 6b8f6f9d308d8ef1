"""Which stationary point of the Moreau envelope the prox takes at a node, and from which starts it
is searched (THEORY.md sec. 3, 12).

A prox policy is a strategy object: given the nodes, the point and how hard to look (:class:`Effort`),
it chooses the starts and runs the kernel from them. :class:`GlobalMinimum` is the replica-symmetric
free entropy's own rule, the global minimiser at every node, found by a multi-start Newton search;
:class:`LocalDescent` the minimiser one descent reaches, whose fixed points are GAMP's (sec. 12).
:class:`ProxChoice` names the two, :func:`make_policy` builds one, and :func:`disagreement_weight`
measures where they differ.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

import numpy as np

from attnphase.saddle.prox.kernel import NodeKernel, ProxResult
from attnphase.saddle.tuning import DescentStart, ProxTuning


class ProxChoice(enum.StrEnum):
    """Which stationary point of the envelope the equations take at every node (THEORY.md sec. 12)."""

    GLOBAL = "global"  # the global minimiser: the replica-symmetric theory of the training loss's global minimum
    LOCAL = "local"  # the minimiser a descent reaches, from the cavity mean by default: GAMP's fixed points


#: Relative excess of a node's envelope value over the global minimum's above which the local policy's
#: stationary point there is another one than the global minimiser (:func:`disagreement_weight`): well
#: above the kernel's resolution of ``M`` at its gradient tolerance, well below the gap between two basins.
DISTINCT_VALUE = 1e-8


def disagreement_weight(weights: np.ndarray, local_values: np.ndarray, global_values: np.ndarray) -> float:
    """The share of the rule's ``weights`` at the nodes where the local policy's envelope value exceeds the
    global minimum by more than :data:`DISTINCT_VALUE` relative: where the two pick different minimisers
    (ties between mirror images, equal in value, do not count)."""
    excess = local_values - global_values
    differ = ~(excess <= DISTINCT_VALUE * (1.0 + np.abs(global_values)))  # a NaN counts as different
    return float(weights[differ].sum() / weights.sum())


class Effort(enum.Enum):
    """How hard a prox evaluation looks for its policy's stationary point."""

    FULL = "full"  # every start of the policy: a point's verification, its observables
    QUICK = "quick"  # the starts that follow the last full prox's basins: a search's iterates, differences


class ProxPolicy(Protocol):
    """The rule that picks a stationary point of the envelope at every node (module docstring)."""

    def at(self, kernel: NodeKernel, scale: Callable[[np.ndarray], float]) -> ProxPolicy:
        """The same policy on ``kernel`` (other constants), ``scale`` the largest response there."""
        ...

    def starts(self, nodes: np.ndarray, point: np.ndarray, effort: Effort, warm: np.ndarray | None) -> np.ndarray:
        """The starts ``(S, k, N)`` at ``nodes`` and ``point``; ``warm``: the minima the last full prox of the
        same symmetry pattern found at each node (``None`` if there is none)."""
        ...

    def starts_around(self, near: np.ndarray, nodes: np.ndarray, point: np.ndarray, effort: Effort) -> np.ndarray:
        """The starts at a point a difference step away from a full evaluation whose minima (and their
        mirror images) are ``near``."""
        ...

    def follows_around(self, effort: Effort) -> bool:
        """Whether an evaluation near a full one starts from that one's minima at this ``effort``."""
        ...

    def minimise(
        self, nodes: np.ndarray, point: np.ndarray, starts: np.ndarray, tolerance: float, effort: Effort
    ) -> ProxResult:
        """The policy's stationary point at every node from ``starts``."""
        ...


def declared_start_count(count: int, directions: int) -> int:
    """How many of the ``count`` full starts of :class:`GlobalMinimum` are the declared ones: they come
    first, then the shifts ``+-omega + sqrt(V) u_j`` of each of the ``directions``, then their negatives
    (four per direction)."""
    return count - 4 * directions


def first_direction_split(count: int, directions: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices, among the ``count`` full starts of :class:`GlobalMinimum` (:func:`declared_start_count`),
    of the declared starts with the first direction's four shifts, and of the other directions' shifts."""
    declared = declared_start_count(count, directions)
    first = np.r_[: declared + 2, declared + 2 * directions : declared + 2 * directions + 2]
    return first, np.setdiff1d(np.arange(count), first)


class GlobalMinimum:
    """The global minimiser of the envelope at every node (THEORY.md sec. 3), by ``kernel``.

    Full starts: the declaration's starts (the first two ``+-omega``) and ``+-omega +- sqrt(V) u_j`` for
    the fixed unit ``directions`` ``u_j`` (``scale(point)`` is the largest ``V``), all but the first
    direction's only where those do not agree on one minimum (:meth:`minimise`). The start set is closed
    under ``z -> -z`` and ``omega -> -omega``, so the symmetries of ``M`` carry over exactly to the computed
    ``M*``. Quick starts: ``+-omega`` after every distinct minimum the last full prox of the same pattern
    found at each node, its lowest first (with ``warm_start``), where ``+-omega`` stop once they reach one
    of those: the minima follow every basin the full starts found, so a node whose lowest minimum moves
    to another of them is seen to; ``+-omega`` find a basin born since.
    """

    def __init__(
        self, kernel: NodeKernel, directions: np.ndarray, scale: Callable[[np.ndarray], float], warm_start: bool
    ) -> None:
        self.kernel, self.directions, self.scale, self.warm_start = kernel, directions, scale, warm_start

    def at(self, kernel: NodeKernel, scale: Callable[[np.ndarray], float]) -> GlobalMinimum:
        """The same policy on another kernel (other constants)."""
        return GlobalMinimum(kernel, self.directions, scale, self.warm_start)

    def starts(self, nodes: np.ndarray, point: np.ndarray, effort: Effort, warm: np.ndarray | None) -> np.ndarray:
        """Quick: the last full prox's minima (``warm``) and the first two declared starts; full: every
        declared start and, about its first (``omega``), the random directions scaled to the point and
        their mirror images."""
        if effort is Effort.QUICK:
            probes = self.kernel.declared_starts(nodes, point, first=2)
            # a pattern met first outside the domain has no fold, and its warm start is then on all nodes
            if self.warm_start and warm is not None and warm.shape[2] == nodes.shape[1]:
                return np.concatenate([warm, probes])  # first: the probes stop where they reach a known basin
            return probes
        starts = self.kernel.declared_starts(nodes, point)
        if len(self.directions):
            omega = starts[0]
            scale = np.sqrt(self.scale(point))
            shifted = [sign * omega + scale * u[:, None] for u in self.directions for sign in (1, -1)]
            starts = np.concatenate([starts, np.stack(shifted), -np.stack(shifted)])
        return starts

    def follows_around(self, effort: Effort) -> bool:
        """A quick evaluation near a full one starts from its minima; a full one does where random
        directions would otherwise be added (the minima stand in for them)."""
        return bool(len(self.directions)) or effort is Effort.QUICK

    def starts_around(self, near: np.ndarray, nodes: np.ndarray, point: np.ndarray, effort: Effort) -> np.ndarray:
        """``near`` first, refined first, then the declared starts if ``effort`` is full (in place of the
        random directions), else ``+-omega``: the basins the full starts found are among ``near``'s minima,
        and where the move breaks a symmetry, a node on or near a mirror plane may fall into the mirror
        image of its minimum."""
        declared = self.kernel.declared_starts(nodes, point, first=None if effort is Effort.FULL else 2)
        return np.concatenate([near, declared])

    def minimise(
        self, nodes: np.ndarray, point: np.ndarray, starts: np.ndarray, tolerance: float, effort: Effort
    ) -> ProxResult:
        """Quick: the kernel from ``starts``. Full (``starts`` from :meth:`starts`): the declared starts and
        the first direction's shifts at every node, the other directions' shifts only at the nodes where
        those do not agree on one minimum (they end in two or more, or none converges), each refined after
        the minima found there. Where the declared starts, spread over the teacher's fields, the exact-fit
        points and ``+-omega``, and the first random direction all end in one minimum, the envelope shows
        one basin; the random starts, far from every minimum, cost most of the full prox."""
        if effort is Effort.QUICK or not len(self.directions):
            return self.kernel.minimise(nodes, point, starts, tolerance)
        first, rest = first_direction_split(len(starts), len(self.directions))
        found = self.kernel.minimise(nodes, point, np.ascontiguousarray(starts[first]), tolerance)
        z, value, grad, minima = found
        uncertain = np.flatnonzero(np.isfinite(minima[:, 0, :]).sum(axis=0) != 1)
        if not rest.size or not uncertain.size:
            return found
        again = np.concatenate([minima[:, :, uncertain], starts[rest][:, :, uncertain]])
        z_u, value_u, grad_u, minima_u = self.kernel.minimise(
            np.ascontiguousarray(nodes[:, uncertain]), point, np.ascontiguousarray(again), tolerance
        )
        z[:, uncertain], value[uncertain], grad[uncertain] = z_u, value_u, grad_u
        every = np.full((len(again), *minima.shape[1:]), np.nan)
        every[: len(minima)] = minima
        every[:, :, uncertain] = minima_u
        return ProxResult(z, value, grad, every)


class LocalDescent:
    """The stationary point of the envelope that a descent from ``start`` reaches at every node (THEORY.md
    sec. 12): the kernel's Newton with its Armijo line search, which decreases ``M`` at every step, from
    the cavity mean ``z = omega`` (the declaration's first start) or from ``z = 0``.

    From the cavity mean, this is the prox GAMP's output step evaluates when it minimises each sample's
    envelope from that sample's cavity mean (paper App. B.2), and its fixed points are stationary points
    of the training loss (App. B.4). It is a function of the node and the point alone (one start at every
    effort, no memory), and equivariant under the envelope's symmetries, which map ``omega`` with the node.
    """

    def __init__(self, kernel: NodeKernel, start: DescentStart) -> None:
        self.kernel, self.start = kernel, start

    def at(self, kernel: NodeKernel, scale: Callable[[np.ndarray], float]) -> LocalDescent:
        """The same policy on another kernel (other constants)."""
        return LocalDescent(kernel, self.start)

    def starts(self, nodes: np.ndarray, point: np.ndarray, effort: Effort, warm: np.ndarray | None) -> np.ndarray:
        """The one start, ``omega`` or zero, at every effort."""
        omega = self.kernel.declared_starts(nodes, point, first=1)
        return omega if self.start is DescentStart.CAVITY_MEAN else np.zeros_like(omega)

    def follows_around(self, effort: Effort) -> bool:
        """Never: the descent starts at the same place wherever it is evaluated."""
        return False

    def starts_around(self, near: np.ndarray, nodes: np.ndarray, point: np.ndarray, effort: Effort) -> np.ndarray:
        """The one start (:meth:`starts`); ``near`` is not used."""
        return self.starts(nodes, point, effort, None)

    def minimise(
        self, nodes: np.ndarray, point: np.ndarray, starts: np.ndarray, tolerance: float, effort: Effort
    ) -> ProxResult:
        """The kernel's descent from ``starts``."""
        return self.kernel.minimise(nodes, point, starts, tolerance)


def make_policy(
    choice: ProxChoice, kernel: NodeKernel, scale: Callable[[np.ndarray], float], tuning: ProxTuning, seed: int
) -> ProxPolicy:
    """The policy ``choice`` on ``kernel``; the global one with its random start directions drawn from
    ``seed`` (the same directions for the same seed and prox dimension) and ``scale`` the largest response."""
    if choice is ProxChoice.LOCAL:
        return LocalDescent(kernel, tuning.descent_start)
    k = kernel.compiled.prox_dimension
    directions = np.random.default_rng(seed).standard_normal((tuning.directions(k), k))
    directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
    return GlobalMinimum(kernel, directions, scale, tuning.warm_start)
