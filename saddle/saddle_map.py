"""The saddle-point map ``F`` of one compiled model on one quadrature rule (THEORY.md sec. 4, 5).

``F`` sends the order parameters ``x = (q, m, V, theta)`` to new ones: the global prox at every
quadrature node -> the energetic conjugates -> the closed-form entropic update. :class:`SaddleMap`
evaluates it (:meth:`SaddleMap.evaluate`), its Jacobian in closed form (the derivatives of the
integrands derived in ``replica/``, the prox moving with the order parameters by the implicit function
theorem: :meth:`SaddleMap.map_jacobian`) and the free entropy with its kink correction; it owns the
prox's multi-start policy (:class:`~attnphase.saddle.settings.ProxSettings`) and the fold of the rule
under the envelope's symmetries (:mod:`saddle.symmetry`). :class:`ScaledResidual` is ``F(x) - x`` as
the residual a root finder (:mod:`saddle.roots`) drives to zero.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np

from attnphase.saddle.compiled import CompiledSystem
from attnphase.saddle.line_correction import LineCorrection
from attnphase.saddle.overlaps import VANISHING_PROBE, OverlapGeometry, SymmetryPattern
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.symmetry import Fold, envelope_symmetries, fold_nodes
from attnphase.saddle.validation import check_alpha

#: A node's prox has converged when the gradient of the envelope there is below this.
PROX_GRADIENT_TOLERANCE = 1e-7

#: Thorough proxes a map and its renewed copies remember (:meth:`SaddleMap._thorough_prox`).
THOROUGH_MEMORY = 4
#: A prox at every node with every distinct minimum found there: ``(z (k, N), M (N,), |grad M| (N,),
#: minima (S, k, N))`` (:func:`saddle.kernels.prox_kernel`).
Minimised = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def declared_start_count(count: int, directions: int) -> int:
    """How many of the ``count`` thorough starts of :meth:`SaddleMap._starts` are the declared ones: they
    come first, then the shifts ``+-omega + sqrt(V) u_j`` of each of the ``directions``, then their
    negatives (four per direction)."""
    return count - 4 * directions


def first_direction_split(count: int, directions: int) -> tuple[np.ndarray, np.ndarray]:
    """The indices, among the ``count`` thorough starts of :meth:`SaddleMap._starts`
    (:func:`declared_start_count`), of the declared starts with the first direction's four shifts, and of
    the other directions' shifts."""
    declared = declared_start_count(count, directions)
    first = np.r_[: declared + 2, declared + 2 * directions : declared + 2 * directions + 2]
    return first, np.setdiff1d(np.arange(count), first)


def _slots_used(minima: np.ndarray) -> int:
    """The number of leading slots of ``minima (S, k, N)`` that hold a minimum at some node."""
    used = np.flatnonzero(np.isfinite(minima[:, 0, :]).any(axis=1))
    return int(used[-1]) + 1 if used.size else 1


#: The scaled residual (:class:`ScaledResidual`) where ``F`` is not finite or the point is outside the domain.
OUTSIDE_DOMAIN = 1e6


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
    expectations: np.ndarray  # E[dM/dX at prox] per order parameter (in the settings' conjugate form)
    # a thorough evaluation's distinct minima per node (S, k, N) on its fold's representatives, else None
    minima: np.ndarray | None = None


