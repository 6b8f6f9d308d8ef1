"""The order parameters of one replica system at given constants (THEORY.md sec. 2, 6): their
Cauchy-Schwarz bounds, their domain, the label of a point by the overlap families that do not vanish
there, and the vanishing student.

An :class:`OverlapGeometry` reads the declaration's structure and the constants' values; it knows no
quadrature and evaluates no integral.
"""

from __future__ import annotations

import numpy as np

from attnphase.replica.order_parameters import OrderParameter
from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.geometry.layout import ParameterLayout
from attnphase.saddle.tuning import GeometryTuning


class OverlapGeometry:
    """Bounds, domain and labels of the order parameters of ``system`` (laid out as ``layout``) at the
    constants ``consts`` (the values of ``ReplicaSystem.constants``), with the thresholds of ``tuning``."""

    def __init__(
        self, system: ReplicaSystem, layout: ParameterLayout, consts: np.ndarray, tuning: GeometryTuning
    ) -> None:
        self.system, self.layout, self.consts, self.tuning = system, layout, consts, tuning
        self._rhos: dict[int, float] = {}

    def at(self, consts: np.ndarray) -> OverlapGeometry:
        """The same geometry at other values of the constants."""
        return OverlapGeometry(self.system, self.layout, consts, self.tuning)

    # ------------------------------------------------------------------ the teacher and the student
    def rho(self, group: int) -> float:
        """``rho`` of covariance class ``group``: the teacher field's variance (THEORY.md sec. 2)."""
        if group not in self._rhos:
            values = dict(zip(self.system.constants, self.consts, strict=True))
            self._rhos[group] = float(self.system.teacher_overlap[group].subs(values))
        return self._rhos[group]

    def q_diagonal(self) -> list[tuple[int, float]]:
        """The index of every diagonal entry of ``q`` with the ``rho`` of its covariance class."""
        entries = self.layout.entries
        return [(i, self.rho(e.group)) for i, e in enumerate(entries) if e.family == "q" and e.entry[0] == e.entry[1]]

    def vanishes(self, params: np.ndarray) -> bool:
        """The student vanishes at ``params`` (W = 0): every entry of every ``q`` is zero."""
        return self.layout.vanishes(params)

    def nearly_vanishes(self, values: np.ndarray) -> bool:
        """Every diagonal entry of ``q`` is positive but below the tuning's ``nearly_vanishing`` of ``rho``."""
        return all(0 < values[i] < self.tuning.nearly_vanishing * rho for i, rho in self.q_diagonal())

    def kernel_point(self, params: np.ndarray) -> np.ndarray:
        """Where the node integrals are evaluated for ``params``: ``params`` itself, or, at a vanishing
        student (:meth:`vanishes`), the same point with the diagonal of ``q`` at the tuning's
        ``vanishing_probe`` times ``rho``. The map there is the limit ``q -> 0`` of the map: ``q`` enters
        the integrands through ``sqrt(q)`` and ``q^-1``, so at ``q = 0`` they are ``0/0``, while ``F`` is
        smooth in ``q`` and ``F_q`` vanishes linearly there."""
        if not self.vanishes(params):
            return params
        probe = params.copy()
        for i, rho in self.q_diagonal():
            probe[i] = self.tuning.vanishing_probe * rho
        return probe

    def prox_scale(self, params: np.ndarray) -> float:
        """How far the prox moves at ``params`` relative to its usual scale: 1, or at a vanishing student
        about ``sqrt(vanishing_probe)`` (:meth:`kernel_point`)."""
        return 1.0 if not self.vanishes(params) else float(np.sqrt(self.tuning.vanishing_probe))

    def largest_response(self, params: np.ndarray) -> float:
        """The largest diagonal entry of ``V`` at ``params``: the scale of the prox's random starts."""
        entries = self.layout.entries
        return float(max(params[i] for i, e in enumerate(entries) if e.family == "V" and e.entry[0] == e.entry[1]))

    # ------------------------------------------------------------------ overlaps and labels
    def _diagonals(self, values: np.ndarray) -> dict[tuple[str, int, int], float]:
        """The diagonal entries of ``q`` and ``V`` at ``values``, keyed by ``(family, class, column)``."""
        return {
            (e.family, e.group, e.entry[0]): float(value)
            for value, e in zip(values, self.layout.entries, strict=True)
            if e.family in ("q", "V") and e.entry[0] == e.entry[1]
        }

    def overlap_bounds(self, values: np.ndarray) -> np.ndarray:
        """The Cauchy-Schwarz bound at ``values`` of every overlap entry, 0 for the other entries: for
        the overlap of the student's column ``j`` with the teacher, ``|theta_ij| <= sqrt(q_jj rho)`` in its
        covariance class, and with a positional direction ``|m_j| <= sqrt(q_jj / rho)`` (``q_jj`` averaged
        over the classes, ``rho`` of the first)."""
        diagonal = self._diagonals(values)
        bounds = np.zeros(len(values))
        for i, e in enumerate(self.layout.entries):
            if e.family == "theta":
                bounds[i] = np.sqrt(max(diagonal[("q", e.group, column_of(e))], 0.0) * self.rho(e.group))
            elif e.family == "m":
                column = [q for (family, _, j), q in diagonal.items() if family == "q" and j == column_of(e)]
                bounds[i] = np.sqrt(max(float(np.mean(column)), 0.0) / self.rho(0))
        return bounds

    def off_diagonal_scales(self, values: np.ndarray) -> np.ndarray:
        """The Cauchy-Schwarz bound ``sqrt(x_ii x_jj)`` at ``values`` of every off-diagonal entry ``x_ij`` of
        ``q`` and ``V`` (within its covariance class), 0 for the other entries. At rank 2 and above these
        entries flip sign under a reflection of one student column, as ``m_j`` and ``theta_j`` do."""
        diagonal = self._diagonals(values)
        scales = np.zeros(len(values))
        for k, e in enumerate(self.layout.entries):
            if e.family in ("q", "V") and e.entry[0] != e.entry[1]:
                i, j = (diagonal[(e.family, e.group, c)] for c in e.entry)
                scales[k] = np.sqrt(max(i * j, 0.0))
        return scales

    def sign_scales(self, values: np.ndarray) -> np.ndarray:
        """The scale of every entry a symmetry of the map can flip (:meth:`overlap_bounds` for the
        overlaps, :meth:`off_diagonal_scales` for the off-diagonal entries of ``q`` and ``V``), 0 for the
        diagonal entries."""
        return self.overlap_bounds(values) + self.off_diagonal_scales(values)

    def nonzero_families(self, values: np.ndarray) -> tuple[str, ...]:
        """The overlap families of which some entry exceeds the tuning's ``negligible_overlap`` of its
        Cauchy-Schwarz bound at ``values`` (:meth:`overlap_bounds`)."""
        bound = self.overlap_bounds(values)
        found = []
        for family in self.layout.overlap_families:
            mask = (self.layout.families == family) & (bound != 0)
            if np.any(np.abs(values[mask]) > self.tuning.negligible_overlap * bound[mask]):
                found.append(family)
        return tuple(found)

    def label_of(self, values: np.ndarray) -> str:
        """The declaration's label of order parameters ``values``: by which overlap families do not
        vanish there (:meth:`nonzero_families`, :class:`~attnphase.replica.declaration.BranchLabels`)."""
        return self.system.label(self.nonzero_families(values))

    # ------------------------------------------------------------------ the domain
    def raised_into_domain(self, values: np.ndarray, movable: np.ndarray) -> np.ndarray:
        """``values`` if they lie in the domain (:meth:`in_domain`), else with the ``movable`` diagonal
        entries of ``q`` raised to at least ``vanishing_probe rho`` and doubled until they do (a larger
        ``q`` keeps it positive definite and makes ``rho - theta q^-1 theta^T`` larger), then doubled
        ``q_margin_doublings`` times more: a start for a solve whose held overlaps, e.g. ``theta``
        moved off a vanishing student, exceed the Cauchy-Schwarz bound of its ``q``. Returned
        unchanged if no number of doublings (at most ``q_doublings``) helps."""
        if self.in_domain(values):
            return values
        raised = values.copy()
        diagonal = [(i, rho) for i, rho in self.q_diagonal() if movable[i]]
        for i, rho in diagonal:
            raised[i] = max(raised[i], self.tuning.vanishing_probe * rho)
        for _ in range(self.tuning.q_doublings):
            if self.in_domain(raised):
                for i, _ in diagonal:
                    raised[i] *= 2**self.tuning.q_margin_doublings
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
        layout = self.layout
        violations = []
        if vanishing:
            overlaps = np.isin(layout.families, layout.overlap_families)
            nonzero = [name for name, value, o in zip(layout.names, values, overlaps, strict=True) if o and value != 0]
            if nonzero:
                violations.append(f"{', '.join(nonzero)} non-zero where q = 0")
        parameters = self.system.parameters
        shapes = {"q": parameters.q, "V": parameters.V, "theta": parameters.theta}
        matrices: dict[tuple[str, int], np.ndarray] = {}
        for value, e in zip(values, layout.entries, strict=True):
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


def column_of(entry: OrderParameter) -> int:
    """The student column an overlap entry belongs to: ``j`` of ``m_j`` (``mu_k^T w_j``) and of
    ``theta_ij`` (``w*_i^T Sigma w_j``)."""
    return entry.entry[0] if entry.family == "m" else entry.entry[1]
