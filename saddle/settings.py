"""How fixed points are computed: the solver's settings and the global prox's multi-start policy
(THEORY.md sec. 4), each field checked against its range on construction (:mod:`saddle.validation`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from attnphase.saddle.quadrature import GaussHermite, QuadratureCheck, QuadratureRule, ScrambledSobol
from attnphase.saddle.validation import (
    PROX_RANGES,
    SOLVER_RANGES,
    check_choice,
    check_fields,
    check_type,
)

#: The prox dimension (``L r``) above which random start directions are added by default
#: (:meth:`ProxSettings.directions`).
RANDOM_STARTS_ABOVE = 2


@dataclass(frozen=True)
class ProxSettings:
    """Multi-start policy and tolerances of the global prox (:mod:`saddle.kernels`).

    ``warm_start``: the quick evaluations of a root search or a Hessian's differences
    (:meth:`SaddleMap.prox` with ``thorough=False``) also start from every distinct minimum the last
    thorough evaluation on the same nodes found at each node, so that they follow the basins the
    thorough starts found nearby. Every point is still verified by a thorough evaluation from the fixed
    starts alone (:meth:`~attnphase.saddle.solver.SaddlePointSolver.observe`).

    ``extra_directions``: the number of random unit vectors ``u_j`` (drawn with ``seed``) whose shifts
    ``+-omega +- sqrt(V) u_j`` are thorough starts too, the first direction's at every node and the others'
    where the declared starts and the first direction do not agree on one minimum
    (:meth:`SaddleMap._multistart`); ``None`` (the default) takes :meth:`directions` of the prox's dimension.
    """

    extra_directions: int | None = None
    gradient_tolerance: float = 1e-11
    max_iterations: int = 60
    seed: int = 0
    warm_start: bool = True

    def __post_init__(self) -> None:
        check_type(self.warm_start, "warm_start", bool, "True or False")
        automatic = {"extra_directions"} if self.extra_directions is None else set()
        check_fields(self, {name: r for name, r in PROX_RANGES.items() if name not in automatic})

    def directions(self, prox_dimension: int) -> int:
        """The random start directions at a prox of ``prox_dimension`` (``L r``) coordinates:
        ``extra_directions`` if given, else none up to :data:`RANDOM_STARTS_ABOVE` coordinates and
        one per coordinate beyond. Measured at the fixed points of the paper's model (two
        coordinates), eight directions change nothing (tests/test_fixed_points.py); at those of a
        three-token declaration, the declared starts miss lower minima at some nodes (``F`` moves by
        up to 1.7e-7), three directions find them and twelve or 48 change nothing more."""
        if self.extra_directions is not None:
            return self.extra_directions
        return prox_dimension if prox_dimension > RANDOM_STARTS_ABOVE else 0


@dataclass(frozen=True)
class SolverSettings:
    """How fixed points are computed.

    ``conjugate_form``: ``"score"`` evaluates the conjugates of ``q, m, theta`` in the
    Gaussian integration-by-parts form ``E[M* s_X]`` (continuous integrand), ``"envelope"``
    as ``E[dM/dX at prox]`` (discontinuous where the prox jumps between basins); the two are
    equal in exact arithmetic (THEORY.md sec. 4). ``test_quadrature`` integrates the smooth
    test-error integrand. ``fold_symmetries``: compute the prox on one node per orbit of the
    envelope's symmetries at the current overlaps (:mod:`saddle.symmetry`); the result is
    the same up to rounding. ``error_check``: the independent randomised rules on which the training
    loss of every converged point is evaluated again, for its quadrature error
    (:class:`~attnphase.saddle.quadrature.QuadratureCheck`; ``None``: no estimate).
    """

    quadrature: QuadratureRule = GaussHermite(20)
    test_quadrature: QuadratureRule = GaussHermite(20)
    conjugate_form: Literal["score", "envelope"] = "score"
    method: Literal["newton", "broyden", "hybr", "damped"] = "newton"
    tolerance: float = 1e-9
    accept: float = 1e-8
    max_evaluations: int = 60
    damping: float = 0.5
    prox: ProxSettings = ProxSettings()
    fold_symmetries: bool = True
    line_correction: bool = True
    threshold_quadrature: GaussHermite | None = GaussHermite(32)
    energy_tolerance: float = 1e-6
    prox_tolerance: float = 1e-6
    kink_tolerance: float = 0.05
    error_check: QuadratureCheck | None = QuadratureCheck()

    def __post_init__(self) -> None:
        rules, rule = (GaussHermite, ScrambledSobol), "a GaussHermite or ScrambledSobol rule"
        check_type(self.quadrature, "quadrature", rules, rule)
        check_type(self.test_quadrature, "test_quadrature", rules, rule)
        check_type(
            self.threshold_quadrature, "threshold_quadrature", (GaussHermite, type(None)), "a GaussHermite or None"
        )
        check_type(self.prox, "prox", ProxSettings, "a ProxSettings")
        check_type(self.error_check, "error_check", (QuadratureCheck, type(None)), "a QuadratureCheck or None")
        for flag in ("fold_symmetries", "line_correction"):
            check_type(getattr(self, flag), flag, bool, "True or False")
        check_choice(self.conjugate_form, "conjugate_form", ("score", "envelope"))
        check_choice(self.method, "method", ("newton", "broyden", "hybr", "damped"))
        check_fields(self, SOLVER_RANGES)
