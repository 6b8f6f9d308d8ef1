"""Branches over alpha: discovery from several anchors and continuation (THEORY.md sec. 4, 6).

A branch (an invariant subspace, :mod:`saddle.branches`) is searched for at several anchor alphas
(:meth:`SaddlePointSolver.anchor`): first the largest, the smallest and the middle alpha of the grid,
then the middle of every stretch of the grid that no piece of the branch covers yet, up to
``max_anchors`` anchors in all, and one more for every end of a piece inside the grid where the
branch was lost (up to ``EXTRA_ANCHORS`` more: it may go on elsewhere): every end but the merger of a
piece of ``TRUSTED_MERGE`` points or more into a more symmetric branch (a pitchfork). Every anchor that
lands on the branch (converged, and labelled with the branch's name) is continued both ways until it
meets a stretch already covered (the pieces join) or the branch ends; so a branch that exists on only
part of the range is found on that part, wherever it lies.

Each continuation step predicts the next point by quadratic extrapolation of the last three (the
first step from an anchor along the branch's tangent there, :meth:`SaddlePointSolver.tangent`) and
corrects it with the solver's root search (Newton's method with the map's Jacobian in closed form,
:class:`~attnphase.saddle.roots.RootFinder`). A failed step is retried from the last point, then halved (up to
``max_halvings`` times). If it still fails, the branch is followed in arclength from its last two
points (:mod:`saddle.arclength`; a piece of one point, from it and a point solved as far behind it as
the target is ahead): either the path crosses the target (the step failed for want of a
better start, and continuation in alpha goes on from the point solved there, or at the next grid
alpha if no solve converges at the target), or it turns back at a fold, whose alpha is recorded, and the branch's other
*sheet* is continued back in alpha from the first grid points the path reaches beyond the fold
(its points carry ``sheet`` one higher). Every end of a piece is recorded (:class:`BranchEnd`)
with its kind: ``fold`` where the piece turns back (``at`` is the fold's alpha), ``merged`` when
the branch converged onto a point whose defining overlaps vanish (a more symmetric branch, as at a
pitchfork; that point is not kept on this branch, whose label it does not carry), ``failed`` when
it did not converge (the flagged point is kept, with the checks it failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from attnphase.saddle.arclength import continue_past
from attnphase.saddle.branches import Branch
from attnphase.saddle.extrapolation import lagrange
from attnphase.saddle.fixed_point import FixedPoint
from attnphase.saddle.solver import SaddlePointSolver

PointCallback = Callable[[FixedPoint], None]
PointFinisher = Callable[[FixedPoint], FixedPoint]
MAX_RELATIVE_STEP = 0.5  # |delta alpha| / alpha of one continuation step
#: Anchors tried per branch by default: both ends and the middle of the grid (one more in a gap
#: where the middle is covered).
MAX_ANCHORS = 3
#: More anchors where a branch was lost: one for every end of a piece inside the grid, up to this many.
EXTRA_ANCHORS = 2
#: A piece of at least this many points that merges into a more symmetric branch ends there: the
#: step that merged started from a quadratic extrapolation of the piece and was halved, so the
#: merger is a pitchfork, not a lost branch, and earns no extra anchor. (From a shorter piece the
#: prediction is linear at best, and a merger may be a step that fell short of a steep branch.)
TRUSTED_MERGE = 3
MERGED, FAILED, FOLD = "merged", "failed", "fold"
#: Sheets followed past folds from one anchor (each fold adds one).
MAX_SHEETS = 3


@dataclass(frozen=True)
class BranchEnd:
    """Where a piece of a branch could not be continued: its last point is at ``alpha``; the step
    towards ``at`` (below ``alpha`` if ``direction`` is -1, above if +1) ``merged`` into the branch
    named in ``detail`` or ``failed`` with the checks named in ``detail``; or the piece turns back at
    a ``fold`` at ``at`` (``detail`` says where its other sheet went). ``sheet``: the piece's sheet."""

    alpha: float
    direction: int
    kind: str
    at: float
    detail: str
    sheet: int = 0

    def describe(self, branch: str) -> str:
        """One sentence: where and why the branch ended."""
        side = "below" if self.direction < 0 else "above"
        if self.kind == FOLD:
            return f"the {branch} branch turns back at a fold at alpha = {self.at:.6g} ({self.detail})"
        if self.kind == MERGED:
            how = f"it merges into the {self.detail} branch at alpha = {self.at:g}"
        else:
            how = f"at alpha = {self.at:g}: {self.detail}"
        return f"the {branch} branch could not be continued {side} alpha = {self.alpha:g} ({how})"


