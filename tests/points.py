"""Scripted fixed points the tests of the search's rules share: no solver, no kernels."""

from __future__ import annotations

import numpy as np

from attnphase.saddle.points.checks import Check, Failure
from attnphase.saddle.points.fixed_point import FixedPoint


def scripted_point(
    alpha: float, values: dict[str, float], loss: float, label: str, converged: bool = True, residual: float = 1e-10
) -> FixedPoint:
    """A fixed point at ``alpha`` with order parameters ``values`` (conjugates zero), training loss ``loss``,
    labelled ``label``; unconverged, it fails the residual check."""
    failures = () if converged else (Failure(Check.RESIDUAL, "1e-3 > 1e-8"),)
    return FixedPoint(
        alpha=alpha,
        names=tuple(values),
        conjugate_names=tuple(f"{name}hat" for name in values),
        values=np.array(list(values.values())),
        conjugates=np.zeros(len(values)),
        train_loss=loss,
        energy=loss,
        line_correction=0.0,
        residual=residual,
        iterations=1,
        prox_unconverged=0,
        failures=failures,
        branch=label,
        free_entropy=-loss,
        test_error=0.0,
        symmetry_defect=0.0,
        quadrature="rule",
        conjugate_form="score",
    )
