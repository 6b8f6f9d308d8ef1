"""Saddle points as value objects (THEORY.md sec. 3-5): a fixed point of the saddle-point equations,
and a constrained saddle point (chosen overlaps held, their conjugates as multipliers), on one base.

Both carry their order parameters and conjugates, the training loss and the independent energy, and
the record of their checks (:mod:`saddle.points.checks`): ``converged`` means no check failed. A
:class:`FixedPoint` adds its label, ``Phi``, the test error, the symmetry defect, its stability and its
quadrature error check; a :class:`ConstrainedPoint` the held values and the gradient of the training
loss in them. Each has its row of a tidy table; a fixed point also reads back from one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from attnphase.saddle.points.checks import (
    Assessment,
    Failure,
    assessment_text,
    parse_assessment,
    parse_status,
    status_text,
)

#: Column prefix of the curvature of the training loss in an overlap family (``curvature_m``).
CURVATURE_PREFIX = "curvature_"


def read_flag(value: object) -> bool | None:
    """A table's ``True`` / ``False`` cell as a flag; ``None`` for anything else (an empty cell)."""
    return {"true": True, "1": True, "false": False, "0": False}.get(str(value).lower())


@dataclass(frozen=True, kw_only=True)
class SaddlePoint:
    """What every saddle point has: order parameters and conjugates at ``alpha``, the training loss
    ``eps_t = -Phi`` and the energy ``alpha E[l(prox, h*)] + E[R]/d`` (equal to ``train_loss -
    line_correction``, the kink correction of :mod:`saddle.quadrature.kinks`), the residual, the
    evaluations that found it, the nodes whose prox did not converge, and the checks it failed."""

    alpha: float
    names: tuple[str, ...]
    conjugate_names: tuple[str, ...]
    values: np.ndarray
    conjugates: np.ndarray
    train_loss: float
    energy: float
    line_correction: float
    residual: float
    iterations: int
    prox_unconverged: int
    failures: tuple[Failure, ...] = ()

    @property
    def converged(self) -> bool:
        """Every check holds."""
        return not self.failures

    @property
    def status(self) -> str:
        """The checks as a table writes them (:func:`~attnphase.saddle.points.checks.status_text`)."""
        return status_text(self.failures)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The names of the checks that failed (empty when converged)."""
        return tuple(f.check.value for f in self.failures)

    def __getitem__(self, name: str) -> float:
        if name in self.names:
            return float(self.values[self.names.index(name)])
        return float(self.conjugates[self.conjugate_names.index(name)])

    def _parameter_columns(self) -> dict[str, float]:
        row = {n: float(v) for n, v in zip(self.names, self.values, strict=True)}
        row.update({n: float(v) for n, v in zip(self.conjugate_names, self.conjugates, strict=True)})
        return row

    def _check_columns(self) -> dict[str, object]:
        return {"converged": self.converged, "status": self.status, "residual": self.residual}


@dataclass(frozen=True, kw_only=True)
class FixedPoint(SaddlePoint):
    """A solution of the saddle-point equations and its observables (THEORY.md sec. 5)."""

    branch: str  # the declaration's label of the overlap families that do not vanish here
    free_entropy: float  # Phi
    test_error: float  # eps_g
    symmetry_defect: float  # max |F(x)| over the parameters the branch holds at zero (by symmetry or gauge)
    quadrature: str
    conjugate_form: str
    prox: str = "global"  # the policy of the envelope's stationary point (saddle.prox.policy.ProxChoice)
    # the share of the rule's weight where the local and global policies' stationary points differ
    # (saddle.prox.policy.disagreement_weight); NaN away from a fixed point
    prox_disagreement: float = float("nan")
    # smallest eigenvalue of the training loss's Hessian block per overlap family (saddle/stability/)
    curvature: Mapping[str, float] = field(default_factory=dict)
    stable: bool | None = None  # Hessian positive definite; None where not assessed
    assessment: Assessment = Assessment.NOT_ASKED
    stability_problem: Failure | None = None  # why the assessment failed
    # replica symmetry (saddle/stability/replicon.py): the replicon (inf where the prox's jumps carry
    # weight, NaN where that is unresolved), its smooth part, the jump term's share of the fluctuation
    # response, and whether the replica-symmetric point is stable (None where unresolved or not assessed)
    replicon: float = float("nan")
    replicon_smooth: float = float("nan")
    jump_ratio: float = float("nan")
    rs_stable: bool | None = None
    sheet: int = 0  # folds passed on the way from the branch's anchor (saddle/search/arclength.py)
    # eps_t on the independent randomised rules of the error check (saddle.quadrature.check.QuadratureCheck):
    # their mean and its standard error; NaN where no check ran (unconverged points, or none asked for)
    train_loss_check: float = float("nan")
    train_loss_check_se: float = float("nan")
    error_check: str = ""  # the check's label

    @property
    def stability_status(self) -> str:
        """The assessment as a table writes it (:func:`~attnphase.saddle.points.checks.assessment_text`)."""
        return assessment_text(self.assessment, self.stability_problem)

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

    @classmethod
    def from_row(cls, row: Mapping[str, object], names: Sequence[str], conjugate_names: Sequence[str]) -> FixedPoint:
        """Inverse of :meth:`row` (for resuming a scan from its table)."""
        converged = str(row["converged"]).lower() in ("true", "1")
        status = row.get("status")
        failures = parse_status(str(status)) if isinstance(status, str) else ()
        if not converged and not failures:
            failures = parse_status("residual: not recorded")
        stable = read_flag(row.get("stable"))
        recorded = row.get("stability_status")
        if isinstance(recorded, str):
            assessment, problem = parse_assessment(recorded)
        else:  # a table written without the status column
            assessment, problem = (Assessment.NOT_ASKED if stable is None else Assessment.ASSESSED), None
        label = row.get("error_check")
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
            failures=() if converged else failures,
            iterations=int(row["iterations"]),
            prox_unconverged=int(row["prox_unconverged"]),
            quadrature=str(row["quadrature"]),
            conjugate_form=str(row["conjugate_form"]),
            prox=str(row.get("prox", "global")),
            prox_disagreement=float(row.get("prox_disagreement", float("nan"))),
            curvature={
                str(k).removeprefix(CURVATURE_PREFIX): float(v)
                for k, v in row.items()
                if str(k).startswith(CURVATURE_PREFIX)
            },
            stable=stable,
            assessment=assessment,
            stability_problem=problem,
            replicon=float(row.get("replicon", float("nan"))),
            replicon_smooth=float(row.get("replicon_smooth", float("nan"))),
            jump_ratio=float(row.get("jump_ratio", float("nan"))),
            rs_stable=read_flag(row.get("rs_stable")),
            sheet=int(row.get("sheet", 0)),
            train_loss_check=float(row.get("train_loss_check", float("nan"))),
            train_loss_check_se=float(row.get("train_loss_check_se", float("nan"))),
            error_check=label if isinstance(label, str) else "",  # NaN when empty
        )

    def row(self) -> dict[str, object]:
        """One tidy table row (column names are part of the public interface)."""
        row: dict[str, object] = {"alpha": self.alpha, "branch": self.branch, "sheet": self.sheet}
        row.update(self._parameter_columns())
        row.update(
            free_entropy=self.free_entropy,
            train_loss=self.train_loss,
            energy=self.energy,
            line_correction=self.line_correction,
            test_error=self.test_error,
            stable=self.stable,
            **{CURVATURE_PREFIX + family: float(c) for family, c in self.curvature.items()},
            stability_status=self.stability_status,
            rs_stable=self.rs_stable,
            replicon=self.replicon,
            replicon_smooth=self.replicon_smooth,
            jump_ratio=self.jump_ratio,
            **self._check_columns(),
            symmetry_defect=self.symmetry_defect,
            iterations=self.iterations,
            prox_unconverged=self.prox_unconverged,
            quadrature=self.quadrature,
            train_loss_error=self.train_loss_error,
            train_loss_check=self.train_loss_check,
            train_loss_check_se=self.train_loss_check_se,
            error_check=self.error_check,
            conjugate_form=self.conjugate_form,
            prox=self.prox,
            prox_disagreement=self.prox_disagreement,
        )
        return row


@dataclass(frozen=True, kw_only=True)
class ConstrainedPoint(SaddlePoint):
    """A saddle point with the entries ``fixed`` held at ``held``, as the constrained solver finds it
    (:class:`~attnphase.saddle.search.constrained.ConstrainedSolver`): ``values`` has the fixed entries
    equal to ``held``, ``conjugates`` the multipliers in the places of their conjugates, and
    ``gradient`` is ``d eps / d held``."""

    fixed: tuple[str, ...]
    held: np.ndarray
    gradient: np.ndarray

    def usable_gradient(self, largest_residual: float) -> bool:
        """Its gradient can enter a Hessian: every check holds but perhaps the residual (at most
        ``largest_residual``) and the energy identity it then misses by as little."""
        loose = set(self.failed_checks) <= {"residual", "energy"}
        return loose and self.residual <= largest_residual and bool(np.all(np.isfinite(self.gradient)))

    def row(self) -> dict[str, object]:
        """One tidy table row: every parameter, multiplier and gradient entry (``grad_<name>``), and the checks."""
        row: dict[str, object] = {"alpha": self.alpha}
        row.update(self._parameter_columns())
        row.update({f"grad_{n}": float(g) for n, g in zip(self.fixed, self.gradient, strict=True)})
        row.update(train_loss=self.train_loss, energy=self.energy, line_correction=self.line_correction)
        row.update(self._check_columns())
        row.update(iterations=self.iterations, prox_unconverged=self.prox_unconverged)
        return row
