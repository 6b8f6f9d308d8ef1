"""Branches: the invariant subspaces of the saddle-point map, named by the declaration (THEORY.md sec. 6).

Each overlap family of the replica system (:attr:`ReplicaSystem.overlap_families`) flips sign under a
symmetry of the equations, so holding any subset of them at zero is an invariant subspace: the
saddle-point map sends it into itself (the ``symmetry_defect`` of every point measures this). A
:class:`Branch` is such a subspace, searched for fixed points; it is named by the declaration's label
of a point at which exactly the families it leaves free are non-zero. A point found there is labelled
by what it converged to (:meth:`OverlapGeometry.label_of`), which may be a more symmetric label when
the free overlaps vanish (the branch has merged into a more symmetric one).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from attnphase.replica.saddle_equations import ReplicaSystem


@dataclass(frozen=True)
class Branch:
    """A family of fixed points: the overlap families held at zero (an invariant subspace of the
    equations) and its ``name`` (the declaration's label of the points with every other overlap family
    non-zero). Where the declaration has continuous rotations, ``gauge`` names the order-parameter
    entries held at zero to fix them (:meth:`ReplicaSystem.gauge`): not solved for, their equations enter
    each point's symmetry defect."""

    name: str
    zero: tuple[str, ...] = ()
    gauge: tuple[str, ...] = ()

    def contains(self, other: Branch) -> bool:
        """``other``'s subspace is this branch's with exactly one more overlap family held at zero."""
        return set(self.zero) < set(other.zero) and len(other.zero) == len(self.zero) + 1


def branches_of(system: ReplicaSystem) -> tuple[Branch, ...]:
    """One branch per subset of the system's overlap families held at zero, the most symmetric
    (every overlap zero) first and the one with none held at zero last."""
    families = system.overlap_families
    found = []
    for size in range(len(families), -1, -1):
        for zero in itertools.combinations(families, size):
            free = [f for f in families if f not in zero]
            found.append(Branch(system.label(free), zero=zero, gauge=system.gauge(free)))
    return tuple(found)
