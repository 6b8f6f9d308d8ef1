"""The saddle-point map ``F`` of one compiled model on one quadrature rule, and its derivatives
(THEORY.md sec. 4).

``F`` sends the order parameters ``x = (q, m, V, theta)`` to new ones: the prox at every quadrature node
(:class:`~attnphase.saddle.prox.engine.ProxEngine`) -> the energetic conjugates -> the closed-form
entropic update. :class:`SaddleMap` evaluates it (:meth:`SaddleMap.evaluate`) and its Jacobian in closed
form (the derivatives of the integrands derived in ``replica/``, the prox moving with the order
parameters by the implicit function theorem: :meth:`SaddleMap.map_jacobian`); :class:`MemoisedMap`
evaluates each point of a root search once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from attnphase.saddle.compilation.compiled import CompiledSystem
from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.geometry.overlaps import OverlapGeometry
from attnphase.saddle.prox.engine import ProxEngine
from attnphase.saddle.prox.policy import Effort


@dataclass
class Evaluation:
    """Everything one evaluation of ``F`` computes."""

    params: np.ndarray
    conjugates: np.ndarray
    updated: np.ndarray
    mean_envelope: float
    mean_loss: float
    prox_unconverged: int
    prox_unconverged_weight: float  # quadrature weight of the nodes whose prox has not converged
    z: np.ndarray  # the prox at every node
    envelope_values: np.ndarray  # M* at every node
    expectations: np.ndarray  # E[dM/dX at prox] per order parameter (in the map's conjugate form)
    # a full evaluation's distinct minima per node (S, k, N) on its fold's representatives, else None
    minima: np.ndarray | None = None


class SaddleMap:
    """``F`` of ``compiled`` at the constants ``consts`` on the rule ``(nodes, weights)``, with the prox of
    ``engine`` and the conjugates in ``form``; a node's prox counts as converged below ``converged_gradient``."""

    def __init__(
        self,
        compiled: CompiledSystem,
        consts: np.ndarray,
        engine: ProxEngine,
        geometry: OverlapGeometry,
        nodes: np.ndarray,
        weights: np.ndarray,
        form: ConjugateForm,
        converged_gradient: float,
    ) -> None:
        self.compiled, self.consts, self.engine, self.geometry = compiled, consts, engine, geometry
        self.nodes, self.weights, self.form, self.converged_gradient = nodes, weights, form, converged_gradient

    def in_score_form(self, params: np.ndarray) -> bool:
        """The conjugates at ``params`` are integrated in the score form: the map's form is the score form
        and the student does not vanish there (the score form divides by ``q``)."""
        return self.form is ConjugateForm.SCORE and not self.geometry.vanishes(params)

    def evaluate(
        self, params: np.ndarray, alpha: float, effort: Effort = Effort.FULL, around: Evaluation | None = None
    ) -> Evaluation:
        """One application of the saddle-point map at ``params`` (``effort``: the prox's starts; ``around``: a
        full evaluation nearby whose minima start the prox, :meth:`ProxEngine.__call__`); at a vanishing
        student, its limit (:meth:`OverlapGeometry.kernel_point`)."""
        z, value, grad, minima = self.engine(params, effort, around)
        form = self.compiled.score if self.in_score_form(params) else self.compiled.energetic
        integrals = self.integrated(form, z, params)
        conj = self.compiled.conjugates(np.array([alpha]), integrals[2:], self.consts)
        updated = self.compiled.orders(conj, self.consts)
        unconverged = ~(grad <= self.converged_gradient)  # NaN counts as unconverged
        return Evaluation(
            params,
            conj,
            updated,
            float(integrals[0]),
            float(integrals[1]),
            int(unconverged.sum()),
            float(self.weights[unconverged].sum()),
            z,
            value,
            integrals[2:],
            minima if effort is Effort.FULL else None,
        )

    def integrated(self, kernel, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``kernel(z, nodes, weights, point, consts)`` over the rule at the prox ``z`` at ``params``, with
        every node that an element of the fold's group fixes averaged over the images of its prox under
        those elements (:meth:`~attnphase.saddle.prox.symmetry.Fold.mirrored`: where they move it, the node is
        a tie between equally good minima)."""
        point = self.geometry.kernel_point(params)
        fold = self.engine.fold(point)
        if fold is None or not fold.fixed:
            return kernel(z, self.nodes, self.weights, point, self.consts)
        weights = self.weights / fold.stabiliser_sizes
        total = kernel(z, self.nodes, weights, point, self.consts)
        for nodes, image in fold.mirrored(z):
            on_plane = np.ascontiguousarray(self.nodes[:, nodes])
            total = total + kernel(np.ascontiguousarray(image), on_plane, weights[nodes], point, self.consts)
        return total

    def map_jacobian(self, ev: Evaluation, alpha: float) -> np.ndarray:
        """``dF/dx`` at the point of the evaluation ``ev``: the closed-form derivatives of the entropic and
        conjugate updates times the derivative of the expectations ``E[dM/dX]`` in the order parameters,
        with the prox of ``ev`` moving with them
        (:class:`~attnphase.replica.saddle_equations.IntegrandDerivatives`): on the rule, the exact
        derivative of ``F`` wherever no node's prox changes basin (tests/test_jacobian.py compares it with
        differences of ``F``)."""
        return self.order_jacobian(ev.conjugates) @ self.conjugate_jacobian(ev, alpha)

    def order_jacobian(self, conjugates: np.ndarray) -> np.ndarray:
        """``d orders / d conjugates``: the entropic update's derivative, in closed form."""
        return self.compiled.order_jacobian(conjugates, self.consts)

    def orders(self, conjugates: np.ndarray) -> np.ndarray:
        """The entropic update: the order parameters the ``conjugates`` give (THEORY.md sec. 4)."""
        return self.compiled.orders(conjugates, self.consts)

    def conjugate_jacobian(self, ev: Evaluation, alpha: float) -> np.ndarray:
        """``d Xhat / dY``: the derivative of the energetic conjugates in the order parameters at the point
        of the evaluation ``ev`` (:meth:`expectation_jacobian`, the conjugate updates closed form)."""
        slope = self.compiled.conjugate_jacobian(np.array([alpha]), ev.expectations, self.consts)
        return slope @ self.expectation_jacobian(ev)

    def expectation_jacobian(self, ev: Evaluation) -> np.ndarray:
        """``d E[dM*/dX] / dY`` (rows ``X``, columns ``Y``) at the point of the evaluation ``ev``, in the form
        ``ev``'s expectations were integrated in, the prox of ``ev`` moving with the order parameters
        (:class:`~attnphase.replica.saddle_equations.IntegrandDerivatives`): the Hessian of ``E[M*]``."""
        c = self.compiled
        kernel = c.score_jacobian if self.in_score_form(ev.params) else c.energetic_jacobian
        return self.integrated(kernel, ev.z, ev.params)

    def alpha_derivative(self, ev: Evaluation, alpha: float) -> np.ndarray:
        """``dF/dalpha`` at the point of the evaluation ``ev`` (the expectations do not depend on alpha)."""
        c = self.compiled
        slope = c.conjugate_alpha_derivative(np.array([alpha]), ev.expectations, self.consts)
        return self.order_jacobian(ev.conjugates) @ slope

    def free_entropy_gradient(self, ev: Evaluation, alpha: float, conjugates: np.ndarray) -> np.ndarray:
        """``dPhi/dx`` at the point of ``ev`` with the given ``conjugates`` (THEORY.md sec. 3): minus the
        gradient of the training loss in the order parameters."""
        return self.compiled.gradient(np.array([alpha]), ev.expectations, ev.params, conjugates, self.consts)


