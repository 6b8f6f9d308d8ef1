"""Symmetries of the Moreau envelope, used to fold the prox onto orbit representatives.

A signed permutation ``g`` acts on the node variables ``n = (xi, eta)`` and on the prox variables ``z``
(THEORY.md sec. 2-3): it permutes tokens by ``pi`` and the student's columns by ``c`` (in ``xi`` and ``z``
alike), and multiplies the ``xi``, ``eta`` and ``z`` of every token by signs ``s_xi, s_eta, s_z``, one per
column. If ``M(g z; g n) = M(z; n)`` for every ``z`` and ``n`` at the current order parameters, the global
prox is equivariant, ``z*(g n) = g z*(n)``, so it only has to be computed on one node per orbit of a rule
whose nodes are mapped onto nodes with equal weights (tensor Gauss-Hermite is; Sobol points are not). The
integrands themselves are still evaluated at every node, with the unfolded prox, so nothing is assumed
about how they transform.

Which symmetries hold depends on the declaration and on the order parameters: on which overlaps vanish
and, at rank ``r >= 2``, on which signed permutations of the student's columns leave them unchanged
(:meth:`~attnphase.saddle.geometry.patterns.SymmetryPatterns.symmetry_pattern`). The paper's semantic branch
(``m = 0``) has ``(xi, eta, z) -> -(xi, eta, z)``; the positional branch (``theta = 0``) has
``eta -> -eta`` and the token swap with ``xi, z -> -xi, -z``; a rank-2 student whose two columns have
the same overlaps has the exchange of its columns. They are found by testing ``M`` at random points
(:func:`envelope_symmetries`), never assumed.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from attnphase.saddle.quadrature.rules import with_labels


@dataclass(frozen=True)
class SignedPermutation:
    """``g``: token permutation ``pi`` and student-column permutation ``columns`` (``()`` for none), with
    signs on ``xi``, ``eta`` and ``z``, one per column (of the student for ``xi`` and ``z``, of the teacher
    for ``eta``), the same for every token. Column ``i`` of token ``l`` of ``g n`` is ``sign[i]`` times
    column ``columns[i]`` of token ``pi[l]`` of ``n``."""

    permutation: tuple[int, ...]
    sign_xi: tuple[int, ...]
    sign_eta: tuple[int, ...]
    sign_z: tuple[int, ...]
    columns: tuple[int, ...] = ()

    def _column(self, i: int) -> int:
        """The student column that column ``i`` of an image comes from."""
        return self.columns[i] if self.columns else i

    def node_map(
        self, r: int, t: int, labels: tuple[tuple[int, int], ...] = ()
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """Indices and signs with ``(g n)[i] = sign[i] * n[index[i]]`` for token-major nodes, followed by
        the label indicators ``labels`` (token and cluster of each: the permutation moves a token's
        label with it); ``None`` if a permuted indicator is none of ``labels``."""
        L = len(self.permutation)
        index, sign = [], []
        student = [self._column(i) for i in range(r)]
        for width, offset, signs, columns in ((r, 0, self.sign_xi, student), (t, L * r, self.sign_eta, range(t))):
            for l in range(L):
                source = self.permutation[l]
                index += [offset + source * width + column for column in columns]
                sign += list(signs)
        for token, cluster in labels:
            if (self.permutation[token], cluster) not in labels:
                return None
            index.append(L * (r + t) + labels.index((self.permutation[token], cluster)))
            sign.append(1)
        return np.array(index), np.array(sign, dtype=float)

    def z_map(self, r: int) -> tuple[np.ndarray, np.ndarray]:
        """Index and sign arrays mapping the prox variables ``z`` (L r of them) under this map."""
        index = [self.permutation[l] * r + self._column(i) for l in range(len(self.permutation)) for i in range(r)]
        return np.array(index), np.tile(np.array(self.sign_z, dtype=float), len(self.permutation))

    @property
    def is_identity(self) -> bool:
        """Whether the map leaves every variable unchanged."""
        signs = self.sign_xi + self.sign_eta + self.sign_z
        unmoved = all(p == i for sequence in (self.permutation, self.columns) for i, p in enumerate(sequence))
        return unmoved and all(s == 1 for s in signs)


def candidates(L: int, r: int = 1, t: int = 1) -> list[SignedPermutation]:
    """Every signed permutation of ``L`` tokens and ``r`` student columns with ``t`` teacher columns (a
    group of order ``2^(2r + t) r! L!``: the per-column signs and the column exchanges are the
    reflections and permutations of a student of rank ``r >= 2``, whose rotations a gauge fixes)."""
    student, teacher = (list(itertools.product((1, -1), repeat=width)) for width in (r, t))
    return [
        SignedPermutation(p, a, b, c, columns)
        for p in itertools.permutations(range(L))
        for columns in itertools.permutations(range(r))
        for a in student
        for b in teacher
        for c in student
    ]


def envelope_symmetries(
    envelope: Callable[[np.ndarray, np.ndarray], np.ndarray],
    L: int,
    r: int,
    t: int,
    rng: np.random.Generator,
    tolerance: float,
    samples: int = 8,
    labels: tuple[tuple[tuple[int, int], ...], np.ndarray] = ((), np.zeros((0, 1))),
) -> list[SignedPermutation] | None:
    """The candidates ``g`` with ``M(g z; g n) = M(z; n)`` to the relative ``tolerance`` at ``samples``
    random points (``None`` if ``M`` is not finite there).

    ``envelope(z (k, S), nodes (D, S)) -> M (S,)`` at the order parameters of interest. The
    candidates form a group and the invariances of ``M`` among them a subgroup. ``labels``: the
    token and cluster of each label indicator and their values ``(indicators, K)`` in the ``K``
    configurations of the label law; every random point is tried in every configuration, so that
    no configuration escapes the test.
    """
    pairs, configurations = labels
    D, k = L * (r + t), L * r
    nodes = rng.standard_normal((D, samples))
    z = rng.standard_normal((k, samples))
    if pairs:
        count = configurations.shape[1]
        nodes, _ = with_labels(nodes, np.ones(samples), configurations, np.ones(count))
        z = np.tile(z, count)
    base = envelope(z, nodes)
    if not np.all(np.isfinite(base)):
        return None
    found = []
    for g in candidates(L, r, t):
        mapped = g.node_map(r, t, pairs)
        if mapped is None:
            continue
        n_index, n_sign = mapped
        z_index, z_sign = g.z_map(r)
        moved = envelope(z_sign[:, None] * z[z_index], n_sign[:, None] * nodes[n_index])
        if np.all(np.abs(moved - base) <= tolerance * (1.0 + np.abs(base))):
            found.append(g)
    return found


@dataclass(frozen=True)
class Fold:
    """Orbit representatives of a rule's nodes and how to unfold values computed on them.

    ``representatives`` are node indices and ``nodes`` those nodes (contiguous, for the prox
    kernel); ``sources[i]`` is the position in
    ``representatives`` of node ``i``'s representative and ``z_index[i], z_sign[i]`` the
    action of the group element taking it to node ``i``: ``z[:, i] = z_sign[:, i] *
    z_rep[z_index[:, i], sources[i]]``.
    """

    representatives: np.ndarray
    nodes: np.ndarray
    sources: np.ndarray
    z_index: np.ndarray
    z_sign: np.ndarray
    fixed: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] = ()  # per element: nodes it fixes, its z map

    @property
    def stabiliser_sizes(self) -> np.ndarray:
        """Per node, the number of the group's elements that fix it (the identity included)."""
        sizes = np.ones(self.sources.size)
        for nodes, _, _ in self.fixed:
            sizes[nodes] += 1
        return sizes

    def mirrored(self, z: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
        """For each element ``g`` of the group that fixes some nodes, those nodes and ``g`` applied to
        their prox ``z`` (:meth:`SaddleMap.integrated` averages each such node's integrands over
        its stabiliser's images of its prox). A node that ``g`` fixes (``g n = n``: it lies on a mirror
        plane of the rule) has ``M(g z; n) = M(z; n)``; where ``g`` moves its prox, both are global minima,
        the node sits where the prox jumps from one to the other and stands for both sides. Taking the
        prox found alone breaks the symmetries that exchange the sides by the node's weight, and makes
        the integrals depend on which minimum a search met; the average over the stabiliser's images is
        the same whichever it met."""
        return [(nodes, sign[:, None] * z[:, nodes][index]) for nodes, index, sign in self.fixed]

    def images(self, z: np.ndarray) -> list[np.ndarray]:
        """For each element ``g`` of the group that fixes some nodes, ``g`` applied to the prox ``z`` at
        every node: at a node on ``g``'s mirror plane the other of two tied minima, at a node near it
        the minimum mirror to ``z``'s, nearly as low (``M(g z; n) = M(z; g n)`` with ``g n`` close to
        ``n``). Starts of a prox where a small move breaks the group's symmetries
        (:meth:`ProxEngine.__call__ <attnphase.saddle.prox.engine.ProxEngine.__call__>` with ``around``)."""
        return [sign[:, None] * z[index] for _, index, sign in self.fixed]

    @property
    def ratio(self) -> float:
        """Nodes per representative."""
        return self.sources.size / max(self.representatives.size, 1)

    def unfold_z(self, z_rep: np.ndarray) -> np.ndarray:
        """The prox at every node of the rule from its value at the orbit representatives."""
        return self.z_sign * np.ravel(z_rep)[self._z_gather]

    @cached_property
    def _z_gather(self) -> np.ndarray:
        """``z_index[:, i] * R + sources[i]`` (``R`` representatives): node ``i``'s prox coordinates as
        positions in the flattened ``(k, R)`` prox of the representatives, gathered in one step."""
        return self.z_index * self.representatives.size + self.sources[None, :]

    def unfold(self, values: np.ndarray) -> np.ndarray:
        """A quantity invariant under the group (``M*``, ``|grad M|``)."""
        return values[self.sources]


class NodeLookup:
    """The index of each of a set of points among a rule's nodes (coordinates compared after rounding
    to 9 decimals), by binary search over the nodes' sorted byte keys."""

    DECIMALS = 9

    def __init__(self, nodes: np.ndarray) -> None:
        self._keys = self._key(nodes)
        self._order = np.argsort(self._keys, kind="stable")
        self._sorted = self._keys[self._order]

    @classmethod
    def _key(cls, points: np.ndarray) -> np.ndarray:
        """One opaque key per column of ``points (D, N)``: its rounded coordinates as bytes (``-0``
        made ``+0``, so that sign flips of zero coordinates compare equal)."""
        rounded = np.ascontiguousarray(np.round(points.T, cls.DECIMALS) + 0.0)
        return rounded.view(np.dtype((np.void, rounded.dtype.itemsize * rounded.shape[1]))).ravel()

    def indices(self, points: np.ndarray) -> np.ndarray:
        """The node index of each column of ``points``, ``-1`` where it is no node."""
        keys = self._key(points)
        position = np.minimum(np.searchsorted(self._sorted, keys), self._sorted.size - 1)
        found = self._sorted[position] == keys
        return np.where(found, self._order[position], -1)


def fold_nodes(
    nodes: np.ndarray,
    weights: np.ndarray,
    group: list[SignedPermutation],
    r: int,
    t: int,
    labels: tuple[tuple[int, int], ...] = (),
) -> Fold | None:
    """The fold of a rule under ``group``, or ``None`` if the rule is not invariant under it
    (some image of a node is not a node of equal weight) or the group is trivial. ``labels``: the
    token and cluster of each label indicator, the nodes after the Gaussian ones."""
    group = [g for g in group if not g.is_identity]
    if not group:
        return None
    n = nodes.shape[1]
    lookup = NodeLookup(nodes)
    maps = []
    for g in group:
        mapped = g.node_map(r, t, labels)
        if mapped is None:
            return None
        n_index, n_sign = mapped
        target = lookup.indices(n_sign[:, None] * nodes[n_index])
        if np.any(target < 0) or not np.allclose(weights[target], weights, rtol=1e-9, atol=0):
            return None
        maps.append(target)
    # target[i] = index of g n_i; the group is closed, so the orbit of i is {i} and its
    # images, and the smallest index in it is the orbit's representative.
    representative = np.arange(n)
    for target in maps:
        representative = np.minimum(representative, target)
    representatives = np.unique(representative)
    position = np.full(n, -1)
    position[representatives] = np.arange(representatives.size)
    k = len(group[0].permutation) * r
    z_index = np.tile(np.arange(k)[:, None], (1, n))
    z_sign = np.ones((k, n))
    assigned = np.zeros(n, dtype=bool)
    assigned[representatives] = True
    for g, target in zip(group, maps, strict=True):
        index, sign = g.z_map(r)
        images = target[representatives]
        fresh = ~assigned[images]
        images = images[fresh]
        # z at g n = g z at n: (g z)[i] = sign[i] z[index[i]]
        z_index[:, images] = index[:, None]
        z_sign[:, images] = sign[:, None]
        assigned[images] = True
    if not np.all(assigned):
        return None
    fixed = []
    for g, target in zip(group, maps, strict=True):
        on_mirror = np.flatnonzero(target == np.arange(n))
        if on_mirror.size:
            fixed.append((on_mirror, *g.z_map(r)))
    return Fold(
        representatives,
        np.ascontiguousarray(nodes[:, representatives]),
        position[representative],
        z_index,
        z_sign,
        tuple(fixed),
    )
