"""Quadrature rules for Gaussian expectations ``E_{n ~ N(0, I_D)}[f(n)]``.

A rule is a small strategy object: ``rule.nodes(D)`` returns points ``(D, N)`` and weights
``(N,)`` summing to one, and ``rule.label`` names it in every table. The energetic
integrands are discontinuous (the prox jumps between basins, THEORY.md sec. 6), so the
convergence of a rule is measured at converged fixed points (tests/test_quadrature.py),
never assumed.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache, reduce

import numpy as np
from numpy.polynomial.hermite_e import hermegauss
from scipy.stats import norm, qmc

from attnphase.replica.declaration import Interval
from attnphase.saddle.validation import SEED

#: Stated relative error of the reported eps_t at the default rule (Gauss-Hermite 20 with the
#: kink correction of saddle/line_correction.py) on the paper's instance: measured at most
#: 1e-5 against the reference of benchmarks/quadrature.py --reference (scrambled Sobol 2^20,
#: four seeds, standard error below 7e-6) at alpha = 1.25 and 2 on both branches; without the
#: correction the rule is off by up to 2.3e-4 there.
DEFAULT_TRAIN_LOSS_ERROR = 5e-5


class QuadratureError(ValueError):
    """A quadrature parameter is outside its allowed range."""


#: The largest number of nodes a rule may have before pruning (a tensor Gauss-Hermite rule has
#: ``order ** dimension``). The nodes and weights of a rule at the limit take ``8 (dimension + 1)``
#: bytes each (0.8 GB in four dimensions), and the solver holds several arrays of that size.
MAX_NODES = 20_000_000
#: Gauss-Hermite points per dimension: at most 64, so that the paper's four-dimensional integrals
#: (``64**4 = 1.7e7`` nodes) stay below :data:`MAX_NODES`.
GAUSS_HERMITE_ORDER = Interval(2, 64, integer=True)
#: log2 of the number of scrambled Sobol points (``2**24 = 1.7e7`` below :data:`MAX_NODES`).
SOBOL_LOG2_POINTS = Interval(4, 24, integer=True)
#: Relative weight below which a tensor Gauss-Hermite node is dropped.
PRUNE = Interval(0.0, 1.0, high_open=True)
#: Dimensions of a Gaussian integral: ``L (r + t)`` for a declaration (at most 16 x 8).
INTEGRAL_DIMENSION = Interval(1, 128, integer=True)


def check_size(rule: GaussHermite | ScrambledSobol, dimension: int) -> int:
    """``dimension`` if ``rule`` has at most :data:`MAX_NODES` nodes there, else :class:`QuadratureError`
    giving the size and the limit; called before a rule's nodes are allocated."""
    dimension = INTEGRAL_DIMENSION.check(dimension, "dimension", QuadratureError)
    nodes = rule.size(dimension)
    if nodes > MAX_NODES:
        raise QuadratureError(
            f"quadrature rule {rule.label} in {dimension} dimensions has {float(nodes):.3g} nodes, above the limit "
            f"of {MAX_NODES:.3g} (saddle.quadrature.MAX_NODES); use a lower order or quadrature 'sobol'"
        )
    return dimension


@dataclass(frozen=True)
class GaussHermite:
    """Tensor Gauss-Hermite rule of ``order`` points per dimension.

    Nodes whose product weight is below ``prune`` times the largest are dropped and the
    remaining weights renormalised to sum to one; :meth:`pruned_weight` reports the weight
    dropped (for a bounded integrand it bounds the error this adds). The default ``1e-8``
    halves the nodes in four dimensions and drops a weight of about ``1e-7``; on the
    paper's instance it moves eps_t by less than ``1e-6`` relative (tests/test_quadrature.py).
    """

    order: int = 12
    prune: float = 1e-8

    def __post_init__(self) -> None:
        object.__setattr__(self, "order", GAUSS_HERMITE_ORDER.check(self.order, "Gauss-Hermite order", QuadratureError))
        object.__setattr__(self, "prune", PRUNE.check(self.prune, "prune", QuadratureError))

    @property
    def label(self) -> str:
        """The rule's name in tables, e.g. ``gauss-hermite-20``."""
        return f"gauss-hermite-{self.order}"

    def size(self, dimension: int) -> int:
        """The number of nodes before pruning, ``order ** dimension``."""
        return self.order**dimension

    def nodes(self, dimension: int) -> tuple[np.ndarray, np.ndarray]:
        """Nodes ``(dimension, N)`` and weights ``(N,)`` summing to one, for ``E_{n ~ N(0, I)}``
        (:class:`QuadratureError` if :meth:`size` exceeds :data:`MAX_NODES`)."""
        return _tensor_gauss_hermite(self.order, check_size(self, dimension), self.prune)[:2]

    def pruned_weight(self, dimension: int) -> float:
        """The total weight of the nodes dropped by pruning."""
        return _tensor_gauss_hermite(self.order, check_size(self, dimension), self.prune)[2]


@lru_cache(maxsize=16)
def _tensor_gauss_hermite(order: int, dimension: int, prune: float) -> tuple[np.ndarray, np.ndarray, float]:
    """The pruned tensor rule: product weights (C order over the node indices), then only the kept nodes' points."""
    x, w = hermegauss(order)
    w = w / w.sum()
    weights = reduce(np.multiply.outer, [w] * dimension).ravel()
    keep = weights >= prune * weights.max()
    dropped = float(weights[~keep].sum())
    kept = np.flatnonzero(keep)
    points = np.empty((dimension, kept.size))
    for axis, index in enumerate(np.unravel_index(kept, (order,) * dimension)):
        points[axis] = x[index]
    weights = weights[kept] / weights[kept].sum()
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


def make_rule(kind: str, order: int, seed: int = 0) -> QuadratureRule:
    """Build a rule by name: ``gauss-hermite`` (``order`` points per dimension, :data:`GAUSS_HERMITE_ORDER`)
    or ``sobol`` (``2**order`` points scrambled with ``seed``, :data:`SOBOL_LOG2_POINTS`)."""
    if kind == "gauss-hermite":
        return GaussHermite(order)
    if kind == "sobol":
        return ScrambledSobol(order, seed)
    raise QuadratureError(f"quadrature must be one of gauss-hermite, sobol; got {kind!r}")
