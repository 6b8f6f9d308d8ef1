"""Each strategy of the anchor search states one rule; here each is tried on its own, against a scripted
search (no solver, no kernels), so the rule is what is tested."""

from __future__ import annotations

import numpy as np
import pytest
from points import scripted_point

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.search.anchors import (
    AnchorSearch,
    QuadratureChecked,
    Rays,
    RefineCoarse,
    SeededStarts,
    SymmetricPoint,
)

MIXED = Branch("mixed")
POSITIONAL = Branch("positional", zero=("theta",))
SEMANTIC = Branch("semantic", zero=("m",))
AGNOSTIC = Branch("agnostic", zero=("m", "theta"))


def point(label: str, converged: bool = True, loss: float = 1.0, residual: float = 1e-10, at: float = 0.0):
    """A fixed point labelled ``label``; ``at`` marks it (its first value) so a test can tell points apart."""
    return scripted_point(1.0, {"m": at, "theta": 0.0}, loss, label, converged, residual)


class ScriptedSearch(AnchorSearch):
    """The operations of an anchor search, scripted: ``solutions`` maps a start's marker to the point a
    solve from it ends at; every call is recorded in ``calls``."""

    def __init__(self, strategies=(), solutions=None, free=("m",), symmetric=None, coarse=None, seeds=(), rays=None):
        self.strategies = tuple(strategies)
        self.solutions = solutions or {}
        self.free, self.symmetric, self.coarse_search, self.seeds = free, symmetric, coarse, seeds
        self.rays = rays or {}
        self.calls: list[tuple] = []

    def coarse(self):
        return self.coarse_search

    def solve(self, alpha, branch, initial, trial=False):
        self.calls.append(("solve", float(initial[0]), trial))
        return self.solutions[float(initial[0])]

    def checked(self, found):
        self.calls.append(("checked", found.branch))
        return found

    def vanishes(self, values):
        return bool(values[0] == -1.0)

    def free_families(self, branch):
        return self.free

    def nonzero_families(self, values):
        return () if values[0] == 0 else ("m", "theta")

    def subspaces(self, branch):
        return [(POSITIONAL, "theta"), (SEMANTIC, "m")] if branch is MIXED else []

    def seeded_starts(self, alpha, branch):
        return [[np.array([marker, 0.0]) for marker in way] for way in self.seeds]

    def along_ray(self, found, family, branch):
        self.calls.append(("ray", found.branch, family))
        return self.rays.get((found.branch, family))

    def symmetric_point(self, alpha):
        self.calls.append(("symmetric",))
        return self.symmetric


class Coarse:
    """A coarse search that finds ``rough``."""

    def __init__(self, rough):
        self.rough = rough

    def __call__(self, alpha, branch):
        return self.rough


def test_refine_coarse_keeps_a_converged_refinement_of_the_coarse_point():
    rough = point("positional", at=1.0)
    search = ScriptedSearch(solutions={1.0: point("positional", at=2.0)}, coarse=Coarse(rough))
    assert RefineCoarse()(search, 1.0, POSITIONAL, None).values[0] == 2.0


def test_refine_coarse_gives_the_best_tried_where_the_coarse_search_missed_the_branch():
    rough = point("agnostic", at=1.0)
    stalled = point("positional", converged=False, at=2.0, residual=1e-3)
    search = ScriptedSearch(solutions={1.0: stalled}, coarse=Coarse(rough), symmetric=point("agnostic", at=7.0))
    assert RefineCoarse()(search, 1.0, POSITIONAL, None).values[0] == 7.0  # nothing converged: the symmetric point


def test_refine_coarse_leaves_the_search_to_this_rule_where_it_cannot_help():
    unconverged = point("positional", converged=False, at=2.0)
    on_branch = ScriptedSearch(solutions={1.0: unconverged}, coarse=Coarse(point("positional", at=1.0)))
    assert RefineCoarse()(on_branch, 1.0, POSITIONAL, None) is None
    vanishing = ScriptedSearch(coarse=Coarse(point("agnostic", at=-1.0)))
    assert RefineCoarse()(vanishing, 1.0, POSITIONAL, None) is None and vanishing.calls == []
    assert RefineCoarse()(ScriptedSearch(coarse=None), 1.0, POSITIONAL, None) is None
    found = point("positional")
    assert RefineCoarse()(ScriptedSearch(coarse=Coarse(found)), 1.0, POSITIONAL, found) is found


