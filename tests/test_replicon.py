"""The replicon (THEORY.md sec. 12, saddle/stability/replicon.py) as the specification states it.

* Its readout is the map's: the same sum over tokens, ``(alpha / kappa_e) E[sum_l <D_e,l, g_l g_l^T>]``,
  reproduces the conjugates ``qhat`` the compiled map integrates in the envelope form, for the paper's
  model and for declarations with several covariance classes, rank 2 and mixture tokens.
* Its per-node slope ``G = P H^-1 P - P`` is the derivative of ``g_out = P (prox - omega)`` in the
  student's field at fixed teacher field: central differences of the prox itself, on nodes moved in
  ``omega`` alone, agree with it wherever the prox stays in its basin.
* Where the envelope is strongly convex at every node (a ridge strong enough that ``V^-1`` outweighs
  the loss's curvature) the replica-symmetric point must be stable: the replicon is below one and
  converged in the quadrature order, and the fluctuation response is linear in its size.
* A fluctuation of the student's nodes of size ``eps`` moves the conjugates by ``D(eps)``, linear in
  ``eps`` where ``g_out`` is smooth and of order ``sqrt(eps)`` where the prox jumps; the coefficient of
  ``sqrt(eps)`` measured from two replica groups equals the one integrated over the jump surface.
"""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import variant
from attnphase.saddle.compilation.replicon import compile_replicon
from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.replicon import (
    conjugate_readout,
    fluctuation_response,
    gaussian_rule,
    jump_coefficient,
    prox_response,
    replica_symmetry,
    replicon,
    smooth_coefficient,
)
from attnphase.saddle.tuning import RepliconTuning

ENVELOPE = SolverSettings(conjugate_form=ConjugateForm.ENVELOPE, quadrature=GaussHermite(8))
#: a point inside every declaration's domain, by family: diagonal and off-diagonal entries
TRIAL = {"q": (0.05, 0.01), "V": (15.0, 1.0), "m": (0.2, 0.2), "theta": (0.05, 0.05)}


def trial_point(problem) -> np.ndarray:
    """A point with every overlap family nonzero (:data:`TRIAL`)."""
    system = problem.map.compiled.system
    return np.array([TRIAL[e.family][0 if e.entry[0] == e.entry[1] else 1] for e in system.entries])


def student_fields(problem, params: np.ndarray) -> np.ndarray:
    """``omega`` at every node of the problem's rule, ``(k, N)``: the declaration's first prox start."""
    saddle_map = problem.map
    return saddle_map.compiled.starts(saddle_map.nodes, params, saddle_map.consts, first=1)[0]


@pytest.mark.parametrize(
    "name", ["paper", *(pytest.param(name, marks=pytest.mark.slow) for name in ("spectrum", "rank2", "mixture"))]
)
def test_the_readout_of_g_g_is_the_conjugate_the_map_integrates(name):
    model = paper_model(omega=0.2) if name == "paper" else variant(name).model()
    problem = make_solver(model, ENVELOPE).problem
    params = trial_point(problem)
    ev = problem.map.evaluate(params, 1.3, Effort.FULL)
    prior = compile_replicon(problem.map.compiled.system).prior_hessian(problem.map.nodes, params, problem.map.consts)
    g = np.einsum("nab,bn->na", prior, ev.z - student_fields(problem, params))
    length, rank = model.length, model.rank
    per_token = g.reshape(-1, length, rank)
    outer = np.einsum("nla,nlb->nlab", per_token, per_token)
    pieces = compile_replicon(problem.map.compiled.system)
    read = conjugate_readout(problem, 1.3, outer[None], pieces.incidence(problem.map.nodes))[:, 0]
    np.testing.assert_allclose(read, ev.conjugates[pieces.entries], rtol=1e-9)


def moved_nodes(nodes: np.ndarray, point: np.ndarray, token: int, step: float) -> np.ndarray:
    """The paper's nodes ``(xi_1, xi_2, eta_1, eta_2)`` moved so that ``omega_token`` moves by ``step`` and
    the teacher's fields stay: ``xi += step / sqrt(q)``, ``eta -= theta step / (q sqrt(rho - theta^2/q))``."""
    q, _, _, theta = point
    rho = 0.25
    moved = nodes.copy()
    moved[token] += step / np.sqrt(q)
    moved[2 + token] -= theta * step / (q * np.sqrt(rho - theta**2 / q))
    return moved


