"""Stability against training: what the Hessian says a fixed point is, gradient descent finds.

The scan flags every fixed point stable (a local minimum of the training loss in the overlaps) or
not (saddle/stability/). At finite d, L-BFGS started near a point must leave it if it is unstable
and stay if it is stable:

* the agnostic point (m = theta = 0) is unstable at omega = 0.3 (alpha = 1 and 2) and at omega = 0.2
  (alpha = 0.8 and 1.4): from a random start (inside the agnostic subspace up to overlaps of order
  1/sqrt(d)) every run ends with an overlap above 1/sqrt(d), off that subspace at this d;
* the positional point is stable there: from the positional start every run ends on it (overlaps
  within 2/sqrt(d) + 10 %).

With the other positional target A (0.3, 0.7, 0.8, 0.2) the agnostic point has q of about 0.012 to
0.016, so the bound sqrt(q rho) of theta is about 0.05, that is 1/sqrt(d) at d = 400: training
cannot be told from the agnostic point there at that size. At d = 3200 and alpha = 2 it can: the
agnostic point is unstable in theta, and from a random start every run ends on the stable semantic
point (theta = 0.079, 4.4/sqrt(d)).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from attnphase.experiments.training import SimulationSettings, simulate
from attnphase.replica.declaration import paper_model
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess

D, SEEDS = 400, 3
#: (declaration's changes, alphas): at omega = 0.2 below the positional branch's fold (1.77)
SETTINGS = [({"omega": 0.3}, (1.0, 2.0)), ({"omega": 0.2}, (0.8, 1.4))]
IDS = ["omega=0.3", "omega=0.2"]


@pytest.fixture(scope="module", params=SETTINGS, ids=IDS)
def setting(request):
    change, alphas = request.param
    model = paper_model(**change)
    rule = GaussHermite(10)
    solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
    points = {}
    for name in ("agnostic", "positional"):
        branch = solver.branch(name)
        assessor = solver.renewed()
        trace = trace_branch(solver.renewed(), branch, alphas, finish=lambda p, a=assessor: assess(a, p))
        points[name] = {p.alpha: p for p in trace.converged() if p.branch == name and p.sheet == 0}
    settings = SimulationSettings.of_model(
        model, d=D, alphas=alphas, seeds=SEEDS, optimiser="lbfgs", inits=("random", "positional"), n_test=500
    )
    runs = simulate(settings)
    assert runs["converged"].all()
    return alphas, points, runs.assign(m=runs["m"].abs(), theta=runs["theta"].abs())


def _ends(setting, label: str, init: str):
    """Per alpha: the scan's point of ``label`` and the runs from ``init``."""
    alphas, points, runs = setting
    for alpha in alphas:
        yield alpha, points[label][alpha], runs[(runs["alpha"] == alpha) & (runs["init"] == init)]


@pytest.mark.slow
def test_from_near_an_unstable_agnostic_point_training_leaves_it(setting):
    for alpha, agnostic, ended in _ends(setting, "agnostic", "random"):
        assert agnostic.stable is False, alpha
        assert (np.maximum(ended["m"], ended["theta"]) > 1 / math.sqrt(D)).all(), ended[["m", "theta"]]


@pytest.mark.slow
def test_from_a_stable_positional_point_training_stays_on_it(setting):
    for alpha, positional, ended in _ends(setting, "positional", "positional"):
        assert positional.stable is True, alpha
        allowance = 2 / math.sqrt(D) + 0.1 * positional["m"]
        assert (ended["m"] - positional["m"]).abs().max() <= allowance, ended["m"]
        assert ended["theta"].max() <= 2 / math.sqrt(D), ended["theta"]


OTHER_A, OTHER_A_D, OTHER_A_ALPHA = ((0.3, 0.7), (0.8, 0.2)), 3200, 2.0


@pytest.mark.slow
def test_with_the_other_target_training_leaves_the_unstable_agnostic_point_for_the_semantic_one():
    model = paper_model(A=OTHER_A)
    rule = GaussHermite(10)
    solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
    search = AnchorSearch(solver)
    agnostic, semantic = (
        assess(solver.renewed(), search(OTHER_A_ALPHA, solver.branch(name))) for name in ("agnostic", "semantic")
    )
    assert agnostic.branch == "agnostic" and agnostic.stable is False
    assert semantic.branch == "semantic" and semantic.stable is True
    settings = SimulationSettings.of_model(
        model, d=OTHER_A_D, alphas=(OTHER_A_ALPHA,), seeds=2, optimiser="lbfgs", inits=("random",), n_test=500
    )
    runs = simulate(settings)
    assert runs["converged"].all()
    theta = runs["theta"].abs()
    assert (theta > 2 / math.sqrt(OTHER_A_D)).all(), theta  # off the agnostic subspace
    allowance = 2 / math.sqrt(OTHER_A_D) + 0.1 * semantic["theta"]
    assert (theta - semantic["theta"]).abs().max() <= allowance, theta
