"""The observables of the free entropy at a point (THEORY.md sec. 3, 5): ``Phi``, the training loss
with its kink correction, the energy, the test error, and the independent estimate of the training
loss's quadrature error.

:class:`FreeEntropy` holds the rule, the test rule and the error check; it takes the prox from the
engine and ``E[M*]`` from an evaluation of the map, and computes nothing of ``F`` itself.
"""

from __future__ import annotations

import numpy as np

from attnphase.saddle.compilation.compiled import CompiledSystem
from attnphase.saddle.equations.saddle_map import Evaluation
from attnphase.saddle.geometry.overlaps import OverlapGeometry
from attnphase.saddle.prox.engine import ProxEngine
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.check import QuadratureCheck
from attnphase.saddle.quadrature.kinks import LineCorrection
from attnphase.saddle.quadrature.rules import GaussHermite, QuadratureRule
from attnphase.saddle.tuning import QuadratureTuning
from attnphase.saddle.validation import check_alpha


class FreeEntropy:
    """``Phi`` and the observables of ``compiled`` at constants ``consts`` on the ``rule`` (its nodes and
    weights), the test error on ``test_nodes, test_weights``, the prox from ``engine``; ``line_correction``:
    correct ``E[M*]`` for the kinks along lines on a Gauss-Hermite rule (with ``tuning``'s knobs);
    ``error_check``: the rules of the quadrature error estimate (``None``: none)."""

    def __init__(
        self,
        compiled: CompiledSystem,
        consts: np.ndarray,
        engine: ProxEngine,
        geometry: OverlapGeometry,
        rule: QuadratureRule,
        nodes: tuple[np.ndarray, np.ndarray],
        test_nodes: tuple[np.ndarray, np.ndarray],
        error_check: QuadratureCheck | None,
        line_correction: bool,
        tuning: QuadratureTuning,
        lines: LineCorrection | None = None,
    ) -> None:
        self.compiled, self.consts, self.engine, self.geometry = compiled, consts, engine, geometry
        self.rule, self.error_check, self.line_correction, self.tuning = rule, error_check, line_correction, tuning
        (self.nodes, self.weights), (self.test_nodes, self.test_weights) = nodes, test_nodes
        self._lines = lines

    def on(self, engine: ProxEngine, geometry: OverlapGeometry, consts: np.ndarray) -> FreeEntropy:
        """The same observables with the prox of ``engine`` at the constants ``consts`` (the kink
        correction's grid, a function of the rule alone, is kept)."""
        return FreeEntropy(
            self.compiled,
            consts,
            engine,
            geometry,
            self.rule,
            (self.nodes, self.weights),
            (self.test_nodes, self.test_weights),
            self.error_check,
            self.line_correction,
            self.tuning,
            self._lines,
        )

    def kink_correction(self, params: np.ndarray, z: np.ndarray, values: np.ndarray) -> float:
        """The correction of ``E[M*]`` for the kinks along lines (:mod:`saddle.quadrature.kinks`), given the
        prox ``z`` and ``M*`` at every node; 0 unless ``line_correction`` is set and the rule is a tensor
        Gauss-Hermite rule."""
        if not (self.line_correction and isinstance(self.rule, GaussHermite)):
            return 0.0
        if self._lines is None:
            t = self.tuning
            self._lines = LineCorrection(
                self.nodes,
                self.weights,
                self.rule.order,
                gaussian=self.compiled.dimension,
                flag_ratio=t.kink_flag_ratio,
                min_weight=t.kink_min_weight,
                step=t.kink_step,
                panels=t.kink_panels,
                slope_step=t.slope_step,
            )
        point = self.geometry.kernel_point(params)
        return self._lines(z, values, lambda nodes, starts: self.engine.from_starts(nodes, point, starts)[:2])

    def free_entropy(self, params: np.ndarray, conjugates: np.ndarray, alpha: float) -> float:
        """``Phi`` at the order parameters ``params`` and conjugates ``conjugates`` with this rule for
        ``E[M*]`` (THEORY.md sec. 3; the full prox; with the kink correction if asked for, as in the reported
        eps_t). ``Phi`` is stationary at a fixed point, so evaluated at a fixed point found on another
        (coarser) rule it gives ``eps_t = -Phi`` with this rule's quadrature error plus an error of second
        order in the distance between the two rules' fixed points (tests/test_quadrature.py measures it)."""
        check_alpha(alpha)
        z, value, _, _ = self.engine(params, Effort.FULL)
        return self.phi(params, conjugates, alpha, self.weights @ value + self.kink_correction(params, z, value))

    def train_loss_check(self, params: np.ndarray, conjugates: np.ndarray, alpha: float) -> tuple[float, float]:
        """``eps_t = -Phi`` at ``params`` and ``conjugates`` on each rule of the ``error_check``
        (:class:`~attnphase.saddle.quadrature.check.QuadratureCheck`), the full prox at every point: the
        mean over the scramblings and its standard error (NaN, NaN without a check)."""
        if self.error_check is None:
            return float("nan"), float("nan")
        losses = []
        for rule in self.error_check.rules():
            nodes, weights = self.compiled.rule(rule)
            values = self.engine.full_on(nodes, params).value
            losses.append(-self.phi(params, conjugates, alpha, float(weights @ values)))
        return float(np.mean(losses)), float(np.std(losses, ddof=1) / np.sqrt(len(losses)))

    def loss_observables(
        self, params: np.ndarray, conjugates: np.ndarray, ev: Evaluation, alpha: float, correct_kinks: bool
    ) -> dict[str, float]:
        """``free_entropy`` Phi and ``train_loss`` eps_t = -Phi at ``params`` and ``conjugates`` given the
        evaluation ``ev`` there, with ``E[M*]`` corrected for kinks if ``correct_kinks`` (the correction,
        times alpha, is ``line_correction``), and the independent route, the ``energy``
        ``alpha E[l] + E[R]/d`` (THEORY.md sec. 5)."""
        kink = self.kink_correction(params, ev.z, ev.envelope_values) if correct_kinks else 0.0
        phi = self.phi(params, conjugates, alpha, ev.mean_envelope + kink)
        return {
            "free_entropy": phi,
            "train_loss": -phi,
            "energy": float(alpha * ev.mean_loss + self.compiled.regulariser(conjugates, self.consts)),
            "line_correction": alpha * kink,
        }

    def phi(self, params: np.ndarray, conjugates: np.ndarray, alpha: float, mean_envelope: float) -> float:
        """``Phi`` (THEORY.md sec. 3) given ``E[M*]``."""
        c = self.compiled
        return float(c.trace(params, conjugates) + c.entropic(conjugates, self.consts) - alpha * mean_envelope)

    @property
    def coupling(self) -> np.ndarray:
        """``d^2 Phi / dX dXhat'``: the trace terms' constant coupling of the order parameters and conjugates."""
        return self.compiled.coupling

    def entropic_hessian(self, conjugates: np.ndarray) -> np.ndarray:
        """``d^2 Psi_w / dXhat dXhat'`` at ``conjugates``, in closed form."""
        return self.compiled.entropic_hessian(conjugates, self.consts)

    def regulariser_slope(self) -> float:
        """The least rate at which the regulariser grows from ``W = 0`` (positive under an l1 term)."""
        return float(self.compiled.regulariser_slope(self.consts))

    def test_error(self, params: np.ndarray) -> float:
        """``eps_g`` at ``params`` on the test rule (THEORY.md sec. 5; its integrand is smooth)."""
        point = self.geometry.kernel_point(params)
        return float(self.compiled.test_error(self.test_nodes, self.test_weights, point, self.consts)[0])
