"""Quadrature rules, and their accuracy measured at converged fixed points (THEORY.md sec. 6).

The energetic integrands have kinks (M*) and jumps (the prox changes basin), so tensor
Gauss-Hermite converges algebraically there; the reported eps_t carries the kink correction
of saddle/quadrature/kinks.py. The stated error of the default rule,
``saddle.quadrature.rules.DEFAULT_TRAIN_LOSS_ERROR``, is checked here against a higher order and
against an independent scrambled-Sobol estimate; benchmarks/quadrature.py measures more.
"""

from __future__ import annotations

from functools import reduce

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from attnphase.experiments.options import ScanOptions
from attnphase.replica.declaration import paper_model
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.survey import make_solver, threshold_solver
from attnphase.saddle.quadrature.check import QuadratureCheck
from attnphase.saddle.quadrature.rules import (
    DEFAULT_TRAIN_LOSS_ERROR,
    GaussHermite,
    QuadratureError,
    ScrambledSobol,
    make_rule,
)
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning

#: The floor of the coarser rules anchors are searched on (the anchor tuning's).
FLOOR = Tuning().anchors

#: The paper's branches (THEORY.md sec. 6), named as its declaration names them.
POSITIONAL = Branch("positional", ("theta",))
SEMANTIC = Branch("semantic", ("m",))


def _scan_settings(**options):
    """The solver settings a scan of the paper's model runs with under ``options``."""
    return ScanOptions(**options).settings(paper_model())


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


@pytest.mark.parametrize(("order", "dimension", "prune"), [(20, 4, 1e-8), (9, 3, 1e-4), (5, 5, 1e-3), (7, 2, 0.0)])
def test_the_grown_rule_is_the_pruned_full_grid(order, dimension, prune):
    """The rule grown a dimension at a time keeps exactly the nodes of the materialised grid whose
    product weight reaches ``prune`` times the largest, in the same order, with the same weights."""
    x, w = hermegauss(order)
    w = w / w.sum()
    full = reduce(np.multiply.outer, [w] * dimension).ravel()
    keep = np.flatnonzero(full >= prune * full.max())
    grid = np.stack(np.meshgrid(*[x] * dimension, indexing="ij")).reshape(dimension, -1)
    rule = GaussHermite(order, prune)
    points, weights = rule.nodes(dimension)
    np.testing.assert_array_equal(points, grid[:, keep])
    np.testing.assert_allclose(weights, full[keep] / full[keep].sum(), rtol=1e-14)
    assert rule.pruned_weight(dimension) == pytest.approx(full.sum() - full[keep].sum(), abs=1e-15)
    assert rule.size(dimension) == keep.size


def test_six_dimensions_at_order_20_need_no_full_grid():
    """``20**6 = 6.4e7`` nodes before pruning, 3 % of them kept, and the rule still integrates a
    Gaussian's moment generating function ``E[exp(a . n)] = exp(|a|^2 / 2)`` to its pruned weight."""
    rule = GaussHermite(20)
    points, weights = rule.nodes(6)
    assert points.shape == (6, 2_126_528)
    a = np.array([0.3, -0.2, 0.1, 0.25, -0.15, 0.05])
    assert weights @ np.exp(a @ points) == pytest.approx(np.exp(a @ a / 2), rel=1e-6)
    assert weights @ points[0] ** 2 == pytest.approx(1.0, rel=1e-5)  # pruning drops large |n|
    assert rule.pruned_weight(6) < 2e-6


@pytest.mark.parametrize("branch", [POSITIONAL, SEMANTIC])
def test_pruning_changes_the_map_by_far_less_than_the_quadrature_error(reference_traces, branch):
    """The default pruning against an almost unpruned rule of the same order, at a fixed point."""
    point = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - 1.5))
    solvers = [make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(16, p))) for p in (1e-8, 1e-14)]
    maps = [solver.problem.map.evaluate(point.values, point.alpha) for solver in solvers]
    assert maps[0].mean_envelope == pytest.approx(maps[1].mean_envelope, rel=1e-6)
    np.testing.assert_allclose(maps[0].updated, maps[1].updated, rtol=1e-4, atol=1e-12)


