"""Folds: the continuation follows a branch around a saddle-node (saddle/search/arclength.py).

At omega = 0.2 the positional branch ends in alpha at a fold: its minimum (the sheet the anchor
finds) meets a saddle of the training loss and both vanish. Each property is checked by a route
other than the arclength path that found it: solves at fixed alpha beyond the fold, the curvature
of the loss approaching it, and the sign change of the agnostic point's curvature where the
returning sheet merges into it.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.points.checks import Check, Failure
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search import continuation
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.arclength import ArcOutcome, continue_in_constant
from attnphase.saddle.search.continuation import Continuation
from attnphase.saddle.search.trace import EndKind
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.tuning import Tuning

GRID = [1.5, 1.58, 1.66, 1.74, 1.82, 1.9]
#: Continuation's tuning with one anchor per trace.
ONE_ANCHOR = Tuning().replaced(continuation={"max_anchors": 1})


@pytest.fixture(scope="module")
def base():
    return make_solver(paper_model(omega=0.2))


@pytest.fixture
def solver(base):
    """The solver at omega = 0.2 without the memory of other tests' solves."""
    return base.renewed()


@pytest.fixture(scope="module")
def trace(base):
    solver = base.renewed()
    assessor = solver.renewed()  # as a survey assesses: on a solver of its own (saddle/phases/survey.py)
    return trace_branch(solver, solver.branch("positional"), GRID, finish=lambda p: assess(assessor, p))


def _sheet(trace, sheet: int) -> dict[float, FixedPoint]:
    return {p.alpha: p for p in trace.points if p.sheet == sheet and p.converged}


def _fold(trace):
    (fold,) = [e for e in trace.ends if e.kind is EndKind.FOLD]
    return fold


@pytest.mark.slow
def test_the_positional_branch_turns_back_at_a_fold_inside_the_grid_step_beyond_its_last_point(trace):
    """One fold, located strictly inside the grid step beyond the last point of the anchor's sheet;
    every point of every sheet labelled positional."""
    fold = _fold(trace)
    assert fold.sheet == 0 and max(_sheet(trace, 0)) == fold.alpha < fold.at < fold.alpha + 0.08
    assert all(p.branch == "positional" for p in trace.points)


def test_no_positional_point_beyond_the_fold(solver, trace):
    """Solved at fixed alpha just beyond the fold from the last point below it, the solver leaves the
    positional branch (another route than the arclength path)."""
    fold = _fold(trace)
    last = _sheet(trace, 0)[fold.alpha]
    branch = solver.branch("positional")
    for alpha in (fold.at + 0.01, fold.at + 0.03):
        beyond, _ = solver.solve(alpha, branch, initial=last.values)
        assert not solver.on_branch(beyond, branch), alpha


def test_the_minimum_flattens_towards_the_fold(trace):
    """On the anchor's sheet the curvature in m (the Hessian of the training loss) falls steadily as the
    fold nears and is nearly zero at the last point before it: a saddle-node, where it vanishes."""
    stable = _sheet(trace, 0)
    curvature = [stable[a].curvature["m"] for a in sorted(stable)]
    assert curvature[0] > 0
    assert all(b < a for a, b in zip(curvature, curvature[1:], strict=False))
    assert abs(curvature[-1]) < 0.1 * curvature[0]


def test_the_returning_sheet_merges_into_the_agnostic_point_where_its_m_curvature_changes_sign(solver, trace):
    """Beyond the fold the other sheet runs back in alpha and merges into the agnostic branch (a
    pitchfork); the agnostic point's curvature in m (the Hessian: another route) changes sign there."""
    fold = _fold(trace)
    (merge,) = [e for e in trace.ends if e.kind is EndKind.MERGED and e.sheet == 1]
    assert merge.detail == "agnostic" and merge.direction == -1 and merge.at < fold.at
    agnostic = solver.branch("agnostic")
    search = AnchorSearch(solver)
    signs = []
    for alpha in (merge.at - 0.03, merge.at + 0.03):
        point = assess(solver, search(alpha, agnostic))
        assert point.branch == "agnostic" and point.stable is not None
        signs.append(np.sign(point.curvature["m"]))
    assert signs == [-1, 1]


@pytest.mark.slow
def test_the_positional_branch_at_alpha_2_folds_in_omega_between_0_2_and_0_3():
    """Continued in omega from 0.3 downwards at alpha = 2, the positional branch turns back at one fold
    between 0.2 and 0.3 (where the fold in alpha at omega = 0.2, 1.77, lies below alpha = 2). Checked
    by other routes: the path's points on both sheets near the fold are fixed points of the paper's
    declaration built afresh at their omega (with distinct m), and below the fold a solve from the
    fold's point leaves the positional branch."""
    solver = make_solver(paper_model(omega=0.3))
    branch = solver.branch("positional")
    start = AnchorSearch(solver)(2.0, branch)
    path = continue_in_constant(solver, start, "omega", 0.15, bounds=(0.0, 1.0))
    (fold,) = path.folds
    assert 0.2 < fold < 0.3
    turn = int(np.argmin(path.values))
    sheets = (range(turn), range(turn + 1, len(path.values)))
    near = [min(sheet, key=lambda i: abs(path.values[i] - fold - 0.01)) for sheet in sheets]
    for i in near:
        fresh = make_solver(paper_model(omega=path.values[i])).observe(path.points[i].values, 2.0, branch)
        assert fresh.converged and fresh.branch == "positional", fresh.status
    assert path.points[near[0]]["m"] > path.points[near[1]]["m"] + 0.02
    below = make_solver(paper_model(omega=fold - 0.01))
    left, _ = below.solve(2.0, branch, initial=path.points[turn].values)
    assert not below.on_branch(left, branch)


