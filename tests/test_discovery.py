"""Discovery of a branch over the grid: anchors, and more anchors where a piece was lost."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.saddle import continuation
from attnphase.saddle.continuation import trace_branch
from attnphase.saddle.fixed_point import SolverSettings
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.scan import make_solver

GRID = np.arange(0.1, 2.51, 0.2).round(6).tolist()


@pytest.fixture(scope="module")
def omega_01():
    """At omega = 0.1 the positional branch exists from 0.1 to a fold near 1.25 (docs/validation.md);
    the step up from its point at alpha = 0.1 lands on the agnostic point, and the first three
    anchors (2.5, 0.1, 1.3) find nothing else of it."""
    rule = GaussHermite(8)
    return make_solver(paper_model(omega=0.1), SolverSettings(quadrature=rule, test_quadrature=rule))


def _positional_alphas(trace) -> set[float]:
    return {p.alpha for p in trace.points if p.converged and p.branch == "positional" and p.sheet == 0}


def test_a_branch_lost_inside_the_grid_is_anchored_again_and_found_where_it_goes_on(omega_01):
    trace = trace_branch(omega_01, omega_01.branch("positional"), GRID)
    assert {0.1, 0.5, 0.7, 0.9, 1.1} <= _positional_alphas(trace)
    assert len(trace.anchors) == 5  # two more than the default, for the ends at 0.1 and at 1.1
    found = [p for p in trace.points if p.alpha == 0.7][0]
    assert 0.15 < found["m"] < 0.25


def test_without_the_extra_anchors_it_is_missed(omega_01, monkeypatch):
    """What the extra anchors are for: with none, the same trace holds only the point at 0.1."""
    monkeypatch.setattr(continuation, "EXTRA_ANCHORS", 0)
    trace = trace_branch(omega_01.renewed(), omega_01.branch("positional"), GRID)
    assert _positional_alphas(trace) == {0.1}