def test_a_rule_with_another_prune_is_named_apart_in_the_tables():
    """Tables name the rule of each row; a prune other than the default is part of the name, and a scan's
    options (``make_rule``, :func:`solver_settings`) give it to both Gauss-Hermite rules, the scan's and
    alpha_l's."""
    assert GaussHermite(20).label == "gauss-hermite-20"
    assert GaussHermite(8, 1e-6).label == "gauss-hermite-8-prune1e-06"
    assert make_rule("gauss-hermite", 8, prune=1e-6) == GaussHermite(8, 1e-6)
    settings = _scan_settings(order=8, prune=1e-6)
    assert (settings.quadrature, settings.threshold_quadrature) == (GaussHermite(8, 1e-6), GaussHermite(32, 1e-6))
    assert GaussHermite(8, 1e-6).size(6) < 0.52 * GaussHermite(8).size(6)


def test_a_coarser_rule_is_of_the_same_kind():
    """Anchors are searched on a coarser rule of the scan's own kind: half the Gauss-Hermite order
    (at least 6), an eighth of the Sobol points with the same scrambling (at least 2^10)."""
    assert GaussHermite(20).coarser(FLOOR) == GaussHermite(10)
    assert GaussHermite(10, prune=1e-12).coarser(FLOOR) == GaussHermite(6, prune=1e-12)
    assert GaussHermite(6).coarser(FLOOR) is None
    assert ScrambledSobol(16, seed=3).coarser(FLOOR) == ScrambledSobol(13, seed=3)
    assert ScrambledSobol(12).coarser(FLOOR) == ScrambledSobol(10)
    assert ScrambledSobol(10).coarser(FLOOR) is None


def test_an_anchor_on_a_sobol_rule_is_searched_on_a_coarser_sobol_rule():
    solver = make_solver(paper_model(), SolverSettings(quadrature=ScrambledSobol(16, seed=2)))
    search = AnchorSearch(solver)
    assert search.coarse().solver.settings.quadrature == ScrambledSobol(13, seed=2)
    point = search(2.0, POSITIONAL)
    assert point.converged and point.branch == "positional"
    assert point.quadrature == "sobol-2^16-seed2"


def test_sobol_points_are_standard_gaussian():
    points, weights = ScrambledSobol(14, seed=1).nodes(4)
    assert points.shape == (4, 2**14)
    np.testing.assert_allclose(points @ weights, 0.0, atol=5e-3)
    np.testing.assert_allclose((points**2) @ weights, 1.0, atol=1e-2)


def test_bad_rules_are_rejected():
    with pytest.raises(QuadratureError, match=r"order must be an integer in \[2, 64\]"):
        GaussHermite(1)
    with pytest.raises(QuadratureError, match="log2_points must be"):
        ScrambledSobol(30)
    with pytest.raises(QuadratureError, match="quadrature must be one of"):
        make_rule("trapezoid", 10)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("branch", "alpha"), [(POSITIONAL, 1.25), (SEMANTIC, 1.25), (POSITIONAL, 2.0), (SEMANTIC, 2.0)]
)
def test_default_rule_is_within_its_stated_error(reference_traces, paper_solver, branch, alpha):
    """The reported eps_t at the default rule against two independent estimates: Gauss-Hermite
    32 (solved, with its own kink correction) and scrambled Sobol 2^18 (``-Phi`` at the default
    fixed point; Phi is stationary there). Both agree with it within the stated error, near
    alpha_c (where the plain rule is worst) and at alpha = 2."""
    start = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - alpha))
    default, _ = paper_solver.solve(alpha, branch, initial=start.values)
    assert default.converged
    finer, _ = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(32))).solve(
        alpha, branch, initial=default.values
    )
    assert finer.converged
    sobol = make_solver(paper_model(), SolverSettings(quadrature=ScrambledSobol(18, seed=1)))
    estimates = [finer.train_loss, -sobol.problem.observables.free_entropy(default.values, default.conjugates, alpha)]
    for estimate in estimates:
        assert abs(estimate - default.train_loss) / default.train_loss < DEFAULT_TRAIN_LOSS_ERROR
    if alpha == 1.25:  # the kink correction is what brings the rule within it there
        plain = default.train_loss - default.line_correction
        assert abs(estimates[1] - plain) / default.train_loss > 2 * DEFAULT_TRAIN_LOSS_ERROR