@dataclass(frozen=True)
class Anchor:
    """An anchor search at ``alpha`` and what it found: ``found`` is the label of the point it
    converged to, or ``None`` if it did not converge (``status`` then says why)."""

    alpha: float
    found: str | None
    status: str

    def describe(self) -> str:
        """``at alpha = a`` and what was found there."""
        found = f"the {self.found} branch" if self.found else f"no fixed point ({self.status})"
        return f"at alpha = {self.alpha:g} {found}"


@dataclass(frozen=True)
class BranchTrace:
    """The points of one branch over alpha, where its pieces ended, and the anchors tried."""

    branch: str
    points: tuple[FixedPoint, ...]
    ends: tuple[BranchEnd, ...] = ()
    anchors: tuple[Anchor, ...] = ()

    def converged(self) -> tuple[FixedPoint, ...]:
        """The points of the trace that converged."""
        return tuple(p for p in self.points if p.converged)

    def missing(self, alphas: Iterable[float]) -> dict[float, str]:
        """Why the branch has no point at each of ``alphas`` that it has no point at: the nearest end
        of a piece beyond which the alpha lies, or what the anchors found if no piece reaches it."""
        have = {p.alpha for p in self.points}
        reasons = {}
        for alpha in sorted({float(a) for a in alphas} - have):
            beyond = [e for e in self.ends if e.direction * (alpha - e.alpha) > 0]
            if beyond:
                end = min(beyond, key=lambda e: abs(alpha - e.alpha))
                reasons[alpha] = end.describe(self.branch)
            elif self.anchors:
                found = "; ".join(a.describe() for a in self.anchors)
                reasons[alpha] = f"the {self.branch} branch was not found (anchor searches found {found})"
            else:
                reasons[alpha] = "not computed"
        return reasons


def _sweep(
    solver: SaddlePointSolver,
    branch: Branch,
    start: FixedPoint | Sequence[FixedPoint],
    targets: Sequence[float],
    on_point: PointCallback,
    max_halvings: int,
    finish: PointFinisher,
    grid: Sequence[float] = (),
    sheet: int = 0,
    slope: np.ndarray | None = None,
) -> tuple[list[FixedPoint], list[BranchEnd]]:
    """Continue ``start`` (a point, or the last points of a piece) through ``targets`` (in order);
    the points found (on this sheet and, past a fold, on the next ones: ``grid`` is where those are
    sought) and where the piece ended. ``slope``: the branch's direction ``dx/dalpha`` at a single
    ``start`` (:meth:`SaddlePointSolver.tangent`), the first step's predictor."""
    history = [start] if isinstance(start, FixedPoint) else list(start)
    origin = history[-1].alpha
    direction = 1 if targets and targets[0] > origin else -1
    jacobian: np.ndarray | None = None
    found: list[FixedPoint] = []

    def keep(point: FixedPoint) -> FixedPoint:
        point = finish(replace(point, sheet=sheet))
        found.append(point)
        on_point(point)
        return point

    remaining = list(targets)
    while remaining:
        target = remaining.pop(0)
        point, jacobian = _step(solver, branch, history, target, jacobian, max_halvings, slope)
        failed = not solver.on_branch(point, branch) and not point.converged
        if failed and len(history) == 1:
            history = [*_behind(solver, branch, history[0], target, slope), *history]
        if failed and len(history) >= 2:
            passage = continue_past(solver, branch, history, grid or targets, direction)
            if passage.folded:
                if point.branch == branch.name and direction * (passage.fold - target) > 0:
                    keep(point)  # the branch exists at the target, but did not converge there: kept, flagged
                more, ends = _past_fold(solver, branch, history, passage, on_point, max_halvings, finish, grid, sheet)
                return found + more, ends
            if passage.points:  # the branch goes on through the target, or (if no solve there converged) beyond it
                point, jacobian = passage.points[0], None
                if point.alpha != target:
                    if point.alpha not in remaining:  # beyond this piece's targets: another piece is there
                        return found, []
                    remaining = remaining[remaining.index(point.alpha) + 1 :]
            elif passage.merged:
                at = passage.merged_at if np.isfinite(passage.merged_at) else target
                return found, [BranchEnd(history[-1].alpha, direction, MERGED, at, passage.merged, sheet)]
        if not solver.on_branch(point, branch):
            if point.converged:
                return found, [BranchEnd(history[-1].alpha, direction, MERGED, point.alpha, point.branch, sheet)]
            if point.branch == branch.name:  # kept, flagged: non-convergence is never silent
                keep(point)
            return found, [BranchEnd(history[-1].alpha, direction, FAILED, point.alpha, point.status, sheet)]
        history.append(keep(point))
    return found, []


