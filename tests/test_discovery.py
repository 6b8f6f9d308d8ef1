"""Discovery of a branch over the grid: anchors, and more anchors where a piece was lost."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings

GRID = np.arange(0.1, 2.51, 0.2).round(6).tolist()


@pytest.fixture(scope="module")
def omega_01_base():
    """At omega = 0.1 the positional branch is born from the agnostic one at a pitchfork near
    alpha = 0.09 and merges into it again near 1.2 (docs/validation/branches.md). On this coarse rule the
    map has no root to the tolerance at alpha = 0.3 (the step up from the point at 0.1 fails
    there, flagged), and the first three anchors (2.5, 0.1, 1.3) find nothing else of it."""
    rule = GaussHermite(8)
    return make_solver(paper_model(omega=0.1), SolverSettings(quadrature=rule, test_quadrature=rule))


@pytest.fixture
def omega_01(omega_01_base):
    """The solver at omega = 0.1 without the memory of other tests' solves."""
    return omega_01_base.renewed()


def _positional_alphas(trace) -> set[float]:
    return {p.alpha for p in trace.points if p.converged and p.branch == "positional" and p.sheet == 0}


@pytest.mark.slow
def test_a_branch_lost_inside_the_grid_is_anchored_again_and_found_where_it_goes_on(omega_01):
    trace = trace_branch(omega_01, omega_01.branch("positional"), GRID)
    assert {0.1, 0.5, 0.7, 0.9, 1.1} <= _positional_alphas(trace)
    assert len(trace.anchors) == 4  # one more than the default, for the end where the step to 0.3 failed
    assert [e.kind for e in trace.ends if e.alpha == 0.1] == ["failed"]
    found = [p for p in trace.points if p.alpha == 0.7][0]
    assert 0.15 < found["m"] < 0.25


def test_without_the_extra_anchors_it_is_missed(omega_01, retuned):
    """What the extra anchors are for: with none, the same trace holds only the point at 0.1."""
    solver = retuned(omega_01, continuation={"extra_anchors": 0})
    trace = trace_branch(solver, solver.branch("positional"), GRID)
    assert _positional_alphas(trace) == {0.1}


def test_the_tangent_is_the_secant_of_two_solved_points(omega_01):
    """dx/dalpha from the Jacobian of the map (one point) against the central difference of the
    fixed points solved at alpha -+ 0.01 (two points): equal to the secant's error, O(h^2)."""
    branch = omega_01.branch("positional")
    point = AnchorSearch(omega_01)(0.7, branch)
    below, _ = omega_01.solve(0.69, branch, initial=point.values)
    above, _ = omega_01.solve(0.71, branch, initial=point.values)
    secant = (above.values - below.values) / 0.02
    slope = omega_01.tangent(point, branch)
    assert point.converged and below.converged and above.converged
    assert np.allclose(slope, secant, rtol=1e-2, atol=1e-4)
    names = omega_01.problem.layout.names
    assert slope[names.index("theta")] == 0.0  # held by the branch
    assert abs(slope[names.index("m")]) > 1e-3  # the test can tell a slope from none


def test_the_first_step_from_a_point_near_a_pitchfork_follows_the_tangent(omega_01, retuned, monkeypatch):
    """From the point at alpha = 0.1, where m = 0.036 grows like sqrt(alpha - 0.09), the first step
    predicted along the tangent stays on the branch; predicted from the point's own values (no
    tangent), it falls onto the agnostic point and the piece ends in a false merger."""
    grid = [0.1, 0.15, 0.2, 0.25]
    branch = omega_01.branch("positional")

    def trace(solver):
        search = AnchorSearch(solver)

        def only_at_01(alpha: float, branch):
            return search(alpha, branch) if alpha == 0.1 else search.symmetric_point(alpha)

        return trace_branch(solver, branch, grid, anchor=only_at_01)

    followed = trace(retuned(omega_01, continuation={"max_anchors": 2}))
    assert _positional_alphas(followed) == set(grid)
    assert [p["m"] for p in sorted(followed.points, key=lambda p: p.alpha)] == sorted(p["m"] for p in followed.points)
    without = retuned(omega_01, continuation={"max_anchors": 2})
    monkeypatch.setattr(without, "tangent", lambda point, branch: None)
    lost = trace(without)
    assert _positional_alphas(lost) == {0.1}
    assert [e.kind for e in lost.ends] == ["merged"]
