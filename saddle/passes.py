"""The passes of every root search on the saddle-point map: quick prox starts first, all of them last
(THEORY.md sec. 4).

An evaluation of the map with every prox start (:meth:`SaddleMap.prox`, ``thorough``) costs several
quick ones (``+-omega`` and the last thorough prox of the same zero pattern), ten times as many beyond
two prox coordinates, where random start directions are added. So a root is sought on the quick map
and *verified* with every start. If the verification fails, the quick search is repeated from its
best point (``refreshed``: its warm start is now the verification's prox, so the quick map agrees with
the full one there); only if that search settles on a root of the quick map that the verification
still rejects (the extra starts find lower minima there) is the search repeated on the full map.
Without warm starts the second pass is the full one. A search that may give way (``persist`` off: a
seeded trial of an anchor search, :meth:`SaddlePointSolver.anchor`, which the next seed or a ray
follows) ends after a quick pass that settles on no root of the quick map: the refreshed pass
repairs a quick map whose warm start misses basins near a root, not a start from which Newton's
method finds none. The fixed points
(:meth:`SaddlePointSolver.solve`), the constrained points (:class:`~attnphase.saddle.landscape.ConstrainedSolver`)
and the arclength corrector (:mod:`saddle.arclength`) all search this way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

QUICK, REFRESHED, THOROUGH = "quick", "refreshed", "thorough"

Verified = TypeVar("Verified")
#: ``search(start, thorough) -> (x, settled)``: the best iterate of a root search from ``start`` on the
#: quick or the full map, and whether it met the root finder's tolerance there.
Search = Callable[[np.ndarray, bool], tuple[np.ndarray, bool]]


def search_in_passes(
    search: Search,
    verify: Callable[[np.ndarray], Verified],
    accepted: Callable[[Verified], bool],
    start: np.ndarray,
    warm_start: bool,
    persist: bool = True,
) -> Verified:
    """The verified result (``verify(x)``, with every prox start) of the first pass whose result is
    ``accepted``, or of the last pass run (module docstring): quick, then refreshed (or full, without
    ``warm_start``), then full if the refreshed search settled on a root the verification rejected.
    Without ``persist``, a quick pass that settles on no root is the last."""
    passes = [QUICK, REFRESHED if warm_start else THOROUGH]
    while True:
        kind = passes.pop(0)
        x, settled = search(start, kind == THOROUGH)
        verified = verify(x)
        if accepted(verified) or (kind == QUICK and not settled and not persist):
            return verified
        if kind == REFRESHED and settled:
            passes.append(THOROUGH)
        if not passes:
            return verified
        start = x
