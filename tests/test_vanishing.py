"""The vanishing student W = 0: the map's limit q -> 0, the fixed point, its closed form and training.

Where the ridge is strong against the signal (small sigma, large lambda) the training loss is lowest
at W = 0: q = 0 and every overlap zero (docs/validation/vanishing.md).
"""

from __future__ import annotations

import numpy as np
import pytest
from numpy.polynomial.hermite_e import hermegauss

from attnphase.experiments.training import SimulationSettings, simulate
from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.points.checks import Assessment
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.constrained import ConstrainedSolver
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess

RULE = SolverSettings(quadrature=GaussHermite(12), test_quadrature=GaussHermite(12))
STRONG_RIDGE = {"sigma": 0.3, "lam": 0.1}


@pytest.fixture(scope="module")
def strong_ridge_base():
    return make_solver(paper_model(**STRONG_RIDGE), RULE)


@pytest.fixture
def strong_ridge(strong_ridge_base):
    """The strong ridge's solver without the memory of other tests' solves."""
    return strong_ridge_base.renewed()


def _limit_by_extrapolation(solver, values, alpha, q_index, step):
    """``2 F(step) - F(2 step)`` in q at ``values``: the map at q = 0 to order step^2 (measured: 5e-7
    relative at 1e-4 rho, 7e-8 at 1e-5 rho, where the prox tolerance takes over), by the
    ordinary evaluation at two small positive q."""
    outputs = []
    for q in (step, 2 * step):
        point = values.copy()
        point[q_index] = q  # every q entry: a diagonal q for each covariance class
        ev = solver.problem.map.evaluate(point, alpha)
        outputs.append(np.concatenate([ev.conjugates, ev.updated]))
    return 2 * outputs[0] - outputs[1]


def _assert_the_map_at_zero_is_its_limit(model):
    rule = GaussHermite(8)
    solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule, conjugate_form="envelope"))
    families = solver.problem.layout.families
    values = np.where(families == "V", 2.0, 0.0)
    q_index = np.flatnonzero(families == "q")
    at_zero = solver.problem.map.evaluate(values, 1.3)
    step = 1e-5 * solver.problem.geometry.rho(0)
    limit = _limit_by_extrapolation(solver, values, 1.3, q_index, step)
    np.testing.assert_allclose(np.concatenate([at_zero.conjugates, at_zero.updated]), limit, rtol=1e-6, atol=1e-7)
    # q = 0 is invariant: F_q vanishes with q (here up to the probe's q, 1e-10 rho)
    assert np.all(np.abs(at_zero.updated[q_index]) < 1e-8 * solver.problem.geometry.rho(0))


@pytest.mark.parametrize(
    "model",
    [paper_model(sigma=0.3, lam=0.1), paper_model(omega=0.1, sigma=0.5, lam=0.1, A=((0.3, 0.7), (0.8, 0.2)))],
    ids=["sigma0.3-lambda0.1", "omega0.1-otherA-lambda0.1"],
)
def test_the_map_at_a_vanishing_student_is_the_limit_of_the_map_as_q_goes_to_zero(model):
    _assert_the_map_at_zero_is_its_limit(model)


@pytest.mark.slow
def test_so_it_is_for_a_declaration_with_three_tokens(three_token_model):
    _assert_the_map_at_zero_is_its_limit(three_token_model)


def _uniform_attention_test_error(omega, sigma, A, order=60):
    """eps_g of W = 0 from THEORY.md sec. 1 and 6 alone: f = (1/2) (x_1 + x_2) for both tokens, so
    eps_g = (1/L) E[ sigma^2 ||T(h*) - 1/2||_F^2 ] with h*_l ~ N(0, sigma^2) independent (L = 2)."""
    x, w = hermegauss(order)
    w = w / w.sum()
    h1, h2 = np.meshgrid(sigma * x, sigma * x, indexing="ij")
    weight = np.outer(w, w)
    total = 0.0
    for row, (hl, other) in enumerate(((h1, h2), (h2, h1))):
        # softmax_row(h* h*^T): row l has scores (h_l h_1, h_l h_2)
        own, cross = hl * hl, hl * other
        p_own = 1.0 / (1.0 + np.exp(cross - own))
        target_own = (1 - omega) * p_own + omega * A[row][row]
        target_other = (1 - omega) * (1 - p_own) + omega * A[row][1 - row]
        total += np.sum(weight * ((target_own - 0.5) ** 2 + (target_other - 0.5) ** 2))
    return sigma**2 * total / 2


