"""The symmetry pattern of a point: which entries are zero, and which signed permutations of the
student's columns leave the order parameters unchanged (THEORY.md sec. 2, 6).

The envelope's symmetries at a point depend on its pattern alone, so the prox's fold is found once per
pattern (:class:`~attnphase.saddle.prox.folding.FoldFinder`), at two generic points of the pattern
(:meth:`SymmetryPatterns.generic_points`).
"""

from __future__ import annotations

import itertools
from functools import cached_property

import numpy as np

from attnphase.saddle.geometry.gauge import rotated
from attnphase.saddle.geometry.overlaps import OverlapGeometry

#: What the envelope's symmetries at a point depend on (:meth:`SymmetryPatterns.symmetry_pattern`).
SymmetryPattern = tuple[tuple[bool, ...], tuple[int, ...]]


class SymmetryPatterns:
    """Zero patterns, column stabilisers and generic points of the order parameters of ``geometry``."""

    def __init__(self, geometry: OverlapGeometry) -> None:
        self.geometry = geometry
        self.entries = geometry.layout.entries
        self.tuning = geometry.tuning

    def zero_pattern(self, params: np.ndarray) -> tuple[bool, ...]:
        """Which order parameters are zero, what the fold of the rule depends on: exactly, or for an
        entry a symmetry can flip (:meth:`OverlapGeometry.sign_scales`) within the tuning's ``rounding_zero``
        of its scale. A symmetry of the map can hold a single entry at zero inside a family that is not
        (the overlap with a mixture's cluster means next to a positional overlap; ``q_1_2`` and ``V_1_2``
        where the second student column's reflection is a symmetry); the iterations leave such an entry at
        the rounding level, where folding with the symmetry changes the integrals by as little. Counting it
        as non-zero would drop the fold there, and with it the average over the ties its reflection
        exchanges: the map would jump with the residue's sign."""
        tiny = np.abs(params) <= self.tuning.rounding_zero * self.geometry.sign_scales(params)
        return tuple(bool(v == 0 or small) for v, small in zip(params, tiny, strict=True))

    @cached_property
    def column_permutations(self) -> tuple[np.ndarray, ...]:
        """Every signed permutation matrix ``P`` of the student's columns but the identity: ``W -> W P``
        moves the order parameters as a rotation does (:func:`~attnphase.saddle.geometry.gauge.rotated`)."""
        rank = self.geometry.system.parameters.q[0].shape[0]
        matrices = []
        for columns in itertools.permutations(range(rank)):
            for signs in itertools.product((1.0, -1.0), repeat=rank):
                matrix = np.zeros((rank, rank))
                matrix[columns, range(rank)] = signs
                if not np.array_equal(matrix, np.eye(rank)):
                    matrices.append(matrix)
        return tuple(matrices)

    def column_stabiliser(self, params: np.ndarray) -> tuple[int, ...]:
        """The positions in :attr:`column_permutations` of the ``P`` that leave ``params`` unchanged: the
        entries of the zero pattern (:meth:`zero_pattern`) read as zero, and two entries ``P`` exchanges
        equal within the tuning's ``rounding_equal`` of the larger. Where ``P`` exchanges columns
        (``q_1_1 = q_2_2``, ``V_1_1 = V_2_2``), the envelope may be invariant under the exchange, and then
        the prox has tied minima on its mirror plane that only a fold with the exchange averages."""
        cleaned = np.where(self.zero_pattern(params), 0.0, params)
        equal = self.tuning.rounding_equal
        stabiliser = []
        for k, matrix in enumerate(self.column_permutations):
            moved = rotated(cleaned, self.entries, matrix)
            if np.all(np.abs(moved - cleaned) <= equal * np.maximum(np.abs(moved), np.abs(cleaned))):
                stabiliser.append(k)
        return tuple(stabiliser)

    def symmetry_pattern(self, params: np.ndarray) -> SymmetryPattern:
        """What the envelope's symmetries at ``params`` depend on: the zero pattern (:meth:`zero_pattern`)
        and the column stabiliser (:meth:`column_stabiliser`)."""
        return self.zero_pattern(params), self.column_stabiliser(params)

    def generic_points(self, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Two points with the zero pattern of ``params`` at which its symmetries are tested: every
        non-zero entry a symmetry can flip set to a fraction of its scale (keeping its sign) drawn at
        random for each entry, in the tuning's first ``generic_fractions`` range at the first point and
        its second at the second, the other non-zero entries perturbed at random by up to 10 %. (At
        ``params`` itself an entry that is non-zero but negligible, as on the way to a merger, would pass
        for zero and lend the pattern the symmetry that flips it, folding the rule wrongly; entries of one
        family set to the same fraction of the same scale would be equal, and lend the pattern the symmetry
        that exchanges them, as ``m_1 = m_2`` does the swap of two tokens whose encodings are exchanged.)
        Each point is then averaged over the column stabiliser of ``params`` (:meth:`column_stabiliser`),
        so that the entries it exchanges are equal there as at ``params``, and those alone."""
        zero = np.array(self.zero_pattern(params))
        stabiliser = [self.column_permutations[k] for k in self.column_stabiliser(params)]
        points = []
        for low, high in self.tuning.generic_fractions:
            point = params * rng.uniform(0.9, 1.0, params.size)
            # the diagonal first: the scales of the off-diagonal entries are read at the perturbed point
            scale = self.geometry.sign_scales(point)
            flipped = (scale != 0) & ~zero
            fractions = rng.uniform(low, high, params.size)
            point[flipped] = np.sign(params[flipped]) * fractions[flipped] * scale[flipped]
            point[zero] = 0.0
            if stabiliser:
                images = [rotated(point, self.entries, matrix) for matrix in stabiliser]
                point = np.mean([point, *images], axis=0)
            points.append(point)
        return points[0], points[1]
