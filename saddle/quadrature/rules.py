"""Quadrature rules for Gaussian expectations ``E_{n ~ N(0, I_D)}[f(n)]``.

A rule is a small strategy object: ``rule.nodes(D)`` returns points ``(D, N)`` and weights
``(N,)`` summing to one, and ``rule.label`` names it in every table. The energetic
integrands are discontinuous (the prox jumps between basins, THEORY.md sec. 6), so the
convergence of a rule is measured at converged fixed points (tests/test_quadrature.py),
never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Protocol

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.stats import norm, qmc

from attnphase.replica.declaration import Interval
from attnphase.saddle.validation import SEED

#: Stated relative error of the reported eps_t at the default rule (Gauss-Hermite 20 with the
#: kink correction of saddle/quadrature/kinks.py) on the paper's instance: measured at most
#: 1e-5 against the reference of benchmarks/quadrature.py --reference (scrambled Sobol 2^20,
#: four seeds, standard error below 7e-6) at alpha = 1.25 and 2 on both branches; without the
#: correction the rule is off by up to 2.3e-4 there.
DEFAULT_TRAIN_LOSS_ERROR = 5e-5


class CoarsestRules(Protocol):
    """The floor of :meth:`GaussHermite.coarser` and :meth:`ScrambledSobol.coarser`
    (:class:`~attnphase.saddle.tuning.AnchorTuning` is one)."""

    coarsest_order: int
    coarsest_sobol_log2: int


class QuadratureError(ValueError):
    """A quadrature parameter is outside its allowed range."""


#: The largest number of nodes a rule may have (a tensor Gauss-Hermite rule: after pruning; it is
#: grown without materialising the ``order ** dimension`` grid). The nodes and weights of a rule at
#: the limit take ``8 (dimension + 1)`` bytes each (0.8 GB in four dimensions), and the solver holds
#: several arrays of that size.
MAX_NODES = 20_000_000
#: Gauss-Hermite points per dimension: at most 64 (the paper's four-dimensional integrals then have
#: at most ``64**4 = 1.7e7`` nodes, below :data:`MAX_NODES`).
GAUSS_HERMITE_ORDER = Interval(2, 64, integer=True)
#: log2 of the number of scrambled Sobol points (``2**24 = 1.7e7`` below :data:`MAX_NODES`).
SOBOL_LOG2_POINTS = Interval(4, 24, integer=True)
#: Relative weight below which a tensor Gauss-Hermite node is dropped.
PRUNE = Interval(0.0, 1.0, high_open=True)
#: Dimensions of a Gaussian integral: ``L (r + t)`` for a declaration (at most 16 x 8).
INTEGRAL_DIMENSION = Interval(1, 128, integer=True)


def check_size(rule: ScrambledSobol, dimension: int) -> int:
    """``dimension`` if ``rule`` has at most :data:`MAX_NODES` points there, else :class:`QuadratureError`
    giving the size and the limit; called before a rule's points are allocated."""
    dimension = INTEGRAL_DIMENSION.check(dimension, "dimension", QuadratureError)
    nodes = rule.size(dimension)
    if nodes > MAX_NODES:
        raise QuadratureError(
            f"quadrature rule {rule.label} in {dimension} dimensions has {float(nodes):.3g} nodes, above the limit "
            f"of {MAX_NODES:.3g} (saddle.quadrature.rules.MAX_NODES); use a lower order"
        )
    return dimension