@pytest.mark.parametrize("branch", [POSITIONAL, SEMANTIC])
def test_free_entropy_is_stationary_at_a_fixed_point(reference_traces, branch):
    """Phi on Gauss-Hermite 20 at the fixed point of a coarser rule (Gauss-Hermite 12) is much
    closer to the finer rule's own eps_t than the coarse rule's eps_t is: the error is of
    second order in the distance between the fixed points (THEORY.md sec. 4: the fixed point
    is a stationary point of Phi). At the rule's own fixed point it is its eps_t. (Plain
    rules, without the kink correction, which relies on this property.)"""
    alpha = 1.25
    start = min(reference_traces[branch.name].converged(), key=lambda p: abs(p.alpha - alpha))
    fine_solver, coarse_solver = (
        make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(order), line_correction=False))
        for order in (20, 12)
    )
    fine, _ = fine_solver.solve(alpha, branch, initial=start.values)
    coarse, _ = coarse_solver.solve(alpha, branch, initial=fine.values)
    assert fine.converged and coarse.converged and fine.line_correction == coarse.line_correction == 0.0
    own = -fine_solver.problem.observables.free_entropy(fine.values, fine.conjugates, alpha)
    assert own == pytest.approx(fine.train_loss, rel=1e-12)
    cross = -fine_solver.problem.observables.free_entropy(coarse.values, coarse.conjugates, alpha)
    assert abs(coarse.train_loss - fine.train_loss) > 1e-4 * fine.train_loss
    assert abs(cross - fine.train_loss) < 0.1 * abs(coarse.train_loss - fine.train_loss)


def test_alpha_l_is_solved_on_the_finer_threshold_rule_only_when_it_is_finer():
    model = paper_model()
    default = threshold_solver(model, SolverSettings())
    assert default.settings.quadrature == GaussHermite(32)
    for settings in (
        SolverSettings(quadrature=GaussHermite(40)),
        SolverSettings(quadrature=ScrambledSobol(12)),
        SolverSettings(threshold_quadrature=None),
    ):
        assert threshold_solver(model, settings).settings.quadrature == settings.quadrature


def test_the_error_check_measures_the_error_of_a_coarse_rule():
    """A point solved on plain Gauss-Hermite 6 (no kink correction) has eps_t off by about 1e-3 relative.
    Its error check (four scrambled Sobol rules of 2^12 points at the point, :class:`QuadratureCheck`)
    is an unbiased estimate of the exact eps_t there: it lies within four of its standard errors of
    ``-Phi`` on Gauss-Hermite 40 with the kink correction (accurate to about 1e-5 relative), so the
    estimated error ``train_loss_error`` is the actual one within that margin, and large enough to be
    told from zero. (The default check, on 2^11 points, has about twice the standard error: an error
    of this size, 3e-6, is 2.4 of them there.)"""
    model, alpha = paper_model(), 1.5
    check = QuadratureCheck(12)
    coarse = make_solver(model, SolverSettings(quadrature=GaussHermite(6), line_correction=False, error_check=check))
    point = AnchorSearch(coarse)(alpha, SEMANTIC)
    assert point.converged and point.error_check == check.label
    exact = -make_solver(model, SolverSettings(quadrature=GaussHermite(40))).problem.observables.free_entropy(
        point.values, point.conjugates, alpha
    )
    assert abs(point.train_loss_check - exact) < 4 * point.train_loss_check_se
    assert abs(point.train_loss - exact) > 5e-4 * exact
    assert point.train_loss_error > 3 * point.train_loss_check_se


def test_only_converged_points_are_checked_and_the_check_can_be_off(paper_solver):
    point = AnchorSearch(paper_solver)(2.0, SEMANTIC)
    assert np.isfinite(point.train_loss_check) and point.train_loss_check_se > 0.0
    moved = point.values * 1.05
    unconverged = paper_solver.observe(moved, 2.0, SEMANTIC)
    assert not unconverged.converged and np.isnan(unconverged.train_loss_error) and unconverged.error_check == ""
    off = make_solver(paper_model(), SolverSettings(error_check=None)).observe(point.values, 2.0, SEMANTIC)
    assert off.converged and np.isnan(off.train_loss_check)
    assert paper_solver.checked(off).train_loss_check == point.train_loss_check  # the same rules, the same value


def test_the_check_scramblings_are_drawn_from_the_scan_seed_apart_from_any_small_seed():
    """Four distinct 32-bit seeds per check seed, none of them a small integer such as the scrambling
    seed of a Sobol rule a point was solved on; the scan's seed chooses them."""
    for seed in (0, 1, 2**32 - 1):
        seeds = _scan_settings(quadrature="sobol", order=12, seed=seed).error_check.seeds
        assert len(set(seeds)) == 4 and min(seeds) > 1000 and seed not in seeds
    assert _scan_settings(seed=0).error_check.seeds != _scan_settings(seed=1).error_check.seeds
    assert _scan_settings(error_check=0).error_check is None
    check = QuadratureCheck(12, 3, seed=5)
    assert [rule.seed for rule in check.rules()] == list(check.seeds) and check.rules()[0].log2_points == 12
