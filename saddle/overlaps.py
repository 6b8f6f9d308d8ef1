"""The geometry of the order parameters of one compiled model at given constants (THEORY.md sec. 2, 6):
their Cauchy-Schwarz bounds, their domain, the label of a point by the overlap families that do not
vanish there, the vanishing student, and the branches' free entries and gauge.

An :class:`OverlapGeometry` reads the declaration's structure (``ReplicaSystem.entries``) and the
constants' values; it knows no quadrature and evaluates no integral.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from functools import cached_property

import numpy as np

from attnphase.replica.declaration import OVERLAP_FAMILIES
from attnphase.replica.order_parameters import OrderParameter
from attnphase.saddle.branches import Branch
from attnphase.saddle.compiled import CompiledSystem
from attnphase.saddle.gauge import into_gauge, rotated

#: What the envelope's symmetries at a point depend on (:meth:`OverlapGeometry.symmetry_pattern`).
SymmetryPattern = tuple[tuple[bool, ...], tuple[int, ...]]

#: An overlap family counts as non-zero at a point when an entry exceeds this fraction of its bound.
NEGLIGIBLE_OVERLAP = 1e-3

#: An entry a symmetry can flip at most this fraction of its scale (:meth:`OverlapGeometry.sign_scales`) counts as
#: zero in a point's zero pattern (:meth:`OverlapGeometry.zero_pattern`): rounding residue, far below any entry
#: on its way to zero.
ROUNDING_ZERO = 1e-13

#: Two entries a signed permutation of the student's columns exchanges count as equal in a point's
#: symmetry pattern (:meth:`OverlapGeometry.column_stabiliser`) when they differ by at most this fraction
#: of the larger: rounding residue of a solve that keeps the columns alike, far below any difference on
#: the way to a branch where they differ.
ROUNDING_EQUAL = 1e-12

#: The ranges of the fractions of its scale an entry a symmetry can flip is set to at the two points where
#: a zero pattern's symmetries are tested (:meth:`OverlapGeometry.generic_points`): away from zero and
#: from the Cauchy-Schwarz bound, different at the two points, drawn for each entry.
GENERIC_FRACTIONS = ((0.2, 0.45), (0.45, 0.7))

#: Where the student vanishes (every entry of q zero: W = 0, a stationary point of every
#: declaration whose attention scores are quadratic in the weights), the map is its limit q -> 0,
#: evaluated with the diagonal of q at this fraction of rho (F is smooth in q there, so the error is
#: of the order of the probe) and in the envelope form: the score form divides M* by q, and its
#: rounding error grows as 1/q (docs/validation.md, "The vanishing student").
VANISHING_PROBE = 1e-10
#: Most doublings of the diagonal of ``q`` that bring a start into the domain
#: (:meth:`OverlapGeometry.raised_into_domain`):
#: from ``VANISHING_PROBE rho`` they reach ``rho`` and beyond.
Q_DOUBLINGS = 64
#: Doublings past the first ``q`` inside the domain: a start just inside the bound
#: ``theta^2 <= q rho`` has a teacher field of nearly zero conditional variance, where Newton steps
#: leave the domain again; a factor 4 inside, the solves converge (docs/validation.md,
#: "The vanishing student").
Q_MARGIN_DOUBLINGS = 2
#: A search that ends unconverged with every diagonal entry of q below this fraction of rho is
#: repeated from the vanishing student (the root finders approach q = 0 only geometrically).
NEARLY_VANISHING = 1e-3


class OverlapGeometry:
    """Bounds, domain, labels and branch masks of the order parameters of ``compiled`` at the constants
    ``consts`` (the values of ``ReplicaSystem.constants``)."""

    def __init__(self, compiled: CompiledSystem, consts: np.ndarray) -> None:
        self.compiled = compiled
        self.system = compiled.system
        self.consts = consts
        self.names: tuple[str, ...] = compiled.names
        self.families = np.array(compiled.families)
        self.q_entries = self.families == "q"
        self.responses = self.families == "V"
        self._rhos: dict[int, float] = {}

    # ------------------------------------------------------------------ the teacher and the student
    def rho(self, group: int) -> float:
        """``rho`` of covariance class ``group``: the teacher field's variance (THEORY.md sec. 2)."""
        if group not in self._rhos:
            values = dict(zip(self.system.constants, self.consts, strict=True))
            self._rhos[group] = float(self.system.teacher_overlap[group].subs(values))
        return self._rhos[group]

    def q_diagonal(self) -> list[tuple[int, float]]:
        """The index of every diagonal entry of ``q`` with the ``rho`` of its covariance class."""
        entries = self.system.entries
        return [(i, self.rho(e.group)) for i, e in enumerate(entries) if e.family == "q" and e.entry[0] == e.entry[1]]

    def vanishes(self, params: np.ndarray) -> bool:
        """The student vanishes at ``params`` (W = 0): every entry of every ``q`` is zero."""
        return bool(np.all(params[self.q_entries] == 0))

    def nearly_vanishes(self, values: np.ndarray) -> bool:
        """Every diagonal entry of ``q`` is positive but below ``NEARLY_VANISHING`` of ``rho``."""
        return all(0 < values[i] < NEARLY_VANISHING * rho for i, rho in self.q_diagonal())

    def kernel_point(self, params: np.ndarray) -> np.ndarray:
        """Where the node integrals are evaluated for ``params``: ``params`` itself, or, at a vanishing
        student (:meth:`vanishes`), the same point with the diagonal of ``q`` at ``VANISHING_PROBE``
        times ``rho``. The map there is the limit ``q -> 0`` of the map: ``q`` enters the integrands
        through ``sqrt(q)`` and ``q^-1``, so at ``q = 0`` they are ``0/0``, while ``F`` is smooth in
        ``q`` and ``F_q`` vanishes linearly there (docs/validation.md, "The vanishing student")."""
        if not self.vanishes(params):
            return params
        probe = params.copy()
        for i, rho in self.q_diagonal():
            probe[i] = VANISHING_PROBE * rho
        return probe

    def largest_response(self, params: np.ndarray) -> float:
        """The largest diagonal entry of ``V`` at ``params``: the scale of the prox's random starts."""
        entries = self.system.entries
        return float(max(params[i] for i, e in enumerate(entries) if e.family == "V" and e.entry[0] == e.entry[1]))

    # ------------------------------------------------------------------ overlaps and labels
    def _diagonals(self, values: np.ndarray) -> dict[tuple[str, int, int], float]:
        """The diagonal entries of ``q`` and ``V`` at ``values``, keyed by ``(family, class, column)``."""
        return {
            (e.family, e.group, e.entry[0]): float(value)
            for value, e in zip(values, self.system.entries, strict=True)
            if e.family in ("q", "V") and e.entry[0] == e.entry[1]
        }

    def overlap_bounds(self, values: np.ndarray) -> np.ndarray:
        """The Cauchy-Schwarz bound at ``values`` of every overlap entry, 0 for the other entries: for
        the overlap of the student's column ``j`` with the teacher, ``|theta_ij| <= sqrt(q_jj rho)`` in its
        covariance class, and with a positional direction ``|m_j| <= sqrt(q_jj / rho)`` (``q_jj`` averaged
        over the classes, ``rho`` of the first)."""
        diagonal = self._diagonals(values)
        bounds = np.zeros(len(values))
        for i, e in enumerate(self.system.entries):
            if e.family == "theta":
                bounds[i] = np.sqrt(max(diagonal[("q", e.group, self.column_of(e))], 0.0) * self.rho(e.group))
            elif e.family == "m":
                column = [q for (family, _, j), q in diagonal.items() if family == "q" and j == self.column_of(e)]
                bounds[i] = np.sqrt(max(float(np.mean(column)), 0.0) / self.rho(0))
        return bounds

    def off_diagonal_scales(self, values: np.ndarray) -> np.ndarray:
        """The Cauchy-Schwarz bound ``sqrt(x_ii x_jj)`` at ``values`` of every off-diagonal entry ``x_ij`` of
        ``q`` and ``V`` (within its covariance class), 0 for the other entries. At rank 2 and above these
        entries flip sign under a reflection of one student column, as ``m_j`` and ``theta_j`` do."""
        diagonal = self._diagonals(values)
        scales = np.zeros(len(values))
        for k, e in enumerate(self.system.entries):
            if e.family in ("q", "V") and e.entry[0] != e.entry[1]:
                i, j = (diagonal[(e.family, e.group, c)] for c in e.entry)
                scales[k] = np.sqrt(max(i * j, 0.0))
        return scales

    def sign_scales(self, values: np.ndarray) -> np.ndarray:
        """The scale of every entry a symmetry of the map can flip (:meth:`overlap_bounds` for the
        overlaps, :meth:`off_diagonal_scales` for the off-diagonal entries of ``q`` and ``V``), 0 for the
        diagonal entries."""
        return self.overlap_bounds(values) + self.off_diagonal_scales(values)

    def zero_pattern(self, params: np.ndarray) -> tuple[bool, ...]:
        """Which order parameters are zero, what the fold of the rule depends on: exactly, or for an
        entry a symmetry can flip (:meth:`sign_scales`) within ``ROUNDING_ZERO`` of its scale. A symmetry
        of the map can hold a single entry at zero inside a family that is not (the overlap with a
        mixture's cluster means next to a positional overlap; ``q_1_2`` and ``V_1_2`` where the second
        student column's reflection is a symmetry); the iterations leave such an entry at the rounding
        level, where folding with the symmetry changes the integrals by as little. Counting it as
        non-zero would drop the fold there, and with it the average over the ties its reflection
        exchanges: the map would jump with the residue's sign."""
        tiny = np.abs(params) <= ROUNDING_ZERO * self.sign_scales(params)
        return tuple(bool(v == 0 or small) for v, small in zip(params, tiny, strict=True))

    @cached_property
    def column_permutations(self) -> tuple[np.ndarray, ...]:
        """Every signed permutation matrix ``P`` of the student's columns but the identity: ``W -> W P``
        moves the order parameters as a rotation does (:func:`~attnphase.saddle.gauge.rotated`)."""
        rank = self.system.parameters.q[0].shape[0]
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
        equal within ``ROUNDING_EQUAL`` of the larger. Where ``P`` exchanges columns (``q_1_1 = q_2_2``,
        ``V_1_1 = V_2_2``), the envelope may be invariant under the exchange, and then the prox has tied
        minima on its mirror plane that only a fold with the exchange averages (docs/validation.md,
        "Rank 2's agnostic point: the column swap where the columns are equal")."""
        entries = self.system.entries
        cleaned = np.where(self.zero_pattern(params), 0.0, params)
        stabiliser = []
        for k, matrix in enumerate(self.column_permutations):
            moved = rotated(cleaned, entries, matrix)
            if np.all(np.abs(moved - cleaned) <= ROUNDING_EQUAL * np.maximum(np.abs(moved), np.abs(cleaned))):
                stabiliser.append(k)
        return tuple(stabiliser)

    def symmetry_pattern(self, params: np.ndarray) -> SymmetryPattern:
        """What the envelope's symmetries at ``params`` depend on: the zero pattern (:meth:`zero_pattern`)
        and the column stabiliser (:meth:`column_stabiliser`). The fold of the rule is found once per
        pattern (:meth:`~attnphase.saddle.saddle_map.SaddleMap.fold`)."""
        return self.zero_pattern(params), self.column_stabiliser(params)

    def generic_points(self, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Two points with the zero pattern of ``params`` at which its symmetries are tested: every
        non-zero entry a symmetry can flip set to a fraction of its scale (:meth:`sign_scales`, keeping
        its sign) drawn at random for each entry, in ``GENERIC_FRACTIONS[0]`` at the first point and
        ``GENERIC_FRACTIONS[1]`` at the second, the other non-zero entries perturbed at random by up to
        10 %. (At ``params`` itself an entry that is non-zero but negligible, as on the way to a merger,
        would pass for zero and lend the pattern the symmetry that flips it, folding the rule wrongly;
        entries of one family set to the same fraction of the same scale would be equal, and lend the
        pattern the symmetry that exchanges them, as ``m_1 = m_2`` does the swap of two tokens whose
        encodings are exchanged.) Each point is then averaged over the column stabiliser of ``params``
        (:meth:`column_stabiliser`), so that the entries it exchanges are equal there as at ``params``, and
        those alone."""
        zero = np.array(self.zero_pattern(params))
        stabiliser = [self.column_permutations[k] for k in self.column_stabiliser(params)]
        points = []
        for low, high in GENERIC_FRACTIONS:
            point = params * rng.uniform(0.9, 1.0, params.size)
            # the diagonal first: the scales of the off-diagonal entries are read at the perturbed point
            scale = self.sign_scales(point)
            flipped = (scale != 0) & ~zero
            fractions = rng.uniform(low, high, params.size)
            point[flipped] = np.sign(params[flipped]) * fractions[flipped] * scale[flipped]
            point[zero] = 0.0
            if stabiliser:
                images = [rotated(point, self.system.entries, matrix) for matrix in stabiliser]
                point = np.mean([point, *images], axis=0)
            points.append(point)
        return points[0], points[1]

    def nonzero_families(self, values: np.ndarray) -> tuple[str, ...]:
        """The overlap families of which some entry exceeds ``NEGLIGIBLE_OVERLAP`` of its
        Cauchy-Schwarz bound at ``values`` (:meth:`overlap_bounds`)."""
        bound = self.overlap_bounds(values)
        found = []
        for family in self.system.overlap_families:
            mask = (self.families == family) & (bound != 0)
            if np.any(np.abs(values[mask]) > NEGLIGIBLE_OVERLAP * bound[mask]):
                found.append(family)
        return tuple(found)

    def label_of(self, values: np.ndarray) -> str:
        """The declaration's label of order parameters ``values``: by which overlap families do not
        vanish there (:meth:`nonzero_families`, :class:`~attnphase.replica.declaration.BranchLabels`)."""
        return self.system.label(self.nonzero_families(values))

    @staticmethod
    def column_of(entry: OrderParameter) -> int:
        """The student column an overlap entry belongs to: ``j`` of ``m_j`` (``mu_k^T w_j``) and of
        ``theta_ij`` (``w*_i^T Sigma w_j``)."""
        return entry.entry[0] if entry.family == "m" else entry.entry[1]

    @staticmethod
    def _seedable(entry: OrderParameter, branch: Branch) -> bool:
        """``entry`` is an entry a seed may set on ``branch``: of a free overlap family, not held by the
        gauge, and of the first teacher direction (every positional direction for ``m``)."""
        free_overlap = entry.family in OVERLAP_FAMILIES and entry.family not in branch.zero
        return free_overlap and entry.name not in branch.gauge and (entry.family == "m" or entry.entry[0] == 0)

    def seed_columns(self, branch: Branch) -> list[dict[str, int]]:
        """The ways to put the seeds of the branch's free overlap families on student columns
        (:meth:`seeded`): the first column for every family first (the only way at rank 1), then each
        assignment of the families to distinct columns whose seeded entries the branch's gauge does not
        hold at zero (a student that fits the positions with one column and the teacher with another).
        At rank 2 the mixed branch has two: ``m`` and ``theta`` on the first column, or ``theta`` on the
        second; a branch with one free family has one."""
        families = self.free_families(branch)
        seedable = [e for e in self.system.entries if self._seedable(e, branch)]
        choices = [sorted({self.column_of(e) for e in seedable if e.family == family}) for family in families]
        first = tuple(0 for _ in families)
        combinations = itertools.product(*choices) if len(families) > 1 else ()
        distinct = [c for c in combinations if c != first and len(set(c)) == len(c)]
        return [dict(zip(families, combination, strict=True)) for combination in (first, *distinct)]

    def seeded(
        self, base: np.ndarray, branch: Branch, strength: float, columns: Mapping[str, int] | None = None
    ) -> np.ndarray:
        """``base`` with one entry of each of the branch's free overlap families set to ``strength``
        times its Cauchy-Schwarz bound (:meth:`overlap_bounds`): the entry of the family's first teacher
        direction (every positional direction for ``m``) on the student column ``columns[family]``
        (default: the first, the family's leading entry)."""
        columns = columns or {}
        x = base.copy()
        bound = self.overlap_bounds(base)
        for i, e in enumerate(self.system.entries):
            if bound[i] and self._seedable(e, branch) and self.column_of(e) == columns.get(e.family, 0):
                x[i] = strength * bound[i]
        return x

    def raised_into_domain(self, values: np.ndarray, movable: np.ndarray) -> np.ndarray:
        """``values`` if they lie in the domain (:meth:`in_domain`), else with the ``movable`` diagonal
        entries of ``q`` raised to at least ``VANISHING_PROBE rho`` and doubled until they do (a larger
        ``q`` keeps it positive definite and makes ``rho - theta q^-1 theta^T`` larger), then doubled
        ``Q_MARGIN_DOUBLINGS`` times more: a start for a solve whose held overlaps, e.g. ``theta``
        moved off a vanishing student, exceed the Cauchy-Schwarz bound of its ``q``. Returned
        unchanged if no number of doublings helps."""
        if self.in_domain(values):
            return values
        raised = values.copy()
        diagonal = [(i, rho) for i, rho in self.q_diagonal() if movable[i]]
        for i, rho in diagonal:
            raised[i] = max(raised[i], VANISHING_PROBE * rho)
        for _ in range(Q_DOUBLINGS):
            if self.in_domain(raised):
                for i, _ in diagonal:
                    raised[i] *= 2**Q_MARGIN_DOUBLINGS
                return raised
            for i, _ in diagonal:
                raised[i] *= 2
        return values

    def in_domain(self, values: np.ndarray) -> bool:
        """``values`` are finite and inside the domain of the order parameters (:meth:`domain_violations`)."""
        return bool(np.all(np.isfinite(values))) and not self.domain_violations(values)

    def domain_violations(self, values: np.ndarray) -> list[str]:
        """Order parameters outside their domain (THEORY.md sec. 2): per covariance class, ``V``
        must be positive definite, and ``q`` too, with the teacher field's conditional covariance
        ``rho - theta q^-1 theta^T`` positive semidefinite, unless the student vanishes
        (:meth:`vanishes`), and with it every overlap."""
        vanishing = self.vanishes(values)
        violations = []
        if vanishing:
            overlaps = np.isin(self.families, self.system.overlap_families)
            nonzero = [name for name, value, o in zip(self.names, values, overlaps, strict=True) if o and value != 0]
            if nonzero:
                violations.append(f"{', '.join(nonzero)} non-zero where q = 0")
        parameters = self.system.parameters
        shapes = {"q": parameters.q, "V": parameters.V, "theta": parameters.theta}
        matrices: dict[tuple[str, int], np.ndarray] = {}
        for value, e in zip(values, self.system.entries, strict=True):
            if e.family not in shapes:
                continue
            matrix = matrices.setdefault((e.family, e.group), np.zeros(shapes[e.family][e.group].shape))
            matrix[e.entry] = value
            if e.family != "theta":  # q and V are symmetric
                matrix[e.entry[::-1]] = value
        for (family, group), matrix in sorted(matrices.items()):
            if family == "theta" or (family == "q" and vanishing):
                continue
            label = family + (f" of class {group + 1}" if len(parameters.q) > 1 else "")
            if not np.all(np.isfinite(matrix)) or np.linalg.eigvalsh(matrix).min() <= 0:
                violations.append(f"{label} not positive definite ({np.array2string(matrix.ravel(), precision=3)})")
            elif family == "q" and ("theta", group) in matrices:
                theta = matrices[("theta", group)]
                conditional = self.rho(group) * np.eye(theta.shape[0]) - theta @ np.linalg.solve(matrix, theta.T)
                if np.linalg.eigvalsh(conditional).min() < -1e-12 * self.rho(group):
                    violations.append(f"theta^2 > q rho in class {group + 1} (Cauchy-Schwarz)")
        return violations

    # ------------------------------------------------------------------ branches and the gauge
    def free_mask(self, branch: Branch) -> np.ndarray:
        """True for the order parameters ``branch`` does not hold at zero (neither by a family it holds
        nor by its gauge)."""
        return ~np.isin(self.families, branch.zero) & ~self.gauge_mask(branch)

    def moved_entries(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """The order parameters a solve from ``values`` on ``branch`` moves: the branch's free ones, and
        at a vanishing student only the responses among them (W = 0 stays W = 0: an invariant set of F)."""
        free = self.free_mask(branch)
        return free & self.responses if self.vanishes(values) else free

    def gauge_mask(self, branch: Branch) -> np.ndarray:
        """True for the order parameters ``branch`` holds at zero to fix the gauge of the declaration's
        rotations (:attr:`Branch.gauge`)."""
        return np.isin(self.names, branch.gauge)

    def in_gauge(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """``values`` rotated onto the slice of the branch's gauge (:func:`~attnphase.saddle.gauge.into_gauge`):
        the same weights up to a rotation of the student's columns, so the same observables."""
        return into_gauge(values, self.system.entries, self.rotations, self.gauge_mask(branch))

    @cached_property
    def rotations(self) -> tuple[np.ndarray, ...]:
        """The declaration's rotation generators as arrays (they depend on its structure only)."""
        return tuple(np.array(g.tolist(), dtype=float) for g in self.system.model.rotations())

    def free_families(self, branch: Branch) -> tuple[str, ...]:
        """The overlap families that are free on ``branch``."""
        return tuple(f for f in self.system.overlap_families if f not in branch.zero)
