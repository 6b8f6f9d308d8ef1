"""What tracing a branch over alpha found: its points, where its pieces ended, the anchors tried, and
the grid alphas inside a piece that no strategy reached (THEORY.md sec. 6)."""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass

from attnphase.saddle.points.fixed_point import FixedPoint


class EndKind(enum.StrEnum):
    """How a piece of a branch ended."""

    FOLD = "fold"  # the piece turns back in alpha: a saddle-node, its other sheet continued back
    MERGED = "merged"  # it converged onto a more symmetric branch (a pitchfork)
    FAILED = "failed"  # it did not converge


@dataclass(frozen=True)
class BranchEnd:
    """Where a piece of a branch could not be continued: its last point is at ``alpha``; the step
    towards ``at`` (below ``alpha`` if ``direction`` is -1, above if +1) merged into the branch named in
    ``detail`` or failed with the checks named in ``detail``; or the piece turns back at a fold at ``at``
    (``detail`` says where its other sheet went). ``sheet``: the piece's sheet."""

    alpha: float
    direction: int
    kind: EndKind
    at: float
    detail: str
    sheet: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", EndKind(self.kind))

    def describe(self, branch: str) -> str:
        """One sentence: where and why the branch ended."""
        side = "below" if self.direction < 0 else "above"
        if self.kind is EndKind.FOLD:
            return f"the {branch} branch turns back at a fold at alpha = {self.at:.6g} ({self.detail})"
        if self.kind is EndKind.MERGED:
            how = f"it merges into the {self.detail} branch at alpha = {self.at:g}"
        else:
            how = f"at alpha = {self.at:g}: {self.detail}"
        return f"the {branch} branch could not be continued {side} alpha = {self.alpha:g} ({how})"


@dataclass(frozen=True)
class Anchor:
    """An anchor search at ``alpha`` and what it found: ``found`` is the label of the point it converged
    to, or ``None`` if it did not converge (``status`` then says why)."""

    alpha: float
    found: str | None
    status: str

    def describe(self) -> str:
        """``at alpha = a`` and what was found there."""
        found = f"the {self.found} branch" if self.found else f"no fixed point ({self.status})"
        return f"at alpha = {self.alpha:g} {found}"


@dataclass(frozen=True)
class Gap:
    """A grid ``alpha`` between two points of one piece (on ``sheet``) that no strategy of the tracer
    reached, and why (``reason``)."""

    alpha: float
    sheet: int
    reason: str


@dataclass(frozen=True)
class BranchTrace:
    """The points of one branch over alpha, where its pieces ended, the anchors tried, and the gaps."""

    branch: str
    points: tuple[FixedPoint, ...]
    ends: tuple[BranchEnd, ...] = ()
    anchors: tuple[Anchor, ...] = ()
    gaps: tuple[Gap, ...] = ()

    def converged(self) -> tuple[FixedPoint, ...]:
        """The points of the trace that converged."""
        return tuple(p for p in self.points if p.converged)

    def missing(self, alphas: Iterable[float]) -> dict[float, str]:
        """Why the branch has no point at each of ``alphas`` that it has no point at: a gap's own reason,
        else the nearest end of a piece beyond which the alpha lies, or what the anchors found if no piece
        reaches it."""
        have = {p.alpha for p in self.points}
        gaps = {g.alpha: g.reason for g in self.gaps}
        reasons = {}
        for alpha in sorted({float(a) for a in alphas} - have):
            beyond = [e for e in self.ends if e.direction * (alpha - e.alpha) > 0]
            if alpha in gaps:
                reasons[alpha] = gaps[alpha]
            elif beyond:
                end = min(beyond, key=lambda e: abs(alpha - e.alpha))
                reasons[alpha] = end.describe(self.branch)
            elif self.anchors:
                found = "; ".join(a.describe() for a in self.anchors)
                reasons[alpha] = f"the {self.branch} branch was not found (anchor searches found {found})"
            else:
                reasons[alpha] = "not computed"
        return reasons