def test_with_constants_names_the_allowed_constants(solver):
    with pytest.raises(ValueError, match="constant must be one of .*omega"):
        solver.with_constants({"omgea": 0.2})
    with pytest.raises(ValueError, match="omega must be finite"):
        solver.with_constants({"omega": float("nan")})


def test_a_passage_that_reaches_only_a_later_grid_alpha_goes_on_from_there(monkeypatch):
    """Where no solve converges at the failed target but the arclength path does at the next grid alpha,
    the piece goes on from that point, no alpha taken twice: the target is left without a converged
    point, its gap recorded with the reason, and the bridge's best attempt there kept flagged."""
    rule = GaussHermite(8)
    small = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule, tuning=ONE_ANCHOR))
    branch = small.branch("semantic")
    real_step = Continuation.step
    forced = (Failure(Check.RESIDUAL, "forced"),)

    def failing_at(target: float):
        def step(self, history, to, *rest):
            point, jac = real_step(self, history, to, *rest)
            return (replace(point, failures=forced), jac) if to == target else (point, jac)

        return step

    def passage_to(alpha: float):
        def passage(solver, branch, history, grid, direction):
            point, _ = solver.solve(alpha, branch, initial=history[-1].values)
            return ArcOutcome(float("nan"), (point,))

        return passage

    real_solve = Continuation.solve

    def solve_failing_at(self, alpha, initial):
        point = real_solve(self, alpha, initial)
        return replace(point, failures=forced) if alpha == 1.7 else point

    monkeypatch.setattr(Continuation, "step", failing_at(1.7))
    monkeypatch.setattr(Continuation, "solve", solve_failing_at)
    monkeypatch.setattr(continuation, "continue_past", passage_to(1.6))
    trace = trace_branch(small, branch, [1.5, 1.6, 1.7, 1.8, 1.9])
    converged = [p for p in trace.points if p.converged]
    assert [p.alpha for p in converged] == [1.5, 1.6, 1.8, 1.9]
    assert all(p.branch == "semantic" for p in converged)
    assert [p.alpha for p in trace.points if not p.converged] == [1.7]
    assert [gap.alpha for gap in trace.gaps] == [1.7] and "forced" in trace.gaps[0].reason


@pytest.mark.slow
def test_the_mixed_branch_merges_into_the_positional_one_where_its_theta_curvature_changes_sign(solver):
    """Continued up in alpha at omega = 0.2, the mixed branch (found by a ray from the positional
    point) runs into the positional branch at a pitchfork, theta vanishing: the arclength path stops
    there as a merger (not after its steps run out), at the alpha where the square of theta, linear
    in alpha near a pitchfork, vanishes; and the positional point's curvature in theta (the Hessian:
    another route) changes sign there."""
    from attnphase.saddle.search.rays import along_ray

    mixed, positional = solver.branch("mixed"), solver.branch("positional")
    search = AnchorSearch(solver)

    def ray(alpha: float, _branch) -> FixedPoint:
        return along_ray(search, search(alpha, positional), "theta", mixed) or search(alpha, mixed)

    trace = trace_branch(solver.renewed(), mixed, [1.46, 1.54, 1.62, 1.7], anchor=ray)
    assert {1.46, 1.54, 1.62} <= {p.alpha for p in trace.converged() if p.branch == "mixed"}
    (merge,) = [e for e in trace.ends if e.direction == 1]
    assert merge.kind is EndKind.MERGED and merge.detail == "positional" and 1.62 < merge.at < 1.7
    base, signs = search(1.62, positional), []
    for alpha in (merge.at - 0.03, merge.at + 0.03):  # solved from the positional point at 1.62
        point = assess(solver.renewed(), solver.solve(alpha, positional, initial=base.values)[0])
        assert point.branch == "positional" and point.stable is not None
        signs.append(np.sign(point.curvature["theta"]))
    assert signs == [1, -1]


@pytest.mark.slow
def test_a_piece_of_one_point_next_to_a_fold_ends_at_the_fold_not_in_a_failure():
    """The lasso at omega = 0.1, sigma = 0.4: the positional branch is born at a saddle-node between
    alpha = 2.2 and 2.4 (the agnostic point is a minimum along m there, so it is no pitchfork). Anchored
    at 2.4 alone, the step to 2.2 fails; the piece, a single point, is followed in arclength from it and
    a point behind it, and ends at a fold inside the step. Past it, the other sheet at 2.4 is a saddle
    along m above the minimum; solved at fixed alpha beyond the fold, the solver leaves the branch."""
    model = variant("l1").model({"omega": 0.1, "sigma": 0.4})
    solver = make_solver(model, SolverSettings(quadrature=GaussHermite(12), tuning=ONE_ANCHOR))
    branch = solver.branch("positional")
    assessor = solver.renewed()
    trace = trace_branch(solver, branch, [2.2, 2.4], finish=lambda p: assess(assessor, p))
    (fold,) = trace.ends
    assert fold.kind is EndKind.FOLD and fold.alpha == 2.4 and 2.2 < fold.at < 2.4
    assert all(p.converged and p.branch == "positional" for p in trace.points)
    minimum, saddle = _sheet(trace, 0)[2.4], _sheet(trace, 1)[2.4]
    assert minimum.stable and minimum.curvature["m"] > 0 > saddle.curvature["m"]
    assert saddle.train_loss > minimum.train_loss and abs(saddle["m"] - minimum["m"]) > 0.01
    for alpha in (fold.at - 0.01, fold.at - 0.03):
        beyond, _ = solver.solve(alpha, branch, initial=minimum.values)
        assert not solver.on_branch(beyond, branch), alpha
