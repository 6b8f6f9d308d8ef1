"""alpha_l where the global minimum changes branch inside its bracket (THEORY.md sec. 6).

The lasso at omega = 0.1 (``lambda_1 = 0.001``, Gauss-Hermite 12) has no positional branch, so no
alpha_c; its global minimum changes from agnostic to semantic between alpha = 0.7 and 0.9, where
the semantic branch, born at a fold near 0.75, crosses below the agnostic one near 0.775 (a
first-order change, the test error jumps from about 0.0067 to 0.0034). Bracketed by the grid
alphas 0.7 and 0.9, the change and alpha_l are found from the traces alone.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from scipy.optimize import brentq

from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import VARIANTS
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.phases.thresholds import _BranchSolver, change_of_minimum, linear_threshold
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.constrained import ConstrainedSolver
from attnphase.saddle.search.trace import BranchTrace
from attnphase.saddle.settings import SolverSettings

RULE = SolverSettings(quadrature=GaussHermite(12), test_quadrature=GaussHermite(12))


@pytest.fixture(scope="module")
def lasso_base():
    model = VARIANTS["l1"].model({"lambda_1": 0.001, "omega": 0.1})
    solver = make_solver(model, RULE)
    agnostic, semantic = solver.branch("agnostic"), solver.branch("semantic")
    search = AnchorSearch(solver.renewed())
    points = {
        "agnostic": [search(alpha, agnostic) for alpha in (0.7, 0.9)],
        "semantic": [search(0.9, semantic)],
    }
    for name, found in points.items():
        assert all(solver.on_branch(p, solver.branch(name)) for p in found)
    traces = [(solver.branch(name), BranchTrace(name, tuple(found))) for name, found in points.items()]
    return solver, traces


@pytest.fixture
def lasso(lasso_base):
    """The lasso's solver, without the memory of other tests' solves, and its traces."""
    solver, traces = lasso_base
    return solver.renewed(), traces


@pytest.fixture(scope="module")
def switch(lasso_base):
    """Where the lasso's global minimum changes from agnostic to semantic, from the traces alone."""
    solver, traces = lasso_base
    (agnostic, agnostic_trace), (semantic, semantic_trace) = traces
    return change_of_minimum(
        solver.renewed(), (agnostic, _by_alpha(agnostic_trace)), (semantic, _by_alpha(semantic_trace)), 0.7, 0.9
    )


def _by_alpha(trace: BranchTrace):
    return {p.alpha: p for p in trace.points}


def _solved(solver, name, alpha, start):
    point, _ = solver.solve(alpha, solver.branch(name), initial=start.values)
    return point if solver.on_branch(point, solver.branch(name)) else None


@pytest.mark.slow
def test_the_change_of_minimum_is_where_the_training_losses_cross(lasso, switch):
    solver, traces = lasso
    (_, agnostic_trace), (_, semantic_trace) = traces
    assert 0.76 < switch < 0.79
    start_agnostic, start_semantic = agnostic_trace.points[0], semantic_trace.points[0]
    for alpha, semantic_lower in ((switch - 1e-3, False), (switch + 1e-3, True)):
        below = _solved(solver, "agnostic", alpha, start_agnostic)
        above = _solved(solver, "semantic", alpha, start_semantic)
        assert below is not None and above is not None, alpha
        assert (above.train_loss < below.train_loss) is semantic_lower, alpha


@pytest.mark.slow
def test_alpha_l_at_a_first_order_change_that_is_not_alpha_c(lasso, switch):
    """With the baseline between the two branches' test errors at the change, alpha_l is the change."""
    solver, traces = lasso
    (_, agnostic_trace), (_, semantic_trace) = traces
    baseline = 0.5 * (
        _solved(solver, "agnostic", switch, agnostic_trace.points[0]).test_error
        + _solved(solver, "semantic", switch, semantic_trace.points[0]).test_error
    )
    found = linear_threshold(solver, traces, baseline)
    assert found.status == "found" and found.bracket == (0.7, 0.9)
    # the training losses' difference has a slope of about 4e-4 per unit alpha there and the solves'
    # warm starts move eps_t by about 2e-8, so two searches agree to about 5e-5
    assert found.value == pytest.approx(switch, abs=1e-4)
    assert "change of global minimum from agnostic to semantic" in found.note


@pytest.mark.slow
def test_alpha_l_on_the_branch_above_the_change(lasso):
    """With a baseline below the semantic test error at the change, alpha_l is the semantic branch's
    crossing of it, above the change."""
    solver, traces = lasso
    baseline = 0.002
    found = linear_threshold(solver, traces, baseline)
    assert found.status == "found" and "on the semantic branch" in found.note
    assert 0.78 < found.value < 0.9
    at = _solved(solver, "semantic", found.value, traces[1][1].points[0])
    assert at.test_error == pytest.approx(baseline, rel=1e-5)


@pytest.mark.slow
def test_alpha_l_moves_to_the_bracket_where_the_root_rule_puts_it(lasso):
    """The bracket is chosen on the scan's test errors; where the rule alpha_l is solved on puts the
    crossing in a neighbouring bracket (here: a grid value made wrong on purpose), it is found there."""
    solver, traces = lasso
    (_, agnostic_trace), (semantic, semantic_trace) = traces
    start = semantic_trace.points[0]
    grid = [start] + [_solved(solver, "semantic", alpha, start) for alpha in (1.1, 1.3)]
    baseline = 0.0008  # the semantic test error falls through it between 0.9 and 1.1
    assert grid[0].test_error > baseline > grid[1].test_error > grid[2].test_error
    misleading = [grid[0], replace(grid[1], test_error=0.0009), grid[2]]
    found = linear_threshold(solver, [traces[0], (semantic, BranchTrace("semantic", tuple(misleading)))], baseline)
    assert found.status == "found" and found.bracket == (0.9, 1.1)
    direct = brentq(lambda x: _solved(solver, "semantic", x, start).test_error - baseline, 0.9, 1.1, xtol=1e-9)
    assert found.value == pytest.approx(direct, abs=1e-6)


