"""Anchors of a branch from rays in the loss landscape (saddle/search/rays.py, saddle/search/anchors.py).

The mixed fixed point a ray meets is checked by other routes: at omega = 0.3 it is the mixed point
the anchor search finds from its seeds; at omega = 0.2, where the seeds miss it, it lies between
the positional and semantic minima in the overlap plane, above both in training loss, and the
Hessian of the training loss calls it a saddle: the barrier of the first-order transition.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import variant
from attnphase.saddle.phases import survey as survey_module
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.points.checks import Check, Failure
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.constrained import ConstrainedSolver
from attnphase.saddle.search.rays import along_ray
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import BranchTrace
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess


@pytest.fixture(scope="module")
def omega_02_base():
    return make_solver(paper_model(omega=0.2))


@pytest.fixture
def omega_02(omega_02_base):
    """The solver at omega = 0.2 without the memory of other tests' solves."""
    return omega_02_base.renewed()


def test_the_ray_meets_the_mixed_point_the_seeded_anchor_finds(omega_02):
    """At omega = 0.2, alpha = 1.3 the seeded search finds the mixed point; the ray from the
    positional point along theta meets the same point."""
    search = AnchorSearch(omega_02)
    seeded = search(1.3, omega_02.branch("mixed"))
    assert seeded.converged and seeded.branch == "mixed"
    positional = search(1.3, omega_02.branch("positional"))
    met = along_ray(search, positional, "theta", omega_02.branch("mixed"))
    assert met is not None
    np.testing.assert_allclose(met.values, seeded.values, rtol=1e-5, atol=1e-7)


def test_at_omega_0_2_the_ray_finds_the_barrier_between_the_two_minima(omega_02):
    solver = omega_02
    search = AnchorSearch(solver)
    positional = assess(solver, search(1.5, solver.branch("positional")))
    semantic = assess(solver, search(1.5, solver.branch("semantic")))
    assert positional.stable and semantic.stable
    mixed = along_ray(search, positional, "theta", solver.branch("mixed"))
    assert mixed is not None and mixed.converged and mixed.branch == "mixed"
    assert 0 < mixed["m"] < positional["m"] and 0 < mixed["theta"] < semantic["theta"]
    assert mixed.train_loss > max(positional.train_loss, semantic.train_loss)
    assert assess(solver, mixed).stable is False


@pytest.mark.slow
def test_the_scan_finds_the_mixed_branch_where_the_seeded_anchors_miss_it(paper_solver):
    """At omega = 0.3, alpha = 1.25 the seeded anchor of the mixed branch lands on the positional point;
    the scan's anchor search goes on along rays and finds the mixed branch, and so does the anchor
    search of a single point (:meth:`AnchorSearch.with_rays`, the landscape's), from the anchors of the
    branches it contains."""
    solver = paper_solver.renewed()
    mixed_branch = solver.branch("mixed")
    seeded = AnchorSearch(solver)(1.25, mixed_branch)
    assert seeded.branch != "mixed"
    solution = survey(solver, [1.25], reference_error=0.0, stability=False)
    mixed = solution.traces["mixed"].converged()
    assert [p.alpha for p in mixed] == [1.25]
    assert all(p.branch == "mixed" for p in mixed)
    alone = AnchorSearch.with_rays(solver.renewed())(1.25, mixed_branch)
    assert alone.converged and alone.branch == "mixed"
    np.testing.assert_allclose(alone.values, mixed[0].values, rtol=1e-5, atol=1e-7)


