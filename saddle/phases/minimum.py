"""The global minimum over branches and its changes along the alpha grid (THEORY.md sec. 5, 6)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.trace import BranchTrace


@dataclass(frozen=True)
class Transition:
    """A change of the global minimum between two neighbouring alphas of the grid: from the branch
    ``before`` (lowest training loss at ``below``) to ``after`` (lowest at ``above``)."""

    below: float
    above: float
    before: str
    after: str


def transitions(traces: Sequence[BranchTrace]) -> tuple[Transition, ...]:
    """Every change of the global minimum's branch between neighbouring alphas (:func:`global_minimum`)."""
    best = global_minimum(traces)
    alphas = list(best)
    return tuple(
        Transition(a, b, best[a].branch, best[b].branch)
        for a, b in zip(alphas, alphas[1:], strict=False)
        if best[a].branch != best[b].branch
    )


def global_minimum(traces: Sequence[BranchTrace]) -> dict[float, FixedPoint]:
    """At every alpha, the converged point with the lowest training loss; an alpha where a flagged point
    (one that did not converge) has a lower training loss still is left out: the minimum there is not
    known."""
    best: dict[float, FixedPoint] = {}
    for trace in traces:
        for p in trace.converged():
            if p.alpha not in best or p.train_loss < best[p.alpha].train_loss:
                best[p.alpha] = p
    unknown = {
        p.alpha
        for trace in traces
        for p in trace.points
        if not p.converged and p.alpha in best and p.train_loss < best[p.alpha].train_loss
    }
    return {alpha: point for alpha, point in sorted(best.items()) if alpha not in unknown}
