"""Seeded starts of a branch's first point (THEORY.md sec. 6): a branch's free overlap families set to
fractions of their Cauchy-Schwarz bounds, on each way of putting them on the student's columns."""

from __future__ import annotations

import itertools
from collections.abc import Mapping

import numpy as np

from attnphase.replica.declaration import OVERLAP_FAMILIES
from attnphase.replica.order_parameters import OrderParameter
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.geometry.overlaps import OverlapGeometry, column_of


def _seedable(entry: OrderParameter, branch: Branch) -> bool:
    """``entry`` is an entry a seed may set on ``branch``: of a free overlap family, not held by the
    gauge, and of the first teacher direction (every positional direction for ``m``)."""
    free_overlap = entry.family in OVERLAP_FAMILIES and entry.family not in branch.zero
    return free_overlap and entry.name not in branch.gauge and (entry.family == "m" or entry.entry[0] == 0)


class Seeds:
    """Seeded starts on the order parameters of ``geometry``."""

    def __init__(self, geometry: OverlapGeometry) -> None:
        self.geometry = geometry
        self.layout = geometry.layout

    def columns(self, branch: Branch) -> list[dict[str, int]]:
        """The ways to put the seeds of the branch's free overlap families on student columns
        (:meth:`seeded`): the first column for every family first (the only way at rank 1), then each
        assignment of the families to distinct columns whose seeded entries the branch's gauge does not
        hold at zero (a student that fits the positions with one column and the teacher with another).
        At rank 2 the mixed branch has two: ``m`` and ``theta`` on the first column, or ``theta`` on the
        second; a branch with one free family has one."""
        families = self.layout.free_families(branch)
        seedable = [e for e in self.layout.entries if _seedable(e, branch)]
        choices = [sorted({column_of(e) for e in seedable if e.family == family}) for family in families]
        first = tuple(0 for _ in families)
        combinations = itertools.product(*choices) if len(families) > 1 else ()
        distinct = [c for c in combinations if c != first and len(set(c)) == len(c)]
        return [dict(zip(families, combination, strict=True)) for combination in (first, *distinct)]

    def seeded(
        self, base: np.ndarray, branch: Branch, strength: float, columns: Mapping[str, int] | None = None
    ) -> np.ndarray:
        """``base`` with one entry of each of the branch's free overlap families set to ``strength``
        times its Cauchy-Schwarz bound (:meth:`OverlapGeometry.overlap_bounds`): the entry of the family's
        first teacher direction (every positional direction for ``m``) on the student column
        ``columns[family]`` (default: the first, the family's leading entry)."""
        columns = columns or {}
        x = base.copy()
        bound = self.geometry.overlap_bounds(base)
        for i, e in enumerate(self.layout.entries):
            if bound[i] and _seedable(e, branch) and column_of(e) == columns.get(e.family, 0):
                x[i] = strength * bound[i]
        return x