def test_where_the_secant_start_misses_brents_root_finds_the_point(omega_02, monkeypatch):
    """The first solve of the branch from a ray's bracket starts at the secant estimate of the
    gradient's root; if that solve lands elsewhere, the root is refined by Brent's method and the
    branch solved from there, which finds the same point."""
    solver = omega_02
    search = AnchorSearch(solver)
    positional = search(1.5, solver.branch("positional"))
    direct = along_ray(search, positional, "theta", solver.branch("mixed"))
    solve, secant_starts = SaddlePointSolver.solve, []

    def secant_misses(self, alpha, branch, initial, jacobian=None):
        if branch.name == "mixed" and self is search.coarse().solver and not secant_starts:
            secant_starts.append(initial)
            return positional, None  # a start that lands on the positional point
        return solve(self, alpha, branch, initial, jacobian)

    monkeypatch.setattr(SaddlePointSolver, "solve", secant_misses)
    refined = along_ray(search, positional, "theta", solver.branch("mixed"))
    assert len(secant_starts) == 1
    assert refined is not None and refined.converged and refined.branch == "mixed"
    np.testing.assert_allclose(refined.values, direct.values, rtol=1e-6, atol=1e-8)


def test_the_point_met_on_the_coarse_rule_is_the_one_met_on_the_solvers_own(omega_02, monkeypatch):
    """The ray is followed on the coarse rule and its point refined; followed on the solver's own
    rule (no coarse rule) it meets the same fixed point."""
    solver = omega_02
    search = AnchorSearch(solver)
    positional = search(1.5, solver.branch("positional"))
    refined = along_ray(search, positional, "theta", solver.branch("mixed"))
    own = AnchorSearch(solver.renewed())
    monkeypatch.setattr(own, "coarse", lambda: None)
    direct = along_ray(own, positional, "theta", solver.branch("mixed"))
    assert refined is not None and direct is not None and refined.converged and direct.converged
    np.testing.assert_allclose(refined.values, direct.values, rtol=1e-6, atol=1e-8)


@pytest.mark.slow
def test_a_branch_born_from_a_subspace_branchs_second_sheet_is_found_from_it(monkeypatch):
    """The elastic net at omega = 0.15 with the target (0.3, 0.7; 0.8, 0.2), alpha = 1.5: the agnostic
    branch has two sheets there (a fold near alpha = 1), and only the second (small q) is unstable
    along m. Where the seeded search misses the positional branch (as it does within that scan), the
    scan's rays start from the agnostic points on both sheets: from the first alone they find nothing,
    from the second they descend to a positional point below it in training loss."""
    model = variant("elastic-net").model({"omega": 0.15, "A": np.array([[0.3, 0.7], [0.8, 0.2]])})
    solver = make_solver(model, SolverSettings(quadrature=GaussHermite(12)))
    agnostic = solver.branch("agnostic")
    first = assess(solver, AnchorSearch(solver)(1.5, agnostic))
    second, _ = solver.solve(1.5, agnostic, initial=np.array([0.0043, 0.0, 6.1, 0.0]))
    second = assess(solver, replace(second, sheet=1))
    assert first.converged and second.converged and second.branch == first.branch == "agnostic"
    assert second["q"] < 0.2 * first["q"]
    assert first.curvature["m"] > 0 > second.curvature["m"]

    class MissesPositional:
        """The seeded search as it ends within that scan: on the agnostic point, for the positional branch."""

        def __call__(self, search, alpha, branch, found):
            return first if found is None and branch.name == "positional" else found

    strategies = survey_module.default_strategies
    monkeypatch.setattr(survey_module, "default_strategies", lambda rays=None: (MissesPositional(), *strategies(rays)))

    def positional_points(agnostic_points):
        traced = {"agnostic": BranchTrace("agnostic", agnostic_points)}
        traced |= {name: BranchTrace(name, ()) for name in ("semantic", "mixed")}
        solution = survey(solver.renewed(), [1.5], reference_error=0.0, traced=traced, stability=False)
        return solution.traces["positional"].converged()

    assert positional_points((first,)) == ()
    (found,) = positional_points((first, second))
    assert found.branch == "positional" and found["m"] > 0.005
    assert found.train_loss < second.train_loss


