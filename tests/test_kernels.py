"""The linear algebra inside the prox's Newton steps (saddle/compilation/templates.py): allocation-free, so it runs in
the compiled prox without heap traffic, and equal to LAPACK's answer. The templates are plain Python,
so they are checked here as they are, against numpy, on random symmetric matrices of the sizes the
variants have (``L r`` from 3 to 6 prox coordinates)."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.saddle.compilation import templates as kernels


def _symmetric(rng: np.random.Generator, k: int, definite: bool) -> np.ndarray:
    a = rng.standard_normal((k, k))
    return a @ a.T + 1e-3 * np.eye(k) if definite else (a + a.T) / 2


@pytest.mark.parametrize("k", [3, 4, 6])
def test_the_smallest_eigenvalue_equals_lapacks(k):
    rng = np.random.default_rng(k)
    for _ in range(50):
        h = _symmetric(rng, k, definite=False)
        found = kernels._smallest_eigenvalue(h.ravel(), k, np.empty(k * k))
        assert found == pytest.approx(np.linalg.eigvalsh(h)[0], abs=1e-13 * np.abs(h).max())


@pytest.mark.parametrize("k", [3, 4, 6])
@pytest.mark.parametrize("definite", [True, False])
def test_the_newton_direction_solves_the_minimally_shifted_system(k, definite):
    """``-(H + shift I)^-1 g`` with ``shift = max(0, floor - lambda_min)``: plain Newton where ``H`` is
    positive definite, a descent direction where it is not. (Where it is not, ``H + shift I`` has an
    eigenvalue ``floor`` ~ 1e-10 of its scale: the solve is that ill-conditioned, whoever computes it.)"""
    rng = np.random.default_rng(10 * k + definite)
    for _ in range(50):
        h, g = _symmetric(rng, k, definite), rng.standard_normal(k)
        step = np.empty(k)
        kernels._newton_direction(np.concatenate([g, h.ravel()]), k, step, np.empty(k * k))
        floor = 1e-10 * (1.0 + np.abs(h).max())
        shift = max(0.0, floor - np.linalg.eigvalsh(h)[0])
        expected = -np.linalg.solve(h + shift * np.eye(k), g)
        tolerance = 1e-9 if definite else 1e-4
        np.testing.assert_allclose(step, expected, rtol=tolerance, atol=tolerance * np.abs(expected).max())
        assert g @ step < 0  # a descent direction


def test_a_matrix_that_is_not_positive_definite_has_no_cholesky_factor():
    low = np.empty(9)
    assert kernels._cholesky(np.diag([1.0, 2.0, 3.0]).ravel(), 3, 0.0, low)
    np.testing.assert_allclose(low.reshape(3, 3).diagonal(), np.sqrt([1.0, 2.0, 3.0]))
    assert not kernels._cholesky(np.diag([1.0, -2.0, 3.0]).ravel(), 3, 0.0, low)
    assert kernels._cholesky(np.diag([1.0, -2.0, 3.0]).ravel(), 3, 2.5, low)
    assert not kernels._cholesky(np.full(9, np.nan), 3, 0.0, low)