def _behind(
    solver: SaddlePointSolver, branch: Branch, point: FixedPoint, target: float, slope: np.ndarray | None
) -> list[FixedPoint]:
    """A point of ``branch`` as far behind ``point`` in alpha as ``target`` is ahead of it (half-way
    to alpha = 0 if that is nearer), predicted along the branch's ``slope`` there; empty if that
    solve leaves the branch. With it a piece of a single point (an anchor whose first step failed)
    can be followed in arclength, which tells a fold between the two from a failure. It is not kept."""
    back = point.alpha - (target - point.alpha)
    back = back if back > 0 else 0.5 * point.alpha
    behind, _ = solver.solve(back, branch, initial=_predict([point], back, slope), error_check=False)
    return [behind] if solver.on_branch(behind, branch) else []


def _past_fold(solver, branch, history, passage, on_point, max_halvings, finish, grid, sheet):
    """The points and ends past the fold that ``passage`` found after ``history``: the next sheet,
    continued back in alpha from the grid points the passage reached (up to ``MAX_SHEETS`` sheets),
    and the fold itself as the end of this piece."""
    direction = 1 if passage.fold > history[-1].alpha else -1
    back, nxt = -direction, sheet + 1
    returned = [finish(replace(p, sheet=nxt)) for p in passage.points]
    for point in returned:
        on_point(point)
    ends: list[BranchEnd] = []
    if returned and nxt < MAX_SHEETS:
        last = returned[-1].alpha
        targets = [a for a in grid[::back] if back * (a - last) > 0]
        more, ends = _sweep(solver, branch, returned, targets, on_point, max_halvings, finish, grid, nxt)
        returned += more
    elif passage.merged:
        at = passage.merged_at if np.isfinite(passage.merged_at) else passage.fold
        ends = [BranchEnd(passage.fold, back, MERGED, at, passage.merged, nxt)]
    elif not returned:
        ends = [BranchEnd(passage.fold, back, FAILED, passage.fold, passage.status, nxt)]
    where = ends[0].describe(branch.name) if ends else "its other sheet reaches the end of the grid"
    return returned, [BranchEnd(history[-1].alpha, direction, FOLD, passage.fold, where, sheet), *ends]


def _step(solver, branch, history, target, jacobian, max_halvings, slope=None):
    """Continue from ``history[-1]`` to ``target``, halving the step on failure. Steps that
    change alpha by more than ``MAX_RELATIVE_STEP`` go through intermediate points first.
    ``slope``: the branch's direction at ``history[0]``, the predictor while the history is that
    point alone (:func:`_predict`)."""
    last = history[-1]
    if abs(target - last.alpha) > MAX_RELATIVE_STEP * min(target, last.alpha):
        middle = float(np.sqrt(target * last.alpha))
        mid_point, mid_jac = _step(solver, branch, history, middle, jacobian, max_halvings, slope)
        if not solver.on_branch(mid_point, branch):
            return mid_point, mid_jac
        history = [*history, mid_point]
        last = mid_point
        jacobian = mid_jac
    predicted = _predict(history, target, slope)
    point, jac = solver.solve(target, branch, initial=predicted, jacobian=jacobian)
    if solver.on_branch(point, branch):
        return point, jac
    point, jac = solver.solve(target, branch, initial=last.values)
    if solver.on_branch(point, branch) or point.converged or max_halvings == 0:
        return point, jac  # a fixed point off the branch from both starts: it has merged
    middle = 0.5 * (last.alpha + target)
    mid_point, mid_jac = _step(solver, branch, history, middle, None, max_halvings - 1, slope)
    if not solver.on_branch(mid_point, branch):
        return point, jac
    return _step(solver, branch, [*history, mid_point], target, mid_jac, max_halvings - 1)