def test_a_falling_ray_is_followed_past_the_familys_bound_at_its_start_to_the_minimum():
    """The paper's model at omega = 0.5, sigma = 1, lambda = 0.1 with the target (0.3, 0.7; 0.8, 0.2),
    alpha = 2.4: the agnostic point is unstable along theta, and the training loss at fixed theta
    still falls at 0.9 times theta's Cauchy-Schwarz bound there (q grows along the ray, and with it
    the bound). The ray goes on until the fall ends, at the semantic minimum beyond that bound, below
    the agnostic point in training loss (the coarse rule's ray stalls before it, and the solver's own
    rule follows it)."""
    solver = make_solver(
        paper_model(omega=0.5, sigma=1.0, lam=0.1, A=((0.3, 0.7), (0.8, 0.2))),
        SolverSettings(quadrature=GaussHermite(12)),
    )
    search = AnchorSearch(solver)
    agnostic = assess(solver, search(2.4, solver.branch("agnostic")))
    assert agnostic.converged and agnostic.curvature["theta"] < 0
    theta = solver.problem.layout.index("theta")
    bound = float(solver.problem.geometry.overlap_bounds(agnostic.values)[theta])
    at_edge = ConstrainedSolver(solver, ("theta",)).solve(2.4, [0.9 * bound], agnostic.values)
    assert at_edge.converged and at_edge.gradient[0] < 0

    semantic = along_ray(search, agnostic, "theta", solver.branch("semantic"))
    assert semantic is not None and semantic.converged and semantic.branch == "semantic"
    assert semantic["theta"] > bound and semantic.train_loss < at_edge.train_loss < agnostic.train_loss
    assert assess(solver, semantic).stable


@pytest.mark.slow
def test_where_every_seeded_search_stalls_the_anchor_is_the_converged_symmetric_point():
    """L1 at omega 0.1, sigma 0.4: the positional branch exists only above its fold at alpha 2.33, and
    at alpha 1.4 every seeded search for the mixed branch, on the coarse rule and on the solver's own,
    stalls near m = 0.17 (residual about 1e-2, a ghost of the branch past its fold). The anchor is
    then the symmetric point, converged (the agnostic one), and not a stalled iterate that a scan
    would report as a flagged row of a branch that does not exist there."""
    model = variant("l1").model({"omega": 0.1, "sigma": 0.4})
    solver = make_solver(model, SolverSettings(quadrature=GaussHermite(12), test_quadrature=GaussHermite(12)))
    search = AnchorSearch(solver)
    point = search(1.4, solver.branch("mixed"))
    assert point.converged and point.branch == "agnostic"
    np.testing.assert_allclose(point.values, search.symmetric_point(1.4).values, rtol=1e-7, atol=1e-9)


def test_a_ray_that_leaves_the_branchs_subspace_ends_there_without_a_second_try(omega_02, monkeypatch):
    """A constrained point of the ray with another family the branch leaves free at zero (here ``m``,
    as where a positional ray's solve falls onto ``m = 0``) lies in a smaller invariant subspace: the
    ray meets nothing, and is not followed again on the solver's own rule."""
    solver = omega_02
    search = AnchorSearch(solver)
    positional = search(1.5, solver.branch("positional"))
    solve = ConstrainedSolver.solve
    m = solver.problem.layout.index("m")
    calls = []

    def collapsing(self, *args, **kwargs):
        point = solve(self, *args, **kwargs)
        calls.append(point)
        if len(calls) < 2:
            return point
        values = point.values.copy()
        values[m] = 0.0
        return replace(point, values=values)

    monkeypatch.setattr(ConstrainedSolver, "solve", collapsing)
    assert along_ray(search, positional, "theta", solver.branch("mixed")) is None
    assert len(calls) == 2