@pytest.mark.parametrize(
    "omega, sigma, lam, A",
    [
        (0.3, 0.3, 0.1, ((0.6, 0.4), (0.4, 0.6))),
        (0.1, 0.3, 0.01, ((0.6, 0.4), (0.4, 0.6))),
        (0.5, 0.5, 0.1, ((0.3, 0.7), (0.8, 0.2))),
    ],
)
def test_at_the_vanishing_student_the_losses_are_those_of_uniform_attention(omega, sigma, lam, A):
    solver = make_solver(paper_model(omega=omega, sigma=sigma, lam=lam, A=A), RULE)
    expected = _uniform_attention_test_error(omega, sigma, A)
    search = AnchorSearch(solver)
    for alpha in (0.5, 2.0):
        point = search.vanishing_point(alpha)
        assert point.converged, point.status
        assert point.branch == "agnostic" and np.all(point.values[solver.problem.layout.families != "V"] == 0)
        assert point.test_error == pytest.approx(expected, rel=2e-5)  # the error of Gauss-Hermite 12 here
        # the predictor does not depend on the data, so the training loss per sample is the test error
        assert point.train_loss == pytest.approx(alpha * point.test_error, rel=1e-9)


def test_where_the_student_does_not_vanish_the_vanishing_point_is_not_reported_converged():
    """At the paper's default the responses' equation has no root at W = 0."""
    search = AnchorSearch(make_solver(paper_model(), RULE))
    assert not search.vanishing_point(1.3).converged
    assert search.symmetric_point(1.3).converged and search.symmetric_point(1.3).values[0] > 0.01


@pytest.mark.parametrize("alpha", [1.5, 2.4])
def test_a_search_never_settles_outside_the_domain_where_v_vanishes(alpha):
    """At weak ridge the first Newton step from the generic guess overshoots to ``V < 0``. ``F`` is finite
    there (the envelope holds ``V^-1``) and its residual vanishes towards ``q = V = 0`` from outside the
    domain, a spurious root; the search must stay inside and find the agnostic point, which exists (the
    vanishing student is no root here: the responses' equation has none at ``W = 0``)."""
    model = paper_model(omega=0.45, sigma=0.6, lam=0.005, A=((0.3, 0.7), (0.8, 0.2)))
    solver = make_solver(model, SolverSettings())
    search = AnchorSearch(solver)
    point = search(alpha, solver.branch("agnostic"))
    assert point.converged, point.status
    assert point["V"] > 10.0 and point["q"] > 0.01
    assert not search.vanishing_point(alpha).converged


def test_searches_that_run_to_q_zero_end_on_the_vanishing_student(strong_ridge):
    """Root finders approach q = 0 only geometrically; the searches end on W = 0, labelled by it."""
    search = AnchorSearch(strong_ridge)
    for name in ("agnostic", "positional", "semantic"):
        point = search(1.5, strong_ridge.branch(name))
        assert point.converged, point.status
        assert point.branch == "agnostic" and strong_ridge.problem.geometry.vanishes(point.values)


@pytest.fixture(scope="module")
def trained():
    model = paper_model(**STRONG_RIDGE)
    settings = SimulationSettings.of_model(model, d=200, alphas=(0.5, 1.5, 2.5), seeds=4, optimiser="lbfgs")
    return simulate(settings)


@pytest.mark.slow
def test_training_from_both_informed_starts_ends_at_w_zero_as_the_theory_says(strong_ridge, trained):
    """The referee: L-BFGS at d = 200 from the positional and the semantic start ends at Q = 0, with
    the theory's training loss and test error (within 4 standard errors + 5 %), and the theory says
    W = 0 is a minimum (positive curvature in both overlap families)."""
    assert trained["converged"].all()
    assert (trained["q"] < 1e-10).all()
    search = AnchorSearch(strong_ridge)
    for alpha, runs in trained.groupby("alpha"):
        point = assess(strong_ridge, search.vanishing_point(alpha))
        assert point.stable and min(point.curvature.values()) > 0
        for column, theory in (("train_loss", point.train_loss), ("test_error", point.test_error)):
            spread = 4 * runs[column].std(ddof=1) / np.sqrt(len(runs))
            assert abs(runs[column].mean() - theory) <= spread + 0.05 * theory, (alpha, column)


def test_a_start_outside_the_domain_is_raised_into_it_along_q_alone(strong_ridge):
    """A start with ``theta`` above the Cauchy-Schwarz bound of its ``q`` (here ``q = 0``) is moved
    into the domain by raising the diagonal of ``q``, and nothing else; a start inside is kept."""
    overlaps, families = strong_ridge.problem.geometry, strong_ridge.problem.layout.families
    start = np.where(families == "V", 10.0, 0.0) + np.where(families == "theta", 0.01, 0.0)
    assert not overlaps.in_domain(start)
    raised = overlaps.raised_into_domain(start, np.ones(start.size, dtype=bool))
    assert overlaps.in_domain(raised)
    np.testing.assert_array_equal(raised[families != "q"], start[families != "q"])
    assert overlaps.raised_into_domain(raised, np.ones(start.size, dtype=bool)) is raised


