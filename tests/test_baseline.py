"""The linear positional baseline ``f_B(x) = B x`` (THEORY.md sec. 7) against independent computations.

``baseline.linear.linear_baseline`` integrates ``B_hat = E[T(h*)]`` and
``eps_lin = (1/L) E tr[(T - B_hat) Sigma_tilde (T - B_hat)^T]`` by tensor Gauss-Hermite. Here the same
quantities are computed from scratch in numpy: a high-order product rule, plain Monte Carlo over the
teacher fields, and a least-squares fit of B on finite-d data generated as in sec. 1.
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from attnphase.baseline.linear import linear_baseline
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.quadrature.rules import GaussHermite

A_STANDARD = ((0.6, 0.4), (0.4, 0.6))
A_SECOND_EXAMPLE = ((0.3, 0.7), (0.8, 0.2))  # App. E.2


def teacher_attention(hstar: np.ndarray, omega: float, a: np.ndarray) -> np.ndarray:
    """``T(h*) = (1 - omega) softmax_row(h* h*^T) + omega A`` (sec. 6) for a batch ``hstar`` of shape ``(N, L)``;
    returns ``(N, L, L)``."""
    scores = hstar[:, :, None] * hstar[:, None, :]
    scores = scores - scores.max(axis=2, keepdims=True)
    e = np.exp(scores)
    return (1 - omega) * e / e.sum(axis=2, keepdims=True) + omega * np.asarray(a)[None]


def reference_by_product_rule(sigma: float, omega: float, a, order: int = 64) -> tuple[np.ndarray, float]:
    """``B_hat`` and ``eps_lin`` with an unpruned ``order``-point product Gauss-Hermite rule in (eta_1, eta_2)."""
    x, w = hermegauss(order)
    w = w / w.sum()
    eta1, eta2 = (g.ravel() for g in np.meshgrid(x, x, indexing="ij"))
    weights = np.outer(w, w).ravel()
    t = teacher_attention(sigma * np.stack([eta1, eta2], axis=1), omega, a)
    b_hat = np.einsum("nij,n->ij", t, weights)
    per_node = sigma**2 / 2 * ((t - b_hat) ** 2).sum(axis=(1, 2))
    return b_hat, float(per_node @ weights)


@pytest.fixture(scope="module")
def paper_system():
    return derive(paper_model())


def test_gauss_hermite_orders_converge_spectrally(paper_system):
    """Sec. 7: the baseline integrand is smooth, so the rule converges fast: orders 24 and 32 agree to 1e-9, order 16
    to 1e-6 (its intrinsic error is 3e-7), and each order is at least as close to a 64-point unpruned reference as
    the previous one."""
    errors = {order: linear_baseline(paper_system, GaussHermite(order, prune=0.0)).test_error for order in (16, 24, 32)}
    matrices = {order: linear_baseline(paper_system, GaussHermite(order, prune=0.0)).matrix for order in (16, 24, 32)}
    assert errors[24] == pytest.approx(errors[32], rel=1e-9)
    assert errors[16] == pytest.approx(errors[32], rel=1e-6)
    np.testing.assert_allclose(matrices[24], matrices[32], rtol=0, atol=1e-11)
    np.testing.assert_allclose(matrices[16], matrices[32], rtol=0, atol=1e-8)
    b_ref, eps_ref = reference_by_product_rule(0.5, 0.3, A_STANDARD)
    distance = [abs(errors[order] - eps_ref) for order in (16, 24, 32)]
    assert distance[0] >= distance[1] and distance[1] <= 1e-9 * eps_ref and distance[2] <= 1e-9 * eps_ref
    np.testing.assert_allclose(matrices[32], b_ref, rtol=0, atol=1e-11)


def test_baseline_matrix_is_row_stochastic_and_labelled(paper_system):
    """Sec. 7: ``B_hat = E[T]`` inherits the row sums 1 of T; the result names the rule that produced it."""
    result = linear_baseline(paper_system, GaussHermite(24))
    assert result.matrix.shape == (2, 2)
    np.testing.assert_allclose(result.matrix.sum(axis=1), 1.0, rtol=0, atol=1e-10)
    assert result.quadrature == "gauss-hermite-24"
    assert result.test_error > 0


@pytest.mark.parametrize(
    ("omega", "sigma", "a"),
    [(0.3, 0.5, A_STANDARD), (0.3, 0.5, A_SECOND_EXAMPLE), (0.0, 0.5, A_STANDARD), (0.7, 1.2, A_SECOND_EXAMPLE)],
    ids=["paper", "app-E2", "semantic-target", "sigma1.2-app-E2"],
)
def test_baseline_matches_monte_carlo_over_teacher_fields(omega, sigma, a):
    """Sec. 7: ``h*_l = sigma eta_l`` with ``eta ~ N(0, I_2)``; ``B_hat = E[T]`` and
    ``eps_lin = (1/L) E tr[(T - B) sigma^2 I (T - B)^T]`` by plain Monte Carlo (400k samples), within 4 standard
    errors of the package's Gauss-Hermite values."""
    result = linear_baseline(derive(paper_model(omega=omega, sigma=sigma, A=a)), GaussHermite(24))
    rng = np.random.default_rng(12345)
    n = 400_000
    t = teacher_attention(sigma * rng.standard_normal((n, 2)), omega, a)
    b_mc = t.mean(axis=0)
    b_se = t.std(axis=0, ddof=1) / np.sqrt(n)
    per_sample = sigma**2 / 2 * ((t - b_mc) ** 2).sum(axis=(1, 2))
    eps_mc, eps_se = per_sample.mean(), per_sample.std(ddof=1) / np.sqrt(n)
    assert np.all(np.abs(result.matrix - b_mc) <= 4 * b_se + 1e-15)
    assert abs(result.test_error - eps_mc) <= 4 * eps_se
    if omega > 0:  # the Monte Carlo resolves the test error to better than 1 %
        assert eps_se < 0.01 * eps_mc


