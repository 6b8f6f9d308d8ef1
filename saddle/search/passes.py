"""The passes of every root search on the saddle-point map: quick prox starts first, the full ones last
(THEORY.md sec. 4).

An evaluation of the map with the full prox costs several quick ones (``+-omega`` and the last full prox
of the same zero pattern), ten times as many beyond two prox coordinates, where random start directions
are added. So a root is sought on the quick map and *verified* with the full prox. If the verification
fails, the quick search is repeated from its best point (:attr:`Pass.REFRESHED`: its warm start is now the
verification's prox, so the quick map agrees with the full one there); only if that search settles on a
root of the quick map that the verification still rejects (the full starts find lower minima there) is
the search repeated on the full map. Without warm starts the second pass is the full one. A search that
may give way (a seeded trial of an anchor search, which the next seed or a ray follows) ends after a
quick pass that settles on no root: the refreshed pass repairs a quick map whose warm start misses basins
near a root, not a start from which Newton's method finds none. The fixed points, the constrained points
and the arclength corrector all search this way.
"""

from __future__ import annotations

import enum
from typing import Protocol, TypeVar

import numpy as np

from attnphase.saddle.prox.policy import Effort


class Pass(enum.Enum):
    """A pass of a root search, and the prox it runs on."""

    QUICK = "quick"
    REFRESHED = "refreshed"  # quick again, warm-started from the verification's prox
    FULL = "full"

    @property
    def effort(self) -> Effort:
        """The prox of the pass's evaluations."""
        return Effort.FULL if self is Pass.FULL else Effort.QUICK


Verified = TypeVar("Verified")


class PassedSearch(Protocol[Verified]):
    """A root search run in passes (:func:`search_in_passes`); it keeps its own state between passes (the
    evaluations made, the last Jacobian estimate)."""

    def search(self, start: np.ndarray, effort: Effort) -> tuple[np.ndarray, bool]:
        """The best iterate of a root search from ``start`` on the quick or the full map, and whether it met
        the root finder's tolerance there."""
        ...

    def verify(self, x: np.ndarray) -> Verified:
        """The iterate ``x`` observed with the full prox and every check."""
        ...

    def accepted(self, verified: Verified) -> bool:
        """Whether the verified result is what the search is for."""
        ...


def search_in_passes(
    searcher: PassedSearch[Verified], start: np.ndarray, warm_start: bool, persist: bool = True
) -> Verified:
    """The verified result of the first pass of ``searcher`` whose result it accepts, or of the last pass run
    (module docstring): quick, then refreshed (or full, without ``warm_start``), then full if the refreshed
    search settled on a root the verification rejected. Without ``persist``, a quick pass that settles on
    no root is the last."""
    passes = [Pass.QUICK, Pass.REFRESHED if warm_start else Pass.FULL]
    while True:
        kind = passes.pop(0)
        x, settled = searcher.search(start, kind.effort)
        verified = searcher.verify(x)
        if searcher.accepted(verified) or (kind is Pass.QUICK and not settled and not persist):
            return verified
        if kind is Pass.REFRESHED and settled:
            passes.append(Pass.FULL)
        if not passes:
            return verified
        start = x
