"""The layout of the order-parameter vector of one replica system (THEORY.md sec. 2): the name and
family of each entry, and which entries a branch leaves free.

Every vector of order parameters (and of conjugates) in :mod:`attnphase.saddle` is ordered as
``ReplicaSystem.entries``; a :class:`ParameterLayout` answers the questions that need that order
and nothing else (no constants, no quadrature).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np

from attnphase.replica.order_parameters import OrderParameter
from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.geometry.branches import Branch


class ParameterLayout:
    """The entries of ``system``'s order parameters: names, families and masks."""

    def __init__(self, system: ReplicaSystem) -> None:
        self.entries: tuple[OrderParameter, ...] = tuple(system.entries)
        self.names: tuple[str, ...] = tuple(e.symbol.name for e in self.entries)
        self.conjugate_names: tuple[str, ...] = tuple(e.conjugate.name for e in self.entries)
        self.families = np.array([e.family for e in self.entries])
        self.overlap_families: tuple[str, ...] = tuple(system.overlap_families)
        self.q_entries = self.families == "q"
        self.responses = self.families == "V"

    @cached_property
    def overlap_entries(self) -> np.ndarray:
        """The indices of the overlap entries (the families of ``ReplicaSystem.overlap_families``)."""
        return np.flatnonzero(np.isin(self.families, self.overlap_families))

    def index(self, name: str) -> int:
        """The position of the entry called ``name``."""
        return self.names.index(name)

    def vanishes(self, values: np.ndarray) -> bool:
        """The student vanishes at ``values`` (W = 0): every entry of every ``q`` is zero."""
        return bool(np.all(values[self.q_entries] == 0))

    def gauge_mask(self, branch: Branch) -> np.ndarray:
        """True for the entries ``branch`` holds at zero to fix the gauge of the declaration's rotations."""
        return np.isin(self.names, branch.gauge)

    def free_mask(self, branch: Branch) -> np.ndarray:
        """True for the entries ``branch`` holds at zero neither by a family nor by its gauge."""
        return ~np.isin(self.families, branch.zero) & ~self.gauge_mask(branch)

    def moved_entries(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """The entries a solve from ``values`` on ``branch`` moves: the branch's free ones, and at a
        vanishing student only the responses among them (W = 0 stays W = 0: an invariant set of F)."""
        free = self.free_mask(branch)
        return free & self.responses if self.vanishes(values) else free

    def free_families(self, branch: Branch) -> tuple[str, ...]:
        """The overlap families that are free on ``branch``."""
        return tuple(f for f in self.overlap_families if f not in branch.zero)