def test_baseline_second_example_differs_from_the_standard_one():
    """App. E.2: the non-symmetric A changes B_hat (its rows follow the rows of A), so the comparison above is not
    trivially passed by a package that ignores A."""
    standard = linear_baseline(derive(paper_model(A=A_STANDARD)))
    second = linear_baseline(derive(paper_model(A=A_SECOND_EXAMPLE)))
    assert np.abs(standard.matrix - second.matrix).max() > 0.05
    assert second.matrix[0, 1] > second.matrix[0, 0] and second.matrix[1, 0] > second.matrix[1, 1]


def test_baseline_matches_least_squares_fit_on_finite_d_data(paper_system):
    """Sec. 1 and 7 at finite d: tokens ``x_l ~ N(0, sigma^2 I_d)``, targets ``y = T(x Q*/sqrt(d)) x``; the
    least-squares B (``min_B sum ||y - B x||^2``, d = 200, n = 20000) is within 0.02 of B_hat and its test error
    ``(1/(dL)) E||y - B x||^2`` on fresh samples is within 5 % of eps_lin.

    ``Q*`` is a standard Gaussian vector rescaled to ``||Q*||^2 = d``: the theory's ``rho = Q*^T Sigma Q*/d``
    (sec. 2) is then exactly ``sigma^2``. Without the rescaling ``rho`` fluctuates by ``sqrt(2/d) = 10 %`` at
    d = 200, which moves eps_lin by up to ~20 % (it grows like ``rho^2.4`` here)."""
    result = linear_baseline(paper_system, GaussHermite(24))
    sigma, omega, a = 0.5, 0.3, np.array(A_STANDARD)
    d, n_train, n_test_chunks, chunk = 200, 20_000, 3, 20_000
    rng = np.random.default_rng(2024)
    q_star = rng.standard_normal(d)
    q_star *= np.sqrt(d) / np.linalg.norm(q_star)

    def sample(n):
        x = sigma * rng.standard_normal((n, 2, d))
        y = teacher_attention(x @ q_star / np.sqrt(d), omega, a) @ x
        return x, y

    x, y = sample(n_train)
    b_fit = np.einsum("nld,nkd->lk", y, x) @ np.linalg.inv(np.einsum("nld,nkd->lk", x, x))
    del x, y
    np.testing.assert_allclose(b_fit, result.matrix, rtol=0, atol=0.02)

    errors = []
    for _ in range(n_test_chunks):
        x, y = sample(chunk)
        residual = y - np.einsum("lk,nkd->nld", b_fit, x)
        errors.append((residual**2).sum(axis=(1, 2)) / (d * 2))
    errors = np.concatenate(errors)
    test_error, standard_error = errors.mean(), errors.std(ddof=1) / np.sqrt(errors.size)
    assert standard_error < 0.01 * test_error  # the 5 % band is several standard errors wide
    assert test_error == pytest.approx(result.test_error, rel=0.05)
