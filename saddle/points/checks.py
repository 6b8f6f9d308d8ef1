"""The checks a saddle point must pass, as values (THEORY.md sec. 4, 5).

A point's checks are a tuple of :class:`Failure` values, each naming its :class:`Check` and saying by
how much it failed; a point with none has converged. Text appears only where a table is written
(:func:`status_text`) and is turned back into values where a table is read (:func:`parse_status`).
The same holds for the outcome of a point's stability assessment (:class:`Assessment`).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

#: The status of a point every check holds for.
CONVERGED = "converged"
#: Between the failures of a point's status.
SEPARATOR = "; "


class Check(enum.StrEnum):
    """A check of a candidate fixed point (:class:`~attnphase.saddle.points.diagnosis.Diagnosis`)."""

    RESIDUAL = "residual"  # the scaled residual |F(x) - x| / (1 + |x|) within the acceptance
    FINITE = "finite"  # order parameters, conjugates and observables finite
    DOMAIN = "domain"  # q and V positive definite, Cauchy-Schwarz (THEORY.md sec. 2)
    ENERGY = "energy"  # the energy identity energy = eps_t - line_correction (sec. 5)
    KINK = "kink"  # the kink correction small against the energy
    PROX = "prox"  # the prox converged at all nodes but a small weight
    QUADRATURE = "quadrature"  # the estimated quadrature error of eps_t small against eps_t


@dataclass(frozen=True)
class Failure:
    """A failed check, of a point (:class:`Check`) or of its Hessian (:class:`HessianCheck`), and by how
    much it failed (``detail``, for the reader)."""

    check: Check | HessianCheck
    detail: str

    def text(self) -> str:
        """``check: detail``, as a table's ``status`` (or ``stability_status``) shows it."""
        return f"{self.check.value}: {self.detail}"


def status_text(failures: Sequence[Failure]) -> str:
    """A point's ``status`` column: :data:`CONVERGED`, or every failure's text joined by ``"; "``."""
    return SEPARATOR.join(f.text() for f in failures) if failures else CONVERGED


def parse_status(text: str) -> tuple[Failure, ...]:
    """The failures a ``status`` column lists (:func:`status_text` read back; ``ValueError`` naming
    an unknown check)."""
    if text == CONVERGED:
        return ()
    failures = []
    for part in text.split(SEPARATOR):
        name, _, detail = part.partition(":")
        try:
            check = Check(name.strip())
        except ValueError:
            raise ValueError(f"status names no check: {part!r}") from None
        failures.append(Failure(check, detail.strip()))
    return tuple(failures)


class Assessment(enum.StrEnum):
    """What the stability assessment of a point gave (:func:`~attnphase.saddle.stability.assessment.assess`)."""

    ASSESSED = "assessed"  # curvatures and ``stable`` computed
    NOT_ASKED = "not assessed"  # no assessment was asked for
    UNCONVERGED = "not assessed: the point has not converged"
    FAILED = "failed"  # the Hessian could not be computed; the reason says why


class HessianCheck(enum.StrEnum):
    """Why a Hessian of the training loss is not usable (:class:`~attnphase.saddle.stability.hessian.Stability`)."""

    PROX = "prox"  # a prox behind a difference did not converge
    CONSTRAINED = "constrained"  # a constrained point behind a column has no usable gradient
    NOT_FINITE = "hessian"  # an entry is not finite


def assessment_text(assessment: Assessment, problem: Failure | None) -> str:
    """A point's ``stability_status`` column: the assessment, or for a failed one its reason."""
    if assessment is Assessment.FAILED:
        return problem.text() if problem is not None else Assessment.FAILED.value
    return assessment.value


def parse_assessment(text: str) -> tuple[Assessment, Failure | None]:
    """The assessment and reason a ``stability_status`` column holds (:func:`assessment_text` read back)."""
    for assessment in Assessment:
        if text == assessment.value and assessment is not Assessment.FAILED:
            return assessment, None
    name, _, detail = text.partition(":")
    try:
        return Assessment.FAILED, Failure(HessianCheck(name.strip()), detail.strip())
    except ValueError:
        raise ValueError(f"stability_status is no assessment: {text!r}") from None
