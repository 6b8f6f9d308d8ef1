"""The kink correction of Gauss-Hermite along lines (saddle/quadrature/kinks.py), on a toy
envelope with a known kink and against independent integrals; its effect on the paper's
model is measured in tests/test_quadrature.py."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.stats import norm

from attnphase.saddle.quadrature.kinks import LineCorrection
from attnphase.saddle.quadrature.rules import GaussHermite

TILT = 0.4


def kink_location(n1: np.ndarray) -> np.ndarray:
    return 0.3 + 0.2 * n1


def toy_prox(nodes: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Global minimum over ``starts`` of the tilted double well
    ``M(z; n) = (z^2 - 1)^2 / 2 + TILT z (n_0 - c(n_1))``: two basins (z near +-1) that tie,
    so ``M*`` has a kink, on the curve ``n_0 = c(n_1)``."""
    tilt = TILT * (nodes[0] - kink_location(nodes[1]))
    z = starts[:, 0, :].copy()
    for _ in range(200):
        gradient = 2 * z * (z**2 - 1) + tilt
        curvature = 6 * z**2 - 2
        step = np.where(curvature > 0.1, -gradient / np.where(curvature > 0.1, curvature, 1.0), -0.2 * gradient)
        z += np.clip(step, -0.5, 0.5)
    values = 0.5 * (z**2 - 1) ** 2 + tilt * z
    best = values.argmin(axis=0)
    columns = np.arange(nodes.shape[1])
    return z[best, columns][None, :], values[best, columns]


def global_prox(nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    starts = np.stack([np.ones((1, nodes.shape[1])), -np.ones((1, nodes.shape[1]))])
    return toy_prox(nodes, starts)


def line_integrals(nodes: np.ndarray, weights: np.ndarray, correction: LineCorrection) -> float:
    """``E[M*]`` with each line along axis 0 integrated on a fine trapezoid (step 1e-3) and the
    same outer rule along axis 1: the exact value of what the correction targets."""
    t = np.linspace(-9.0, 9.0, 18001)
    fine = norm.pdf(t) * (t[1] - t[0])
    i, _ = correction.pairs
    total, seen = 0.0, set()
    for node in i:
        n1 = nodes[1, node]
        if n1 in seen:
            continue
        seen.add(n1)
        points = np.vstack([t, np.full_like(t, n1)])
        outer = correction.outer_weights(np.array([node]))[0]
        total += outer * (fine @ global_prox(points)[1])
    return total


def test_peano_kernel_is_the_rule_error_of_a_truncated_linear_function():
    correction = LineCorrection(*GaussHermite(12, prune=0.0).nodes(1), order=12)
    x, w = np.polynomial.hermite_e.hermegauss(12)
    for t in (-2.3, -0.4, 0.05, 1.7):
        exact = quad(lambda s, t=t: (s - t) * norm.pdf(s), t, np.inf)[0]
        rule = (w / w.sum()) @ np.maximum(x - t, 0.0)
        assert correction.peano(np.array([t]))[0] == pytest.approx(exact - rule, abs=1e-13)


def test_correction_makes_the_lines_through_a_kink_exact():
    nodes, weights = GaussHermite(20).nodes(2)
    correction = LineCorrection(nodes, weights, order=20, min_weight=1e-9)
    z, values = global_prox(nodes)
    exact = line_integrals(nodes, weights, correction)
    plain = weights @ values
    corrected = plain + correction(z, values, toy_prox)
    assert abs(plain - exact) > 1e-5
    assert abs(corrected - exact) < 0.02 * abs(plain - exact)


def test_no_correction_for_a_smooth_envelope():
    """Without the tilt's kink (one basin everywhere) nothing is flagged and nothing changes."""
    nodes, weights = GaussHermite(20).nodes(2)
    correction = LineCorrection(nodes, weights, order=20)

    def single_well(points: np.ndarray, starts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        z = (0.3 * points[0] + 0.1 * points[1] ** 2)[None, :] * np.ones((starts.shape[1], 1))
        return z, 0.5 * z[0] ** 2

    z, values = single_well(nodes, np.zeros((1, 1, nodes.shape[1])))
    assert correction.flagged(z, single_well)[0].size == 0
    assert correction(z, values, single_well) == 0.0


def test_nodes_that_are_not_a_gauss_hermite_grid_are_refused():
    nodes, weights = GaussHermite(8).nodes(2)
    with pytest.raises(ValueError, match="not a tensor Gauss-Hermite grid"):
        _ = LineCorrection(nodes + 0.01, weights, order=8).pairs