class SaddleMap:
    """``F`` of ``compiled`` at the constants ``consts`` on the rules of ``settings``
    (``quadrature`` for ``F``, ``test_quadrature`` for the test error)."""

    def __init__(self, compiled: CompiledSystem, settings: SolverSettings, consts: np.ndarray) -> None:
        self.compiled = compiled
        self.settings = settings
        self.consts = consts
        self.overlaps = OverlapGeometry(compiled, consts)
        self.nodes, self.weights = compiled.rule(settings.quadrature)
        self.test_nodes, self.test_weights = compiled.rule(settings.test_quadrature)
        rng = np.random.default_rng(settings.prox.seed)
        k = compiled.prox_dimension
        directions = rng.standard_normal((settings.prox.directions(k), k))
        self._directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
        self._folds: dict[SymmetryPattern, Fold | None] = {}
        self._warm: dict[SymmetryPattern, np.ndarray] = {}  # the last thorough prox's minima per symmetry pattern
        self._thorough: dict[tuple[bytes, bytes], Minimised] = {}
        self._lines: LineCorrection | None = None

    def renewed(self) -> SaddleMap:
        """This map without warm prox starts (what it computes then depends only on what it is asked),
        keeping the symmetry folds (found at generic points) and sharing the memory of thorough proxes
        (a function of the point and the constants alone)."""
        other = copy.copy(self)
        other._warm, other._folds = {}, dict(self._folds)
        return other

    def with_constants(self, consts: np.ndarray) -> SaddleMap:
        """This map, renewed (:meth:`renewed`), at other values ``consts`` of the declaration's constants
        (the folds' groups, found at generic values, hold at other generic values)."""
        other = self.renewed()
        other.consts = consts
        other.overlaps = OverlapGeometry(self.compiled, consts)
        return other

    # ------------------------------------------------------------------ the prox
    def prox(
        self, params: np.ndarray, thorough: bool = True, around: Evaluation | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Global prox at every quadrature node: ``(z (k, N), M (N,), |grad M| (N,))``.

        Starts, if ``thorough``: the system's starts (:func:`replica.saddle_equations._prox_starts`, the
        first two ``+-omega``) and ``+-omega +- sqrt(V) u_j`` for
        :meth:`~attnphase.saddle.settings.ProxSettings.directions` fixed unit vectors ``u_j``, all but the
        first direction's where those do not agree on one minimum (:meth:`_multistart`). The start
        set is closed under ``z -> -z`` and ``omega -> -omega``, so the symmetries of ``M`` carry over
        exactly to the computed ``M*``. Without ``thorough`` (the quick map of a root search or of a
        Hessian's differences), the starts are ``+-omega`` after every distinct minimum the last thorough
        prox on the same nodes found at each node, its lowest first (``ProxSettings.warm_start``;
        :func:`saddle.kernels.prox_kernel`), where ``+-omega`` stop once they reach one of those. The
        minima follow every basin the thorough starts found, so a node whose lowest minimum moves to
        another of them is seen to; ``+-omega`` find a basin born since. Either alone misses basins the
        thorough starts find (tests/test_landscape.py).

        ``around``: a thorough evaluation on this rule at a point near ``params`` (a difference step
        away, which may leave its zero pattern). The prox then starts from every minimum ``around``'s
        prox found at each node and their images under the symmetries of its fold
        (:meth:`~attnphase.saddle.symmetry.Fold.images`), refined first, then from the system's starts
        if ``thorough`` (in place of the random directions; without random directions a thorough
        prox has its usual starts), else from ``+-omega``: the basins the thorough starts found are
        among ``around``'s minima, and where the move breaks a symmetry, a node on or near a mirror
        plane may fall into the mirror image of its minimum.
        """
        z, value, grad, _ = self._prox_and_minima(params, thorough, around)
        return z, value, grad

    def _prox_and_minima(self, params: np.ndarray, thorough: bool, around: Evaluation | None) -> Minimised:
        """:meth:`prox` and the distinct minima its starts found at each node, on the representatives of
        the fold at ``params`` (``(S, k, N)``, the lowest first; :func:`saddle.kernels.prox_kernel`)."""
        point = self.overlaps.kernel_point(params)
        tolerance = self._prox_tolerance(params)
        fold = self.fold(point)
        nodes = self.nodes if fold is None else fold.nodes
        pattern = self.overlaps.symmetry_pattern(point)
        if around is not None and (len(self._directions) or not thorough):
            declared = self.compiled.starts(nodes, point, self.consts, first=None if thorough else 2)
            found = self._minimised(nodes, point, np.concatenate([self._near(around, fold), declared]), tolerance)
        else:
            starts = self._starts(nodes, point, thorough, pattern)
            prox = self._thorough_prox if thorough else self._minimised
            found = prox(nodes, point, starts, tolerance)
        z, value, grad, minima = found
        minima = minima[: _slots_used(minima)]
        if thorough and self.settings.prox.warm_start:
            self._warm[pattern] = minima
        if fold is None:
            return z, value, grad, minima
        return fold.unfold_z(z), fold.unfold(value), fold.unfold(grad), minima

    def _prox_tolerance(self, params: np.ndarray) -> float:
        """The prox's gradient tolerance at ``params``: at a vanishing student the prox moves by about
        ``sqrt(VANISHING_PROBE)`` of its usual scale (:meth:`OverlapGeometry.kernel_point`)."""
        scale = 1.0 if self.overlaps.kernel_point(params) is params else np.sqrt(VANISHING_PROBE)
        return self.settings.prox.gradient_tolerance * scale

    def _near(self, around: Evaluation, fold: Fold | None) -> np.ndarray:
        """Every minimum the prox of the thorough evaluation ``around`` found at each node, each followed
        by its images under the symmetries of ``around``'s fold (:meth:`prox`), at the nodes ``fold``
        computes the prox on: ``(S, k, N)``."""
        if around.z.shape[1] != self.nodes.shape[1]:
            raise ValueError("around: an evaluation on another rule than this map's")
        if around.minima is None:
            raise ValueError("around: an evaluation with every prox start (thorough)")
        around_fold = self.fold(self.overlaps.kernel_point(around.params))
        starts = []
        for minimum in around.minima:
            z = minimum if around_fold is None else around_fold.unfold_z(minimum)
            z = z if fold is None else z[:, fold.representatives]
            starts += [z, *([] if around_fold is None else around_fold.images(z))]
        return np.stack(starts)

    def _starts(self, nodes: np.ndarray, point: np.ndarray, thorough: bool, pattern: SymmetryPattern) -> np.ndarray:
        """The prox starts ``(S, k, N)`` at ``nodes`` and the kernel point ``point`` (:meth:`prox`)."""
        if not thorough:
            probes = self.compiled.starts(nodes, point, self.consts, first=2)
            warm = self._warm.get(pattern) if self.settings.prox.warm_start else None
            # a pattern met first outside the domain has no fold, and its warm start is then on all nodes
            if warm is not None and warm.shape[2] == nodes.shape[1]:
                return np.concatenate([warm, probes])  # first: the probes stop where they reach a known basin
            return probes
        starts = self.compiled.starts(nodes, point, self.consts)
        if len(self._directions):
            omega = starts[0]
            scale = np.sqrt(self.overlaps.largest_response(point))
            shifted = [sign * omega + scale * u[:, None] for u in self._directions for sign in (1, -1)]
            starts = np.concatenate([starts, np.stack(shifted), -np.stack(shifted)])
        return starts

    def _multistart(self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float) -> Minimised:
        """The prox from the thorough ``starts`` (:meth:`_starts`: the declared ones, then the four shifts
        of each random direction): the declared starts and the first direction's shifts at every node,
        the other directions' shifts only at the nodes where those do not agree on one minimum (they end
        in two or more, or none converges), each refined after the minima found there. Where the
        declared starts, spread over the teacher's fields, the exact-fit points and ``+-omega``, and the
        first random direction all end in one minimum, the envelope shows one basin: at every thorough
        prox of 20-alpha scans of the three-token, untied and rank-2 variants the other directions found
        no minimum lower by more than 1.5e-10 at such a node (docs/validation.md, "Six dimensions"; the
        declared starts alone missed one lower by up to 1.4e-4 at three rank-2 proxes, which the first
        direction finds), nor at the three-token point where the random starts lower ``E[M*]``
        (tests/test_fixed_points.py). The random starts, far from
        every minimum, cost most of the thorough prox."""
        if not len(self._directions):
            return self._minimised(nodes, params, starts, tolerance)
        first, rest = first_direction_split(len(starts), len(self._directions))
        found = self._minimised(nodes, params, np.ascontiguousarray(starts[first]), tolerance)
        z, value, grad, minima = found
        uncertain = np.flatnonzero(np.isfinite(minima[:, 0, :]).sum(axis=0) != 1)
        if not rest.size or not uncertain.size:
            return found
        again = np.concatenate([minima[:, :, uncertain], starts[rest][:, :, uncertain]])
        z_u, value_u, grad_u, minima_u = self._minimised(
            np.ascontiguousarray(nodes[:, uncertain]), params, np.ascontiguousarray(again), tolerance
        )
        z[:, uncertain], value[uncertain], grad[uncertain] = z_u, value_u, grad_u
        every = np.full((len(again), *minima.shape[1:]), np.nan)
        every[: len(minima)] = minima
        every[:, :, uncertain] = minima_u
        return z, value, grad, every

    def _thorough_prox(self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float) -> Minimised:
        """:meth:`_multistart`, remembered for the last ``THOROUGH_MEMORY`` points: it depends
        on the point and the constants only (the starts are fixed), so the stability assessment of a
        point just verified, or a point verified twice, costs no second prox. The memory is shared with
        the map's renewed copies (:meth:`renewed`), whose results it therefore does not change."""
        key = (params.tobytes(), self.consts.tobytes())
        if key not in self._thorough:
            found = self._multistart(nodes, params, starts, tolerance)
            for array in found:
                array.setflags(write=False)  # shared by every caller
            self._thorough[key] = found
            while len(self._thorough) > THOROUGH_MEMORY:
                del self._thorough[next(iter(self._thorough))]
        return self._thorough[key]

    def prox_from(
        self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float | None = None
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The best of Newton refined from ``starts (S, k, N)`` at ``nodes (D, N)`` to a gradient of
        ``tolerance`` (by default ``ProxSettings.gradient_tolerance``): ``(z, M, |grad M|)``."""
        return self._minimised(nodes, params, starts, tolerance)[:3]

    def _minimised(
        self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float | None = None
    ) -> Minimised:
        """:meth:`prox_from` and every distinct minimum found at each node (:func:`saddle.kernels.prox_kernel`)."""
        s = self.settings.prox
        return self.compiled.prox(
            np.ascontiguousarray(nodes),
            params,
            self.consts,
            np.ascontiguousarray(starts),
            s.gradient_tolerance if tolerance is None else tolerance,
            s.max_iterations,
        )

    def fold(self, params: np.ndarray) -> Fold | None:
        """The fold of the rule under the envelope's symmetries at overlaps with the symmetry pattern
        of ``params`` (:meth:`OverlapGeometry.symmetry_pattern`: its zero entries and the column
        permutations that leave it unchanged), found once per pattern, at two generic points of the
        pattern (:meth:`OverlapGeometry.generic_points`); ``None`` if there is nothing to fold."""
        if not self.settings.fold_symmetries:
            return None
        pattern = self.overlaps.symmetry_pattern(params)
        if pattern in self._folds:
            return self._folds[pattern]
        system = self.compiled.system
        L = system.sigma_tilde.shape[0]
        r = self.compiled.prox_dimension // L
        t = self.compiled.dimension // L - r
        rng = np.random.default_rng(self.settings.prox.seed)
        pairs = system.labels.pairs
        values, probabilities = system.label_rule()
        labels = (pairs, np.array(values, dtype=float).reshape(len(pairs), len(probabilities)))
        groups = []
        for point in self.overlaps.generic_points(params, rng):
            found = envelope_symmetries(self.envelope_at(point), L, r, t, rng, labels=labels)
            if found is not None:  # None: M is not finite there (overlaps out of range)
                groups.append(set(found))
        if not groups:  # an iterate outside the domain: no fold here, and none remembered for the pattern
            return None
        group = sorted(set.intersection(*groups), key=repr)
        self._folds[pattern] = fold_nodes(self.nodes, self.weights, group, r, t, pairs)
        return self._folds[pattern]

    def envelope_at(self, params: np.ndarray):
        """``M(z, n)`` at ``params`` for every column of ``z`` and ``nodes`` (for the symmetry test):
        the prox kernel with the given ``z`` as its one start and no Newton step."""

        def envelope(z: np.ndarray, nodes: np.ndarray) -> np.ndarray:
            starts = np.ascontiguousarray(z, dtype=float)[None]
            columns = np.ascontiguousarray(nodes, dtype=float)
            _, values, _, _ = self.compiled.prox(columns, params, self.consts, starts, 0.0, 0)
            return values

        return envelope

    # ------------------------------------------------------------------ F and its derivatives
    def in_score_form(self, params: np.ndarray) -> bool:
        """The conjugates at ``params`` are integrated in the score form: the settings ask for it and the
        student does not vanish there (the score form divides by ``q``:
        :meth:`OverlapGeometry.kernel_point`)."""
        return self.settings.conjugate_form == "score" and not self.overlaps.vanishes(params)

    def evaluate(
        self, params: np.ndarray, alpha: float, thorough: bool = True, around: Evaluation | None = None
    ) -> Evaluation:
        """One application of the saddle-point map at ``params`` (``thorough``: all prox starts; ``around``:
        a thorough evaluation nearby whose minima start the prox, :meth:`prox`);
        at a vanishing student, its limit (:meth:`OverlapGeometry.kernel_point`)."""
        z, value, grad, minima = self._prox_and_minima(params, thorough, around)
        form = self.compiled.score if self.in_score_form(params) else self.compiled.energetic
        integrals = self.integrated(form, z, params)
        conj = self.compiled.conjugates(np.array([alpha]), integrals[2:], self.consts)
        updated = self.compiled.orders(conj, self.consts)
        unconverged = ~(grad <= PROX_GRADIENT_TOLERANCE)  # NaN counts as unconverged
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
            minima if thorough else None,
        )

    def integrated(self, kernel, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``kernel(z, nodes, weights, point, consts)`` over the rule at the prox ``z`` at ``params``, with
        every node that an element of the fold's group fixes averaged over the images of its prox under
        those elements (:meth:`~attnphase.saddle.symmetry.Fold.mirrored`: where they move it, the node is
        a tie between equally good minima)."""
        point = self.overlaps.kernel_point(params)
        fold = self.fold(point)
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
        with the prox of ``ev`` moving with them (:class:`~attnphase.replica.saddle_equations.
        IntegrandDerivatives`): on the rule, the exact derivative of ``F`` wherever no node's prox changes
        basin (tests/test_jacobian.py compares it with differences of ``F``)."""
        return self.compiled.order_jacobian(ev.conjugates, self.consts) @ self.conjugate_jacobian(ev, alpha)

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
        return c.order_jacobian(ev.conjugates, self.consts) @ slope

    # ------------------------------------------------------------------ the free entropy
    def kink_correction(self, params: np.ndarray, z: np.ndarray, values: np.ndarray) -> float:
        """The correction of ``E[M*]`` for the kinks along lines (:mod:`saddle.line_correction`),
        given the prox ``z`` and ``M*`` at every node; 0 unless ``line_correction`` is set and
        the rule is a tensor Gauss-Hermite rule."""
        rule = self.settings.quadrature
        if not (self.settings.line_correction and isinstance(rule, GaussHermite)):
            return 0.0
        if self._lines is None:
            self._lines = LineCorrection(self.nodes, self.weights, rule.order, gaussian=self.compiled.dimension)
        point = self.overlaps.kernel_point(params)
        return self._lines(z, values, lambda nodes, starts: self.prox_from(nodes, point, starts)[:2])

    def free_entropy(self, params: np.ndarray, conjugates: np.ndarray, alpha: float) -> float:
        """``Phi`` at the order parameters ``params`` and conjugates ``conjugates`` with this
        map's rule for ``E[M*]`` (THEORY.md sec. 3; all prox starts; with the kink
        correction if the settings ask for it, as in the reported eps_t).

        ``Phi`` is stationary at a fixed point, so evaluated at a fixed point found on another
        (coarser) rule it gives ``eps_t = -Phi`` with this rule's quadrature error plus an
        error of second order in the distance between the two rules' fixed points
        (tests/test_quadrature.py measures it).
        """
        check_alpha(alpha)
        z, value, _ = self.prox(params)
        return self.phi(params, conjugates, alpha, self.weights @ value + self.kink_correction(params, z, value))

    def train_loss_check(self, params: np.ndarray, conjugates: np.ndarray, alpha: float) -> tuple[float, float]:
        """``eps_t = -Phi`` at ``params`` and ``conjugates`` on each rule of the settings' ``error_check``
        (:class:`~attnphase.saddle.quadrature.QuadratureCheck`), the prox found from the thorough starts
        (:meth:`prox`) at every point: the mean over the scramblings and its standard error (NaN, NaN
        without a check)."""
        check = self.settings.error_check
        if check is None:
            return float("nan"), float("nan")
        point = self.overlaps.kernel_point(params)
        tolerance = self._prox_tolerance(params)
        pattern = self.overlaps.symmetry_pattern(point)
        losses = []
        for rule in check.rules():
            nodes, weights = self.compiled.rule(rule)
            starts = self._starts(nodes, point, True, pattern)
            values = self._multistart(nodes, point, starts, tolerance)[1]
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

    def test_error(self, params: np.ndarray) -> float:
        """``eps_g`` at ``params`` on the test rule (THEORY.md sec. 5; its integrand is smooth)."""
        point = self.overlaps.kernel_point(params)
        return float(self.compiled.test_error(self.test_nodes, self.test_weights, point, self.consts)[0])


class MemoisedMap:
    """``F`` at ``alpha`` (:meth:`SaddleMap.evaluate`) and its Jacobian (:meth:`SaddleMap.map_jacobian`),
    each point evaluated once: a root search returns to points it has seen (the best iterate). ``len`` is
    the number of evaluations of ``F`` made. Non-finite values are kept, not warned about."""

    def __init__(self, saddle_map: SaddleMap, alpha: float, thorough: bool) -> None:
        self.map, self.alpha, self.thorough = saddle_map, alpha, thorough
        self._cache: dict[bytes, Evaluation] = {}
        self._jacobians: dict[bytes, np.ndarray] = {}

    def __call__(self, params: np.ndarray) -> Evaluation:
        key = params.tobytes()
        if key not in self._cache:
            with np.errstate(all="ignore"):
                self._cache[key] = self.map.evaluate(params, self.alpha, self.thorough)
        return self._cache[key]

    def jacobian(self, params: np.ndarray) -> np.ndarray:
        """``dF/dx`` at ``params`` (the prox of this map's evaluation there)."""
        key = params.tobytes()
        if key not in self._jacobians:
            with np.errstate(all="ignore"):
                self._jacobians[key] = self.map.map_jacobian(self(params), self.alpha)
        return self._jacobians[key]

    def __len__(self) -> int:
        return len(self._cache)


class ScaledResidual:
    """``G(x) = (F(y) - y)[free] / (1 + |x|)``, ``y`` equal to ``base`` but ``x`` on the ``free`` entries:
    the residual whose roots are the fixed points (THEORY.md sec. 4), and its Jacobian from the map's
    (:meth:`jacobian`); a non-finite map gives a large residual (1e6), not a warning, and so does a point
    outside the domain of the order parameters (:meth:`OverlapGeometry.domain_violations`), where ``F`` is
    not evaluated. ``F`` is finite at ``V < 0`` (the envelope holds ``V^-1``) but means nothing there: ``|Vhat|``
    grows without bound as ``V -> 0-``, so ``F_q`` and ``F_V`` vanish, and the residual, absolute for small
    entries, vanishes towards ``q = V = 0``, a spurious root outside the domain that a backtracking step
    across ``V = 0`` would settle on. With the large residual the line search stays inside."""

    def __init__(self, evaluate: MemoisedMap, free: np.ndarray, base: np.ndarray) -> None:
        self.evaluate, self.free, self.base = evaluate, free, base

    def _full(self, x: np.ndarray) -> np.ndarray:
        full = self.base.copy()
        full[self.free] = x
        return full

    def feasible(self, x: np.ndarray) -> bool:
        """Whether ``x`` lies in the domain of the order parameters (:meth:`OverlapGeometry.in_domain`)."""
        return self.evaluate.map.overlaps.in_domain(self._full(x))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        full = self._full(x)
        if not self.evaluate.map.overlaps.in_domain(full):
            return np.full_like(x, OUTSIDE_DOMAIN)
        with np.errstate(all="ignore"):
            g = self.evaluate(full).updated[self.free] - x
        return g / (1.0 + np.abs(x)) if np.all(np.isfinite(g)) else np.full_like(g, OUTSIDE_DOMAIN)

    def jacobian(self, x: np.ndarray) -> np.ndarray | None:
        """``dG/dx``: ``(dF/dx - I) / (1 + |x|)`` on the free entries, less ``G sign(x) / (1 + |x|)`` on
        the diagonal; ``None`` where it is not finite."""
        full = self._full(x)
        scale = 1.0 + np.abs(x)
        with np.errstate(all="ignore"):
            g = (self.evaluate(full).updated[self.free] - x) / scale
            jacobian = (self.evaluate.jacobian(full)[np.ix_(self.free, self.free)] - np.eye(x.size)) / scale[:, None]
            jacobian -= np.diag(g * np.sign(x) / scale)
        return jacobian if np.all(np.isfinite(jacobian)) else None


def residual_norm(params: np.ndarray, updated: np.ndarray) -> float:
    """``max_i |F_i(x) - x_i| / (1 + |x_i|)``: absolute for small, relative for large entries."""
    if not np.all(np.isfinite(updated)):
        return float("inf")
    return float(np.max(np.abs(updated - params) / (1.0 + np.abs(params)), initial=0.0))
