"""Kink correction of tensor Gauss-Hermite for ``E[M*]`` along lines of one node axis.

``M*(n) = min_z M(z; n)`` is continuous, but where the prox changes basin it has a kink,
and where the minimiser moves steeply (near a degenerate minimum) a near-kink; tensor
Gauss-Hermite then converges only algebraically (THEORY.md sec. 6). The rule is a product of
one-dimensional rules, so its error splits into the errors of the one-dimensional rule along
the lines of one axis, weighted by the outer rule. Along a line, the error of the
one-dimensional rule ``Q`` of order ``n`` (exact for polynomials of degree ``2n - 1``) has
the Peano form::

    Q[f] - I[f] = -int B1(t) f''(t) dt,     B1(t) = I[(x - t)_+] - Q[(x - t)_+],

valid for ``f`` whose second derivative is a measure (a kink is a delta in ``f''``). On an
interval ``[a, b]`` between adjacent nodes where ``f`` has a feature, write
``f'' = h + r`` with ``h`` the linear interpolation of ``f''`` between the (smooth) ends
and ``r`` the feature. The ``h`` part belongs to a smooth function, which the rule integrates
to its usual accuracy; the feature's part of the error is removed by adding::

    C = int_a^b B1 (f'' - h) dt
      = [B1 f' - B1' f]_a^b + int_a^b phi (f - P) dt + int_a^b (phi P - B1 h) dt

(two integrations by parts; ``B1'' = phi`` between nodes; ``P`` is the cubic Hermite
interpolant of ``f`` on ``[a, b]``, subtracted so that the integrals that see the feature
are small). The last integral is smooth (Gauss-Legendre); the middle one is computed on a
fine composite rule with ``M*`` minimised from both ends' minimisers; ``f', f''`` at the
ends are central differences of ``M*`` continued from the end's minimiser.

Intervals with a feature are flagged where the prox ``z*`` is not consistent with a smooth
path between the ends (its chord differs from the trapezoid of its end slopes by more than
``flag_ratio`` of the chord), among the intervals whose Gaussian weight is at least
``min_weight`` (tests/test_line_correction.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from numpy.polynomial.legendre import leggauss
from scipy.stats import norm

#: ``prox(nodes (D, N), starts (S, k, N)) -> (z (k, N), M (N,))`` at fixed order parameters.
ProxAt = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


def _gaussian(t: np.ndarray) -> np.ndarray:
    """The standard normal density (``scipy.stats.norm.pdf`` without its argument checks)."""
    return np.exp(-0.5 * t**2) / np.sqrt(2 * np.pi)


@dataclass(frozen=True)
class LineCorrection:
    """The correction of ``E[M*]`` on a pruned tensor Gauss-Hermite rule (``nodes``,
    ``weights`` of :class:`saddle.quadrature.rules.GaussHermite` of ``order``) along ``axis``."""

    nodes: np.ndarray
    weights: np.ndarray
    order: int
    axis: int = 0
    gaussian: int | None = None  # the Gaussian rows of the nodes (the rest: label nodes); None: all
    flag_ratio: float = 0.03
    min_weight: float = 1e-5
    step: float = 1e-3  # central differences of M* along the axis
    panels: int = 2  # fine rule on a flagged interval: panels x 8-point Gauss-Legendre
    slope_step: float = 1e-5  # step along the axis of the difference that gives the prox's slope at a node

    @cached_property
    def _line(self) -> tuple[np.ndarray, np.ndarray]:
        """1D nodes and normalised weights of the rule along ``axis``."""
        x, w = hermegauss(self.order)
        return x, w / w.sum()

    @cached_property
    def _grid(self) -> np.ndarray:
        """The one-dimensional node index of every Gaussian coordinate of every node, ``(gaussian, N)``
        (:class:`ValueError` if the nodes are not a tensor Gauss-Hermite grid of this order)."""
        x, _ = self._line
        gaussian = self.nodes[: self.gaussian]
        index = np.searchsorted(x, gaussian - 1e-9)
        if not np.allclose(x[np.clip(index, 0, x.size - 1)], gaussian, atol=1e-9, rtol=0):
            raise ValueError("the nodes are not a tensor Gauss-Hermite grid of this order")
        return index

    @cached_property
    def pairs(self) -> tuple[np.ndarray, np.ndarray]:
        """Indices ``(i, j)`` of nodes adjacent along ``axis`` (``j`` the next one up)."""
        index = self._grid
        # a line runs along the axis at fixed other coordinates, label nodes included
        index = np.concatenate([index, np.round(self.nodes[index.shape[0] :] * 1e6).astype(index.dtype)])
        position = {tuple(column): n for n, column in enumerate(index.T)}
        shifted = index.copy()
        shifted[self.axis] += 1
        j = np.array([position.get(tuple(column), -1) for column in shifted.T])
        i = np.nonzero(j >= 0)[0]
        return i, j[i]

    @cached_property
    def label_shares(self) -> np.ndarray:
        """The probability of each node's label configuration (its weight over the product of its
        Gaussian coordinates' one-dimensional weights); ones without label nodes. The flagging threshold
        ``min_weight`` applies to the Gaussian weight of a line, whatever its configuration's probability."""
        if self._grid.shape[0] == self.nodes.shape[0]:
            return np.ones(self.nodes.shape[1])
        _, w = self._line
        return self.weights / np.prod(w[self._grid], axis=0)

    def outer_weights(self, i: np.ndarray) -> np.ndarray:
        """Weight of the line through node ``i`` (its weight without the ``axis`` factor)."""
        _, w = self._line
        return self.weights[i] / w[self._grid[self.axis, i]]

    @cached_property
    def _heavy_pairs(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The adjacent pairs ``(i, j)`` whose interval weighs at least ``min_weight`` (the line's Gaussian
        weight times the larger density at its ends times its width), the width of each, and the nodes
        at their ends: their indices and those nodes moved by ``slope_step`` along the axis (where
        :meth:`flagged` takes the prox's slope)."""
        i, j = self.pairs
        t_i, t_j = self.nodes[self.axis, i], self.nodes[self.axis, j]
        weight = self.outer_weights(i) / self.label_shares[i] * np.maximum(_gaussian(t_i), _gaussian(t_j)) * (t_j - t_i)
        heavy = weight >= self.min_weight
        ends = np.unique(np.concatenate([i[heavy], j[heavy]]))
        shifted = self.nodes[:, ends]
        shifted[self.axis] += self.slope_step
        return i[heavy], j[heavy], (t_j - t_i)[heavy], ends, shifted

    def flagged(self, z: np.ndarray, prox: ProxAt) -> tuple[np.ndarray, np.ndarray]:
        """The pairs whose interval holds a feature (see the module docstring)."""
        i, j, width, ends, shifted = self._heavy_pairs
        z_shifted, _ = prox(shifted, z[None, :, ends])
        slope = np.full(z.shape, np.nan)
        slope[:, ends] = (z_shifted - z[:, ends]) / self.slope_step
        chord = z[:, j] - z[:, i]
        mismatch = np.abs(chord - 0.5 * width * (slope[:, i] + slope[:, j])).max(axis=0)
        suspicious = mismatch > self.flag_ratio * np.maximum(np.abs(chord).max(axis=0), 1e-3)
        return i[suspicious], j[suspicious]

    def __call__(self, z: np.ndarray, values: np.ndarray, prox: ProxAt) -> float:
        """The correction to add to the rule's ``E[M*]``, given the prox ``z`` and ``M*``
        (``values``) at every node and the prox at the same order parameters."""
        i, j = self.flagged(z, prox)
        if i.size == 0:
            return 0.0
        a, b = self.nodes[self.axis, i], self.nodes[self.axis, j]
        width = b - a

        def envelope_at(groups: list[tuple[np.ndarray, np.ndarray]]) -> list[np.ndarray]:
            """``M*`` on the flagged lines at the positions ``t`` from the starts ``(S, k, n)`` of each
            ``(t, starts)`` of ``groups``: one prox call for them all."""
            points = np.tile(self.nodes[:, i], len(groups))
            points[self.axis] = np.concatenate([t for t, _ in groups])
            found = prox(points, np.concatenate([starts for _, starts in groups], axis=2))[1]
            return np.split(found, len(groups))

        ends = []
        from_a, from_b = z[None, :, i], z[None, :, j]
        steps = [(a - self.step, from_a), (a + self.step, from_a), (b - self.step, from_b), (b + self.step, from_b)]
        below_a, above_a, below_b, above_b = envelope_at(steps)
        for f, below, above in ((values[i], below_a, above_a), (values[j], below_b, above_b)):
            ends.append((f, (above - below) / (2 * self.step), (above - 2 * f + below) / self.step**2))
        (fa, da, ca), (fb, db, cb) = ends

        def hermite(u: np.ndarray) -> np.ndarray:
            return (
                (2 * u**3 - 3 * u**2 + 1) * fa
                + (u**3 - 2 * u**2 + u) * width * da
                + (-2 * u**3 + 3 * u**2) * fb
                + (u**3 - u**2) * width * db
            )

        smooth = np.zeros(i.size)
        for x, w in zip(*leggauss(12), strict=True):
            u = 0.5 * (x + 1)
            t = a + width * u
            smooth += 0.5 * width * w * (_gaussian(t) * hermite(u) - self.peano(t) * ((1 - u) * ca + u * cb))
        feature = np.zeros(i.size)
        x8, w8 = leggauss(8)
        fine = [
            ((panel + 0.5 * (x + 1)) / self.panels, w)
            for panel in range(self.panels)
            for x, w in zip(x8, w8, strict=True)
        ]
        both = np.stack([z[:, i], z[:, j]])
        inside = envelope_at([(a + width * u, both) for u, _ in fine])
        for (u, w), value in zip(fine, inside, strict=True):
            feature += 0.5 * width / self.panels * w * _gaussian(a + width * u) * (value - hermite(u))
        slope_inside = -norm.sf(a) + self.tail(b)  # B1' on (a, b), continued to a and b
        boundary = self.peano(b) * db - (slope_inside + norm.sf(a) - norm.sf(b)) * fb
        boundary -= self.peano(a) * da - slope_inside * fa
        return float(self.outer_weights(i) @ (boundary + smooth + feature))

    def peano(self, t: np.ndarray) -> np.ndarray:
        """``B1(t) = I[(x - t)_+] - Q[(x - t)_+]``."""
        x, w = self._line
        exact = _gaussian(t) - t * norm.sf(t)
        return exact - (w[None, :] * np.maximum(x[None, :] - t[:, None], 0.0)).sum(axis=1)

    def tail(self, t: np.ndarray) -> np.ndarray:
        """``Q[x >= t]``: the rule's weight at and above ``t`` (a node)."""
        x, w = self._line
        return (w[None, :] * (x[None, :] >= t[:, None] - 1e-12)).sum(axis=1)
