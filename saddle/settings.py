"""How fixed points are computed: the rules, the form of the conjugates, the seed and the
:class:`~attnphase.saddle.tuning.Tuning` (THEORY.md sec. 4), each field checked on construction."""

from __future__ import annotations

from dataclasses import dataclass

from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.prox.policy import ProxChoice
from attnphase.saddle.quadrature.check import QuadratureCheck
from attnphase.saddle.quadrature.rules import GaussHermite, QuadratureRule, ScrambledSobol
from attnphase.saddle.tuning import Tuning
from attnphase.saddle.validation import SEED, check, check_choice, check_type


@dataclass(frozen=True)
class SolverSettings:
    """How fixed points are computed.

    ``quadrature``: the rule of ``F``; ``test_quadrature``: the rule of the smooth test-error integrand;
    ``conjugate_form``: the conjugates of ``q, m, theta`` in the Gaussian integration-by-parts form
    (``score``, a continuous integrand) or as ``E[dM/dX at prox]`` (``envelope``, discontinuous where the
    prox jumps between basins), equal in exact arithmetic (THEORY.md sec. 4); ``threshold_quadrature``: the
    finer rule of alpha_l's root (``None``: the scan's own); ``error_check``: the independent randomised
    rules on which the training loss of every converged point is evaluated again, for its quadrature error
    (:class:`~attnphase.saddle.quadrature.check.QuadratureCheck`; ``None``: no estimate); ``seed``: of the
    prox's random start directions and of the envelope's symmetry tests; ``fold_symmetries``: compute the
    prox on one node per orbit of the envelope's symmetries (the result is the same up to rounding);
    ``line_correction``: correct ``E[M*]`` for its kinks along lines (:mod:`saddle.quadrature.kinks`; under the
    global policy only, where ``M*`` is continuous: the local policy's jumps where the descent's basin changes);
    ``tuning``: every other numerical choice; ``prox``: the stationary point of the envelope taken at
    every node (:class:`~attnphase.saddle.prox.policy.ProxChoice`: the global minimiser, the default and
    the theory of the global minimum, or the local one a descent from the cavity mean reaches).
    """

    quadrature: QuadratureRule = GaussHermite(20)
    test_quadrature: QuadratureRule = GaussHermite(20)
    conjugate_form: ConjugateForm = ConjugateForm.SCORE
    threshold_quadrature: GaussHermite | None = GaussHermite(32)
    error_check: QuadratureCheck | None = QuadratureCheck()
    seed: int = 0
    fold_symmetries: bool = True
    line_correction: bool = True
    tuning: Tuning = Tuning()
    prox: ProxChoice = ProxChoice.GLOBAL

    def __post_init__(self) -> None:
        rules, rule = (GaussHermite, ScrambledSobol), "a GaussHermite or ScrambledSobol rule"
        check_type(self.quadrature, "quadrature", rules, rule)
        check_type(self.test_quadrature, "test_quadrature", rules, rule)
        check_type(
            self.threshold_quadrature, "threshold_quadrature", (GaussHermite, type(None)), "a GaussHermite or None"
        )
        check_type(self.error_check, "error_check", (QuadratureCheck, type(None)), "a QuadratureCheck or None")
        check_type(self.tuning, "tuning", Tuning, "a Tuning")
        for flag in ("fold_symmetries", "line_correction"):
            check_type(getattr(self, flag), flag, bool, "True or False")
        form = check_choice(self.conjugate_form, "conjugate_form", tuple(f.value for f in ConjugateForm))
        object.__setattr__(self, "conjugate_form", ConjugateForm(form))
        prox = check_choice(self.prox, "prox", tuple(p.value for p in ProxChoice))
        object.__setattr__(self, "prox", ProxChoice(prox))
        object.__setattr__(self, "seed", check(self.seed, "seed", SEED))
