"""Fixed points of the saddle-point equations (THEORY.md sec. 4, 5).

The map ``F`` sends the order parameters ``x = (q, m, V, theta)`` to new ones:
prox over all quadrature nodes -> energetic conjugates -> closed-form entropic update.
A fixed point is a root of ``F(x) - x``, found by Newton's method with the Jacobian of ``F`` in
closed form (the derivatives of the integrands derived in ``replica/``, the prox moving with the
order parameters by the implicit function theorem: :meth:`SaddlePointSolver.map_jacobian`), by a
quasi-Newton (Broyden) iteration that can start from a Jacobian carried over from a neighbouring
point, with scipy's Powell hybrid method as the fallback, or by damped iteration. Every result records its
residual ``max |F(x) - x| / (1 + |x|)`` over the branch's free order parameters, its
symmetry defect ``max |F(x)|`` over those the branch holds at zero (zero up to rounding for a
sign-symmetric rule such as Gauss-Hermite: the subspace is invariant; of the order of the
quadrature error for a randomised rule, and for the entries a gauge holds at zero: their equations
follow from the others where the integrals are exact, but no rule is invariant under the continuous
rotations the gauge fixes, :meth:`~attnphase.replica.saddle_equations.ReplicaSystem.gauge`),
whether it converged, and how many evaluations of
``F`` it took. The root is sought with the quick prox starts (``+-omega`` and the last prox with
all starts) and verified with all of them (:meth:`SaddlePointSolver.prox`); if the verification
fails, the quick search is repeated from its best point (its warm start now the verification's
prox, so that the quick map agrees with the full one there), and if that search reaches a root of
the quick map that the verification still rejects, the search is repeated with all starts.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Literal

import numpy as np
import scipy.optimize

from attnphase.saddle.branches import Branch, branches_of
from attnphase.saddle.compiled import CompiledSystem
from attnphase.saddle.gauge import into_gauge
from attnphase.saddle.line_correction import LineCorrection
from attnphase.saddle.quadrature import GaussHermite, QuadratureRule, ScrambledSobol
from attnphase.saddle.symmetry import Fold, envelope_symmetries, fold_nodes
from attnphase.saddle.validation import (
    PROX_RANGES,
    SOLVER_RANGES,
    check_alpha,
    check_choice,
    check_fields,
    check_type,
)

#: The status of a point every check holds for; otherwise the status lists the failed checks.
CONVERGED = "converged"
STATUS_SEPARATOR = "; "
#: A node's prox has converged when the gradient of the envelope there is below this.
PROX_GRADIENT_TOLERANCE = 1e-7

#: Column prefix of the curvature of the training loss in an overlap family (``curvature_m``).
CURVATURE_PREFIX = "curvature_"

#: An overlap family counts as non-zero at a point when an entry exceeds this fraction of its bound.
NEGLIGIBLE_OVERLAP = 1e-3

#: The conjugates ``qhat`` and ``Vhat`` of the generic guess where the equations have no finite value at zero conjugates
#: (:meth:`SaddlePointSolver.generic_guess`).
GUESS_SPREAD = 1e-2

#: Thorough proxes a solver and its renewed copies remember (:meth:`SaddlePointSolver._thorough_prox`).
THOROUGH_MEMORY = 4

#: Where the student vanishes (every entry of q zero: W = 0, a stationary point of every
#: declaration whose attention scores are quadratic in the weights), the map is its limit q -> 0,
#: evaluated with the diagonal of q at this fraction of rho (F is smooth in q there, so the error is
#: of the order of the probe) and in the envelope form: the score form divides M* by q, and its
#: rounding error grows as 1/q (docs/validation.md, "The vanishing student").
VANISHING_PROBE = 1e-10
#: A search that ends unconverged with every diagonal entry of q below this fraction of rho is
#: repeated from the vanishing student (the root finders approach q = 0 only geometrically).
NEARLY_VANISHING = 1e-3


def failed_checks(status: str) -> tuple[str, ...]:
    """The names of the failed checks a point's ``status`` lists (empty when it is ``CONVERGED``)."""
    if status == CONVERGED:
        return ()
    return tuple(part.split(":", 1)[0].strip() for part in status.split(STATUS_SEPARATOR))


#: The prox dimension (``L r``) above which random start directions are added by default
#: (:meth:`ProxSettings.directions`).
RANDOM_STARTS_ABOVE = 2


