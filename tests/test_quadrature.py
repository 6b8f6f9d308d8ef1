"""Quadrature rules, and their accuracy measured at converged fixed points (THEORY.md sec. 6).

The energetic integrands have kinks (M*) and jumps (the prox changes basin), so tensor
Gauss-Hermite converges algebraically there. The stated error of the default rule,
``saddle.quadrature.DEFAULT_TRAIN_LOSS_ERROR``, is checked here against a higher order and
against an independent scrambled-Sobol estimate; benchmarks/quadrature.py measures more.
"""

from __future__ import annotations

import numpy as np
import pytest

from replica.declaration import paper_model
from saddle.fixed_point import POSITIONAL, SEMANTIC, SolverSettings
from saddle.quadrature import (
    DEFAULT_TRAIN_LOSS_ERROR,
    GaussHermite,
    QuadratureError,
    ScrambledSobol,
    make_rule,
)
from saddle.scan import make_solver


@pytest.mark.parametrize("order", [4, 9, 16])
def test_gauss_hermite_integrates_gaussian_moments(order):
    points, weights = GaussHermite(order, prune=0.0).nodes(3)
    assert weights.sum() == pytest.approx(1.0, abs=1e-13)
    assert weights @ points[0] ** 2 == pytest.approx(1.0, rel=1e-12)
    assert weights @ (points[0] ** 2 * points[1] ** 2) == pytest.approx(1.0, rel=1e-12)
    if order >= 3:
        assert weights @ points[2] ** 4 == pytest.approx(3.0, rel=1e-12)


def test_pruning_drops_negligible_weight_and_renormalises():
    rule = GaussHermite(16)
    points, weights = rule.nodes(4)
    assert points.shape[1] < 16**4 // 4
    assert rule.pruned_weight(4) < 1e-6
    assert weights.sum() == pytest.approx(1.0, abs=1e-14)


@pytest.mark.parametrize("branch", [POSITIONAL, SEMANTIC])
def test_pruning_changes_the_map_by_far_less_than_the_quadrature_error(reference_traces, branch):
    """The default pruning against an almost unpruned rule of the same order, at a fixed point."""
    point = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - 1.5))
    solvers = [make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(16, p))) for p in (1e-8, 1e-14)]
    maps = [solver.evaluate(point.values, point.alpha) for solver in solvers]
    assert maps[0].mean_envelope == pytest.approx(maps[1].mean_envelope, rel=1e-6)
    np.testing.assert_allclose(maps[0].updated, maps[1].updated, rtol=1e-4, atol=1e-12)


def test_sobol_points_are_standard_gaussian():
    points, weights = ScrambledSobol(14, seed=1).nodes(4)
    assert points.shape == (4, 2**14)
    np.testing.assert_allclose(points @ weights, 0.0, atol=5e-3)
    np.testing.assert_allclose((points**2) @ weights, 1.0, atol=1e-2)


def test_bad_rules_are_rejected():
    with pytest.raises(QuadratureError, match="order must be an integer >= 2"):
        GaussHermite(1)
    with pytest.raises(QuadratureError, match="log2_points must be"):
        ScrambledSobol(30)
    with pytest.raises(QuadratureError, match="quadrature must be one of"):
        make_rule("trapezoid", 10)


@pytest.mark.parametrize(
    ("branch", "alpha"), [(POSITIONAL, 1.25), (SEMANTIC, 1.25), (POSITIONAL, 2.0), (SEMANTIC, 2.0)]
)
def test_default_rule_is_within_its_stated_error(reference_traces, paper_solver, branch, alpha):
    """eps_t at the default rule's fixed point, against Gauss-Hermite 32 and scrambled Sobol
    (2^16 points): both independent estimates agree with it within the stated error, near
    alpha_c (where the error is largest) and at alpha = 2."""
    start = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - alpha))
    default, _ = paper_solver.solve(alpha, branch, initial=start.values)
    assert default.converged
    estimates = []
    for rule in (GaussHermite(32), ScrambledSobol(16, seed=0)):
        solver = make_solver(paper_model(), SolverSettings(quadrature=rule))
        point, _ = solver.solve(alpha, branch, initial=default.values)
        assert point.converged
        estimates.append(point.train_loss)
    for estimate in estimates:
        assert abs(estimate - default.train_loss) / default.train_loss < DEFAULT_TRAIN_LOSS_ERROR
    assert abs(estimates[0] - estimates[1]) / default.train_loss < DEFAULT_TRAIN_LOSS_ERROR


@pytest.mark.parametrize("branch", [POSITIONAL, SEMANTIC])
def test_free_entropy_is_stationary_at_a_fixed_point(reference_traces, paper_solver, branch):
    """Phi on the default rule at the fixed point of a coarser rule (Gauss-Hermite 12) is much
    closer to the default rule's own eps_t than the coarse rule's eps_t is: the error is of
    second order in the distance between the fixed points (THEORY.md sec. 4: the fixed point
    is a stationary point of Phi). At the default rule's own fixed point it is its eps_t."""
    alpha = 1.25
    start = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - alpha))
    default, _ = paper_solver.solve(alpha, branch, initial=start.values)
    coarse_solver = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(12)))
    coarse, _ = coarse_solver.solve(alpha, branch, initial=default.values)
    assert default.converged and coarse.converged
    own = -paper_solver.free_entropy(default.values, default.conjugates, alpha)
    assert own == pytest.approx(default.train_loss, rel=1e-12)
    cross = -paper_solver.free_entropy(coarse.values, coarse.conjugates, alpha)
    assert abs(coarse.train_loss - default.train_loss) > 1e-4 * default.train_loss
    assert abs(cross - default.train_loss) < 0.1 * abs(coarse.train_loss - default.train_loss)
