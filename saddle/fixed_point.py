"""A fixed point of the saddle-point equations as a value object (THEORY.md sec. 5): its order
parameters and conjugates, its observables (Phi, eps_t, the energy, eps_g), and the record of its
checks (residual, symmetry defect, status), with its row of a tidy table and back.

The points are found by :class:`~attnphase.saddle.solver.SaddlePointSolver`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

#: The status of a point every check holds for; otherwise the status lists the failed checks.
CONVERGED = "converged"
STATUS_SEPARATOR = "; "

#: Column prefix of the curvature of the training loss in an overlap family (``curvature_m``).
CURVATURE_PREFIX = "curvature_"

#: The ``stability_status`` of a point whose stability was assessed (:func:`saddle.landscape.assess`),
#: of one that was not asked for, and of one that was not because the point has not converged; a point
#: whose Hessian could not be computed has the reason instead ("prox: ...", "constrained: ...",
#: "hessian: not finite").
ASSESSED = "assessed"
NOT_ASSESSED = "not assessed"
UNASSESSED_UNCONVERGED = "not assessed: the point has not converged"


def failed_checks(status: str) -> tuple[str, ...]:
    """The names of the failed checks a point's ``status`` lists (empty when it is ``CONVERGED``)."""
    if status == CONVERGED:
        return ()
    return tuple(part.split(":", 1)[0].strip() for part in status.split(STATUS_SEPARATOR))


@dataclass(frozen=True)
class FixedPoint:
    """A solution of the saddle-point equations and its observables (THEORY.md sec. 5)."""

    alpha: float
    branch: str  # the declaration's label of the overlap families that do not vanish here
    names: tuple[str, ...]
    conjugate_names: tuple[str, ...]
    values: np.ndarray
    conjugates: np.ndarray
    free_entropy: float  # Phi
    train_loss: float  # eps_t = -Phi
    energy: float  # alpha E[l(prox, h*)] + E[R]/d on the rule, must equal train_loss - line_correction
    line_correction: float  # kink correction in eps_t (saddle/line_correction.py); 0 if off or unconverged
    test_error: float  # eps_g
    residual: float  # max |F(x) - x| / (1 + |x|) over the branch's free order parameters
    symmetry_defect: float  # max |F(x)| over the parameters the branch holds at zero (by symmetry or gauge)
    converged: bool  # every check of SaddlePointSolver.diagnose holds
    iterations: int
    prox_unconverged: int
    quadrature: str
    conjugate_form: str
    status: str = CONVERGED  # CONVERGED, or "check: detail" for every failed check, joined by "; "
    # smallest eigenvalue of the training loss's Hessian block per overlap family (saddle/landscape.py)
    curvature: Mapping[str, float] = field(default_factory=dict)
    stable: bool | None = None  # Hessian positive definite; None where not assessed
    stability_status: str = NOT_ASSESSED  # ASSESSED, or why stable is None (NOT_ASSESSED, or the reason)
    sheet: int = 0  # folds passed on the way from the branch's anchor (saddle/arclength.py)
    # eps_t on the independent randomised rules of the error check (saddle.quadrature.QuadratureCheck):
    # their mean and its standard error; NaN where no check ran (unconverged points, or none asked for)
    train_loss_check: float = float("nan")
    train_loss_check_se: float = float("nan")
    error_check: str = ""  # the check's label

    @property
    def train_loss_error(self) -> float:
        """The estimated quadrature error of ``train_loss``: its distance to the error check's mean,
        known to about twice ``train_loss_check_se`` (NaN without a check)."""
        return abs(self.train_loss - self.train_loss_check)

    @property
    def train_loss_error_bound(self) -> float:
        """A bound on the quadrature error of ``train_loss``: ``train_loss_error`` plus two standard errors
        of the check (NaN without a check)."""
        return self.train_loss_error + 2.0 * self.train_loss_check_se

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The names of the checks that failed (``residual``, ``finite``, ``domain``, ``energy``,
        ``kink``, ``prox``; empty when converged)."""
        return failed_checks(self.status)

    def __getitem__(self, name: str) -> float:
        if name in self.names:
            return float(self.values[self.names.index(name)])
        return float(self.conjugates[self.conjugate_names.index(name)])

    @classmethod
    def from_row(cls, row: Mapping[str, object], names: Sequence[str], conjugate_names: Sequence[str]) -> FixedPoint:
        """Inverse of :meth:`row` (for resuming a scan from its table)."""
        stable = {"true": True, "1": True, "false": False, "0": False}.get(str(row.get("stable")).lower())
        unrecorded = NOT_ASSESSED if stable is None else ASSESSED  # a table written without the status column
        return cls(
            alpha=float(row["alpha"]),
            branch=str(row["branch"]),
            names=tuple(names),
            conjugate_names=tuple(conjugate_names),
            values=np.array([float(row[n]) for n in names]),
            conjugates=np.array([float(row[n]) for n in conjugate_names]),
            free_entropy=float(row["free_entropy"]),
            train_loss=float(row["train_loss"]),
            energy=float(row["energy"]),
            line_correction=float(row.get("line_correction", 0.0)),
            test_error=float(row["test_error"]),
            residual=float(row["residual"]),
            symmetry_defect=float(row["symmetry_defect"]),
            converged=(converged := str(row["converged"]).lower() in ("true", "1")),
            iterations=int(row["iterations"]),
            prox_unconverged=int(row["prox_unconverged"]),
            quadrature=str(row["quadrature"]),
            conjugate_form=str(row["conjugate_form"]),
            status=str(row.get("status", CONVERGED if converged else "residual: not recorded")),
            curvature={
                str(k).removeprefix(CURVATURE_PREFIX): float(v)
                for k, v in row.items()
                if str(k).startswith(CURVATURE_PREFIX)
            },
            stable=stable,
            stability_status=status if isinstance(status := row.get("stability_status"), str) else unrecorded,
            sheet=int(row.get("sheet", 0)),
            train_loss_check=float(row.get("train_loss_check", float("nan"))),
            train_loss_check_se=float(row.get("train_loss_check_se", float("nan"))),
            error_check=label if isinstance(label := row.get("error_check"), str) else "",  # NaN when empty
        )

    def row(self) -> dict[str, object]:
        """One tidy table row (column names are part of the public interface)."""
        row: dict[str, object] = {"alpha": self.alpha, "branch": self.branch, "sheet": self.sheet}
        row.update({n: float(v) for n, v in zip(self.names, self.values, strict=True)})
        row.update({n: float(v) for n, v in zip(self.conjugate_names, self.conjugates, strict=True)})
        row.update(
            free_entropy=self.free_entropy,
            train_loss=self.train_loss,
            energy=self.energy,
            line_correction=self.line_correction,
            test_error=self.test_error,
            stable=self.stable,
            **{CURVATURE_PREFIX + family: float(c) for family, c in self.curvature.items()},
            stability_status=self.stability_status,
            converged=self.converged,
            status=self.status,
            residual=self.residual,
            symmetry_defect=self.symmetry_defect,
            iterations=self.iterations,
            prox_unconverged=self.prox_unconverged,
            quadrature=self.quadrature,
            train_loss_error=self.train_loss_error,
            train_loss_check=self.train_loss_check,
            train_loss_check_se=self.train_loss_check_se,
            error_check=self.error_check,
            conjugate_form=self.conjugate_form,
        )
        return row