def test_where_the_coarse_search_finds_no_point_of_the_branch_this_rule_does_not_search_again(monkeypatch):
    """The coarse search's point, off the branch, is refined once; if that refinement does not converge,
    the anchor is the symmetric point where that has converged, and the refined point where it has
    not: no seeded search is repeated on the solver's own rule."""
    rule = GaussHermite(12)
    solver = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule))
    mixed, alpha = solver.branch("mixed"), 1.5
    search = AnchorSearch(solver)
    symmetric = search.symmetric_point(alpha)
    assert symmetric.converged
    seeds = solver.problem.seeds
    seeded = seeds.seeded(symmetric.values, mixed, 0.5, seeds.columns(mixed)[0])
    rough = search.coarse().solver.observe(seeded, alpha, mixed, error_check=False)
    assert not rough.converged
    monkeypatch.setattr(search, "coarse", lambda: lambda a, b: rough)  # the coarse search ends at rough
    starts = []

    def stalling(alpha, branch, initial, jacobian=None, error_check=True, budget=None):
        starts.append(np.array(initial))
        return solver.observe(initial, alpha, branch, error_check=False), None

    monkeypatch.setattr(solver, "solve", stalling)
    found = search(alpha, mixed)
    assert found.converged and np.array_equal(found.values, symmetric.values)
    assert len(starts) == 1 and np.array_equal(starts[0], rough.values)

    unconverged = replace(symmetric, failures=(Failure(Check.RESIDUAL, "forced"),))
    monkeypatch.setattr(search, "symmetric_point", lambda a: unconverged)
    refined = search(alpha, mixed)
    assert not refined.converged and np.array_equal(refined.values, rough.values)
    assert len(starts) == 2


def test_a_coarse_point_of_the_branch_that_refines_onto_a_more_symmetric_one_ends_the_search(monkeypatch):
    """Where the coarse search lands on the branch but its refinement on the solver's rule converges onto
    a more symmetric point (the coarse rule's branch reaches where this rule's does not), that point is
    the anchor: the seeded search is not repeated on the solver's rule (in a scan, the rays from the
    contained branches' points follow)."""
    rule = GaussHermite(12)
    solver = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule))
    semantic, alpha = solver.branch("semantic"), 2.0
    search = AnchorSearch(solver)
    rough = search.coarse()(alpha, semantic)
    assert search.coarse().solver.on_branch(rough, semantic)
    symmetric = search.symmetric_point(alpha)
    assert symmetric.converged and symmetric.branch == "agnostic"
    monkeypatch.setattr(search, "coarse", lambda: lambda a, b: rough)  # the coarse search ends at rough
    starts = []

    def collapsing(alpha, branch, initial, jacobian=None, error_check=True, budget=None):
        starts.append(np.array(initial))
        return symmetric, None

    monkeypatch.setattr(solver, "solve", collapsing)
    found = search(alpha, semantic)
    assert found.converged and found.branch == "agnostic" and np.array_equal(found.values, symmetric.values)
    assert len(starts) == 1 and np.array_equal(starts[0], rough.values)


def test_a_seeded_trial_gives_way_after_its_evaluation_budget(monkeypatch):
    """A seeded trial of an anchor search (a ``budget``, the anchor tuning's ``seeded_trial_evaluations``)
    that has not settled within its budget of evaluations of the map ends there, unconverged (the anchor
    search then tries its next seed); a search that persists (continuation, refinements, rays) has no
    such budget."""
    rule = GaussHermite(12)
    solver = make_solver(paper_model(), SolverSettings(quadrature=rule, test_quadrature=rule))
    semantic, alpha = solver.branch("semantic"), 1.5
    symmetric = AnchorSearch(solver).symmetric_point(alpha)
    seeds, tuning = solver.problem.seeds, solver.tuning.anchors
    seeded = seeds.seeded(symmetric.values, semantic, tuning.seeds[0], seeds.columns(semantic)[0])
    budget = tuning.seeded_trial_evaluations
    found, _ = solver.renewed().solve(alpha, semantic, seeded, error_check=False, budget=budget)
    assert solver.on_branch(found, semantic) and found.iterations > 4  # evaluations + 1
    trial, _ = solver.renewed().solve(alpha, semantic, seeded, error_check=False, budget=3)
    assert not trial.converged and trial.iterations <= 4
    persisting, _ = solver.renewed().solve(alpha, semantic, seeded, error_check=False)
    assert persisting.converged and np.array_equal(persisting.values, found.values)