def test_symmetric_point_answers_a_branch_with_no_free_family_and_no_other():
    symmetric = point("agnostic")
    assert SymmetricPoint()(ScriptedSearch(free=(), symmetric=symmetric), 1.0, AGNOSTIC, None) is symmetric
    assert SymmetricPoint()(ScriptedSearch(free=("m",), symmetric=symmetric), 1.0, POSITIONAL, None) is None


def test_seeded_starts_take_the_first_landing_trial_per_way_and_the_lowest_loss_among_them():
    solutions = {
        1.0: point("agnostic", at=1.0),
        2.0: point("positional", loss=0.5, at=2.0),
        3.0: point("positional", loss=0.1, at=3.0),  # never tried: the way's first landing came before
        4.0: point("positional", loss=0.3, at=4.0),
    }
    search = ScriptedSearch(solutions=solutions, seeds=[(1.0, 2.0, 3.0), (4.0,)])
    found = SeededStarts()(search, 1.0, POSITIONAL, None)
    assert found.values[0] == 4.0
    solves = [c for c in search.calls if c[0] == "solve"]
    assert solves == [("solve", 1.0, True), ("solve", 2.0, True), ("solve", 4.0, True)]


def test_seeded_starts_give_the_best_trial_where_none_lands():
    solutions = {1.0: point("agnostic", residual=1e-9, at=1.0), 2.0: point("positional", False, residual=1e-4, at=2.0)}
    search = ScriptedSearch(solutions=solutions, seeds=[(1.0, 2.0)], symmetric=point("agnostic", at=9.0))
    assert SeededStarts()(search, 1.0, POSITIONAL, None).values[0] == 1.0  # converged, though elsewhere


def test_the_quadrature_check_runs_on_the_candidate_alone():
    search = ScriptedSearch()
    assert QuadratureChecked()(search, 1.0, POSITIONAL, None) is None and search.calls == []
    QuadratureChecked()(search, 1.0, POSITIONAL, point("positional"))
    assert search.calls == [("checked", "positional")]


def test_rays_start_where_the_candidate_is_elsewhere_from_subspace_points_where_the_family_vanishes():
    met = point("mixed", at=5.0)
    rays = {("semantic", "m"): met}
    subspace = {
        "positional": [point("positional", at=1.0), point("positional", at=0.0)],
        "semantic": [point("semantic")],
    }
    search = ScriptedSearch(rays=rays)
    candidate = point("positional", at=1.0)
    found = Rays(lambda b, alpha: subspace[b.name])(search, 1.0, MIXED, candidate)
    assert found is met  # no ray from the point with theta non-zero; the other positional one met nothing
    assert [c for c in search.calls if c[0] == "ray"] == [("ray", "positional", "theta"), ("ray", "semantic", "m")]
    on_branch = point("mixed")
    assert Rays(lambda b, alpha: subspace[b.name])(search, 1.0, MIXED, on_branch) is on_branch


def test_rays_that_meet_nothing_leave_the_candidate_and_none_start_where_the_family_is_non_zero():
    candidate = point("positional")
    search = ScriptedSearch()
    assert Rays(lambda b, alpha: [point(b.name, at=0.0)])(search, 1.0, MIXED, candidate) is candidate
    nowhere = ScriptedSearch()
    assert Rays(lambda b, alpha: [point(b.name, at=1.0)])(nowhere, 1.0, MIXED, candidate) is candidate
    assert nowhere.calls == []


def test_the_search_runs_its_strategies_in_order_and_needs_one_to_give_a_point():
    order = []

    def strategy(name, gives=None):
        def run(search, alpha, branch, found):
            order.append(name)
            return gives if found is None else found

        return run

    given = point("positional")
    search = ScriptedSearch(strategies=[strategy("first"), strategy("second", given), strategy("third")])
    assert AnchorSearch.__call__(search, 1.0, POSITIONAL) is given and order == ["first", "second", "third"]
    with pytest.raises(ValueError, match="no point"):
        AnchorSearch.__call__(ScriptedSearch(strategies=[strategy("none")]), 1.0, POSITIONAL)


def test_best_of_prefers_a_converged_point_then_the_lowest_residual():
    search = ScriptedSearch(symmetric=point("agnostic", at=9.0))
    tried = [point("agnostic", False, residual=1e-5, at=1.0), point("positional", False, residual=1e-6, at=2.0)]
    assert search.best_of(1.0, tried).values[0] == 9.0  # none converged: the converged symmetric point
    assert search.best_of(1.0, [*tried, point("agnostic", residual=1e-9, at=3.0)]).values[0] == 3.0
    stalled = ScriptedSearch(symmetric=point("agnostic", False, at=9.0))
    assert stalled.best_of(1.0, tried).values[0] == 2.0
