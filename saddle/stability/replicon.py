"""The replicon (de Almeida-Thouless) eigenvalue of a fixed point (THEORY.md sec. 12).

The replica-symmetric point is stable against replica-symmetry breaking where the composition of the
two linear responses to an independent fluctuation ``dq`` of the fields has spectral radius below one:

    dqhat = O dq      (output side: ``alpha E[G dq G^T]`` summed into each ``qhat`` entry, at the prox)
    dq    = I dqhat   (input side: ``d q / d qhat`` of the closed-form entropic update)

with ``G = d g_out / d omega = P H^-1 P - P`` per node (:mod:`attnphase.replica.replicon`). ``G`` is the
derivative of the prox where it is smooth; where the global minimiser jumps between basins (a set of
fields of measure zero) a fluctuation of variance ``eps`` adds ``O(sqrt(eps))`` to ``dqhat``, a positive
term that only raises the response: the value here is the replicon of the smooth part, a lower
bound wherever the jump set carries weight, so ``replicon > 1`` proves the replica-symmetric point
unstable and ``replicon < 1`` is necessary for its stability.
"""

from __future__ import annotations

import numpy as np

from attnphase.saddle.compilation.replicon import compile_replicon
from attnphase.saddle.equations.problem import Problem
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.prox.policy import Effort


def prox_response(problem: Problem, point: FixedPoint) -> np.ndarray:
    """``G = d g_out / d omega = P H^-1 P - P`` at every node of the problem's rule, ``(N, k, k)``, from the
    full prox at ``point``."""
    saddle_map = problem.map
    pieces = compile_replicon(saddle_map.compiled.system)
    params = problem.geometry.kernel_point(point.values)
    ev = saddle_map.evaluate(point.values, point.alpha, Effort.FULL)
    hessian = pieces.envelope_hessian(ev.z, saddle_map.nodes, params, saddle_map.consts)
    prior = pieces.prior_hessian(saddle_map.nodes, params, saddle_map.consts)
    return prior @ np.linalg.solve(hessian, prior) - prior


def conjugate_readout(problem: Problem, alpha: float, per_token: np.ndarray, incidence: np.ndarray) -> np.ndarray:
    """``(alpha / kappa_e) E[sum_l <D_e,l, X_l>]`` for every ``q`` entry ``e``, of the per-node, per-token
    matrices ``X`` (``(F, N, L, r, r)``) with ``incidence`` ``D`` at the rule's nodes (``(E, N, L, r, r)``):
    how a ``qhat`` entry sums the tokens' ``g g^T`` (or any change of it), one column per leading index
    of ``X``."""
    saddle_map = problem.map
    multiplicity = compile_replicon(saddle_map.compiled.system).multiplicity
    summed = np.einsum("n,enlad,fnlad->ef", saddle_map.weights, incidence, per_token)
    return alpha * summed / multiplicity[:, None]


def output_response(problem: Problem, point: FixedPoint) -> np.ndarray:
    """``O[e, f] = d qhat_e / d q_f`` of an independent fluctuation of the fields (module docstring), on the
    ``q`` entries."""
    system = problem.map.compiled.system
    length, rank = system.model.length, system.model.rank
    blocks = prox_response(problem, point).reshape(-1, length, rank, length, rank)
    incidence = compile_replicon(system).incidence(problem.map.nodes)  # (E, N, L, r, r)
    moved = np.einsum("nlaub,fnubc,nlduc->fnlad", blocks, incidence, blocks)
    return conjugate_readout(problem, point.alpha, moved, incidence)


def input_response(problem: Problem, point: FixedPoint) -> np.ndarray:
    """``I[e, f] = d q_e / d qhat_f`` of the entropic update at ``point``'s conjugates, on the ``q`` entries."""
    entries = compile_replicon(problem.map.compiled.system).entries
    jacobian = problem.map.order_jacobian(point.conjugates)
    return jacobian[np.ix_(entries, entries)]


def replicon(problem: Problem, point: FixedPoint) -> float:
    """The spectral radius of ``I O`` at ``point`` (module docstring); NaN where it is not finite."""
    with np.errstate(all="ignore"):
        product = input_response(problem, point) @ output_response(problem, point)
    if not np.all(np.isfinite(product)):
        return float("nan")
    return float(np.max(np.abs(np.linalg.eigvals(product))))