class MemoisedMap:
    """``F`` at ``alpha`` (:meth:`SaddleMap.evaluate`) and its Jacobian (:meth:`SaddleMap.map_jacobian`),
    each point evaluated once: a root search returns to points it has seen (the best iterate). ``len`` is
    the number of evaluations of ``F`` made. Non-finite values are kept, not warned about."""

    def __init__(self, saddle_map: SaddleMap, alpha: float, effort: Effort) -> None:
        self.map, self.alpha, self.effort = saddle_map, alpha, effort
        self._cache: dict[bytes, Evaluation] = {}
        self._jacobians: dict[bytes, np.ndarray] = {}

    def __call__(self, params: np.ndarray) -> Evaluation:
        key = params.tobytes()
        if key not in self._cache:
            with np.errstate(all="ignore"):
                self._cache[key] = self.map.evaluate(params, self.alpha, self.effort)
        return self._cache[key]

    def jacobian(self, params: np.ndarray) -> np.ndarray:
        """``dF/dx`` at ``params`` (the prox of this map's evaluation there)."""
        key = params.tobytes()
        if key not in self._jacobians:
            with np.errstate(all="ignore"):
                self._jacobians[key] = self.map.map_jacobian(self(params), self.alpha)
        return self._jacobians[key]

    def alpha_derivative(self, params: np.ndarray) -> np.ndarray:
        """``dF/dalpha`` at ``params``."""
        with np.errstate(all="ignore"):
            return self.map.alpha_derivative(self(params), self.alpha)

    def __len__(self) -> int:
        return len(self._cache)
