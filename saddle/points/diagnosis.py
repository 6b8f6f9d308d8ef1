"""Which checks a candidate saddle point fails (THEORY.md sec. 4, 5).

:class:`Diagnosis` holds the acceptance (:class:`~attnphase.saddle.tuning.AcceptanceTuning`) and the
domain test of the order parameters, and turns a candidate's numbers into its failures, one
:class:`~attnphase.saddle.points.checks.Failure` per failed :class:`~attnphase.saddle.points.checks.Check`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from attnphase.saddle.points.checks import Check, Failure
from attnphase.saddle.tuning import AcceptanceTuning


class Diagnosis:
    """The checks of a candidate point: ``names`` and ``conjugate_names`` name its numbers, ``domain``
    lists how order parameters leave their domain (empty inside it)."""

    def __init__(
        self,
        acceptance: AcceptanceTuning,
        names: Sequence[str],
        conjugate_names: Sequence[str],
        domain: Callable[[np.ndarray], list[str]],
    ) -> None:
        self.acceptance, self.names, self.conjugate_names, self.domain = acceptance, names, conjugate_names, domain

    def __call__(
        self,
        params: np.ndarray,
        conjugates: np.ndarray,
        residual: float,
        observables: Mapping[str, float],
        prox_unconverged: int,
        prox_weight: float,
    ) -> tuple[Failure, ...]:
        """Every failed check: ``residual`` at most the acceptance; ``finite`` order parameters,
        conjugates and observables; order parameters in their ``domain``; the ``energy`` identity
        ``energy = eps_t - line_correction`` (THEORY.md sec. 5) to the relative acceptance; the ``kink``
        correction of eps_t (:mod:`saddle.quadrature.kinks`) at most its fraction of the energy (a larger
        one means the correction itself has failed); the ``prox`` converged at all nodes but a quadrature
        weight ``prox_weight`` of at most the acceptance (``prox_unconverged`` nodes)."""
        a = self.acceptance
        failed = []
        if not residual <= a.residual:
            failed.append(Failure(Check.RESIDUAL, f"{residual:.1e} > {a.residual:.0e}"))
        numbers = dict(zip(self.names, params, strict=True))
        numbers.update(zip(self.conjugate_names, conjugates, strict=True))
        numbers.update(observables)
        infinite = [name for name, value in numbers.items() if not np.isfinite(value)]
        if infinite:
            failed.append(Failure(Check.FINITE, f"{', '.join(infinite)} not finite"))
        domain = self.domain(params) if np.all(np.isfinite(params)) else []
        if domain:
            failed.append(Failure(Check.DOMAIN, ", ".join(domain)))
        expected = observables["train_loss"] - observables["line_correction"]
        gap = abs(observables["energy"] - expected)
        if np.isfinite(gap) and not gap <= a.energy * abs(expected):
            detail = f"energy - (eps_t - line_correction) = {gap:.1e}, relative {gap / abs(expected):.1e}"
            failed.append(Failure(Check.ENERGY, detail))
        kink, energy = observables["line_correction"], observables["energy"]
        if not abs(kink) <= a.kink * abs(energy):
            detail = f"line_correction = {kink:.2e} exceeds {a.kink:g} of the energy {energy:.2e}"
            failed.append(Failure(Check.KINK, detail))
        if not prox_weight <= a.prox_weight:
            failed.append(Failure(Check.PROX, f"{prox_unconverged} nodes of weight {prox_weight:.1e} unconverged"))
        return tuple(failed)

    def quadrature(self, train_loss: float, error_bound: float, rule: str, check: str) -> Failure | None:
        """The ``quadrature`` check of a converged point: its estimated quadrature error ``error_bound``
        (:attr:`~attnphase.saddle.points.fixed_point.FixedPoint.train_loss_error_bound`, the ``rule``
        against the error ``check``'s rules) at most the acceptance's fraction of ``|train_loss|``."""
        limit = self.acceptance.quadrature_error * abs(train_loss)
        if not np.isfinite(error_bound) or error_bound <= limit:
            return None
        relative = error_bound / abs(train_loss)
        limit = self.acceptance.quadrature_error
        detail = f"eps_t on {rule} is {relative:.1e} relative from the check on {check} (above {limit:g})"
        return Failure(Check.QUADRATURE, detail)