def _predict(history: Sequence[FixedPoint], target: float, slope: np.ndarray | None = None) -> np.ndarray:
    """Lagrange extrapolation through the last (up to three) points of the branch; from a single
    point, along its ``slope`` ``dx/dalpha`` if known (else the point itself)."""
    if len(history) == 1 and slope is not None:
        return history[0].values + (target - history[0].alpha) * slope
    recent = history[-3:]
    return lagrange([p.alpha for p in recent], [p.values for p in recent], target)


def anchor_alphas(grid: Sequence[float], covered: Iterable[float], tried: Iterable[float]) -> list[float]:
    """Where to anchor next: the largest, smallest and middle alpha of ``grid`` at first, then the
    middle of every maximal stretch of the grid neither ``covered`` nor ``tried``, longest first."""
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


def trace_branch(
    solver: SaddlePointSolver,
    branch: Branch,
    alphas: Iterable[float],
    on_point: PointCallback | None = None,
    max_halvings: int = 2,
    max_anchors: int = MAX_ANCHORS,
    finish: PointFinisher | None = None,
    anchor: Callable[[float], FixedPoint] | None = None,
) -> BranchTrace:
    """Every point of ``branch`` at ``alphas`` that anchors at up to ``max_anchors`` alphas and their
    continuations find (module docstring). Every point of the trace is passed through ``finish``
    (e.g. to assess its stability) and then to ``on_point``. ``anchor``: the search for a first point
    at an alpha (by default :meth:`SaddlePointSolver.anchor`)."""
    grid = sorted({float(a) for a in alphas})
    notify = on_point or (lambda _p: None)
    finish = finish or (lambda p: p)
    search = anchor or (lambda a: solver.anchor(a, branch))
    covered: dict[float, FixedPoint] = {}
    points: dict[float, FixedPoint] = {}  # the anchors' sheets
    others: list[FixedPoint] = []  # the sheets beyond folds
    ends: list[BranchEnd] = []
    anchors: list[Anchor] = []
    tried: list[float] = []
    queue = anchor_alphas(grid, covered, tried)
    budget = max_anchors
    while len(tried) < budget:
        queue = [a for a in queue if a not in covered and a not in tried] or anchor_alphas(grid, covered, tried)
        if not queue:
            break
        alpha = queue.pop(0)
        tried.append(alpha)
        first = search(alpha)
        anchor = finish(first) if first.branch == branch.name else first  # another branch's is not kept
        anchors.append(Anchor(alpha, anchor.branch if anchor.converged else None, anchor.status))
        if not solver.on_branch(anchor, branch):
            if not anchor.converged and anchor.branch == branch.name:  # kept, flagged: never silent
                points[alpha] = anchor
                notify(anchor)
            continue
        notify(anchor)
        covered[alpha] = points[alpha] = anchor
        slope = solver.tangent(anchor, branch)
        for direction in (-1, 1):
            targets = []
            for target in grid[::direction]:
                if direction * (target - alpha) <= 0:
                    continue
                if target in covered:  # another piece is there: the two join
                    break
                targets.append(target)
            found, piece_ends = _sweep(
                solver, branch, anchor, targets, notify, max_halvings, finish, grid=grid, slope=slope
            )
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
            lost = [e for e in piece_ends if not (e.kind == MERGED and on_piece >= TRUSTED_MERGE)]
            budget = min(budget + len(lost), max_anchors + EXTRA_ANCHORS)
    every = sorted([*points.values(), *others], key=lambda p: (p.sheet, p.alpha))
    return BranchTrace(branch.name, tuple(every), tuple(ends), tuple(anchors))