@dataclass(frozen=True)
class ProxSettings:
    """Multi-start policy and tolerances of the global prox (:mod:`saddle.kernels`).

    ``warm_start``: the quick evaluations of a root search (:meth:`SaddlePointSolver.prox` with
    ``thorough=False``) also start from the prox of the last thorough evaluation on the same nodes,
    so that they find the basins the thorough starts found nearby. Every point is still verified by a
    thorough evaluation from the fixed starts alone (:meth:`SaddlePointSolver.observe`).

    ``extra_directions``: the number of random unit vectors ``u_j`` (drawn with ``seed``) whose shifts
    ``+-omega +- sqrt(V) u_j`` are thorough starts too; ``None`` (the default) takes
    :meth:`directions` of the prox's dimension.
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
    the same up to rounding.
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

    def __post_init__(self) -> None:
        rules, rule = (GaussHermite, ScrambledSobol), "a GaussHermite or ScrambledSobol rule"
        check_type(self.quadrature, "quadrature", rules, rule)
        check_type(self.test_quadrature, "test_quadrature", rules, rule)
        check_type(
            self.threshold_quadrature, "threshold_quadrature", (GaussHermite, type(None)), "a GaussHermite or None"
        )
        check_type(self.prox, "prox", ProxSettings, "a ProxSettings")
        for flag in ("fold_symmetries", "line_correction"):
            check_type(getattr(self, flag), flag, bool, "True or False")
        check_choice(self.conjugate_form, "conjugate_form", ("score", "envelope"))
        check_choice(self.method, "method", ("newton", "broyden", "hybr", "damped"))
        check_fields(self, SOLVER_RANGES)


@dataclass(frozen=True)
class FixedPoint:
    """A solution of the saddle-point equations and its observables (THEORY.md sec. 5)."""

    alpha: float
    branch: str  # the declaration's label of the overlap families that do not vanish here
    names: tuple[str, ...]
    conjugate_names: tuple[str, ...]
    values: np.ndarray
    conjugates: np.ndarray
    free_entropy: float  # Phi
    train_loss: float  # eps_t = -Phi
    energy: float  # alpha E[l(prox, h*)] + E[R]/d on the rule, must equal train_loss - line_correction
    line_correction: float  # kink correction in eps_t (saddle/line_correction.py); 0 if off or unconverged
    test_error: float  # eps_g
    residual: float  # max |F(x) - x| / (1 + |x|) over the branch's free order parameters
    symmetry_defect: float  # max |F(x)| over the parameters the branch holds at zero (by symmetry or gauge)
    converged: bool  # every check of SaddlePointSolver.diagnose holds
    iterations: int
    prox_unconverged: int
    quadrature: str
    conjugate_form: str
    status: str = CONVERGED  # CONVERGED, or "check: detail" for every failed check, joined by "; "
    # smallest eigenvalue of the training loss's Hessian block per overlap family (saddle/landscape.py)
    curvature: Mapping[str, float] = field(default_factory=dict)
    stable: bool | None = None  # Hessian positive definite; None where not assessed
    sheet: int = 0  # folds passed on the way from the branch's anchor (saddle/arclength.py)

    @property
    def failed_checks(self) -> tuple[str, ...]:
        """The names of the checks that failed (``residual``, ``finite``, ``domain``, ``energy``,
        ``kink``, ``prox``; empty when converged)."""
        return failed_checks(self.status)

    def __getitem__(self, name: str) -> float:
        if name in self.names:
            return float(self.values[self.names.index(name)])
        return float(self.conjugates[self.conjugate_names.index(name)])

    @classmethod
    def from_row(cls, row: Mapping[str, object], names: Sequence[str], conjugate_names: Sequence[str]) -> FixedPoint:
        """Inverse of :meth:`row` (for resuming a scan from its table)."""
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
            converged=(converged := str(row["converged"]).lower() in ("true", "1")),
            iterations=int(row["iterations"]),
            prox_unconverged=int(row["prox_unconverged"]),
            quadrature=str(row["quadrature"]),
            conjugate_form=str(row["conjugate_form"]),
            status=str(row.get("status", CONVERGED if converged else "residual: not recorded")),
            curvature={
                str(k).removeprefix(CURVATURE_PREFIX): float(v)
                for k, v in row.items()
                if str(k).startswith(CURVATURE_PREFIX)
            },
            stable={"true": True, "1": True, "false": False, "0": False}.get(str(row.get("stable", "")).lower()),
            sheet=int(row.get("sheet", 0)),
        )

    def row(self) -> dict[str, object]:
        """One tidy table row (column names are part of the public interface)."""
        row: dict[str, object] = {"alpha": self.alpha, "branch": self.branch, "sheet": self.sheet}
        row.update({n: float(v) for n, v in zip(self.names, self.values, strict=True)})
        row.update({n: float(v) for n, v in zip(self.conjugate_names, self.conjugates, strict=True)})
        row.update(
            free_entropy=self.free_entropy,
            train_loss=self.train_loss,
            energy=self.energy,
            line_correction=self.line_correction,
            test_error=self.test_error,
            stable=self.stable,
            **{CURVATURE_PREFIX + family: float(c) for family, c in self.curvature.items()},
            converged=self.converged,
            status=self.status,
            residual=self.residual,
            symmetry_defect=self.symmetry_defect,
            iterations=self.iterations,
            prox_unconverged=self.prox_unconverged,
            quadrature=self.quadrature,
            conjugate_form=self.conjugate_form,
        )
        return row


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


class MemoisedMap:
    """``F`` at ``alpha`` (:meth:`SaddlePointSolver.evaluate`) and its Jacobian
    (:meth:`SaddlePointSolver.map_jacobian`), each point evaluated once: a root search returns to points
    it has seen (the best iterate). ``len`` is the number of evaluations of ``F`` made. Non-finite values
    are kept, not warned about."""

    def __init__(self, solver: SaddlePointSolver, alpha: float, thorough: bool) -> None:
        self.solver, self.alpha, self.thorough = solver, alpha, thorough
        self._cache: dict[bytes, Evaluation] = {}
        self._jacobians: dict[bytes, np.ndarray] = {}

    def __call__(self, params: np.ndarray) -> Evaluation:
        key = params.tobytes()
        if key not in self._cache:
            with np.errstate(all="ignore"):
                self._cache[key] = self.solver.evaluate(params, self.alpha, self.thorough)
        return self._cache[key]

    def jacobian(self, params: np.ndarray) -> np.ndarray:
        """``dF/dx`` at ``params`` (the prox of this map's evaluation there)."""
        key = params.tobytes()
        if key not in self._jacobians:
            with np.errstate(all="ignore"):
                self._jacobians[key] = self.solver.map_jacobian(self(params), self.alpha)
        return self._jacobians[key]

    def __len__(self) -> int:
        return len(self._cache)


class ScaledResidual:
    """``G(x) = (F(y) - y)[free] / (1 + |x|)``, ``y`` equal to ``base`` but ``x`` on the ``free`` entries:
    the residual whose roots are the fixed points (THEORY.md sec. 4), and its Jacobian from the map's
    (:meth:`jacobian`); a non-finite map gives a large residual (1e6), not a warning."""

    def __init__(self, evaluate: MemoisedMap, free: np.ndarray, base: np.ndarray) -> None:
        self.evaluate, self.free, self.base = evaluate, free, base

    def _full(self, x: np.ndarray) -> np.ndarray:
        full = self.base.copy()
        full[self.free] = x
        return full

    def __call__(self, x: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            g = self.evaluate(self._full(x)).updated[self.free] - x
        return g / (1.0 + np.abs(x)) if np.all(np.isfinite(g)) else np.full_like(g, 1e6)

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


#: An overlap entry at most this fraction of its Cauchy-Schwarz bound counts as zero in a point's zero
#: pattern (:meth:`SaddlePointSolver._pattern`): rounding residue, far below any overlap on its way to zero.
ROUNDING_ZERO = 1e-13


class SaddlePointSolver:
    """Evaluate ``F`` and find its fixed points for one compiled model."""

    def __init__(self, compiled: CompiledSystem, settings: SolverSettings | None = None) -> None:
        self.compiled = compiled
        self.settings = settings or SolverSettings()
        self.consts = compiled.constant_vector()
        self.nodes, self.weights = compiled.rule(self.settings.quadrature)
        self.test_nodes, self.test_weights = compiled.rule(self.settings.test_quadrature)
        self.names = compiled.names
        self.families = compiled.families
        self._q_entries = np.array([f == "q" for f in self.families])
        self._responses = np.array([f == "V" for f in self.families])
        rng = np.random.default_rng(self.settings.prox.seed)
        k = compiled.prox_dimension
        directions = rng.standard_normal((self.settings.prox.directions(k), k))
        self._directions = directions / np.linalg.norm(directions, axis=1, keepdims=True)
        branches = branches_of(compiled.system)
        self.branches = branches  # every invariant subspace, the most symmetric first, the unconstrained last
        self.most_symmetric, self.unconstrained = branches[0], branches[-1]
        self._symmetric: dict[float, FixedPoint] = {}
        self._coarse: SaddlePointSolver | None = None
        self._folds: dict[tuple[bool, ...], Fold | None] = {}
        self._warm: dict[tuple[bool, ...], np.ndarray] = {}  # last thorough prox per zero pattern
        self._thorough: dict[tuple[bytes, bytes], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self._lines: LineCorrection | None = None
        self._rhos: dict[tuple[int, bytes], float] = {}  # rho per covariance class and constants

    # ------------------------------------------------------------------ the map F
    def prox(self, params: np.ndarray, thorough: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Global prox at every quadrature node: ``(z (k, N), M (N,), |grad M| (N,))``.

        Starts: ``+-omega`` and, if ``thorough``, also the system's other starts
        (:func:`replica.saddle_equations._prox_starts`) and ``+-omega +- sqrt(V) u_j`` for
        :meth:`ProxSettings.directions` fixed unit vectors ``u_j``. The start set is closed under
        ``z -> -z`` and ``omega -> -omega``, so the symmetries of ``M`` carry over exactly to
        the computed ``M*``. Without ``thorough``, the last thorough prox on the same nodes is a
        start too (``ProxSettings.warm_start``).
        """
        point = self.kernel_point(params)
        # at a vanishing student the prox moves by about sqrt(VANISHING_PROBE) of its usual scale
        tolerance = self.settings.prox.gradient_tolerance * (1.0 if point is params else np.sqrt(VANISHING_PROBE))
        params = point
        fold = self.fold(params)
        nodes = self.nodes if fold is None else fold.nodes
        starts = self.compiled.starts(nodes, params, self.consts)
        s = self.settings.prox
        pattern = self._pattern(params)
        if not thorough:
            starts = starts[:2]
            if s.warm_start and pattern in self._warm:
                starts = np.concatenate([starts, self._warm[pattern][None]])
        if len(self._directions) and thorough:
            omega = starts[0]
            scale = np.sqrt(self._largest_response(params))
            shifted = [sign * omega + scale * u[:, None] for u in self._directions for sign in (1, -1)]
            starts = np.concatenate([starts, np.stack(shifted), -np.stack(shifted)])
        if thorough:
            z, value, grad = self._thorough_prox(nodes, params, starts, tolerance)
        else:
            z, value, grad = self.prox_from(nodes, params, starts, tolerance)
        if thorough and s.warm_start:
            self._warm[pattern] = z
        if fold is None:
            return z, value, grad
        return fold.unfold_z(z), fold.unfold(value), fold.unfold(grad)

    def _thorough_prox(
        self, nodes: np.ndarray, params: np.ndarray, starts: np.ndarray, tolerance: float
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`prox_from` with every start, remembered for the last ``THOROUGH_MEMORY`` points: it depends
        on the point and the constants only (the starts are fixed), so the stability assessment of a
        point just verified, or a point verified twice, costs no second prox. The memory is shared with
        the solver's renewed copies (:meth:`renewed`), whose results it therefore does not change."""
        key = (params.tobytes(), self.consts.tobytes())
        if key not in self._thorough:
            found = self.prox_from(nodes, params, starts, tolerance)
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
        """The fold of the rule under the envelope's symmetries at overlaps with the zero
        pattern of ``params`` (found once per pattern, at two generic points of the pattern:
        :meth:`generic_points`; ``None`` if there is nothing to fold)."""
        if not self.settings.fold_symmetries:
            return None
        pattern = self._pattern(params)
        if pattern not in self._folds:
            system = self.compiled.system
            L = system.sigma_tilde.shape[0]
            r = self.compiled.prox_dimension // L
            t = self.compiled.dimension // L - r
            rng = np.random.default_rng(self.settings.prox.seed)
            pairs = system.labels.pairs
            values, probabilities = system.label_rule()
            labels = (pairs, np.array(values, dtype=float).reshape(len(pairs), len(probabilities)))
            groups = []
            for point in self.generic_points(params, rng):
                found = envelope_symmetries(self.envelope_at(point), L, r, t, rng, labels=labels)
                if found is not None:  # None: M is not finite there (overlaps out of range)
                    groups.append(set(found))
            group = sorted(set.intersection(*groups), key=repr) if groups else []
            self._folds[pattern] = fold_nodes(self.nodes, self.weights, group, r, t, pairs)
        return self._folds[pattern]

    def _pattern(self, params: np.ndarray) -> tuple[bool, ...]:
        """Which order parameters are zero, what the fold of the rule depends on: exactly, or for an
        overlap entry within ``ROUNDING_ZERO`` of its Cauchy-Schwarz bound. A symmetry of the map can
        hold a single entry at zero inside a family that is not (the overlap with a mixture's cluster
        means next to a positional overlap); the iterations leave such an entry at the rounding level,
        where folding with the symmetry changes the integrals by as little."""
        tiny = np.abs(params) <= ROUNDING_ZERO * self.overlap_bounds(params)
        return tuple(bool(v == 0 or small) for v, small in zip(params, tiny, strict=True))

    def generic_points(self, params: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """Two points with the zero pattern of ``params`` at which its symmetries are tested: every
        non-zero overlap entry set to 0.3 and to 0.6 of its Cauchy-Schwarz bound (keeping its sign),
        the other non-zero entries perturbed at random by up to 10 %. (At ``params`` itself an
        overlap that is non-zero but negligible, as on the way to a merger, would pass for zero and
        lend the pattern the symmetry that flips it, folding the rule wrongly.)"""
        bound = self.overlap_bounds(params)
        zero = np.array(self._pattern(params))
        overlap = (bound != 0) & ~zero
        points = []
        for fraction in (0.3, 0.6):
            point = params * rng.uniform(0.9, 1.0, params.size)
            point[overlap] = np.sign(params[overlap]) * fraction * bound[overlap]
            point[zero] = 0.0
            points.append(point)
        return points[0], points[1]

    def envelope_at(self, params: np.ndarray):
        """``M(z, n)`` at ``params`` for every column of ``z`` and ``nodes`` (for the symmetry test):
        the prox kernel with the given ``z`` as its one start and no Newton step."""

        def envelope(z: np.ndarray, nodes: np.ndarray) -> np.ndarray:
            starts = np.ascontiguousarray(z, dtype=float)[None]
            columns = np.ascontiguousarray(nodes, dtype=float)
            _, values, _ = self.compiled.prox(columns, params, self.consts, starts, 0.0, 0)
            return values

        return envelope

    def vanishes(self, params: np.ndarray) -> bool:
        """The student vanishes at ``params`` (W = 0): every entry of every ``q`` is zero."""
        return bool(np.all(params[self._q_entries] == 0))

    def kernel_point(self, params: np.ndarray) -> np.ndarray:
        """Where the node integrals are evaluated for ``params``: ``params`` itself, or, at a vanishing
        student (:meth:`vanishes`), the same point with the diagonal of ``q`` at ``VANISHING_PROBE``
        times ``rho``. The map there is the limit ``q -> 0`` of the map: ``q`` enters the integrands
        through ``sqrt(q)`` and ``q^-1``, so at ``q = 0`` they are ``0/0``, while ``F`` is smooth in
        ``q`` and ``F_q`` vanishes linearly there (docs/validation.md, "The vanishing student")."""
        if not self.vanishes(params):
            return params
        probe = params.copy()
        for i, rho in self._q_diagonal():
            probe[i] = VANISHING_PROBE * rho
        return probe

    def _q_diagonal(self) -> list[tuple[int, float]]:
        """The index of every diagonal entry of ``q`` with the ``rho`` of its covariance class."""
        entries = self.compiled.system.entries
        return [(i, self._rho(e.group)) for i, e in enumerate(entries) if e.family == "q" and e.entry[0] == e.entry[1]]

    def _largest_response(self, params: np.ndarray) -> float:
        entries = self.compiled.system.entries
        return float(max(params[i] for i, e in enumerate(entries) if e.family == "V" and e.entry[0] == e.entry[1]))

    def _in_score_form(self, params: np.ndarray) -> bool:
        """The conjugates at ``params`` are integrated in the score form: the settings ask for it and the
        student does not vanish there (the score form divides by ``q``: :meth:`kernel_point`)."""
        return self.settings.conjugate_form == "score" and not self.vanishes(params)

    def evaluate(self, params: np.ndarray, alpha: float, thorough: bool = True) -> Evaluation:
        """One application of the saddle-point map at ``params`` (``thorough``: all prox starts); at a
        vanishing student, its limit (:meth:`kernel_point`)."""
        z, value, grad = self.prox(params, thorough)
        form = self.compiled.score if self._in_score_form(params) else self.compiled.energetic
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
        )

    def integrated(self, kernel, z: np.ndarray, params: np.ndarray) -> np.ndarray:
        """``kernel(z, nodes, weights, point, consts)`` over the rule at the prox ``z`` at ``params``, with
        every node that an element of the fold's group fixes averaged over the images of its prox under
        those elements (:meth:`~attnphase.saddle.symmetry.Fold.mirrored`: where they move it, the node is
        a tie between equally good minima)."""
        point = self.kernel_point(params)
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
        kernel = c.score_jacobian if self._in_score_form(ev.params) else c.energetic_jacobian
        return self.integrated(kernel, ev.z, ev.params)

    def alpha_derivative(self, ev: Evaluation, alpha: float) -> np.ndarray:
        """``dF/dalpha`` at the point of the evaluation ``ev`` (the expectations do not depend on alpha)."""
        c = self.compiled
        slope = c.conjugate_alpha_derivative(np.array([alpha]), ev.expectations, self.consts)
        return c.order_jacobian(ev.conjugates, self.consts) @ slope

    def kink_correction(self, params: np.ndarray, z: np.ndarray, values: np.ndarray) -> float:
        """The correction of ``E[M*]`` for the kinks along lines (:mod:`saddle.line_correction`),
        given the prox ``z`` and ``M*`` at every node; 0 unless ``line_correction`` is set and
        the rule is a tensor Gauss-Hermite rule."""
        rule = self.settings.quadrature
        if not (self.settings.line_correction and isinstance(rule, GaussHermite)):
            return 0.0
        if self._lines is None:
            self._lines = LineCorrection(self.nodes, self.weights, rule.order, gaussian=self.compiled.dimension)
        point = self.kernel_point(params)
        return self._lines(z, values, lambda nodes, starts: self.prox_from(nodes, point, starts)[:2])

    def free_entropy(self, params: np.ndarray, conjugates: np.ndarray, alpha: float) -> float:
        """``Phi`` at the order parameters ``params`` and conjugates ``conjugates`` with this
        solver's rule for ``E[M*]`` (THEORY.md sec. 3; all prox starts; with the kink
        correction if the settings ask for it, as in the reported eps_t).

        ``Phi`` is stationary at a fixed point, so evaluated at a fixed point found on another
        (coarser) rule it gives ``eps_t = -Phi`` with this rule's quadrature error plus an
        error of second order in the distance between the two rules' fixed points
        (tests/test_quadrature.py measures it).
        """
        check_alpha(alpha)
        z, value, _ = self.prox(params)
        return self._phi(params, conjugates, alpha, self.weights @ value + self.kink_correction(params, z, value))

    def loss_observables(
        self, params: np.ndarray, conjugates: np.ndarray, ev: Evaluation, alpha: float, correct_kinks: bool
    ) -> dict[str, float]:
        """``free_entropy`` Phi and ``train_loss`` eps_t = -Phi at ``params`` and ``conjugates`` given the
        evaluation ``ev`` there, with ``E[M*]`` corrected for kinks if ``correct_kinks`` (the correction,
        times alpha, is ``line_correction``), and the independent route, the ``energy``
        ``alpha E[l] + E[R]/d`` (THEORY.md sec. 5)."""
        kink = self.kink_correction(params, ev.z, ev.envelope_values) if correct_kinks else 0.0
        phi = self._phi(params, conjugates, alpha, ev.mean_envelope + kink)
        return {
            "free_entropy": phi,
            "train_loss": -phi,
            "energy": float(alpha * ev.mean_loss + self.compiled.regulariser(conjugates, self.consts)),
            "line_correction": alpha * kink,
        }

    def _phi(self, params: np.ndarray, conjugates: np.ndarray, alpha: float, mean_envelope: float) -> float:
        """``Phi`` (THEORY.md sec. 3) given ``E[M*]``."""
        c = self.compiled
        return float(c.trace(params, conjugates) + c.entropic(conjugates, self.consts) - alpha * mean_envelope)

    # ------------------------------------------------------------------ solving
    @staticmethod
    def residual_norm(params: np.ndarray, updated: np.ndarray) -> float:
        """``max_i |F_i(x) - x_i| / (1 + |x_i|)``: absolute for small, relative for large entries."""
        if not np.all(np.isfinite(updated)):
            return float("inf")
        return float(np.max(np.abs(updated - params) / (1.0 + np.abs(params)), initial=0.0))

    def generic_guess(self) -> np.ndarray:
        """The alpha -> 0 limit of the equations (conjugates zero) with ``q = rho/2``; where that limit
        is not finite (no ridge term: ``V`` is infinite; the elastic net's potential is a function of
        the field's spread, zero there), the equations at ``qhat = Vhat = GUESS_SPREAD`` instead."""
        conjugates = np.zeros(len(self.names))
        with np.errstate(all="ignore"):  # at lambda = 0 the limit is not finite: the solve reports it
            x = self.compiled.orders(conjugates, self.consts)
            if not np.isfinite(x).all():
                conjugates[self._q_entries | self._responses] = GUESS_SPREAD
                x = self.compiled.orders(conjugates, self.consts)
        for i, e in enumerate(self.compiled.system.entries):
            if e.family == "q" and e.entry[0] == e.entry[1]:
                x[i] = 0.5 * self._rho(e.group)
            elif e.family in ("m", "theta"):
                x[i] = 0.0
        return x

    def seeded(self, base: np.ndarray, branch: Branch, strength: float) -> np.ndarray:
        """``base`` with the leading entry of each of the branch's free overlap families set to
        ``strength`` times its Cauchy-Schwarz bound (:meth:`overlap_bounds`)."""
        x = base.copy()
        bound = self.overlap_bounds(base)
        for i, e in enumerate(self.compiled.system.entries):
            if bound[i] and e.family not in branch.zero and e.entry == (0, 0):
                x[i] = strength * bound[i]
        return x

    def _rho(self, group: int) -> float:
        """``rho`` of covariance class ``group`` at this solver's constants (remembered per constants)."""
        key = (group, self.consts.tobytes())
        if key not in self._rhos:
            system = self.compiled.system
            values = dict(zip(system.constants, self.consts, strict=True))
            self._rhos[key] = float(system.teacher_overlap[group].subs(values))
        return self._rhos[key]

    def with_constants(self, values: Mapping[str, float]) -> SaddlePointSolver:
        """This solver with some of the declaration's named constants (``AttentionModel.constants()``,
        e.g. ``omega``) set to other finite ``values``: the same compiled kernels, rule and settings,
        for continuation in a constant (:func:`saddle.arclength.continue_in_constant`). The symmetry
        folds found so far are kept (their groups, found at generic values, hold at other generic
        values); every other cache starts empty."""
        names = [str(c) for c in self.compiled.system.constants]
        consts = self.consts.copy()
        for name, value in values.items():
            if name not in names:
                raise ValueError(f"constant must be one of {', '.join(names)}; got {name!r}")
            if not np.isfinite(value):
                raise ValueError(f"{name} must be finite; got {value!r}")
            consts[names.index(name)] = float(value)
        other = self.renewed()
        other.consts = consts
        return other

    def renewed(self) -> SaddlePointSolver:
        """This solver without the memory of what it solved before: the same kernels, rule, settings and
        constants, the same symmetry folds (found at generic points, whatever was solved) and the same
        memory of thorough proxes (a function of the point alone), but no warm prox starts, no cached
        symmetric points and a new coarse solver. What a renewed solver
        computes depends only on what it is asked, so a scan's branch traced on one is reproduced
        exactly when the scan is resumed (:func:`saddle.scan.run_scan`)."""
        other = copy.copy(self)
        other._symmetric, other._coarse, other._warm, other._folds = {}, None, {}, dict(self._folds)
        return other

    def in_form(self, conjugate_form: Literal["score", "envelope"]) -> SaddlePointSolver:
        """This solver, renewed (:meth:`renewed`), evaluating the conjugates in ``conjugate_form``."""
        other = self.renewed()
        other.settings = replace(self.settings, conjugate_form=conjugate_form)
        return other

    def free_mask(self, branch: Branch) -> np.ndarray:
        """True for the order parameters ``branch`` does not hold at zero (neither by a family it holds
        nor by its gauge)."""
        return np.array([f not in branch.zero for f in self.families]) & ~self.gauge_mask(branch)

    def in_gauge(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """``values`` rotated onto the slice of the branch's gauge (:func:`~attnphase.saddle.gauge.into_gauge`):
        the same weights up to a rotation of the student's columns, so the same observables."""
        return into_gauge(values, self.compiled.system.entries, self._rotations, self.gauge_mask(branch))

    @cached_property
    def _rotations(self) -> tuple[np.ndarray, ...]:
        """The declaration's rotation generators as arrays (they depend on its structure only)."""
        return tuple(np.array(g.tolist(), dtype=float) for g in self.compiled.system.model.rotations())

    def gauge_mask(self, branch: Branch) -> np.ndarray:
        """True for the order parameters ``branch`` holds at zero to fix the gauge of the declaration's
        rotations (:attr:`Branch.gauge`)."""
        return np.isin(self.names, branch.gauge)

    def branch(self, name: str) -> Branch:
        """The branch called ``name`` (``ValueError`` naming the choices otherwise)."""
        for branch in self.branches:
            if branch.name == name:
                return branch
        raise ValueError(f"branch must be one of {', '.join(b.name for b in self.branches)}; got {name!r}")

    def seeded_families(self, branch: Branch) -> tuple[str, ...]:
        """The overlap families that are free on ``branch``."""
        return tuple(f for f in self.compiled.system.overlap_families if f not in branch.zero)

    def on_branch(self, point: FixedPoint, branch: Branch) -> bool:
        """``point`` is a converged point of ``branch``: every check of :meth:`diagnose` holds and
        its label (what it converged to) is the branch's."""
        return point.converged and point.branch == branch.name

    def overlap_bounds(self, values: np.ndarray) -> np.ndarray:
        """The Cauchy-Schwarz bound at ``values`` of every overlap entry, 0 for the other entries: for
        the overlap of the student's column ``j`` with the teacher, ``|theta_ij| <= sqrt(q_jj rho)`` in its
        covariance class, and with a positional direction ``|m_j| <= sqrt(q_jj / rho)`` (``q_jj`` averaged
        over the classes, ``rho`` of the first)."""
        system = self.compiled.system
        diagonal: dict[tuple[int, int], float] = {}
        for value, e in zip(values, system.entries, strict=True):
            if e.family == "q" and e.entry[0] == e.entry[1]:
                diagonal[(e.group, e.entry[0])] = float(value)
        bounds = np.zeros(len(values))
        for i, e in enumerate(system.entries):
            if e.family == "theta":
                bounds[i] = np.sqrt(max(diagonal[(e.group, e.entry[1])], 0.0) * self._rho(e.group))
            elif e.family == "m":
                column = [q for (group, j), q in diagonal.items() if j == e.entry[0]]
                bounds[i] = np.sqrt(max(float(np.mean(column)), 0.0) / self._rho(0))
        return bounds

    def nonzero_families(self, values: np.ndarray) -> tuple[str, ...]:
        """The overlap families of which some entry exceeds ``NEGLIGIBLE_OVERLAP`` of its
        Cauchy-Schwarz bound at ``values`` (:meth:`overlap_bounds`)."""
        bound = self.overlap_bounds(values)
        found = []
        for family in self.compiled.system.overlap_families:
            mask = (np.array(self.families) == family) & (bound != 0)
            if np.any(np.abs(values[mask]) > NEGLIGIBLE_OVERLAP * bound[mask]):
                found.append(family)
        return tuple(found)

    def label_of(self, values: np.ndarray) -> str:
        """The declaration's label of order parameters ``values``: by which overlap families do not
        vanish there (:meth:`nonzero_families`, :class:`~attnphase.replica.declaration.BranchLabels`)."""
        return self.compiled.system.label(self.nonzero_families(values))

    def domain_violations(self, values: np.ndarray) -> list[str]:
        """Order parameters outside their domain (THEORY.md sec. 2): per covariance class, ``V``
        must be positive definite, and ``q`` too, with the teacher field's conditional covariance
        ``rho - theta q^-1 theta^T`` positive semidefinite, unless the student vanishes
        (:meth:`vanishes`), and with it every overlap."""
        vanishing = self.vanishes(values)
        violations = []
        if vanishing:
            overlaps = np.isin(self.families, self.compiled.system.overlap_families)
            nonzero = [name for name, value, o in zip(self.names, values, overlaps, strict=True) if o and value != 0]
            if nonzero:
                violations.append(f"{', '.join(nonzero)} non-zero where q = 0")
        parameters = self.compiled.system.parameters
        shapes = {"q": parameters.q, "V": parameters.V, "theta": parameters.theta}
        matrices: dict[tuple[str, int], np.ndarray] = {}
        for value, e in zip(values, self.compiled.system.entries, strict=True):
            if e.family not in shapes:
                continue
            matrix = matrices.setdefault((e.family, e.group), np.zeros(shapes[e.family][e.group].shape))
            matrix[e.entry] = value
            if e.family != "theta":  # q and V are symmetric
                matrix[e.entry[::-1]] = value
        for (family, group), matrix in sorted(matrices.items()):
            if family == "theta" or (family == "q" and vanishing):
                continue
            label = family + (f" of class {group + 1}" if len(parameters.q) > 1 else "")
            if not np.all(np.isfinite(matrix)) or np.linalg.eigvalsh(matrix).min() <= 0:
                violations.append(f"{label} not positive definite ({np.array2string(matrix.ravel(), precision=3)})")
            elif family == "q" and ("theta", group) in matrices:
                theta = matrices[("theta", group)]
                conditional = self._rho(group) * np.eye(theta.shape[0]) - theta @ np.linalg.solve(matrix, theta.T)
                if np.linalg.eigvalsh(conditional).min() < -1e-12 * self._rho(group):
                    violations.append(f"theta^2 > q rho in class {group + 1} (Cauchy-Schwarz)")
        return violations

    def symmetric_point(self, alpha: float) -> FixedPoint:
        """The fixed point with all overlaps zero (``m = theta = 0``) at ``alpha``, from the
        generic guess, or the vanishing student (:meth:`vanishing_point`) if that search does not
        converge and the vanishing student does; cached, since every branch's anchor starts from it."""
        if alpha not in self._symmetric:
            point, _ = self.solve(alpha, self.most_symmetric, initial=self.generic_guess())
            if not point.converged:
                vanishing = self.vanishing_point(alpha)
                point = vanishing if vanishing.converged else point
            self._symmetric[alpha] = point
        return self._symmetric[alpha]

    def vanishing_point(self, alpha: float) -> FixedPoint:
        """The vanishing student ``W = 0`` at ``alpha``: ``q``, every overlap and every conjugate
        but the responses' zero, the responses ``V`` solved from the generic guess's. ``W = 0`` is
        a stationary point of the training loss when the scores are quadratic in the weights, and
        ``q = 0`` an invariant set of ``F`` (:meth:`kernel_point`); the point is a fixed point where
        the prox stays at ``z = 0`` and the responses' equations have a root (its checks say)."""
        start = np.where(self._responses, self.generic_guess(), 0.0)
        point, _ = self.solve(alpha, self.most_symmetric, initial=start)
        return point

    def coarse(self) -> SaddlePointSolver | None:
        """The same solver on the rule's coarser rule of its own kind (``coarser()`` of
        :class:`~attnphase.saddle.quadrature.GaussHermite` or ``ScrambledSobol``; ``None`` if this rule
        is already the coarsest): anchors are searched there, where evaluations are cheap."""
        rule = self.settings.quadrature.coarser()
        if rule is None:
            return None
        if self._coarse is None:
            settings = replace(self.settings, quadrature=rule, test_quadrature=rule)
            self._coarse = SaddlePointSolver(self.compiled, settings)
            self._coarse.consts = self.consts.copy()  # the same constants (with_constants)
        return self._coarse

    def anchor(self, alpha: float, branch: Branch) -> FixedPoint:
        """A first point on ``branch`` at ``alpha`` without any prior solution.

        The point is first searched on the coarse rule (:meth:`coarse`) and refined on this
        one; if the coarse search finds no point of the branch, the point it found is refined and
        returned (the search is not repeated on this rule), and if its refinement leaves the
        branch, the search is repeated on this rule. A search tries informed starts in turn until
        one converges onto the branch: the fully symmetric point (all overlaps zero, a fixed point of every branch's
        subspace) with the branch's overlaps seeded at each of ``branch.seeds`` times their
        Cauchy-Schwarz bound, then the generic guess seeded the same way. If none lands on the
        branch, the best point found is returned, labelled by what it converged to.
        """
        coarse = self.coarse()
        if coarse is not None:
            rough = coarse.anchor(alpha, branch)
            point, _ = self.solve(alpha, branch, initial=rough.values)
            if self.on_branch(point, branch) or not coarse.on_branch(rough, branch):
                return point  # the coarse search found no point of the branch: neither does this one
        parent = self.symmetric_point(alpha)
        if not self.seeded_families(branch):
            return parent
        tried: list[FixedPoint] = []
        for base in (parent.values, self.generic_guess()):
            for strength in branch.seeds:
                point, _ = self.solve(alpha, branch, initial=self.seeded(base, branch, strength))
                tried.append(point)
                if self.on_branch(point, branch):
                    return point
        return min(tried, key=lambda p: (not p.converged, p.residual))  # labelled by what it converged to

    def solve(
        self,
        alpha: float,
        branch: Branch,
        initial: np.ndarray,
        jacobian: np.ndarray | None = None,
    ) -> tuple[FixedPoint, np.ndarray | None]:
        """Fixed point on ``branch`` at ``alpha`` from ``initial`` (rotated onto the branch's gauge,
        :meth:`in_gauge`); returns it and the final Jacobian estimate of ``F(x) - x`` on the free entries
        (reusable by a neighbour)."""
        check_alpha(alpha)
        start = self.in_gauge(np.array(initial, dtype=float), branch)
        free = self._moved_entries(start, branch)
        start[~free] = 0.0
        # iterate with the quick prox starts; verify with all of them; if that fails, iterate quickly
        # again, now warm-started from the verification's prox, and only if that reaches a root of
        # the quick map that the verification rejects (the extra starts find lower minima there)
        # iterate with all starts (after a search that reaches no root, that costs four times as
        # much and rescued 4 of 29 searches at omega = 0.2, none of them on a branch's trace)
        evaluations, passes = 0, ["quick", "refreshed" if self.settings.prox.warm_start else "thorough"]
        while passes:
            kind = passes.pop(0)
            x, jacobian, used, settled = self._find_root(alpha, free, start, jacobian, kind == "thorough")
            evaluations += used
            point = self.observe(x, alpha, branch, evaluations)
            if point.converged or kind == "thorough":
                break
            if kind == "refreshed" and settled:
                passes.append("thorough")
            start = x
        if not point.converged and self._nearly_vanishes(point.values):
            # q runs to the edge of its domain: F vanishes linearly in q there, and the root is W = 0
            vanishing, _ = self.solve(alpha, branch, initial=np.where(self._responses, point.values, 0.0))
            if vanishing.converged:
                return vanishing, None
        return point, jacobian

    def tangent(self, point: FixedPoint, branch: Branch) -> np.ndarray | None:
        """The branch's direction at ``point``: ``dx/dalpha = -(dG/dx)^-1 dG/dalpha`` (zero on the
        entries the branch holds), with ``G`` the scaled residual ``(F(x) - x) / (1 + |x|)`` on its free
        order parameters (THEORY.md sec. 4), both derivatives of the quick map in closed form
        (:meth:`map_jacobian`, :meth:`alpha_derivative`). ``None`` where ``dG/dx`` is singular (a fold or
        a bifurcation) or not finite. A continuation step from a single point predicts along it instead
        of from the point's own values (:mod:`saddle.continuation`)."""
        free = self._moved_entries(point.values, branch)
        evaluate = MemoisedMap(self, point.alpha, False)
        x = point.values[free]
        jacobian = ScaledResidual(evaluate, free, point.values).jacobian(x)
        if jacobian is None:
            return None
        with np.errstate(all="ignore"):
            drift = self.alpha_derivative(evaluate(point.values), point.alpha)[free] / (1.0 + np.abs(x))
        try:
            slope = -np.linalg.solve(jacobian, drift)
        except np.linalg.LinAlgError:
            return None
        if not np.all(np.isfinite(slope)):
            return None
        full = np.zeros_like(point.values)
        full[free] = slope
        return full

    def _moved_entries(self, values: np.ndarray, branch: Branch) -> np.ndarray:
        """The order parameters a solve from ``values`` on ``branch`` moves: the branch's free ones, and
        at a vanishing student only the responses among them (W = 0 stays W = 0: an invariant set of F)."""
        free = self.free_mask(branch)
        return free & self._responses if self.vanishes(values) else free

    def _nearly_vanishes(self, values: np.ndarray) -> bool:
        """Every diagonal entry of ``q`` is positive but below ``NEARLY_VANISHING`` of ``rho``."""
        return all(0 < values[i] < NEARLY_VANISHING * rho for i, rho in self._q_diagonal())

    def _find_root(self, alpha, free, start, jacobian, thorough):
        evaluate = MemoisedMap(self, alpha, thorough)
        residual = ScaledResidual(evaluate, free, start)
        x, jac_out = self.root(residual, start[free], jacobian)
        full = start.copy()
        full[free] = x
        settled = bool(np.abs(residual(x)).max() <= self.settings.tolerance)
        return full, jac_out, len(evaluate), settled

    def root(self, residual, x0: np.ndarray, jacobian: np.ndarray | None = None):
        """A root of ``residual`` from ``x0`` by the settings' ``method``: ``newton`` (the residual's own
        Jacobian at every iterate, :meth:`ScaledResidual.jacobian`, where it has one, else as ``broyden``)
        or ``broyden`` (Broyden's update of ``jacobian`` or of a first estimate), then Powell's hybrid
        method if that falls short of the tolerance; or damped iteration of ``x + residual``. Returns the
        best iterate found and the final Jacobian estimate, if any."""
        if self.settings.method == "damped":
            return self._damped(residual, x0), None
        exact = self.settings.method == "newton" and hasattr(residual, "jacobian")
        if self.settings.method == "hybr":
            x, jac_out = None, None
        else:
            x, jac_out = self._quasi_newton(residual, x0, jacobian, exact)
        if x is None or np.abs(residual(x)).max() > self.settings.tolerance:
            begin = x0 if x is None else x
            jac = (lambda y: self._jacobian(residual, y, residual(y))) if exact else None
            sol = scipy.optimize.root(
                residual,
                begin,
                jac=jac,
                method="hybr",
                options={"xtol": 1e-14, "maxfev": self.settings.max_evaluations},
            )
            if np.abs(residual(sol.x)).max() < np.abs(residual(begin)).max():
                return sol.x, None
            return begin, jac_out
        return x, jac_out

    def _quasi_newton(self, residual, x0: np.ndarray, jacobian: np.ndarray | None, exact: bool):
        """Newton's method (``exact``: the residual's Jacobian at every iterate) or Broyden's good update,
        with a backtracking step.

        Without ``exact``, a Jacobian carried over from a neighbouring point is trusted only while it
        leads: at the first step that does not lower the residual, or if four steps have not lowered it
        tenfold, it is replaced by a fresh estimate at the best iterate (once). Returns the best iterate
        and the last Jacobian, or ``(None, None)`` if the iteration diverges.
        """
        x = x0.copy()
        g = residual(x)
        carried = jacobian is not None and not exact
        if not carried:
            jacobian = self._jacobian(residual, x, g)
        best_norm, best_x, best_g, stalled, checkpoint = np.abs(g).max(), x, g, 0, np.abs(g).max()
        for iteration in range(self.settings.max_evaluations):
            if best_norm <= self.settings.tolerance:
                break
            if carried and (stalled >= 1 or (iteration == 4 and best_norm > 0.1 * checkpoint)):
                # the carried estimate does not lead to the root: estimate the Jacobian afresh
                x, g, carried, stalled = best_x, best_g, False, 0
                jacobian = self._jacobian(residual, x, g)
                continue
            if stalled >= (2 if exact else 6):
                break
            if iteration % 8 == 7:  # less than a halving of the residual in 8 steps: give up
                if best_norm > 0.5 * checkpoint:
                    break
                checkpoint = best_norm
            try:
                step = -np.linalg.solve(jacobian, g)
            except np.linalg.LinAlgError:
                return None, None
            t = 1.0
            for _ in range(6):
                x_new = x + t * step
                g_new = residual(x_new)
                if np.abs(g_new).max() < np.abs(g).max() or t < 0.05:
                    break
                t *= 0.5
            dx, dg = x_new - x, g_new - g
            x, g = x_new, g_new
            norm = np.abs(g).max()
            if norm < best_norm:
                best_norm, best_x, best_g, stalled = norm, x, g, 0
            else:
                stalled += 1
            if not np.isfinite(norm) or norm > 1e3 * max(best_norm, 1e-3):
                return None, None
            if not exact:
                jacobian = jacobian + np.outer(dg - jacobian @ dx, dx) / max(float(dx @ dx), 1e-300)
            elif norm > self.settings.tolerance:
                jacobian = self._jacobian(residual, x, g)
        return best_x, jacobian

    @classmethod
    def _jacobian(cls, residual, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        """``d residual / dx`` at ``x`` (where it is ``g``): the residual's own (:meth:`ScaledResidual.jacobian`)
        where it has one and it is finite, else forward differences."""
        exact = getattr(residual, "jacobian", None)
        jacobian = exact(x) if exact is not None else None
        return jacobian if jacobian is not None else cls._finite_difference_jacobian(residual, x, g)

    @staticmethod
    def _finite_difference_jacobian(residual, x: np.ndarray, g: np.ndarray) -> np.ndarray:
        jac = np.empty((g.size, x.size))
        for j in range(x.size):
            h = 1e-6 * max(abs(x[j]), 1e-2)
            e = x.copy()
            e[j] += h
            jac[:, j] = (residual(e) - g) / h
        return jac

    def _damped(self, residual, x0: np.ndarray) -> np.ndarray:
        x = x0.copy()
        for _ in range(self.settings.max_evaluations):
            g = residual(x) * (1.0 + np.abs(x))
            if np.abs(g / (1.0 + np.abs(x))).max() <= self.settings.tolerance:
                break
            x = x + self.settings.damping * g
        return x

    def diagnose(
        self,
        params: np.ndarray,
        ev: Evaluation,
        residual: float,
        observables: dict[str, float],
    ) -> list[str]:
        """Every failed check of a candidate fixed point, as ``"check: detail"`` (empty if it has
        converged): ``residual`` at most ``accept``; ``finite`` order parameters, conjugates and
        observables; order parameters in their ``domain`` (:meth:`domain_violations`); the
        ``energy`` identity ``energy = eps_t - line_correction`` (THEORY.md sec. 5) to
        ``energy_tolerance`` relative; the ``prox`` converged at all nodes but a quadrature weight
        of at most ``prox_tolerance``; the ``kink`` correction of eps_t (:mod:`saddle.line_correction`)
        at most ``kink_tolerance`` of the energy (it refines the rule's eps_t by about 1e-3 relative,
        docs/validation.md; a larger one means the correction itself has failed). A point needs no
        check of its label: it is labelled by what it converged to (:meth:`label_of`).
        """
        s = self.settings
        failed = []
        if not residual <= s.accept:
            failed.append(f"residual: {residual:.1e} > {s.accept:.0e}")
        numbers = dict(zip(self.names, params, strict=True))
        numbers.update(zip(self.compiled.conjugate_names, ev.conjugates, strict=True))
        numbers.update(observables)
        infinite = [name for name, value in numbers.items() if not np.isfinite(value)]
        if infinite:
            failed.append(f"finite: {', '.join(infinite)} not finite")
        domain = self.domain_violations(params) if np.all(np.isfinite(params)) else []
        if domain:
            failed.append(f"domain: {', '.join(domain)}")
        expected = observables["train_loss"] - observables["line_correction"]
        gap = abs(observables["energy"] - expected)
        if np.isfinite(gap) and not gap <= s.energy_tolerance * abs(expected):
            failed.append(f"energy: energy - (eps_t - line_correction) = {gap:.1e}, relative {gap / abs(expected):.1e}")
        kink, energy = observables["line_correction"], observables["energy"]
        if not abs(kink) <= s.kink_tolerance * abs(energy):
            failed.append(f"kink: line_correction = {kink:.2e} exceeds {s.kink_tolerance:g} of the energy {energy:.2e}")
        if not ev.prox_unconverged_weight <= s.prox_tolerance:
            failed.append(f"prox: {ev.prox_unconverged} nodes of weight {ev.prox_unconverged_weight:.1e} unconverged")
        return failed

    def observe(self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int = 0) -> FixedPoint:
        """The candidate fixed point ``params`` of ``branch`` at ``alpha`` with its observables
        (THEORY.md sec. 5) and every check of :meth:`diagnose`, from one evaluation of the map
        with all prox starts (``evaluations``: the evaluations that found it, for the record).
        A point read back from a table is re-checked this way before it is trusted."""
        check_alpha(alpha)
        with np.errstate(all="ignore"):  # non-finite values are reported in the status, not printed
            return self._observed(np.asarray(params, dtype=float), alpha, branch, evaluations)

    def _observed(self, params: np.ndarray, alpha: float, branch: Branch, evaluations: int) -> FixedPoint:
        ev = self.evaluate(params, alpha, thorough=True)
        c = self.compiled
        free = self.free_mask(branch)
        residual = self.residual_norm(params[free], ev.updated[free])
        defect = self.residual_norm(params[~free], ev.updated[~free])
        # the kink correction refines eps_t at a fixed point (Phi is stationary there only)
        stationary = bool(residual <= self.settings.accept and np.all(np.isfinite(params)))
        observables = self.loss_observables(params, ev.conjugates, ev, alpha, correct_kinks=stationary)
        point = self.kernel_point(params)
        observables["test_error"] = float(c.test_error(self.test_nodes, self.test_weights, point, self.consts)[0])
        failed = self.diagnose(params, ev, residual, observables)
        return FixedPoint(
            alpha=float(alpha),
            branch=self.label_of(params),
            names=self.names,
            conjugate_names=c.conjugate_names,
            values=params.copy(),
            conjugates=ev.conjugates.copy(),
            **observables,
            residual=residual,
            symmetry_defect=defect,
            converged=not failed,
            iterations=evaluations + 1,
            prox_unconverged=ev.prox_unconverged,
            quadrature=self.settings.quadrature.label,
            conjugate_form=self.settings.conjugate_form,
            status=STATUS_SEPARATOR.join(failed) if failed else CONVERGED,
        )
