"""The options of a scan, in one object shared by the API, the command line and the phase diagram.

:class:`ScanOptions` holds what a user chooses about a scan's numerics: the quadrature rule, the seed,
the form of the conjugates, alpha_l's finer rule, whether to assess stability, the quadrature error
check, and the :class:`~attnphase.saddle.tuning.Tuning`. Options left at ``None`` take the tuning's
default for the model's Gaussian dimension (:meth:`~attnphase.saddle.tuning.QuadratureTuning.choice`),
so every shipped variant runs at its stated accuracy by default. :meth:`ScanOptions.settings` turns them
into the solver's :class:`~attnphase.saddle.settings.SolverSettings`; :meth:`ScanOptions.record` is what
``run.json`` keeps (every option resolved, the tuning in full), compared by value when a run resumes.
Each field carries its command-line help, from which the commands' options are generated
(:func:`~attnphase.experiments.cli_common.with_scan_options`).
"""

from __future__ import annotations

import dataclasses
import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from attnphase.replica.declaration import AttentionModel, InputTypeError, Interval, shown
from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.prox.policy import ProxChoice
from attnphase.saddle.quadrature.check import CHECK_LOG2_POINTS, QuadratureCheck
from attnphase.saddle.quadrature.rules import GAUSS_HERMITE_ORDER, PRUNE, SOBOL_LOG2_POINTS, GaussHermite, make_rule
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning
from attnphase.saddle.validation import SEED, ParameterError, check, check_type


class Quadrature(enum.StrEnum):
    """The kind of quadrature rule of a scan (:mod:`saddle.quadrature.rules`)."""

    GAUSS_HERMITE = "gauss-hermite"
    SOBOL = "sobol"


class ProxOption(enum.StrEnum):
    """The prox policies a scan traces its branches under (:class:`~attnphase.saddle.prox.policy.ProxChoice`)."""

    GLOBAL = "global"
    LOCAL = "local"
    BOTH = "both"

    @property
    def policies(self) -> tuple[ProxChoice, ...]:
        """The policies, the global one first."""
        return tuple(ProxChoice) if self is ProxOption.BOTH else (ProxChoice(self.value),)


def _option(default: Any, help: str, flag: str | None = None) -> Any:
    return field(default=default, metadata={"help": help, "flag": flag})


