"""The linear positional baseline ``f_B(x) = B x`` (THEORY.md sec. 7, paper Result 5.1).

Its ERM has O(1) parameters and converges to the population minimiser
``B_hat = E[T(h*) Sigma_tilde] E[Sigma_tilde]^{-1}``, with test error
``eps_g^lin = (1/L) E tr[(T(h*) - B_hat) Sigma_tilde (T(h*) - B_hat)^T]``, where the teacher
fields ``h*_l = rho_l^{1/2} eta_l`` are independent Gaussians (for mixture tokens ``rho_l`` and
``Sigma_tilde`` are those of the tokens' clusters, and the expectations run over the label law too,
THEORY.md sec. 8). Both expectations have smooth
integrands, so tensor Gauss-Hermite converges spectrally (tests/test_baseline.py measures it
and checks it against a finite-d least-squares fit).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import sympy as sp

from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.quadrature.rules import GaussHermite, QuadratureRule, with_labels


@dataclass(frozen=True)
class LinearBaseline:
    """``B_hat`` (L x L) and its test error ``eps_g^lin``."""

    matrix: np.ndarray
    test_error: float
    quadrature: str


def _teacher_nodes(system: ReplicaSystem) -> list[sp.Symbol]:
    """The nodes the teacher's side depends on: ``eta`` (``L t``), then the label nodes of a mixture."""
    return list(system.nodes[len(system.z) :])


def _as_function(system: ReplicaSystem, matrix: sp.Matrix):
    """``matrix`` (with ``theta = 0``: the teacher fields do not depend on the student) as a numpy
    function of the teacher nodes (``(L t + labels, N)``) and the constants, shape ``matrix.shape + (N,)``."""
    theta_zero = {e.symbol: 0 for e in system.entries if e.family == "theta"}
    flat = sp.lambdify(
        [_teacher_nodes(system), list(system.constants)], list(matrix.xreplace(theta_zero)), modules="numpy", cse=True
    )

    def evaluate(nodes: np.ndarray, consts: np.ndarray) -> np.ndarray:
        values = flat(list(nodes), list(consts))
        values = np.broadcast_arrays(*[np.asarray(v, dtype=float) for v in values], np.empty(nodes.shape[1:]))[:-1]
        return np.stack(values).reshape(matrix.shape + values[0].shape)

    return evaluate


def teacher_attention_function(system: ReplicaSystem):
    """``T(h*)`` as a numpy function of the teacher nodes ``eta`` (and the label nodes of a mixture,
    ``(L t + labels, N)``) and the constants."""
    return _as_function(system, system.teacher_attention)


def linear_baseline(system: ReplicaSystem, quadrature: QuadratureRule | None = None) -> LinearBaseline:
    """Population-optimal linear positional attention and its test error."""
    rule = quadrature or GaussHermite(24, prune=0.0)  # two dimensions: no need to prune
    consts = np.array([system.constant_values()[c] for c in system.constants])
    n_teacher = system.gaussian_dimension - len(system.z)
    nodes, weights = with_labels(*rule.nodes(n_teacher), *system.label_rule())
    attention = teacher_attention_function(system)(nodes, consts)  # (L, L, N)
    sigma_tilde = _as_function(system, system.sigma_tilde)(nodes, consts)  # (L, L, N)
    target = np.einsum("ijn,jkn,n->ik", attention, sigma_tilde, weights)
    b_hat = target @ np.linalg.inv(np.einsum("jkn,n->jk", sigma_tilde, weights))
    residual = attention - b_hat[:, :, None]
    per_node = np.einsum("ijn,jkn,ikn->n", residual, sigma_tilde, residual)
    length = attention.shape[0]
    return LinearBaseline(matrix=b_hat, test_error=float(per_node @ weights) / length, quadrature=rule.label)
