"""The linear positional baseline ``f_B(x) = B x`` (THEORY.md sec. 7, paper Result 5.1).

Its ERM has O(1) parameters and converges to the population minimiser
``B_hat = E[T(h*) Sigma_tilde] Sigma_tilde^{-1}``, with test error
``eps_g^lin = (1/L) E tr[(T(h*) - B_hat) Sigma_tilde (T(h*) - B_hat)^T]``, where the teacher
fields ``h*_l = rho_l^{1/2} eta_l`` are independent Gaussians. Both expectations have smooth
integrands, so tensor Gauss-Hermite converges spectrally (tests/test_baseline.py measures it
and checks it against a finite-d least-squares fit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.quadrature import GaussHermite, QuadratureRule


@dataclass(frozen=True)
class LinearBaseline:
    """``B_hat`` (L x L) and its test error ``eps_g^lin``."""

    matrix: np.ndarray
    test_error: float
    quadrature: str


def teacher_attention_function(system: ReplicaSystem):
    """``T(h*)`` as a numpy function of the teacher nodes ``eta`` (``(L t, N)``) and the
    constants: the teacher fields do not depend on the student, so ``theta = 0`` in them."""
    eta_symbols = system.nodes[len(system.z) :]
    theta_zero = {e.symbol: 0 for e in system.entries if e.family == "theta"}
    attention = system.teacher_attention.xreplace(theta_zero)
    flat = sp.lambdify([list(eta_symbols), list(system.constants)], list(attention), modules="numpy", cse=True)
    size = system.teacher_attention.shape

    def evaluate(eta: np.ndarray, consts: np.ndarray) -> np.ndarray:
        values = np.broadcast_arrays(*[np.asarray(v, dtype=float) for v in flat(list(eta), list(consts))])
        return np.stack(values).reshape(size + values[0].shape)

    return evaluate


def linear_baseline(system: ReplicaSystem, quadrature: QuadratureRule | None = None) -> LinearBaseline:
    """Population-optimal linear positional attention and its test error."""
    rule = quadrature or GaussHermite(24, prune=0.0)  # two dimensions: no need to prune
    consts = np.array([system.constant_values()[c] for c in system.constants])
    n_teacher = len(system.nodes) - len(system.z)
    nodes, weights = rule.nodes(n_teacher)
    attention = teacher_attention_function(system)(nodes, consts)  # (L, L, N)
    sigma_tilde = np.array(
        sp.lambdify([list(system.constants)], system.sigma_tilde, modules="numpy")(list(consts)), dtype=float
    )
    mean = np.einsum("ijn,n->ij", attention, weights)
    b_hat = mean @ sigma_tilde @ np.linalg.inv(sigma_tilde)
    residual = attention - b_hat[:, :, None]
    per_node = np.einsum("ijn,jk,ikn->n", residual, sigma_tilde, residual)
    length = attention.shape[0]
    return LinearBaseline(matrix=b_hat, test_error=float(per_node @ weights) / length, quadrature=rule.label)