@dataclass(frozen=True)
class GaussHermite:
    """Tensor Gauss-Hermite rule of ``order`` points per dimension.

    Nodes whose product weight is below ``prune`` times the largest are dropped and the
    remaining weights renormalised to sum to one; :meth:`pruned_weight` reports the weight
    dropped (for a bounded integrand it bounds the error this adds). The default ``1e-8``
    keeps 42 % of the nodes at order 12 and 16 % at order 20 in four dimensions (3 % in six)
    and drops a weight of about ``1e-7`` (``1e-6`` in six); on the paper's instance it moves
    eps_t by less than ``1e-6`` relative (tests/test_quadrature.py). The pruned rule is grown
    without materialising the full grid (:func:`_tensor_gauss_hermite`).
    """

    order: int = 12
    prune: float = 1e-8

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", GAUSS_HERMITE_ORDER.check(self.order, "Gauss-Hermite order", QuadratureError))
        object.__setattr__(self, "prune", PRUNE.check(self.prune, "prune", QuadratureError))

    @property
    def label(self) -> str:
        """The rule's name in tables, e.g. ``gauss-hermite-20``, and ``gauss-hermite-8-prune1e-06`` where
        ``prune`` is not the default."""
        default = type(self).prune
        return f"gauss-hermite-{self.order}" + ("" if self.prune == default else f"-prune{self.prune:g}")

    def size(self, dimension: int) -> int:
        """The number of nodes after pruning (at most ``order ** dimension``)."""
        return self.nodes(dimension)[1].size

    def nodes(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes ``(dimension, N)`` and weights ``(N,)`` summing to one, for ``E_{n ~ N(0, I)}``
        (:class:`QuadratureError` if more than :data:`MAX_NODES` nodes survive pruning)."""
        return self._rule(dimension)[:2]

    def pruned_weight(self, dimension: int) -> float:
        """The total weight of the nodes dropped by pruning."""
        return self._rule(dimension)[2]

    def coarser(self, floor: CoarsestRules) -> GaussHermite | None:
        """The rule of half the order (at least ``floor.coarsest_order``), on which anchors are searched
        cheaply; ``None`` if this one is already that coarse."""
        order = max(floor.coarsest_order, self.order // 2)
        return GaussHermite(order, self.prune) if order < self.order else None

    def _rule(self, dimension: int) -> tuple[np.ndarray, np.ndarray, float]:
        dimension = INTEGRAL_DIMENSION.check(dimension, "dimension", QuadratureError)
        return _tensor_gauss_hermite(self.order, dimension, self.prune)


#: Partial nodes extended at once while a tensor rule is grown (bounds its work arrays).
_BLOCK_ROWS = 1 << 16


@lru_cache(maxsize=16)
def _tensor_gauss_hermite(order: int, dimension: int, prune: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The pruned tensor rule, in C order over the node indices: the nodes whose product weight is at
    least ``prune`` times the largest, the weights renormalised, and the weight dropped.

    The grid is grown one dimension at a time and never materialised: a partial node (its first ``k``
    indices) is kept only if its product weight times the largest weight in each remaining dimension
    reaches the threshold, which every node it extends to needs. Every partial node extends to a kept
    one (with the largest weights), so no level holds more entries than the rule has nodes, and a
    level above :data:`MAX_NODES` ends the construction with :class:`QuadratureError`. The weights are
    multiplied in the order of ``reduce(np.multiply.outer, [w] * dimension)``: the same values."""
    x, w = hermegauss(order)
    w = w / w.sum()
    largest = w.max()
    threshold = prune * largest**dimension
    indices = np.zeros((1, 0), dtype=np.intp)
    weights = np.ones(1)
    for level in range(dimension):
        # the last level applies the threshold itself; the partial ones a bound, slackened for rounding
        bound = threshold if level == dimension - 1 else threshold * (1.0 - 1e-12)
        reach = largest ** (dimension - level - 1)
        kept_rows, kept_columns, kept_weights, count = [], [], [], 0
        for start in range(0, weights.size, _BLOCK_ROWS):
            product = weights[start : start + _BLOCK_ROWS, None] * w[None, :]
            rows, columns = np.nonzero(product * reach >= bound)
            count += rows.size
            if count > MAX_NODES:
                raise QuadratureError(
                    f"quadrature rule gauss-hermite-{order} in {dimension} dimensions keeps more than "
                    f"{MAX_NODES:.3g} nodes after pruning (saddle.quadrature.rules.MAX_NODES); use a lower order, a "
                    "larger prune or quadrature 'sobol'"
                )
            kept_rows.append(rows + start)
            kept_columns.append(columns)
            kept_weights.append(product[rows, columns])
        rows = np.concatenate(kept_rows)
        indices = np.concatenate([indices[rows], np.concatenate(kept_columns)[:, None]], axis=1)
        weights = np.concatenate(kept_weights)
    points = np.ascontiguousarray(x[indices.T])
    total = float(weights.sum())
    dropped = max(0.0, 1.0 - total)
    weights = weights / total
    points.setflags(write=False)
    weights.setflags(write=False)
    return points, weights, dropped


@dataclass(frozen=True)
class ScrambledSobol:
    """Randomised quasi-Monte Carlo: ``2**log2_points`` scrambled Sobol points mapped by the
    inverse normal CDF. Independent of the Gauss-Hermite grid, hence a cross-check of it."""

    log2_points: int = 16
    seed: int = 0

    def __post_init__(self) -> None:
        log2_points = SOBOL_LOG2_POINTS.check(self.log2_points, "Sobol order log2_points", QuadratureError)
        object.__setattr__(self, "log2_points", log2_points)
        object.__setattr__(self, "seed", SEED.check(self.seed, "seed", QuadratureError))

    @property
    def label(self) -> str:
        """The rule's name in tables, e.g. ``sobol-2^16-seed0``."""
        return f"sobol-2^{self.log2_points}-seed{self.seed}"

    def nodes(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        """Points ``(dimension, N)`` and equal weights ``(N,)``, for ``E_{n ~ N(0, I)}``."""
        return _sobol(self.log2_points, check_size(self, dimension), self.seed)

    def size(self, dimension: int) -> int:
        """The number of points, ``2 ** log2_points``."""
        return 2**self.log2_points

    def pruned_weight(self, dimension: int) -> float:
        """Zero: no point is dropped."""
        return 0.0

    def coarser(self, floor: CoarsestRules) -> ScrambledSobol | None:
        """An eighth of the points with the same seed (at least ``2**floor.coarsest_sobol_log2``), on which
        anchors are searched cheaply; ``None`` if this rule is already that coarse."""
        log2_points = max(floor.coarsest_sobol_log2, self.log2_points - 3)
        return ScrambledSobol(log2_points, self.seed) if log2_points < self.log2_points else None


@lru_cache(maxsize=16)
def _sobol(log2_points: int, dimension: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    sampler = qmc.Sobol(d=dimension, scramble=True, seed=seed)
    u = sampler.random_base2(log2_points)
    points = norm.ppf(u).T.copy()
    weights = np.full(points.shape[1], 1.0 / points.shape[1])
    points.setflags(write=False)
    weights.setflags(write=False)
    return points, weights


QuadratureRule = GaussHermite | ScrambledSobol


def with_labels(
    nodes: np.ndarray,
    weights: np.ndarray,
    labels: tuple[tuple[float, ...], ...],
    probabilities: tuple[float, ...],
) -> tuple[np.ndarray, np.ndarray]:
    """The product of a Gaussian rule ``(nodes (D, N), weights (N,))`` with a discrete law: ``K``
    configurations of the label nodes (``labels``: one tuple of ``K`` values per label node) with
    ``probabilities``. The nodes are ``(D + len(labels), K N)``, configuration-major, the weights the
    products, summing to one. Without label nodes the rule is returned as it is."""
    if len(labels) == 0:
        return nodes, weights
    values = np.asarray(labels, dtype=float)
    chance = np.asarray(probabilities, dtype=float)
    n = weights.size
    gaussian = np.tile(nodes, (1, chance.size))
    discrete = np.repeat(values, n, axis=1)
    combined = np.ascontiguousarray(np.concatenate([gaussian, discrete]))
    product_weights = (chance[:, None] * weights[None, :]).ravel()
    combined.setflags(write=False)
    product_weights.setflags(write=False)
    return combined, product_weights


def make_rule(kind: str, order: int, seed: int = 0, prune: float = GaussHermite.prune) -> QuadratureRule:
    """Build a rule by name: ``gauss-hermite`` (``order`` points per dimension, :data:`GAUSS_HERMITE_ORDER`,
    nodes below ``prune`` times the largest weight dropped, :data:`PRUNE`) or ``sobol`` (``2**order`` points
    scrambled with ``seed``, :data:`SOBOL_LOG2_POINTS`; ``prune`` is checked, and does not apply)."""
    prune = PRUNE.check(prune, "prune", QuadratureError)
    if kind == "gauss-hermite":
        return GaussHermite(order, prune)
    if kind == "sobol":
        return ScrambledSobol(order, seed)
    raise QuadratureError(f"quadrature must be one of gauss-hermite, sobol; got {kind!r}")
