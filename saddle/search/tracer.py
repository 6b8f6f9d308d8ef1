"""Branches over alpha: discovery from several anchors and continuation (THEORY.md sec. 4, 6).

A branch (an invariant subspace, :mod:`saddle.geometry.branches`) is searched for at several anchor
alphas (:class:`~attnphase.saddle.search.anchors.AnchorSearch`): first the largest, the smallest and the
middle alpha of the grid, then the middle of every stretch of the grid that no piece of the branch covers
yet, up to the tuning's ``max_anchors`` anchors in all, and one more for every end of a piece inside the
grid where the branch was lost (up to ``extra_anchors`` more: it may go on elsewhere): every end but the
merger of a piece of ``trusted_merge`` points or more into a more symmetric branch (a pitchfork). Every
anchor that lands on the branch (converged, and labelled with the branch's name) is continued both ways
until it meets a stretch already covered (the pieces join) or the branch ends; so a branch that exists
on only part of the range is found on that part, wherever it lies.

Each step is a :class:`~attnphase.saddle.search.continuation.Continuation` step in alpha (the first from an
anchor along the branch's tangent there). If it fails, the branch is followed in arclength from its last
two points (a piece of one point, from it and a point solved as far behind it as the target is ahead):
either the path crosses the target (continuation in alpha goes on from the point solved there, or, if no
solve converges at the target, from the first grid alpha beyond it where one does, and the target is
bridged: :meth:`BranchTracer.bridge`), or it turns back at a fold, whose alpha is recorded, and the
branch's other *sheet* is continued back in alpha from the first grid points the path reaches beyond the
fold (its points carry ``sheet`` one higher). Every end of a piece is recorded
(:class:`~attnphase.saddle.search.trace.BranchEnd`) with its kind: a fold where the piece turns back, a
merger when the branch converged onto a point whose defining overlaps vanish (a more symmetric branch,
as at a pitchfork; that point is not kept on this branch, whose label it does not carry), a failure when
it did not converge (the flagged point is kept, with the checks it failed). A grid alpha inside a piece
that no strategy reaches is recorded as a gap with its own reason.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import replace

import numpy as np

from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.arclength import ArcOutcome
from attnphase.saddle.search.continuation import Continuation
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import Anchor, BranchEnd, BranchTrace, EndKind, Gap
from attnphase.saddle.tuning import ContinuationTuning

PointCallback = Callable[[FixedPoint], None]
PointFinisher = Callable[[FixedPoint], FixedPoint]
AnchorFinder = Callable[[float, Branch], FixedPoint]


def anchor_alphas(grid: Sequence[float], covered: Iterable[float], tried: Iterable[float]) -> list[float]:
    """Where to anchor next: the largest, smallest and middle alpha of ``grid`` at first, then the middle
    of every maximal stretch of the grid neither ``covered`` nor ``tried``, longest first."""
    taken = set(covered) | set(tried)
    if not set(tried):
        return list(dict.fromkeys([grid[-1], grid[0], grid[len(grid) // 2]]))
    stretches, current = [], []
    for alpha in grid:
        if alpha in taken:
            if current:
                stretches.append(current)
            current = []
        else:
            current.append(alpha)
    if current:
        stretches.append(current)
    return [s[len(s) // 2] for s in sorted(stretches, key=len, reverse=True)]


class BranchTracer:
    """Traces the branch of ``continuation`` over a grid of alphas (module docstring), with the anchors,
    pieces and extra anchors ``tuning`` allows: first points from ``anchor`` (an anchor search), steps from
    ``continuation``, every point passed through ``finish`` (e.g. its stability assessment) and then to
    ``on_point``. :meth:`on` builds one on a solver."""

    def __init__(
        self,
        continuation: Continuation,
        anchor: AnchorFinder,
        tuning: ContinuationTuning,
        finish: PointFinisher | None = None,
        on_point: PointCallback | None = None,
    ) -> None:
        self.continuation, self.anchor, self.tuning = continuation, anchor, tuning
        self.branch = continuation.branch
        self.finish = finish or (lambda p: p)
        self.on_point = on_point or (lambda _p: None)
        self.grid: list[float] = []
        self.gaps: list[Gap] = []

    @classmethod
    def on(
        cls,
        solver: SaddlePointSolver,
        branch: Branch,
        anchor: AnchorFinder,
        finish: PointFinisher | None = None,
        on_point: PointCallback | None = None,
    ) -> BranchTracer:
        """The tracer of ``branch`` on ``solver`` (its continuation and tuning)."""
        return cls(Continuation(solver, branch), anchor, solver.tuning.continuation, finish, on_point)

    def trace(self, alphas: Iterable[float]) -> BranchTrace:
        """Every point of the branch at ``alphas`` that the anchors and their continuations find."""
        grid = self.grid = sorted({float(a) for a in alphas})
        self.gaps = []
        branch, tuning = self.branch, self.tuning
        covered: dict[float, FixedPoint] = {}
        points: dict[float, FixedPoint] = {}  # the anchors' sheets
        others: list[FixedPoint] = []  # the sheets beyond folds
        ends: list[BranchEnd] = []
        anchors: list[Anchor] = []
        tried: list[float] = []
        queue = anchor_alphas(grid, covered, tried)
        budget = tuning.max_anchors
        while len(tried) < budget:
            queue = [a for a in queue if a not in covered and a not in tried] or anchor_alphas(grid, covered, tried)
            if not queue:
                break
            alpha = queue.pop(0)
            tried.append(alpha)
            first = self.anchor(alpha, branch)
            anchor = self.finish(first) if first.branch == branch.name else first  # another branch's is not kept
            anchors.append(Anchor(alpha, anchor.branch if anchor.converged else None, anchor.status))
            if not self.continuation.on_branch(anchor):
                if not anchor.converged and anchor.branch == branch.name:  # kept, flagged: never silent
                    points[alpha] = anchor
                    self.on_point(anchor)
                continue
            self.on_point(anchor)
            covered[alpha] = points[alpha] = anchor
            slope = self.continuation.tangent(anchor)
            for direction in (-1, 1):
                targets = []
                for target in grid[::direction]:
                    if direction * (target - alpha) <= 0:
                        continue
                    if target in covered:  # another piece is there: the two join
                        break
                    targets.append(target)
                found, piece_ends = self.piece(anchor, targets, slope=slope)
                for point in found:
                    if point.sheet:
                        others.append(point)
                        continue
                    points[point.alpha] = point
                    if point.converged:
                        covered[point.alpha] = point
                ends.extend(piece_ends)
                # where a piece was lost inside the grid the branch may go on elsewhere: anchor once more
                on_piece = 1 + sum(1 for p in found if p.sheet == 0 and p.converged)
                lost = [e for e in piece_ends if not (e.kind is EndKind.MERGED and on_piece >= tuning.trusted_merge)]
                budget = min(budget + len(lost), tuning.max_anchors + tuning.extra_anchors)
        every = self.bridge([*points.values(), *others])
        return BranchTrace(branch.name, tuple(every), tuple(ends), tuple(anchors), tuple(self.gaps))

    def bridge(self, points: Sequence[FixedPoint]) -> list[FixedPoint]:
        """``points`` with every grid alpha that lies between two converged points of one sheet and has
        no point there filled where a strategy reaches it: a solve from the two neighbours' interpolation,
        then a step from the neighbour below and one from the neighbour above (each halved on failure, as
        continuation steps are). A grid alpha none reaches is recorded as a gap with its own reason, and the
        best attempt, where it is a point of the branch, is kept flagged with its checks (the rule's map may
        have no root to the acceptance there: a node's prox changing basin makes it jump). A step that
        fails for want of a better start thus never leaves a hole inside a branch's range."""
        found = list(points)
        for sheet in sorted({p.sheet for p in points}):
            on_sheet = {p.alpha: p for p in points if p.sheet == sheet}
            converged = sorted(a for a, p in on_sheet.items() if p.converged)
            for lo, hi in zip(converged, converged[1:], strict=False):
                for alpha in (a for a in self.grid if lo < a < hi and a not in on_sheet):
                    point = self._bridged(on_sheet[lo], on_sheet[hi], alpha)
                    if point.branch == self.branch.name:  # on the branch, or a flagged point of it
                        found.append(self._keep(point, sheet, []))
        return sorted(found, key=lambda p: (p.sheet, p.alpha))

    def _bridged(self, below: FixedPoint, above: FixedPoint, alpha: float) -> FixedPoint:
        """The branch's point at ``alpha`` between the converged points ``below`` and ``above`` (:meth:`bridge`),
        or the best attempt, the gap recorded with the checks it failed."""
        w = (alpha - below.alpha) / (above.alpha - below.alpha)
        between = (1.0 - w) * below.values + w * above.values
        attempts = [self.continuation.solve(alpha, between)]
        for side in (below, above):
            if self.continuation.on_branch(attempts[-1]):
                break
            attempts.append(self.continuation.step([side], alpha, None)[0])
        if self.continuation.on_branch(attempts[-1]):
            return attempts[-1]
        best = min(attempts, key=lambda p: p.residual)
        what = best.status if not best.converged else f"the solves converged onto the {best.branch} branch"
        reason = (
            f"the {self.branch.name} branch was not reached at alpha = {alpha:g} between its points at "
            f"alpha = {below.alpha:g} and {above.alpha:g} ({what})"
        )
        self.gaps.append(Gap(alpha, below.sheet, reason))
        return best

    def _keep(self, point: FixedPoint, sheet: int, found: list[FixedPoint]) -> FixedPoint:
        """``point`` on ``sheet``, finished, appended to ``found`` and handed on."""
        point = self.finish(replace(point, sheet=sheet))
        found.append(point)
        self.on_point(point)
        return point

    def piece(
        self,
        start: FixedPoint | Sequence[FixedPoint],
        targets: Sequence[float],
        sheet: int = 0,
        slope: np.ndarray | None = None,
    ) -> tuple[list[FixedPoint], list[BranchEnd]]:
        """Continue ``start`` (a point, or the last points of a piece) through ``targets`` (in order): the
        points found (on this sheet and, past a fold, on the next ones) and where the piece ended.
        ``slope``: the branch's direction ``dx/dalpha`` at a single ``start``, the first step's predictor."""
        history = [start] if isinstance(start, FixedPoint) else list(start)
        origin = history[-1].alpha
        direction = 1 if targets and targets[0] > origin else -1
        jacobian: np.ndarray | None = None
        found: list[FixedPoint] = []
        continuation, branch = self.continuation, self.branch
        remaining = list(targets)
        while remaining:
            target = remaining.pop(0)
            point, jacobian = continuation.step(history, target, jacobian, slope)
            failed = not continuation.on_branch(point) and not point.converged
            if failed and len(history) == 1:
                history = [*continuation.behind(history[0], target, slope), *history]
            if failed and len(history) >= 2:
                passage = continuation.past(history, self.grid or targets, direction)
                if passage.folded:
                    if point.branch == branch.name and direction * (passage.fold - target) > 0:
                        self._keep(point, sheet, found)  # the branch exists at the target, flagged there
                    more, ends = self._past_fold(history, passage, sheet)
                    return found + more, ends
                if passage.points:  # the branch goes on through the target, or (if no solve there converged) beyond
                    point, jacobian = passage.points[0], None
                    if point.alpha != target:
                        if point.alpha not in remaining:  # beyond this piece's targets: another piece is there
                            return found, []
                        remaining = remaining[remaining.index(point.alpha) + 1 :]
                elif passage.merged:
                    at = passage.merged_at if np.isfinite(passage.merged_at) else target
                    end = BranchEnd(history[-1].alpha, direction, EndKind.MERGED, at, passage.merged, sheet)
                    return found, [end]
            if not continuation.on_branch(point):
                if point.converged:
                    end = BranchEnd(history[-1].alpha, direction, EndKind.MERGED, point.alpha, point.branch, sheet)
                    return found, [end]
                if point.branch == branch.name:  # kept, flagged: non-convergence is never silent
                    self._keep(point, sheet, found)
                end = BranchEnd(history[-1].alpha, direction, EndKind.FAILED, point.alpha, point.status, sheet)
                return found, [end]
            history.append(self._keep(point, sheet, found))
        return found, []

    def _past_fold(
        self, history: Sequence[FixedPoint], passage: ArcOutcome, sheet: int
    ) -> tuple[list[FixedPoint], list[BranchEnd]]:
        """The points and ends past the fold that ``passage`` found after ``history``: the next sheet,
        continued back in alpha from the grid points the passage reached (up to the tuning's ``max_sheets``
        sheets), and the fold itself as the end of this piece."""
        direction = 1 if passage.fold > history[-1].alpha else -1
        back, nxt = -direction, sheet + 1
        returned = [self.finish(replace(p, sheet=nxt)) for p in passage.points]
        for point in returned:
            self.on_point(point)
        ends: list[BranchEnd] = []
        if returned and nxt < self.tuning.max_sheets:
            last = returned[-1].alpha
            targets = [a for a in self.grid[::back] if back * (a - last) > 0]
            more, ends = self.piece(returned, targets, nxt)
            returned += more
        elif passage.merged:
            at = passage.merged_at if np.isfinite(passage.merged_at) else passage.fold
            ends = [BranchEnd(passage.fold, back, EndKind.MERGED, at, passage.merged, nxt)]
        elif not returned:
            ends = [BranchEnd(passage.fold, back, EndKind.FAILED, passage.fold, passage.status, nxt)]
        where = ends[0].describe(self.branch.name) if ends else "its other sheet reaches the end of the grid"
        return returned, [BranchEnd(history[-1].alpha, direction, EndKind.FOLD, passage.fold, where, sheet), *ends]


def trace_branch(
    solver: SaddlePointSolver,
    branch: Branch,
    alphas: Iterable[float],
    on_point: PointCallback | None = None,
    finish: PointFinisher | None = None,
    anchor: AnchorFinder | None = None,
) -> BranchTrace:
    """:meth:`BranchTracer.trace` of ``branch`` on ``solver`` over ``alphas``; ``anchor``: the anchor search
    (by default an :class:`~attnphase.saddle.search.anchors.AnchorSearch` without rays on ``solver``)."""
    if anchor is None:
        from attnphase.saddle.search.anchors import AnchorSearch

        anchor = AnchorSearch(solver)
    return BranchTracer.on(solver, branch, anchor, finish, on_point).trace(alphas)