@dataclass(frozen=True)
class ScanOptions:
    """The options of a scan (module docstring); each checked on construction, a bad one named in the error."""

    quadrature: Quadrature = _option(Quadrature.GAUSS_HERMITE, "gauss-hermite or sobol.")
    order: int | None = _option(
        None,
        f"Gauss-Hermite points per dimension, {GAUSS_HERMITE_ORDER}, or log2 of the Sobol points, "
        f"{SOBOL_LOG2_POINTS} (default: the tuning's for the model's dimension, 20 up to four Gaussian "
        "dimensions and 8 beyond, and 2^20 Sobol points).",
    )
    prune: float | None = _option(
        None,
        f"Relative weight below which a Gauss-Hermite node is dropped, a number {PRUNE} "
        "(default: the tuning's for the model's dimension, 1e-8 up to four dimensions and 1e-6 beyond).",
    )
    seed: int = _option(
        0, f"Seed of the Sobol scrambling, the extra prox starts and the error check, an integer {SEED}."
    )
    conjugate_form: ConjugateForm = _option(ConjugateForm.SCORE, "score (integration by parts) or envelope.")
    threshold_order: int | None = _option(
        None,
        f"Gauss-Hermite order on which the root of alpha_l is solved, {GAUSS_HERMITE_ORDER} (0: the "
        "scan's rule; default: the tuning's, 32 up to four Gaussian dimensions and 0 beyond).",
    )
    stability: bool = _option(
        True,
        "Assess every fixed point: curvature of the training loss per overlap family, minimum or saddle.",
        "--stability/--no-stability",
    )
    error_check: int = _option(
        QuadratureCheck.log2_points,
        f"log2 of the points of each of four scrambled Sobol rules on which every converged point's training "
        f"loss is evaluated again for its quadrature error, {CHECK_LOG2_POINTS} (0: none).",
    )
    prox: ProxOption = _option(
        ProxOption.GLOBAL,
        "The stationary point of the envelope at every node: global (the global minimiser: the theory of the "
        "training loss's global minimum), local (the minimiser a descent from the cavity mean reaches: GAMP's "
        "fixed points) or both (a scan under each, in the subdirectories global/ and local/).",
    )
    tuning: Tuning = field(default=Tuning(), metadata={"help": None, "flag": None})

    def __post_init__(self) -> None:
        object.__setattr__(self, "quadrature", choice_of(Quadrature, self.quadrature, "quadrature"))
        object.__setattr__(self, "conjugate_form", choice_of(ConjugateForm, self.conjugate_form, "conjugate_form"))
        object.__setattr__(self, "prox", choice_of(ProxOption, self.prox, "prox"))
        if self.order is not None:
            interval = GAUSS_HERMITE_ORDER if self.quadrature is Quadrature.GAUSS_HERMITE else SOBOL_LOG2_POINTS
            object.__setattr__(self, "order", int(check(self.order, "order", interval)))
        if self.prune is not None:
            object.__setattr__(self, "prune", check(self.prune, "prune", PRUNE))
        object.__setattr__(self, "seed", int(check(self.seed, "seed", SEED)))
        if self.threshold_order is not None:
            object.__setattr__(
                self, "threshold_order", _order_or_zero(self.threshold_order, "threshold_order", GAUSS_HERMITE_ORDER)
            )
        check_type(self.stability, "stability", bool, "True or False")
        object.__setattr__(self, "error_check", _order_or_zero(self.error_check, "error_check", CHECK_LOG2_POINTS))
        check_type(self.tuning, "tuning", Tuning, "a Tuning")

    def resolved(self, model: AttentionModel | int) -> ScanOptions:
        """These options with every ``None`` replaced by the tuning's default for ``model`` (or for a
        Gaussian dimension given as an integer)."""
        dimension = model if isinstance(model, int) else _gaussian_dimension(model)
        choice = self.tuning.quadrature.choice(dimension)
        if self.quadrature is Quadrature.SOBOL:
            order = self.tuning.quadrature.sobol_log2 if self.order is None else self.order
        else:
            order = choice.order if self.order is None else self.order
        prune = choice.prune if self.prune is None else self.prune
        threshold = choice.threshold_order if self.threshold_order is None else self.threshold_order
        return replace(self, order=order, prune=prune, threshold_order=threshold)

    def settings(self, model: AttentionModel | int) -> SolverSettings:
        """The solver settings of these options for ``model`` (or a Gaussian dimension): the rule by kind
        and order, the test error on the rule itself (Gauss-Hermite) or on the dimension's default
        Gauss-Hermite rule (beside a Sobol rule), alpha_l's finer rule, the error check seeded with the
        seed, and the tuning."""
        if self.prox is ProxOption.BOTH:
            raise ParameterError("prox: both is a scan under each policy; settings are those of one policy")
        dimension = model if isinstance(model, int) else _gaussian_dimension(model)
        options = self.resolved(dimension)
        rule = make_rule(options.quadrature.value, options.order, options.seed, options.prune)
        if isinstance(rule, GaussHermite):
            test_rule = rule
        else:
            choice = self.tuning.quadrature.choice(dimension)
            test_rule = GaussHermite(choice.order, choice.prune)
        threshold = options.threshold_order
        return SolverSettings(
            quadrature=rule,
            test_quadrature=test_rule,
            conjugate_form=options.conjugate_form,
            threshold_quadrature=GaussHermite(threshold, options.prune) if threshold else None,
            error_check=QuadratureCheck(options.error_check, seed=options.seed) if options.error_check else None,
            seed=options.seed,
            tuning=self.tuning,
            prox=ProxChoice(self.prox.value),
        )

    def record(self, model: AttentionModel | int) -> dict[str, Any]:
        """The options as ``run.json`` records them for ``model``: resolved, the tuning in full."""
        options = self.resolved(model)
        recorded: dict[str, Any] = {}
        for spec in dataclasses.fields(self):
            value = getattr(options, spec.name)
            recorded[spec.name] = value.record() if isinstance(value, Tuning) else _plain(value)
        return recorded

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ScanOptions:
        """The options :meth:`record` wrote (``ValueError`` naming what does not fit)."""
        values = dict(record)
        if "tuning" in values:
            values["tuning"] = Tuning.from_record(values["tuning"])
        unknown = sorted(set(values) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            raise ValueError(f"scan options have no option {unknown[0]!r}")
        return cls(**values)


def _order_or_zero(value: Any, name: str, allowed: Interval) -> int:
    """``value`` as an integer in ``allowed``, or 0 (which means none, or the scan's own rule)."""
    if isinstance(value, int | np.integer) and not isinstance(value, bool) and value == 0:
        return 0
    return int(check(value, name, allowed))


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def choice_of(kind: type[enum.Enum], value: Any, name: str) -> Any:
    """``value`` as a member of the enum ``kind``, else one line naming ``name`` and the choices."""
    try:
        return kind(value)
    except ValueError:
        raise ParameterError(f"{name} must be one of {', '.join(m.value for m in kind)}; got {shown(value)}") from None


def _gaussian_dimension(model: AttentionModel) -> int:
    """``L (r + t)``: the dimension of the model's Gaussian integrals (THEORY.md sec. 2)."""
    if not isinstance(model, AttentionModel):
        raise InputTypeError(f"model must be an AttentionModel declaration; got {shown(model)}")
    return model.gaussian_dimension()


def read_tuning(path: str | Path) -> Tuning:
    """The tuning in the JSON file ``path``: a :meth:`Tuning.record`, or a ``run.json`` that holds one under
    ``options.tuning``; ``ValueError`` naming the file if it holds neither."""
    path = Path(path)
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} holds no tuning: {error}") from None
    if isinstance(payload, dict) and isinstance(payload.get("options"), dict) and "tuning" in payload["options"]:
        payload = payload["options"]["tuning"]
    try:
        return Tuning.from_record(payload)
    except (TypeError, ValueError) as error:
        raise ValueError(f"{path} holds no tuning: {error}") from None