@pytest.mark.slow
def test_the_stability_of_a_vanishing_student_from_constrained_points_started_inside_the_domain():
    """At a vanishing student (omega = 0.5, the App. E.2 matrix, alpha = 1.3 and 2.3) the Hessian comes
    from constrained points with ``theta`` held at ``delta > 0``: started from the point itself
    (``q = 0``) they start outside the domain, and the solves ran to a negative V. Started with ``q``
    raised into it, they converge to the constrained point a start well inside the domain finds, and
    the point is assessed: a minimum, its theta-curvature between those at neighbouring alphas."""
    solver = make_solver(paper_model(omega=0.5, A=((0.3, 0.7), (0.8, 0.2))), RULE)
    layout, geometry = solver.problem.layout, solver.problem.geometry
    theta = layout.index("theta")
    search = AnchorSearch(solver)
    curvatures = {}
    for alpha in (1.1, 1.3, 1.5, 2.1, 2.3, 2.5):
        point = search(alpha, solver.branch("agnostic"))
        assert point.converged and geometry.vanishes(point.values), alpha
        assessed = assess(solver, point)
        assert assessed.stability_status == "assessed" and assessed.stable, alpha
        curvatures[alpha] = assessed.curvature["theta"]
        if alpha in (1.3, 2.3):
            held = ConstrainedSolver(solver.in_form("envelope"), ("m", "theta"))
            from_point = held.solve(alpha, [0.0, 0.01], point.values, correct_kinks=False)
            inside = point.values.copy()
            inside[layout.index("q")] = 10 * 0.01**2 / geometry.rho(0)
            from_inside = held.solve(alpha, [0.0, 0.01], inside, correct_kinks=False)
            assert from_point.converged and from_inside.converged
            np.testing.assert_allclose(from_point.values, from_inside.values, rtol=1e-7, atol=1e-12)
            assert from_point.values[theta] == 0.01
    assert curvatures[1.1] < curvatures[1.3] < curvatures[1.5]
    assert curvatures[2.1] < curvatures[2.3] < curvatures[2.5]


@pytest.mark.slow
@pytest.mark.parametrize("alpha", [1.3, 2.3])
def test_the_vanishing_student_is_assessed_on_the_default_rule(alpha):
    """On the default rule (Gauss-Hermite 20) the raised ``q`` just inside the bound
    ``theta^2 <= q rho`` left Newton steps too little room: the start is raised a margin further."""
    solver = make_solver(paper_model(omega=0.5, A=((0.3, 0.7), (0.8, 0.2))))
    point = AnchorSearch(solver)(alpha, solver.branch("agnostic"))
    assert point.converged and solver.problem.geometry.vanishes(point.values)
    assessed = assess(solver, point)
    assert assessed.stability_status == "assessed" and assessed.stable


@pytest.mark.slow
def test_under_an_l1_weight_the_vanishing_student_is_a_cusp_and_training_ends_on_it():
    """With ``g(w) = l1 |w|`` (the lasso at omega = 0.5, ``lambda_1 = 0.02``, alpha 0.3 and 0.6) W = 0 is the
    agnostic point. The data term rises from W = 0 at second order (the scores are quadratic in W) and
    the regulariser at first order: a strict local minimum, with infinite curvature in every overlap
    family (its constrained points stall, so it had no curvature before). The referee: proximal
    gradient descent from a random start (entries 0.1 N(0, 1)) at d = 200 ends at Q = 0 exactly."""
    model = variant("l1").model({"lambda_1": 0.02, "omega": 0.5})
    solver = make_solver(model, RULE)
    alphas = (0.3, 0.6)
    search = AnchorSearch(solver)
    for alpha in alphas:
        point = search(alpha, solver.branch("agnostic"))
        assert point.converged and solver.problem.geometry.vanishes(point.values), alpha
        assessed = assess(solver, point)
        assert assessed.stability_status == Assessment.ASSESSED and assessed.stable is True
        assert assessed.curvature == {"m": np.inf, "theta": np.inf}
    settings = SimulationSettings.of_model(model, d=200, alphas=alphas, seeds=2, optimiser="gd", inits=("random",))
    runs = simulate(settings)
    assert runs["converged"].all() and (runs["q"] == 0).all(), runs[["alpha", "q", "steps"]]


@pytest.mark.slow
def test_without_an_l1_weight_the_vanishing_student_has_its_curvature_from_constrained_points(strong_ridge):
    """The elastic net at ``lambda_1 = 0`` is the ridge: its W = 0 (sigma 0.3, ``lambda_2`` = 0.1) is assessed
    from constrained points (finite curvatures), as the ridge's is, and equal to them."""
    elastic = make_solver(variant("elastic-net").model({"lambda_1": 0.0, "lambda_2": 0.1, "sigma": 0.3}), RULE)
    assert elastic.problem.compiled.regulariser_slope(elastic.problem.consts) == 0.0
    ridge = assess(strong_ridge, AnchorSearch(strong_ridge).vanishing_point(1.5))
    point = assess(elastic, AnchorSearch(elastic).vanishing_point(1.5))
    assert point.converged and elastic.problem.geometry.vanishes(point.values) and point.stable is True
    for family in ("m", "theta"):
        assert 0 < point.curvature[family] < np.inf
        assert point.curvature[family] == pytest.approx(ridge.curvature[family], rel=1e-6)
