"""The passes of a root search (saddle/search/passes.py): quick prox starts first, the full map only where the
quick one settles on a root that the verification with every start rejects."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.passes import search_in_passes


class Recorder:
    """A root search that records its passes: pass ``i`` returns ``start + 1`` and ``settled[i]``; the
    verification accepts the ``accept_at``-th result (0-based; never if ``None``)."""

    def __init__(self, settled: list[bool], accept_at: int | None) -> None:
        self.settled, self.accept_at, self.calls, self.verified = settled, accept_at, [], 0

    def search(self, start: np.ndarray, effort: Effort) -> tuple[np.ndarray, bool]:
        self.calls.append(({Effort.FULL: "full", Effort.QUICK: "quick"}[effort], float(start[0])))
        return start + 1.0, self.settled[len(self.calls) - 1]

    def verify(self, x: np.ndarray) -> tuple[float, bool]:
        self.verified += 1
        return float(x[0]), self.verified - 1 == self.accept_at

    def accepted(self, found: tuple[float, bool]) -> bool:
        return found[1]

    def run(self, warm_start: bool = True, persist: bool = True) -> tuple[float, bool]:
        return search_in_passes(self, np.zeros(1), warm_start, persist)


def test_a_root_the_verification_accepts_ends_the_search_after_one_quick_pass():
    recorder = Recorder([True], accept_at=0)
    assert recorder.run() == (1.0, True)
    assert recorder.calls == [("quick", 0.0)]


def test_a_rejected_root_is_searched_again_quickly_from_the_best_iterate():
    recorder = Recorder([True, True], accept_at=1)
    assert recorder.run() == (2.0, True)
    assert recorder.calls == [("quick", 0.0), ("quick", 1.0)]


def test_the_full_map_is_searched_only_where_the_refreshed_search_settles_on_a_rejected_root():
    settled = Recorder([False, True, True], accept_at=None)
    assert settled.run() == (3.0, False)
    assert settled.calls == [("quick", 0.0), ("quick", 1.0), ("full", 2.0)]
    unsettled = Recorder([False, False], accept_at=None)
    assert unsettled.run() == (2.0, False)  # no root of the quick map: the full search would not find one
    assert unsettled.calls == [("quick", 0.0), ("quick", 1.0)]


@pytest.mark.parametrize("accept_at", [1, None])
def test_without_warm_starts_the_second_pass_is_the_full_one(accept_at):
    recorder = Recorder([True, True], accept_at=accept_at)
    assert recorder.run(warm_start=False) == (2.0, accept_at == 1)
    assert recorder.calls == [("quick", 0.0), ("full", 1.0)]


def test_a_search_that_may_give_way_ends_after_a_quick_pass_that_finds_no_root():
    """A seeded trial of an anchor search: no refreshed pass after a quick search that settles on no
    root, but one after a root the verification rejects (the quick map's warm start missed a basin)."""
    unsettled = Recorder([False, True], accept_at=1)
    assert unsettled.run(persist=False) == (1.0, False)
    assert unsettled.calls == [("quick", 0.0)]
    rejected = Recorder([True, True], accept_at=1)
    assert rejected.run(persist=False) == (2.0, True)
    assert rejected.calls == [("quick", 0.0), ("quick", 1.0)]
