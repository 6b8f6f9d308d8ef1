"""The branch tracer's rules, tried on their own: a scripted continuation stands in for the solver, so what is
tested is where the tracer anchors, how far it carries a piece, what it records at an end, and that no
grid alpha inside a branch's range is lost without a reason of its own."""

from __future__ import annotations

import math
from dataclasses import replace

from points import scripted_point

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.arclength import ArcOutcome
from attnphase.saddle.search.trace import EndKind
from attnphase.saddle.search.tracer import BranchTracer, anchor_alphas
from attnphase.saddle.tuning import ContinuationTuning

BRANCH = Branch("positional", zero=("theta",))
GRID = [round(0.5 + 0.1 * k, 10) for k in range(11)]  # 0.5 .. 1.5


def point(alpha: float, label: str = "positional", converged: bool = True) -> FixedPoint:
    return scripted_point(alpha, {"m": alpha}, alpha, label, converged)


class ScriptedContinuation:
    """A branch that exists on ``exists`` (it merges into the agnostic one elsewhere); a step to an alpha in
    ``hard`` fails (unconverged), and the arclength passage past it lands on the next grid alpha; a solve
    from an interpolation reaches the alphas in ``bridgeable``."""

    def __init__(self, exists, hard=(), bridgeable=()):
        self.branch, self.exists, self.hard, self.bridgeable = BRANCH, exists, set(hard), set(bridgeable)
        self.steps: list[float] = []

    def on_branch(self, found):
        return found.converged and found.branch == BRANCH.name

    def _at(self, alpha):
        return point(alpha) if self.exists(alpha) else point(alpha, "agnostic")

    def step(self, history, target, jacobian, slope=None, halvings=None):
        self.steps.append(target)
        if target in self.hard:
            return point(target, converged=False), None
        return self._at(target), None

    def behind(self, found, target, slope):
        return []

    def past(self, history, grid, direction):
        last = history[-1].alpha
        beyond = [a for a in grid if direction * (a - last) > 0 and a not in self.hard][:: direction or 1]
        beyond = sorted(beyond, reverse=direction < 0)
        return ArcOutcome(float("nan"), (self._at(beyond[0]),) if beyond else ())

    def solve(self, alpha, initial):
        return point(alpha) if alpha in self.bridgeable else point(alpha, converged=False)

    def tangent(self, found):
        return None


def trace(continuation, anchored=None):
    calls = []

    def anchor(alpha, branch):
        calls.append(alpha)
        return continuation._at(alpha) if anchored is None else anchored(alpha)

    return BranchTracer(continuation, anchor, ContinuationTuning()).trace(GRID), calls


def test_the_first_anchors_are_the_ends_and_the_middle_of_the_grid():
    assert anchor_alphas(GRID, {}, []) == [1.5, 0.5, 1.0]
    assert anchor_alphas(GRID, {1.5, 1.4}, [1.5, 0.5]) == [1.0]  # then the middle of the longest free stretch


def test_a_branch_over_the_whole_grid_is_traced_from_one_anchor():
    result, anchors = trace(ScriptedContinuation(lambda a: True))
    assert anchors == [1.5]
    assert [p.alpha for p in result.points] == GRID and not result.ends and not result.gaps


def test_a_branch_on_part_of_the_grid_ends_where_it_merges_and_is_found_nowhere_else():
    result, anchors = trace(ScriptedContinuation(lambda a: a >= 1.0))
    assert [p.alpha for p in result.points] == GRID[5:]
    (end,) = result.ends
    assert (end.kind, end.alpha, end.at, end.detail) == (EndKind.MERGED, 1.0, 0.9, "agnostic")
    assert anchors == [1.5, 0.5, 0.8]  # the uncovered stretch's middle last; a long piece's merger adds none


def test_a_branch_found_only_by_a_later_anchor_is_traced_from_there():
    result, anchors = trace(ScriptedContinuation(lambda a: a <= 0.8))
    assert anchors == [1.5, 0.5, 1.0] and [p.alpha for p in result.points] == GRID[:4]


def test_a_grid_alpha_the_arclength_passage_skips_is_bridged_from_its_neighbours():
    continuation = ScriptedContinuation(lambda a: True, hard={0.9}, bridgeable={0.9})
    result, _ = trace(continuation)
    assert [p.alpha for p in result.points] == GRID and not result.gaps


def test_a_grid_alpha_no_strategy_reaches_is_a_gap_with_its_own_reason_and_its_best_attempt_flagged():
    continuation = ScriptedContinuation(lambda a: True, hard={0.9})
    result, anchors = trace(continuation, lambda a: point(a) if a != 0.9 else point(a, "agnostic"))
    assert anchors == [1.5, 0.9]  # the one stretch left uncovered is anchored too, in vain
    (flagged,) = [p for p in result.points if p.alpha == 0.9]
    assert not flagged.converged and flagged.branch == "positional"
    (gap,) = result.gaps
    assert gap.alpha == 0.9 and "between its points at alpha = 0.8 and 1" in gap.reason
    assert result.missing(GRID) == {}  # the alpha has its row, flagged: nothing is missing


def test_an_anchor_that_does_not_converge_on_the_branch_is_kept_flagged_with_its_checks():
    flagged = point(1.5, converged=False)

    def anchored(alpha):
        return flagged if alpha == 1.5 else point(alpha)

    result, anchors = trace(ScriptedContinuation(lambda a: a < 1.5), anchored)
    assert anchors[:2] == [1.5, 0.5]
    assert result.points[-1] == flagged and result.anchors[0].found is None
    assert result.anchors[0].status == flagged.status
    assert math.isclose(min(p.alpha for p in result.points), 0.5) and len(result.points) == len(GRID)


def test_points_pass_through_finish_before_they_are_handed_on():
    continuation = ScriptedContinuation(lambda a: True)
    seen = []
    tracer = BranchTracer(
        continuation,
        lambda alpha, branch: continuation._at(alpha),
        ContinuationTuning(),
        finish=lambda p: replace(p, test_error=1.0),
        on_point=seen.append,
    )
    result = tracer.trace(GRID)
    assert all(p.test_error == 1.0 for p in result.points) and len(seen) == len(GRID)