@pytest.mark.parametrize(("omega", "alpha", "branch"), [(0.3, 1.5, "semantic"), (0.2, 1.0, "positional")])
def test_the_prox_slope_is_the_derivative_of_the_prox(omega, alpha, branch):
    solver = make_solver(paper_model(omega=omega), SolverSettings(quadrature=GaussHermite(8)))
    point = AnchorSearch.with_rays(solver)(alpha, solver.branch(branch))
    assert point.branch == branch
    problem, step = solver.problem, 1e-5
    slope = prox_response(problem, point)
    engine, nodes = problem.map.engine, problem.map.nodes
    params = point.values
    prior = compile_replicon(problem.map.compiled.system).prior_hessian(nodes, params, problem.map.consts)
    differences, basins = [], []
    for token in range(2):
        z_up = engine.full_on(moved_nodes(nodes, params, token, step), params).z
        z_down = engine.full_on(moved_nodes(nodes, params, token, -step), params).z
        dz = (z_up - z_down) / (2 * step)  # d prox / d omega_token
        differences.append(np.einsum("nab,bn->na", prior, dz) - prior[:, :, token])
        basins.append(np.abs(z_up - z_down).max(axis=0) < 1e-2)
    finite = np.stack(differences, axis=-1)  # (N, k, token)
    smooth = basins[0] & basins[1]
    assert problem.map.weights[smooth].sum() > 0.99
    np.testing.assert_allclose(finite[smooth], slope[smooth], atol=1e-6 * np.abs(prior).max())


@pytest.mark.slow
@pytest.mark.parametrize(("lam", "alpha"), [(2.0, 1.0), (2.0, 3.0), (0.1, 2.0)])
def test_a_strongly_convex_envelope_is_replica_symmetric(lam, alpha):
    model = paper_model(omega=0.3, lam=lam)  # V <= sigma^2 / lambda
    values = []
    for order in (10, 16):
        solver = make_solver(model, SolverSettings(quadrature=GaussHermite(order)))
        point = AnchorSearch.with_rays(solver)(alpha, solver.branch("agnostic"))
        assert point.converged
        values.append(replicon(solver.problem, point))
    assert values[0] < 1.0
    assert values[0] == pytest.approx(values[1], rel=1e-3)
    symmetry = replica_symmetry(solver.problem, point, RepliconTuning())
    assert abs(symmetry.jump_ratio) < 1e-3 and symmetry.stable is True


def _point(omega, alpha, branch, order=12):
    solver = make_solver(paper_model(omega=omega), SolverSettings(quadrature=GaussHermite(order)))
    point = AnchorSearch.with_rays(solver)(alpha, solver.branch(branch))
    assert point.converged and point.branch == branch
    return solver, point


@pytest.mark.parametrize(
    ("omega", "alpha", "branch", "smooth"),
    [(0.2, 2.0, "semantic", True), (0.4, 1.0, "agnostic", False), (0.2, 1.0, "positional", False)],
)
def test_the_jump_term_vanishes_where_the_prox_is_smooth_and_makes_the_replicon_infinite_where_it_jumps(
    omega, alpha, branch, smooth
):
    """Away from the default: on a semantic point the global minimiser does not jump and the fluctuation
    response is linear (``J / a`` below 1e-3), the point replica-symmetric with its smooth replicon; on
    agnostic and positional points the jump term is of the order of the smooth one, the replicon infinite."""
    solver, point = _point(omega, alpha, branch)
    symmetry = replica_symmetry(solver.problem, point, RepliconTuning())
    if smooth:
        assert abs(symmetry.jump_ratio) < 1e-3 and symmetry.stable is True
        assert symmetry.replicon == symmetry.replicon_smooth < 1.0
    else:
        assert symmetry.jump_ratio > 0.1 and symmetry.stable is False and symmetry.replicon == np.inf


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "alpha", "branch"), [(0.3, 1.5, "agnostic"), (0.2, 1.0, "positional")])
def test_the_jump_term_from_two_replica_groups_is_the_one_on_the_jump_surface(omega, alpha, branch):
    """The coefficient of ``sqrt(eps)`` in ``D(eps)`` measured from two replica groups (a Gaussian
    fluctuation, eps = 1e-4, minus the smooth part ``eps tr E[G S S^T G^T]``) equals the one integrated over
    the surface where the two lowest minima of the envelope are equal (gap below 3e-4), on the same
    scrambled Sobol rule of 2^15 points; both are a sizeable fraction of the smooth coefficient."""
    solver, point = _point(omega, alpha, branch)
    rule = ScrambledSobol(15, 5)
    problem = make_solver(paper_model(omega=omega), SolverSettings(quadrature=rule)).problem
    a, eps = smooth_coefficient(problem, point), 1e-4
    two_groups = (np.trace(fluctuation_response(problem, point, rule, eps, gaussian_rule(2, 10))) - eps * a) / eps**0.5
    surface = jump_coefficient(problem, point, 3e-4)
    assert two_groups == pytest.approx(surface, rel=0.3)
    assert surface > 0.05 * a