@pytest.mark.slow
def test_a_branch_asked_again_at_an_alpha_answers_without_solving_again(lasso, monkeypatch):
    """The root searches of alpha_l ask a branch at a bracket's ends more than once: the point, or the
    failure to reach it (the semantic branch is born near 0.75), is given again without a solve."""
    solver, traces = lasso
    semantic, semantic_trace = traces[1]
    solves = []
    counting = solver.renewed()
    solve = counting.solve
    monkeypatch.setattr(counting, "solve", lambda *a, **k: solves.append(a[0]) or solve(*a, **k))
    branch = _BranchSolver(counting, semantic, semantic_trace.points[0], semantic_trace.points[0])
    point = branch(0.88)
    assert solver.on_branch(point, semantic) and solves == [0.88]
    assert branch(0.88) is point and solves == [0.88]
    with pytest.raises(RuntimeError, match="semantic") as first:
        branch(0.6)
    tried = len(solves)
    assert tried > 1
    with pytest.raises(RuntimeError, match="semantic") as again:
        branch(0.6)
    assert len(solves) == tried and str(again.value) == str(first.value)


@pytest.mark.slow
def test_no_positional_branch_in_the_landscape_either(lasso):
    """The scan finds no positional branch here; the constrained route agrees: along theta = 0 at
    alpha = 1.5, the lowest training loss at fixed m rises with m from the agnostic point (a positional
    fixed point would be a stationary point of it at some m > 0, THEORY.md sec. 6), and its minimum,
    at m = 0, is the agnostic fixed point."""
    solver, _ = lasso
    alpha = 1.5
    held = ConstrainedSolver(solver, ("m", "theta"))
    start = AnchorSearch(solver)(alpha, solver.branch("agnostic")).values
    profile = []
    for m in (0.4, 0.3, 0.2, 0.1, 0.05, 0.02):  # from large m down, each solve from the one before
        point = held.solve(alpha, [m, 0.0], start)
        assert point.converged, m
        profile.append(point)
        start = point.values
    at_zero = held.solve(alpha, [0.0, 0.0], start)  # the student stays finite (q > 0) from m = 0.02
    assert at_zero.converged and at_zero.values[solver.problem.layout.index("q")] > 0.1
    losses = [at_zero.train_loss, *(p.train_loss for p in reversed(profile))]
    assert all(np.diff(losses) > 0)
    assert all(p.gradient[0] > 0 for p in profile)
    agnostic, _ = solver.solve(alpha, solver.branch("agnostic"), initial=at_zero.values)
    assert solver.on_branch(agnostic, solver.branch("agnostic"))
    assert agnostic.train_loss == pytest.approx(at_zero.train_loss, rel=1e-6)


@pytest.mark.slow
def test_the_agnostic_anchor_is_the_finite_student_where_both_exist(lasso):
    """Under the lasso the vanishing student W = 0 is a fixed point at every alpha (THEORY.md sec. 6),
    and at alpha = 1.5 the coarse rule's search finds it first; a refinement from W = 0 cannot leave it
    (an invariant set), so the anchor searches this rule afresh and finds the agnostic point with
    q > 0, of lower training loss."""
    solver, _ = lasso
    alpha = 1.5
    search = AnchorSearch(solver)
    assert solver.problem.geometry.vanishes(search.coarse()(alpha, solver.branch("agnostic")).values)
    vanishing = search.vanishing_point(alpha)
    assert vanishing.converged
    found = search(alpha, solver.branch("agnostic"))
    assert solver.on_branch(found, solver.branch("agnostic"))
    assert found.values[solver.problem.layout.index("q")] > 0.1
    assert found.train_loss < 0.5 * vanishing.train_loss


@pytest.mark.slow
def test_alpha_c_inside_the_grid_step_where_the_high_branch_begins():
    """The paper's model at omega = 0.1, sigma = 0.3, lambda = 0.001 with the target (0.3, 0.7; 0.8,
    0.2): the semantic branch begins near alpha = 0.47 and is already below the positional one at its
    first grid point, 0.6, of the grid 0.4, 0.6, 0.8, so no two common grid alphas bracket alpha_c.
    Found from the semantic branch's beginning inside the step, it equals alpha_c found the ordinary
    way on a grid whose common alphas bracket it (0.5, 0.52, 0.54, 0.6)."""
    solver = make_solver(
        paper_model(omega=0.1, sigma=0.3, lam=0.001, A=((0.3, 0.7), (0.8, 0.2))),
        SolverSettings(quadrature=GaussHermite(12)),
    )
    coarse = survey(solver.renewed(), [0.4, 0.6, 0.8], reference_error=0.0, stability=False)
    assert [p.alpha for p in coarse.traces["semantic"].converged()][0] == 0.6
    fine = survey(solver.renewed(), [0.5, 0.52, 0.54, 0.6], reference_error=0.0, stability=False)
    assert fine.alpha_c.status == coarse.alpha_c.status == "found"
    assert fine.alpha_c.bracket == (0.5, 0.52) and coarse.alpha_c.bracket == (0.4, 0.6)
    assert abs(coarse.alpha_c.value - fine.alpha_c.value) < 1e-6
