"""The student's rotations acting on order parameters, and the gauge that fixes them (THEORY.md sec. 2).

Where the training loss is invariant under ``W -> W R`` for the rotations ``R = exp(sum_k s_k G_k)`` of a
declaration (:meth:`~attnphase.replica.declaration.AttentionModel.rotations`), the order parameters move
as ``q -> R^T q R``, ``V -> R^T V R``, ``m -> R^T m`` and ``theta -> theta R``, and so do the fixed points:
each is an orbit. A branch fixes the gauge by holding some entries at zero
(:meth:`~attnphase.replica.saddle_equations.ReplicaSystem.gauge`); a start that is off that slice (a ray's
point, an extrapolation) is first rotated onto it, which changes no observable.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.linalg
import scipy.optimize

from attnphase.replica.order_parameters import OrderParameter
from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.geometry.layout import ParameterLayout


def rotated(values: np.ndarray, entries: Sequence[OrderParameter], rotation: np.ndarray) -> np.ndarray:
    """The order parameters ``values`` (one per entry of ``entries``) of the weights ``W R``."""
    matrices: dict[tuple[str, int], np.ndarray] = {}
    size = rotation.shape[0]
    teacher_rank = 1 + max((e.entry[0] for e in entries if e.family == "theta"), default=0)
    shapes = {"q": (size, size), "V": (size, size), "m": (size, 1), "theta": (teacher_rank, size)}
    for value, e in zip(values, entries, strict=True):
        matrix = matrices.setdefault((e.family, e.group), np.zeros(shapes[e.family]))
        matrix[e.entry] = value
        if e.family in ("q", "V"):
            matrix[e.entry[::-1]] = value
    moved = {}
    for (family, group), matrix in matrices.items():
        if family in ("q", "V"):
            moved[(family, group)] = rotation.T @ matrix @ rotation
        elif family == "m":
            moved[(family, group)] = rotation.T @ matrix
        else:
            moved[(family, group)] = matrix @ rotation
    return np.array([moved[(e.family, e.group)][e.entry] for e in entries])


def into_gauge(
    values: np.ndarray,
    entries: Sequence[OrderParameter],
    generators: Sequence[np.ndarray],
    held: np.ndarray,
    angles: int,
) -> np.ndarray:
    """``values`` rotated so that the entries ``held`` (a boolean mask) vanish, as nearly as a rotation can
    make them: the least-squares rotation ``exp(sum_k s_k G_k)`` searched from ``angles`` equally spaced
    angles in ``[-pi, pi)`` along each generator; ``values`` itself when the held entries are zero already."""
    if not generators or not np.any(values[held]):
        return values

    def rotation(s: np.ndarray) -> np.ndarray:
        return scipy.linalg.expm(sum(sk * g for sk, g in zip(s, generators, strict=True)))

    def gauge_entries(s: np.ndarray) -> np.ndarray:
        return rotated(values, entries, rotation(s))[held]

    best, best_size = np.zeros(len(generators)), np.abs(values[held]).max()
    for k in range(len(generators)):
        for angle in np.linspace(-np.pi, np.pi, angles, endpoint=False):
            start = np.zeros(len(generators))
            start[k] = angle
            found = scipy.optimize.least_squares(gauge_entries, start, xtol=1e-15, ftol=1e-15, gtol=1e-15)
            size = np.abs(found.fun).max()
            if size < best_size:
                best, best_size = found.x, size
    return rotated(values, entries, rotation(best))


class Gauge:
    """The declaration's rotations (:meth:`~attnphase.replica.declaration.AttentionModel.rotations`) and the
    slice of a branch's gauge (:attr:`Branch.gauge`), on the order parameters laid out as ``layout``;
    the rotation onto a slice is searched from ``angles`` angles per generator."""

    def __init__(self, system: ReplicaSystem, layout: ParameterLayout, angles: int) -> None:
        self.layout, self.angles = layout, angles
        self.rotations = tuple(np.array(g.tolist(), dtype=float) for g in system.model.rotations())

    def onto(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """``values`` rotated onto the slice of the branch's gauge (:func:`into_gauge`): the same weights up
        to a rotation of the student's columns, so the same observables."""
        held = self.layout.gauge_mask(branch)
        return into_gauge(values, self.layout.entries, self.rotations, held, self.angles)
