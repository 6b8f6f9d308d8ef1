"""The replicon (de Almeida-Thouless) eigenvalue of a fixed point (THEORY.md sec. 12).

The replica-symmetric point is stable against replica-symmetry breaking where the composition of the
two linear responses to an independent fluctuation ``dq`` of the fields has spectral radius below one:

    dqhat = O dq      (output side: ``alpha E[G dq G^T]`` summed into each ``qhat`` entry, at the prox)
    dq    = I dqhat   (input side: ``d q / d qhat`` of the closed-form entropic update)

with ``G = d g_out / d omega = P H^-1 P - P`` per node (:mod:`attnphase.replica.replicon`): the
replicon of the smooth part, :func:`replicon`.

``G`` is the derivative of the prox where it is smooth. Where the global minimiser jumps between
basins, two replicas whose fields differ by an independent fluctuation of size ``eps`` straddle the
jump surface with probability ``O(sqrt(eps))``, and the response of the conjugates,
``D(eps) = E[Cov(g_out | shared field)]`` (the two-group form of ``alpha^-1 dqhat``), is
``eps E[G S S^T G^T] + sqrt(eps) J`` with ``J`` positive semi-definite, nonzero where the jump set
carries weight. The response per unit fluctuation then diverges as ``eps -> 0``: the replicon is
infinite and the replica-symmetric point unstable. :func:`jump_ratio` measures ``J`` against the smooth
coefficient from ``D(eps)`` on the nodes themselves (:func:`fluctuation_response`), and
:func:`jump_coefficient` integrates ``J`` over the jump surface, an independent route.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.saddle.compilation.replicon import compile_replicon
from attnphase.saddle.equations.problem import Problem
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import QuadratureRule, ScrambledSobol
from attnphase.saddle.tuning import RepliconTuning


def prox_response(problem: Problem, point: FixedPoint, nodes: np.ndarray | None = None) -> np.ndarray:
    """``G = d g_out / d omega = P H^-1 P - P`` at every node of ``nodes`` (default: the problem's rule),
    ``(N, k, k)``, from the full prox at ``point``."""
    saddle_map = problem.map
    pieces = compile_replicon(saddle_map.compiled.system)
    params = problem.geometry.kernel_point(point.values)
    if nodes is None:
        nodes, z = saddle_map.nodes, saddle_map.evaluate(point.values, point.alpha, Effort.FULL).z
    else:
        z = problem.engine.full_on(nodes, point.values).z
    hessian = pieces.envelope_hessian(z, nodes, params, saddle_map.consts)
    prior = pieces.prior_hessian(nodes, params, saddle_map.consts)
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


def spherical_rule(dimension: int) -> tuple[np.ndarray, np.ndarray]:
    """``+-sqrt(n) e_j`` with equal weights, ``(2 n, n)`` and ``(2 n,)``: a rule for ``N(0, I_n)`` exact on
    quadratics, so the covariance it gives of a linear function is exact."""
    axes = np.sqrt(dimension) * np.eye(dimension)
    return np.concatenate([axes, -axes]), np.full(2 * dimension, 0.5 / dimension)


def gaussian_rule(dimension: int, order: int) -> tuple[np.ndarray, np.ndarray]:
    """The tensor Gauss-Hermite rule of ``order`` points per axis for ``N(0, I_n)``: ``(order^n, n)``,
    ``(order^n,)``."""
    x, w = np.polynomial.hermite_e.hermegauss(order)
    grids = np.meshgrid(*[x] * dimension, indexing="ij")
    weights = np.prod(np.meshgrid(*[w / w.sum()] * dimension, indexing="ij"), axis=0)
    return np.stack([g.ravel() for g in grids], axis=1), weights.ravel()


def fluctuated_nodes(
    problem: Problem, point: FixedPoint, nodes: np.ndarray, epsilon: float, zeta: np.ndarray
) -> np.ndarray:
    """``nodes (D, N)`` with the student's nodes at ``sqrt(1 - eps) xi + sqrt(eps) zeta`` for every row
    of ``zeta (J, n_xi)``, and the teacher's moved by ``-B^-1 A sqrt(eps) zeta`` so that ``h*`` does not
    see ``zeta`` (:mod:`attnphase.replica.replicon`): ``(D, N, J)``."""
    pieces = compile_replicon(problem.map.compiled.system)
    params, consts = problem.geometry.kernel_point(point.values), problem.consts
    student, teacher = pieces.student_nodes, pieces.teacher_nodes
    shifts = np.sqrt(epsilon) * zeta  # (J, n_xi)
    on_student = pieces.teacher_on_student(nodes, params, consts)  # (N, t, n_xi)
    on_teacher = pieces.teacher_on_teacher(nodes, params, consts)  # (N, t, n_eta)
    compensation = -np.linalg.pinv(on_teacher) @ on_student  # (N, n_eta, n_xi)
    moved = np.repeat(nodes[:, :, None], len(shifts), axis=2)
    moved[student] = np.sqrt(1.0 - epsilon) * nodes[student][:, :, None] + shifts.T[:, None, :]
    moved[teacher] += np.einsum("nab,jb->anj", compensation, shifts)
    return moved


def fluctuation_response(
    problem: Problem,
    point: FixedPoint,
    rule: QuadratureRule,
    epsilon: float,
    inner: tuple[np.ndarray, np.ndarray] | None = None,
) -> np.ndarray:
    """``D(eps) = E[Cov_zeta g_out]`` (``k x k``) on ``rule``'s nodes moved by :func:`fluctuated_nodes`,
    ``zeta`` on the ``inner`` rule (points, weights; default :func:`spherical_rule`), with the full prox
    at every moved node (module docstring)."""
    pieces = compile_replicon(problem.map.compiled.system)
    nodes, weights = problem.compiled.rule(rule)
    zeta, zeta_weights = inner if inner is not None else spherical_rule(len(pieces.student_nodes))
    moved = fluctuated_nodes(problem, point, nodes, epsilon, zeta)
    count, inner_count = moved.shape[1], moved.shape[2]
    flat = moved.reshape(moved.shape[0], -1)
    params, consts = problem.geometry.kernel_point(point.values), problem.consts
    z = problem.engine.full_on(flat, point.values).z.T  # (N J, k)
    omega = pieces.student_fields(flat, params, consts)
    g = np.einsum("nab,nb->na", pieces.prior_hessian(flat, params, consts), z - omega)
    g = g.reshape(count, inner_count, -1)
    centred = g - np.einsum("nja,j->na", g, zeta_weights)[:, None, :]
    return np.einsum("n,j,nja,njb->ab", weights, zeta_weights, centred, centred)


def smooth_coefficient(problem: Problem, point: FixedPoint, rule: QuadratureRule | None = None) -> float:
    """``tr E[G S S^T G^T]`` on ``rule`` (default: the problem's): ``lim D(eps) / eps`` of a smooth
    ``g_out``."""
    pieces = compile_replicon(problem.map.compiled.system)
    params, consts = problem.geometry.kernel_point(point.values), problem.consts
    nodes, weights = (problem.map.nodes, problem.map.weights) if rule is None else problem.compiled.rule(rule)
    slope = prox_response(problem, point, nodes) @ pieces.student_jacobian(nodes, params, consts)
    return float(np.einsum("n,nab,nab->", weights, slope, slope))


def jump_coefficient(problem: Problem, point: FixedPoint, delta: float) -> float:
    """``tr J`` from the jump surface itself, on ``problem``'s rule: with ``z_1``, ``z_2`` the two lowest
    minima the full prox finds at a node, ``Gamma = M(z_2) - M(z_1)``, ``dg = P (z_2 - z_1)`` and
    ``s = |S^T dg|`` (the rate at which a fluctuation of the student's nodes moves ``Gamma``), the
    coarea formula and ``int Phi (1 - Phi) = pi^-1/2`` give
    ``J = pi^-1/2 lim_{delta -> 0} E[s dg dg^T 1(Gamma < delta)] / (2 delta)``, the coefficient of
    ``sqrt(eps)`` in ``D(eps)`` for a Gaussian ``zeta``: an independent route to the jump term."""
    pieces = compile_replicon(problem.map.compiled.system)
    nodes, weights = problem.map.nodes, problem.map.weights
    params, consts = problem.geometry.kernel_point(point.values), problem.consts
    found = problem.engine.full_on(nodes, point.values)
    envelope = problem.engine.kernel.envelope(params)
    values = np.full((found.minima.shape[0], nodes.shape[1]), np.inf)
    for slot, minimum in enumerate(found.minima):
        present = np.isfinite(minimum).all(axis=0)
        values[slot] = np.where(present, envelope(np.where(present, minimum, 0.0), nodes), np.inf)
    order = np.argsort(values, axis=0)[:2]
    index = np.arange(nodes.shape[1])
    gap = values[order[1], index] - values[order[0], index]
    near = np.isfinite(gap) & (gap < delta)
    step = np.where(near, found.minima[order[1], :, index].T - found.minima[order[0], :, index].T, 0.0)
    dg = np.einsum("nab,bn->na", pieces.prior_hessian(nodes, params, consts), np.nan_to_num(step))
    rate = np.linalg.norm(np.einsum("nab,na->nb", pieces.student_jacobian(nodes, params, consts), dg), axis=1)
    return float(np.sum(weights * near * rate * np.einsum("na,na->n", dg, dg)) / (2 * delta * np.sqrt(np.pi)))


def jump_ratio(problem: Problem, point: FixedPoint, tuning: RepliconTuning, scrambling: int = 0) -> float:
    """``J / a``: the coefficient of ``sqrt(eps)`` in ``tr D(eps)``, ``(tr D(eps) - eps a) / sqrt(eps)`` at the
    tuning's fluctuation size, over the smooth one ``a`` (:func:`smooth_coefficient`), both on the tuning's
    scrambled Sobol rule (seed ``tuning.seed + scrambling``): zero where ``g_out`` is smooth, of order one
    where the prox's jumps carry weight. NaN where either is not finite."""
    rule, eps = ScrambledSobol(tuning.log2_points, tuning.seed + scrambling), tuning.fluctuation
    with np.errstate(all="ignore"):
        smooth = smooth_coefficient(problem, point, rule)
        response = float(np.trace(fluctuation_response(problem, point, rule, eps)))
    ratio = (response - eps * smooth) / (eps**0.5 * smooth)
    return ratio if np.isfinite(ratio) else float("nan")


@dataclass(frozen=True)
class ReplicaSymmetry:
    """Where replica symmetry holds at a fixed point (module docstring): the smooth part's replicon and the
    jump term's share of the fluctuation response (:func:`jump_ratio`). At least ``jumps_above``, the jump
    set carries weight and the replicon is infinite; at most ``smooth_below``, it is the smooth part's;
    in between the point is unresolved."""

    replicon_smooth: float
    jump_ratio: float
    smooth_below: float
    jumps_above: float

    @property
    def replicon(self) -> float:
        """The replicon: infinite where the jumps carry weight, the smooth part's where they do not, NaN
        where unresolved."""
        if self.jump_ratio >= self.jumps_above:
            return float("inf")
        return self.replicon_smooth if abs(self.jump_ratio) <= self.smooth_below else float("nan")

    @property
    def stable(self) -> bool | None:
        """Replica-symmetric stable (replicon below one); ``None`` where that is not resolved."""
        if self.replicon_smooth > 1.0 or self.jump_ratio >= self.jumps_above:
            return False
        if self.replicon_smooth < 1.0 and abs(self.jump_ratio) <= self.smooth_below:
            return True
        return None


def largest_jump_ratio(problem: Problem, point: FixedPoint, tuning: RepliconTuning) -> float:
    """The largest :func:`jump_ratio` over the tuning's ``scramblings``, stopping at the first that says the
    jumps carry weight: a jump set of small weight may leave no node of one rule near it, so a smooth
    verdict needs every scrambling to agree."""
    ratios = []
    for scrambling in range(tuning.scramblings):
        ratios.append(jump_ratio(problem, point, tuning, scrambling))
        if not ratios[-1] < tuning.jumps_above:
            break
    return max(ratios) if np.all(np.isfinite(ratios)) else float("nan")


def replica_symmetry(problem: Problem, point: FixedPoint, tuning: RepliconTuning) -> ReplicaSymmetry:
    """:class:`ReplicaSymmetry` of ``point``: the replicon on ``problem``'s rule, the largest jump ratio on
    the tuning's fluctuation rules."""
    ratio = largest_jump_ratio(problem, point, tuning)
    return ReplicaSymmetry(replicon(problem, point), ratio, tuning.smooth_below, tuning.jumps_above)
