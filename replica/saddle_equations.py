"""From a declaration to the replica-symmetric free entropy and its saddle-point equations.

Everything here is symbolic (sympy). The conventions are those of THEORY.md:

* fields (sec. 2): ``omega_l = m_l + q^{1/2} xi_l``,
  ``h*_l = theta q^{-1} (omega_l - m_l) + (rho - theta q^{-1} theta^T)^{1/2} eta_l``
  (Cholesky square roots), with ``xi_l ~ N(0, I_r)``, ``eta_l ~ N(0, I_t)``;
* free entropy (sec. 3):
  ``Phi = sum [tr(Vhat q)/2 - tr(qhat V)/2 - mhat.m - tr(thetahat^T theta)] + Psi_w + alpha Psi_out``,
  ``Psi_out = -E[min_z M(z; xi, eta)]``,
  ``M = sum_l (z_l - omega_l)^T V^{-1} (z_l - omega_l)/2 + l(z, h*)``;
* saddle-point equations (sec. 4): the stationarity conditions of ``Phi``. The entropic side
  is closed form; the energetic side is ``alpha E[dM/dX at z = prox]`` (envelope theorem),
  and equivalently ``alpha (E[M* s_X] + E[partial_X M])`` with ``s_X`` the Gaussian score of
  the field law (Gaussian integration by parts).

The result is a :class:`ReplicaSystem` whose fields are sympy objects a user can print,
simplify or turn into LaTeX (:meth:`ReplicaSystem.latex`, :mod:`attnphase.replica.latex`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from functools import cached_property

import sympy as sp

from attnphase.replica.declaration import OVERLAP_FAMILIES, AttentionModel, DeclarationError, FieldLaw
from attnphase.replica.latex import EquationsDocument, build_document
from attnphase.replica.order_parameters import FAMILIES, HAT_NAMES, OrderParameter, ReducedParameters


@dataclass(frozen=True, eq=False)
class ReplicaSystem:
    """The RS free entropy of a declared model and its saddle-point equations.

    Symbols
        ``alpha``: sample complexity; ``constants``: named constants of the declaration;
        ``nodes``: the standard Gaussian variables ``(xi, eta)`` flattened (token-major), then the label
        indicators of a mixture (``labels``, :class:`LabelIndicators`);
        ``z``: the prox variables (L x r, flattened token-major).
    Fields and target
        ``student_fields`` ``omega`` and ``teacher_fields`` ``h*`` (L x r, L x t);
        ``teacher_attention`` ``T(h*)``; ``sigma_tilde`` ``diag(tr Sigma_l / d)``;
        ``teacher_overlap[c]``: ``rho_c = Q*^T Sigma_c Q* / d`` per covariance class (t x t
        multiple of the identity, its scalar given);
        ``per_token``: each per-token order parameter as an expression in the reduced ones.
    Expressions (all in terms of nodes, order parameters and constants)
        ``envelope`` ``M``; ``envelope_gradient`` and ``envelope_hessian`` in ``z``;
        ``loss`` ``l(z, h*)``; ``energetic_integrands[X] = dM/dX``;
        ``score_integrands[X] = (s_X, partial_X M)``; ``test_error_integrand``
        ``= (2/L) l(h, h*)`` with the fresh field ``h`` in place of ``z``; ``prox_starts``.
    Equations
        ``conjugate_updates[Xhat]``: in terms of ``alpha`` and the placeholders
        ``expectations[X] = E[dM/dX at prox]``; ``order_updates[X]``: closed form in the
        conjugates; ``free_entropy`` with the placeholder ``psi_out``;
        ``free_entropy_gradient[X] = dPhi/dX`` at fixed conjugates (``d trace/dX - alpha E[dM/dX]``),
        zero at a fixed point and the gradient of the constrained training loss elsewhere
        (:meth:`constrained`).
    The regulariser
        ``regulariser_energy`` ``E[g(w*)]``; ``regulariser_slope``: the least rate at which ``g`` grows
        from ``w = 0`` (0 where it is differentiable there), in the constants.
    """

    model: AttentionModel
    parameters: ReducedParameters
    alpha: sp.Symbol
    constants: tuple[sp.Symbol, ...]
    nodes: tuple[sp.Symbol, ...]
    labels: LabelIndicators
    z: tuple[sp.Symbol, ...]
    student_fields: sp.Matrix
    teacher_fields: sp.Matrix
    teacher_attention: sp.Matrix
    sigma_tilde: sp.Matrix
    teacher_overlap: tuple[sp.Expr, ...]
    per_token: dict[str, sp.Expr]
    loss: sp.Expr
    envelope: sp.Expr
    envelope_gradient: tuple[sp.Expr, ...]
    envelope_hessian: tuple[tuple[sp.Expr, ...], ...]
    prox_starts: tuple[tuple[sp.Expr, ...], ...]
    energetic_integrands: dict[sp.Symbol, sp.Expr]
    score_integrands: dict[sp.Symbol, tuple[sp.Expr, sp.Expr]]
    expectations: dict[sp.Symbol, sp.Symbol]
    conjugate_updates: dict[sp.Symbol, sp.Expr]
    order_updates: dict[sp.Symbol, sp.Expr]
    entropic_potential: sp.Expr
    trace_terms: sp.Expr
    psi_out: sp.Symbol
    free_entropy: sp.Expr
    regulariser_energy: sp.Expr
    regulariser_slope: sp.Expr
    test_error_integrand: sp.Expr
    free_entropy_gradient: dict[sp.Symbol, sp.Expr]

    @property
    def entries(self) -> tuple[OrderParameter, ...]:
        """The independent scalar entries of the reduced order parameters, with their conjugates."""
        return self.parameters.entries

    @property
    def overlap_families(self) -> tuple[str, ...]:
        """The families of order parameters that vanish on an invariant subspace of the equations
        (THEORY.md sec. 6), among :data:`~attnphase.replica.declaration.OVERLAP_FAMILIES`."""
        return tuple(f for f in OVERLAP_FAMILIES if self.parameters.of_family(f))

    def gauge(self, free: Iterable[str]) -> tuple[str, ...]:
        """The order-parameter entries held at zero to fix the gauge of the declaration's rotations
        (:meth:`~attnphase.replica.declaration.AttentionModel.rotations`) on the branch where the overlap
        families ``free`` are free, the others zero.

        A rotation ``W -> W exp(s G)`` moves the overlaps along ``dq = G^T q + q G``, ``dm = G^T m``,
        ``dtheta = theta G`` (``V`` like ``q``), so the branch's fixed points come in orbits and its Jacobian
        is singular. Holding one entry per generator at zero cuts each orbit in isolated points; the equation
        of a held entry is then implied by the others (the free entropy is invariant, so its gradient is
        orthogonal to the orbit) and is not solved (on a quadrature rule, which breaks the invariance, it
        holds to the rule's accuracy). Entries are taken greedily where they raise the
        rank of the orbit's tangents on the entries taken, at a generic point of the branch with those
        entries zero: first the entries of the free overlap families off the student's first column
        (``m_2``, ``theta_2``: the free overlaps are rotated onto the first column, whose entries the seeds
        and labels read), then the off-diagonal entries of ``q``. Empty without rotations."""
        generators = self.model.rotations()
        if not generators:
            return ()
        free = set(free)
        par = self.parameters
        candidates = [
            e
            for family in self.overlap_families
            if family in free
            for e in par.of_family(family)
            if e.entry[0 if family == "m" else 1] > 0
        ] + [e for e in par.of_family("q") if e.entry[0] < e.entry[1]]
        generic = {
            e.symbol: (sp.Rational(7 * k % 13 + 3, 17) if e.family in free else 0)
            if e.family in self.overlap_families
            else sp.Rational(k % 5 + 1, 23) + (2 if e.entry[0] == e.entry[1] else 0)
            for k, e in enumerate(par.entries)
        }
        chosen: list[OrderParameter] = []
        for candidate in candidates:
            trial = chosen + [candidate]
            point = generic | {e.symbol: 0 for e in trial}
            tangents = sp.Matrix([[_rotated(e, G, par).subs(point) for e in trial] for G in generators])
            if tangents.rank() == len(trial):
                chosen = trial
            if len(chosen) == len(generators):
                break
        return tuple(e.name for e in chosen)

    def label(self, nonzero: Iterable[str]) -> str:
        """The declaration's name of a fixed point at which exactly the overlap families ``nonzero``
        do not vanish (:class:`~attnphase.replica.declaration.BranchLabels`)."""
        return self.model.labels.label(f for f in nonzero if f in self.overlap_families)

    @property
    def gaussian_dimension(self) -> int:
        """The number of standard Gaussian node variables, ``L (r + t)``: the nodes before the labels."""
        return len(self.nodes) - len(self.labels.symbols)

    def label_rule(self) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
        """The label nodes of this system's declaration and their probabilities (:meth:`LabelIndicators.rule`)."""
        return self.labels.rule(self.model)

    def equations(self) -> list[sp.Eq]:
        """All saddle-point equations as ``sympy.Eq`` objects (conjugates first)."""
        eqs = [sp.Eq(conj, rhs) for conj, rhs in self.conjugate_updates.items()]
        eqs += [sp.Eq(sym, rhs) for sym, rhs in self.order_updates.items()]
        return eqs

    def constrained(self, fixed: Iterable[str]) -> ConstrainedSystem:
        """The saddle point with the order-parameter entries named in ``fixed`` held at given values
        (THEORY.md sec. 3-4): the lowest training loss among all weights with those overlaps."""
        return ConstrainedSystem.of(self, tuple(fixed))

    def constant_values(self) -> dict[sp.Symbol, float]:
        """The value of each named constant (``self.constants``) in this system's declaration."""
        values = self.model.constants()
        return {c: values[c.name] for c in self.constants}

    @cached_property
    def coupling(self) -> sp.Matrix:
        """``d^2 Phi / dX dXhat'`` over the entries (rows: order parameters, columns: conjugates):
        the trace term is bilinear in (parameter, conjugate), so this matrix is constant (THEORY.md
        sec. 3). With :attr:`entropic_hessian` and the Hessian of ``alpha Psi_out`` it makes the
        Hessian of ``Phi`` in all its variables, from which the curvature of the training loss at
        fixed overlaps follows by elimination (:func:`attnphase.saddle.stability.hessian.stability`)."""
        params, conjugates = self.parameters.symbols, self.parameters.conjugates
        return sp.Matrix([[sp.diff(self.trace_terms, x, xhat) for xhat in conjugates] for x in params])

    @cached_property
    def entropic_hessian(self) -> sp.Matrix:
        """``d^2 Psi_w / dXhat dXhat'`` over the conjugates: the Hessian of ``Phi`` in the conjugates
        (the trace term is linear in each), in closed form."""
        return sp.hessian(self.entropic_potential, self.parameters.conjugates)

    def integrands(self, form: str) -> tuple[sp.Expr, ...]:
        """The energetic integrands ``f_X(z, n, x)`` whose expectations at the prox are ``E[dM*/dX]``,
        one per order-parameter entry (THEORY.md sec. 4): ``dM/dX`` in the ``"envelope"`` form,
        ``M s_X + partial_X M`` in the ``"score"`` (Gaussian integration-by-parts) form."""
        params = self.parameters.symbols
        if form == "envelope":
            return tuple(self.energetic_integrands[x] for x in params)
        if form == "score":
            return tuple(self.envelope * self.score_integrands[x][0] + self.score_integrands[x][1] for x in params)
        raise ValueError(f"form must be one of envelope, score; got {form!r}")

    def integrand_derivatives(self, form: str) -> IntegrandDerivatives:
        """The derivatives behind the Jacobian of the expectations ``E[f_X(prox, n, x)]`` in the order
        parameters (:class:`IntegrandDerivatives`), for the integrands of ``form`` (:meth:`integrands`)."""
        if form not in self._integrand_derivatives:
            self._integrand_derivatives[form] = IntegrandDerivatives.of(self, self.integrands(form))
        return self._integrand_derivatives[form]

    @cached_property
    def _integrand_derivatives(self) -> dict[str, IntegrandDerivatives]:
        return {}

    @cached_property
    def order_jacobian(self) -> sp.Matrix:
        """``d order_updates[X] / d Xhat'`` (rows: order parameters, columns: conjugates), closed form."""
        updates = [self.order_updates[x] for x in self.parameters.symbols]
        return sp.Matrix(updates).jacobian(list(self.parameters.conjugates))

    @cached_property
    def conjugate_jacobian(self) -> sp.Matrix:
        """``d conjugate_updates[Xhat] / d E[dM/dX']`` (rows: conjugates, columns: the expectations),
        closed form (linear in ``alpha``)."""
        updates = [self.conjugate_updates[c] for c in self.parameters.conjugates]
        return sp.Matrix(updates).jacobian([self.expectations[x] for x in self.parameters.symbols])

    @cached_property
    def conjugate_alpha_derivative(self) -> sp.Matrix:
        """``d conjugate_updates[Xhat] / d alpha`` at fixed expectations (a column)."""
        updates = [self.conjugate_updates[c] for c in self.parameters.conjugates]
        return sp.Matrix(updates).diff(self.alpha)

    @cached_property
    def _document(self) -> EquationsDocument:
        return build_document(self)

    def equations_document(self) -> EquationsDocument:
        """The whole system as a paper-ready :class:`~attnphase.replica.latex.EquationsDocument`
        (symmetry reduction, fields, attention maps, loss, envelope and prox, energetic
        equations as Gaussian expectations at the prox, entropic equations, free entropy,
        constants: THEORY.md sec. 1-5). Built once per system."""
        return self._document

    def latex(self) -> str:
        """LaTeX source of :meth:`equations_document` (one ``align*`` per section)."""
        return self.equations_document().latex()


@dataclass(frozen=True)
class IntegrandDerivatives:
    """What the derivative of ``E[f_X(z*(x), n, x)]`` in the order parameters ``x`` needs, ``z*`` being
    the prox (the minimiser of ``M`` in ``z``, which moves with ``x``: ``dz*/dY = -H^-1 d^2M/dz dY`` by
    the implicit function theorem, ``H`` the Hessian of ``M`` in ``z``):

        d E[f_X] / dY = E[ partial_Y f_X - sum_jk (partial_zj f_X) (H^-1)_jk (d^2 M / dz_k dY) ]

    on fixed nodes ``n`` (THEORY.md sec. 4). On a quadrature rule this is the exact derivative of the
    rule's sum wherever no node's prox changes basin. Fields (``X`` rows, ``Y`` columns, ``j, k``
    over the prox variables): ``explicit[X][Y] = partial_Y f_X`` at fixed ``z``;
    ``along_z[X][j] = partial_zj f_X``; ``mixed[j][Y] = d^2 M / dz_j dY``."""

    explicit: tuple[tuple[sp.Expr, ...], ...]
    along_z: tuple[tuple[sp.Expr, ...], ...]
    mixed: tuple[tuple[sp.Expr, ...], ...]

    @classmethod
    def of(cls, system: ReplicaSystem, integrands: tuple[sp.Expr, ...]) -> IntegrandDerivatives:
        """The derivatives of ``integrands`` (one per order-parameter entry) of ``system``."""
        params, z = system.parameters.symbols, system.z
        envelope_gradient = [system.energetic_integrands[y] for y in params]
        return cls(
            explicit=tuple(tuple(sp.diff(f, y) for y in params) for f in integrands),
            along_z=tuple(tuple(sp.diff(f, zj) for zj in z) for f in integrands),
            mixed=tuple(tuple(sp.diff(g, zj) for g in envelope_gradient) for zj in z),
        )


@dataclass(frozen=True, eq=False)
class ConstrainedSystem:
    """The free entropy made stationary in every order parameter but the ``fixed`` ones.

    Holding an entry ``X`` at a value ``X0`` (a delta function on ``X(Q)`` in the replica
    computation) drops its stationarity condition ``dPhi/dX = 0``; its conjugate ``Xhat`` becomes a
    Lagrange multiplier, fixed by ``dPhi/dXhat = 0``, i.e. by ``order_updates[X] = X0``. Every other
    equation is unchanged (THEORY.md sec. 4). ``eps(X0) = -Phi`` at that point is the lowest training
    loss among all weights whose overlaps are ``X0`` (the landscape in the overlaps), and by the
    envelope theorem its gradient is ``d eps/dX0 = -dPhi/dX`` at that point: ``-free_entropy_gradient``.
    At a fixed point of the full system the multiplier equals the energetic conjugate and the
    gradient vanishes.
    """

    system: ReplicaSystem
    fixed: tuple[OrderParameter, ...]
    values: tuple[sp.Symbol, ...]  # the held values X0, one per fixed entry
    gradient: dict[sp.Symbol, sp.Expr]  # d eps / d X0 for each fixed entry

    @classmethod
    def of(cls, system: ReplicaSystem, names: tuple[str, ...]) -> ConstrainedSystem:
        """The constrained system holding the entries called ``names`` (``ValueError`` naming the
        entries otherwise)."""
        by_name = {e.name: e for e in system.entries}
        unknown = [n for n in names if n not in by_name]
        if unknown or not names or len(set(names)) != len(names):
            allowed, got = ", ".join(by_name), ", ".join(names) or "none"
            raise ValueError(f"fixed must name distinct order parameters among {allowed}; got {got}")
        fixed = tuple(by_name[n] for n in names)
        return cls(
            system=system,
            fixed=fixed,
            values=tuple(sp.Symbol(f"{e.name}_0", real=True) for e in fixed),
            gradient={e.symbol: -system.free_entropy_gradient[e.symbol] for e in fixed},
        )

    @property
    def multipliers(self) -> tuple[sp.Symbol, ...]:
        """The conjugates of the fixed entries, which act as Lagrange multipliers."""
        return tuple(e.conjugate for e in self.fixed)

    def equations(self) -> list[sp.Eq]:
        """The constrained saddle-point equations: the energetic updates of the conjugates of the
        free entries, the entropic updates of the free entries, and the constraints
        ``X0 = order_updates[X]`` that fix the multipliers."""
        s, held = self.system, {e.symbol for e in self.fixed}
        eqs = [sp.Eq(e.conjugate, s.conjugate_updates[e.conjugate]) for e in s.entries if e.symbol not in held]
        eqs += [sp.Eq(e.symbol, s.order_updates[e.symbol]) for e in s.entries if e.symbol not in held]
        eqs += [sp.Eq(x0, s.order_updates[e.symbol]) for e, x0 in zip(self.fixed, self.values, strict=True)]
        return eqs


@dataclass(frozen=True)
class LabelIndicators:
    """The tokens' cluster labels as node variables of the Gaussian expectations (THEORY.md sec. 8).

    ``Psi_out`` of a mixture is ``sum_c P_c Psi_out(c)`` over the label configurations ``c``: one
    expectation whose nodes are the Gaussian ones and a label configuration drawn from ``P_c``. The
    label of token ``l`` enters as indicators ``s_l_j`` (1 if the token is in cluster ``j``, else 0),
    one per cluster the token takes in some configuration (``pairs``: token and cluster of each), and a
    quantity of token ``l`` that depends on its cluster is ``sum_j s_l_j X_j`` (:meth:`select`), which
    is ``X_j`` at every configuration. With a single configuration the indicators are the constants
    they equal and the selection is ``X_j`` itself: no label nodes."""

    pairs: tuple[tuple[int, int], ...]
    symbols: tuple[sp.Symbol, ...]
    fixed: tuple[int, ...] | None  # each token's cluster, when there is one configuration

    @classmethod
    def of(cls, model: AttentionModel) -> LabelIndicators:
        """The indicators of ``model``'s label law."""
        law = model.tokens.configurations()
        if len(law) == 1:
            return cls((), (), law[0][0])
        pairs = sorted({(l, j) for labels, _ in law for l, j in enumerate(labels)})
        symbols = tuple(sp.Symbol(f"s_{l + 1}_{j + 1}", real=True, nonnegative=True) for l, j in pairs)
        return cls(tuple(pairs), symbols, None)

    def clusters_of(self, token: int) -> tuple[int, ...]:
        """The clusters ``token`` takes in some configuration."""
        if self.fixed is not None:
            return (self.fixed[token],)
        return tuple(j for l, j in self.pairs if l == token)

    def select(self, token: int, per_cluster: Callable[[int], sp.Expr | sp.Matrix]) -> sp.Expr | sp.Matrix:
        """``per_cluster(j)`` at ``token``'s cluster ``j``: ``sum_j s_token_j per_cluster(j)``."""
        if self.fixed is not None:
            return per_cluster(self.fixed[token])
        terms = [s * per_cluster(j) for (l, j), s in zip(self.pairs, self.symbols, strict=True) if l == token]
        total = terms[0]
        for term in terms[1:]:
            total = total + term
        return total

    def rule(self, model: AttentionModel) -> tuple[tuple[tuple[float, ...], ...], tuple[float, ...]]:
        """The label nodes of ``model``'s law: the indicator values of each configuration (one tuple per
        indicator, one entry per configuration) and the configurations' probabilities; no indicators
        and the probability one for a single configuration."""
        law = model.tokens.configurations()
        values = tuple(tuple(float(labels[l] == j) for labels, _ in law) for l, j in self.pairs)
        return values, tuple(float(p) for _, p in law)


def _class_combinations(
    gamma: list[list[sp.Symbol]], basis: tuple[int, ...]
) -> Callable[[int, Sequence[sp.Matrix]], sp.Matrix]:
    """``combination(c, per_group)``: the order parameter of covariance class ``c`` from those of the
    independent classes ``basis`` (``per_group[b]`` for ``basis[b]``): itself for an independent class,
    else ``sum_b x_b per_group[b]`` with ``G_c = sum_b x_b G_basis[b]``, ``G_c`` the class's spectrum
    (its ``gamma`` over the atoms), solved exactly in the spectra's symbols (THEORY.md sec. 2)."""
    spectra = sp.Matrix(gamma)  # atoms x classes
    independent = spectra[:, list(basis)]
    gram_inverse = (independent.T * independent).inv()

    def combination(c: int, per_group: Sequence[sp.Matrix]) -> sp.Matrix:
        if c in basis:
            return per_group[basis.index(c)]
        weights = (gram_inverse * independent.T * spectra[:, c]).applyfunc(sp.cancel)
        total = weights[0] * per_group[0]
        for b in range(1, len(basis)):
            total = total + weights[b] * per_group[b]
        return total

    return combination


def _cholesky(matrix: sp.Matrix) -> sp.Matrix:
    if matrix.shape == (1, 1):
        return sp.Matrix([[sp.sqrt(matrix[0, 0])]])
    return matrix.cholesky(hermitian=False)


def _named_constants(model: AttentionModel) -> dict[str, sp.Symbol]:
    return {name: sp.Symbol(name, real=True, nonnegative=True) for name in model.constants()}


_DERIVED: dict[tuple, ReplicaSystem] = {}


def _rotated(entry: OrderParameter, generator: sp.Matrix, par: ReducedParameters) -> sp.Expr:
    """The rate of change of ``entry`` under ``W -> W exp(s G)`` at ``s = 0``: the entry of ``G^T X + X G``
    for ``X = q, V``, of ``G^T m`` and of ``theta G`` (:meth:`ReplicaSystem.gauge`)."""
    i, j = entry.entry
    if entry.family in ("q", "V"):
        matrix = getattr(par, entry.family)[entry.group]
        return (generator.T * matrix + matrix * generator)[i, j]
    if entry.family == "m":
        return (generator.T * par.mu[entry.group])[i, j]
    return (par.theta[entry.group] * generator)[i, j]


def _check_rotations(model: AttentionModel, consts: dict[str, sp.Symbol]) -> None:
    """:class:`DeclarationError` unless each of the declaration's rotations leaves the student's scores
    unchanged to first order, at a point of rational fields: a rotation that is no symmetry would fix a
    gauge that is not one and lose fixed points."""
    L, r = model.length, model.rank
    fields = sp.Matrix(L, r, lambda l, i: sp.Rational((5 * l + 3 * i) % 11 - 5, 7))
    s = sp.Symbol("s")
    for generator in model.rotations():
        moved = model.student.expression(fields * (sp.eye(r) + s * generator), consts)
        change = max(abs(float(sp.diff(v, s).subs(s, 0))) for v in moved)
        if change > 1e-12:
            raise DeclarationError(
                f"student.rotations must leave the attention unchanged; the generator {generator.tolist()} "
                f"changes it at rate {change:.2g}"
            )


def derive(model: AttentionModel) -> ReplicaSystem:
    """Derive the replica-symmetric free entropy of ``model`` and its saddle-point equations
    (THEORY.md sec. 2-5): the reduced order parameters, the fields, the Moreau envelope and its
    derivatives, the energetic integrands in envelope and score form, the closed-form entropic
    updates and ``Phi``.

    The numbers of the declaration enter only as named constants, so a system derived for one
    set of values serves every other with the same structure (derived once per
    :meth:`~attnphase.replica.declaration.AttentionModel.structure`). ``derive(model).latex()``
    renders the whole system.
    """
    key = model.structure()
    if key not in _DERIVED:
        _DERIVED[key] = _derive(model)
    cached = _DERIVED[key]
    return cached if cached.model == model else replace(cached, model=model)


@dataclass(frozen=True)
class _Setting:
    """What every stage of the derivation reads: the declaration's sizes (``L`` tokens, student rank
    ``r``, teacher rank ``t``), its numbers as named constants, the reduced order parameters, the
    spectra's symbols (atom weights ``weight``, per-class spectra ``gamma``, ``trace_sigma`` = tr Sigma_c / d)
    and the label indicators that select each token's cluster."""

    model: AttentionModel
    consts: dict[str, sp.Symbol]
    par: ReducedParameters
    alpha: sp.Symbol
    strengths: dict[str, sp.Symbol]
    classes: tuple[int, ...]
    basis: tuple[int, ...]
    weight: list[sp.Symbol]
    gamma: list[list[sp.Symbol]]
    trace_sigma: list[sp.Expr]
    labels: LabelIndicators
    sigma_tilde: sp.Matrix

    @classmethod
    def of(cls, model: AttentionModel) -> _Setting:
        consts = _named_constants(model)
        classes = tuple(model.tokens.covariance_classes())
        n_classes = max(classes) + 1
        n_atoms = len(model.tokens.variances)
        weight = [consts[f"w_{a + 1}"] for a in range(n_atoms)]
        gamma = [[consts[f"gamma_{a + 1}_{c + 1}"] for c in range(n_classes)] for a in range(n_atoms)]
        # rho_c = Q*^T Sigma_c Q*/d with iid standard teacher entries; Sigma_tilde_c = tr Sigma_c / d.
        trace_sigma = [sp.Add(*[weight[a] * gamma[a][c] for a in range(n_atoms)]) for c in range(n_classes)]
        labels = LabelIndicators.of(model)
        sigma_tilde = sp.diag(*[labels.select(l, lambda j: trace_sigma[classes[j]]) for l in range(model.length)])
        return cls(
            model=model,
            consts=consts,
            par=model.reduced_parameters(),
            alpha=sp.Symbol("alpha", positive=True),
            strengths={name: consts[name] for name in model.regulariser.constants()},
            classes=classes,
            basis=model.independent_classes(),
            weight=weight,
            gamma=gamma,
            trace_sigma=trace_sigma,
            labels=labels,
            sigma_tilde=sigma_tilde,
        )


@dataclass(frozen=True)
class _Fields:
    """The fields of every token (THEORY.md sec. 2, 8) in the Gaussian nodes ``xi`` (student) and ``eta``
    (teacher): the student's ``omega`` and the teacher's ``hstar`` (rows: tokens), the prox variables
    ``z``, the responses ``V`` per covariance class, the per-token overlaps, and per token the law of
    its fields in each of its clusters: ``(cluster, mean, factor B, standard nodes)`` with the fields
    ``mean + B n``."""

    nodes: tuple[sp.Symbol, ...]
    z: sp.Matrix
    omega: sp.Matrix
    hstar: sp.Matrix
    V_of: list[sp.Matrix]
    per_token: dict[str, sp.Expr | sp.Matrix]
    field_law: list[list[tuple[int, sp.Matrix, sp.Matrix, sp.Matrix]]]


def _fields(s: _Setting) -> _Fields:
    """The fields in terms of the reduced parameters: the mean of token ``l`` in cluster ``j`` is
    ``(p_l + mu_j)^T Q / sqrt(d) = sum_k (P_lk + M_jk) mu_k``, its fluctuation the Cholesky root of its
    class's ``q`` times ``xi``; the teacher's field is conditioned on the student's (THEORY.md sec. 2)."""
    model, par, labels, classes = s.model, s.par, s.labels, s.classes
    L, r, t = model.length, model.rank, model.teacher_rank
    positions = model.positions.coefficient_matrix()
    n_dirs = model.positions.directions
    n_classes = max(classes) + 1
    rho = [s.trace_sigma[c] * sp.eye(t) for c in range(n_classes)]

    def indexed(base: str, cols: int):
        return lambda l, i: sp.Symbol(f"{base}_{l + 1}_{i + 1}" if cols > 1 else f"{base}_{l + 1}", real=True)

    xi = sp.Matrix(L, r, indexed("xi", r))
    eta = sp.Matrix(L, t, indexed("eta", t))
    z = sp.Matrix(L, r, indexed("z", r))
    zero_r = sp.zeros(r, 1)
    means = model.tokens.cluster_means(n_dirs)

    def mean_of(l: int, j: int) -> sp.Matrix:
        coefficients = [positions[l, k] + sp.nsimplify(means[j][k]) for k in range(n_dirs)]
        return sum((c * par.mu[k] for k, c in enumerate(coefficients)), zero_r)

    combination = _class_combinations(s.gamma, s.basis)
    q_of = [combination(c, par.q) for c in range(n_classes)]
    V_of = [combination(c, par.V) for c in range(n_classes)]
    theta_of = [combination(c, par.theta) for c in range(n_classes)]
    roots, inverses_q, residual_roots = [], [], []
    for c in range(n_classes):
        roots.append(_cholesky(q_of[c]))
        inverses_q.append(q_of[c].inv())
        residual_cov = rho[c] - theta_of[c] * inverses_q[c] * theta_of[c].T
        residual_roots.append(_cholesky(residual_cov) if theta_of[c].shape[0] else sp.zeros(t, t))

    omega_rows, hstar_rows, per_token = [], [], {}
    field_law: list[list[tuple[int, sp.Matrix, sp.Matrix, sp.Matrix]]] = []
    for l in range(L):
        xi_l, eta_l = xi[l, :].T, eta[l, :].T
        standard = sp.Matrix.vstack(xi_l, eta_l)

        def omega_in(j: int, l: int = l, xi_l: sp.Matrix = xi_l) -> sp.Matrix:
            return mean_of(l, j) + roots[classes[j]] * xi_l

        def hstar_in(j: int, xi_l: sp.Matrix = xi_l, eta_l: sp.Matrix = eta_l) -> sp.Matrix:
            c = classes[j]
            return theta_of[c] * inverses_q[c] * roots[c] * xi_l + residual_roots[c] * eta_l

        omega_rows.append(labels.select(l, omega_in).T)
        hstar_rows.append(labels.select(l, hstar_in).T)
        law_l = []
        for j in labels.clusters_of(l):
            c = classes[j]
            mean = sp.Matrix.vstack(mean_of(l, j), sp.zeros(t, 1))
            factor = sp.Matrix(
                sp.BlockMatrix(
                    [[roots[c], sp.zeros(r, t)], [theta_of[c] * inverses_q[c] * roots[c], residual_roots[c]]]
                )
            )
            law_l.append((j, mean, factor, standard))
        field_law.append(law_l)
        m_l = labels.select(l, lambda j, l=l: mean_of(l, j))
        for i in range(r):
            per_token[f"m_{l + 1}" + (f"{i + 1}" if r > 1 else "")] = m_l[i]
        for family, matrices, full in (("q", q_of, r > 1), ("V", V_of, r > 1), ("theta", theta_of, (r, t) != (1, 1))):
            value = labels.select(l, lambda j, matrices=matrices: matrices[classes[j]])
            per_token[f"{family}_{l + 1}"] = value if full else value[0, 0]
    return _Fields(
        nodes=tuple(xi) + tuple(eta) + labels.symbols,
        z=z,
        omega=sp.Matrix.vstack(*omega_rows),
        hstar=sp.Matrix.vstack(*hstar_rows),
        V_of=V_of,
        per_token=per_token,
        field_law=field_law,
    )


@dataclass(frozen=True)
class _Envelope:
    """The loss and the Moreau envelope ``M(z) = prior(z, fields) + loss(z, h*)`` (THEORY.md sec. 1, 3),
    with the prior's fields ``fields_free`` left free (``field_values`` sets them to ``omega``), its
    gradient and Hessian in ``z``."""

    teacher: sp.Matrix
    loss: sp.Expr
    prior: sp.Expr
    field_values: dict[sp.Symbol, sp.Expr]
    envelope: sp.Expr
    gradient: tuple[sp.Expr, ...]
    hessian: tuple[tuple[sp.Expr, ...], ...]


def _envelope(s: _Setting, f: _Fields) -> _Envelope:
    """The square loss of the student's attention against the teacher's, weighted by each token's
    ``Sigma_tilde``, and the envelope's prior ``sum_l (z_l - omega_l)^T V^-1 (z_l - omega_l) / 2``."""
    model, labels = s.model, s.labels
    L, r = model.length, model.rank
    teacher = model.teacher.expression(f.hstar, s.consts)
    student = model.student.expression(f.z, s.consts)
    _check_rotations(model, s.consts)
    diff = teacher - student
    loss = sp.Rational(1, 2) * (diff * s.sigma_tilde * diff.T).trace()

    fields_free = sp.Matrix(L, r, lambda l, i: sp.Symbol(f"w_field_{l}_{i}", real=True))
    z = f.z
    prior = sp.Add(
        *[
            sp.Rational(1, 2)
            * (
                (z[l, :] - fields_free[l, :])
                * labels.select(l, lambda j: f.V_of[s.classes[j]].inv())
                * (z[l, :] - fields_free[l, :]).T
            )[0, 0]
            for l in range(L)
        ]
    )
    field_values = dict(zip(fields_free, f.omega, strict=True))
    envelope = prior.subs(field_values) + loss
    gradient = tuple(sp.diff(envelope, zi) for zi in tuple(z))
    hessian = tuple(tuple(sp.diff(g, zj) for zj in tuple(z)) for g in gradient)
    return _Envelope(teacher, loss, prior, field_values, envelope, gradient, hessian)


def _energetic_integrands(
    s: _Setting, f: _Fields, e: _Envelope
) -> tuple[dict[sp.Symbol, sp.Expr], dict[sp.Symbol, tuple[sp.Expr, sp.Expr]]]:
    """The energetic integrands of every order parameter ``X`` (THEORY.md sec. 4): the envelope form
    ``dM/dX`` and the score (integration-by-parts) form ``(s_X, partial_X M)``, ``s_X`` the Gaussian score
    of the field law, ``(C^-1 (y - mean))^T dmean + ((y - mean)^T C^-1 dC C^-1 (y - mean) - tr C^-1 dC) / 2``,
    the partial derivative with the fields held fixed."""
    par, labels = s.par, s.labels
    energetic = {x.symbol: sp.diff(e.envelope, x.symbol) for x in par.entries}
    direct = {x.symbol: sp.diff(e.prior, x.symbol).subs(e.field_values) for x in par.entries}  # fields held fixed
    score: dict[sp.Symbol, tuple[sp.Expr, sp.Expr]] = {}
    # the inverses depend neither on the parameter differentiated nor on the token within a
    # covariance class: compute them once per class
    inverses: dict[sp.ImmutableMatrix, tuple[sp.Matrix, sp.Matrix, sp.Matrix]] = {}
    laws = []  # per token: (cluster, mean, covariance, whitened nodes C^{-1}(y - mean) = B^{-T} n, C^{-1})
    for law_l in f.field_law:
        laws.append([])
        for j, mean, factor, n_l in law_l:
            key = sp.ImmutableMatrix(factor)
            if key not in inverses:
                cov = factor * factor.T
                inverses[key] = (cov, factor.T.inv(), cov.inv())
            cov, factor_t_inv, cov_inv = inverses[key]
            laws[-1].append((j, mean, cov, factor_t_inv * n_l, cov_inv))
    for x in par.entries:
        s_total = sp.Integer(0)
        for l, law_l in enumerate(laws):
            terms = {}
            for j, mean, cov, whitened, cov_inv in law_l:
                dmean, dcov = mean.diff(x.symbol), cov.diff(x.symbol)
                term = sp.Integer(0)
                if not dmean.is_zero_matrix:
                    term += (whitened.T * dmean)[0, 0]
                if not dcov.is_zero_matrix:
                    term += sp.Rational(1, 2) * ((whitened.T * dcov * whitened)[0, 0] - (cov_inv * dcov).trace())
                terms[j] = term
            s_total += labels.select(l, lambda j, terms=terms: terms[j])
        score[x.symbol] = (s_total, direct[x.symbol])
    return energetic, score


def _trace_terms(s: _Setting) -> sp.Expr:
    """The coupling of the order parameters to their conjugates in ``Phi`` (THEORY.md sec. 3):
    ``sum_c [tr(Vhat q)/2 - tr(qhat V)/2 - tr(thetahat^T theta)] - sum_k mhat_k . m_k``."""
    par = s.par
    trace_terms = sp.Integer(0)
    for c in range(len(s.basis)):
        trace_terms += sp.Rational(1, 2) * (par.Vhat[c] * par.q[c]).trace()
        trace_terms -= sp.Rational(1, 2) * (par.qhat[c] * par.V[c]).trace()
        trace_terms -= (par.thetahat[c].T * par.theta[c]).trace()
    for k in range(s.model.positions.directions):
        trace_terms -= (par.muhat[k].T * par.mu[k])[0, 0]
    return trace_terms


def _entropic_potential(s: _Setting) -> sp.Expr:
    """``Psi_w`` (THEORY.md sec. 3): per spectral atom, the regulariser's potential of the law of the
    field the prior sees there; it couples ``Q`` to the independent classes' conjugates only."""
    model, par = s.model, s.par
    r, t = model.rank, model.teacher_rank
    psi_w = sp.Integer(0)
    for a in range(len(s.weight)):
        spectrum = [s.gamma[a][c] for c in s.basis]
        theta_sum = sum((g * par.thetahat[b] for b, g in enumerate(spectrum)), sp.zeros(t, r))
        law = FieldLaw(
            a_matrix=sum((g * par.Vhat[b] for b, g in enumerate(spectrum)), sp.zeros(r, r)),
            covariance=sum((g * par.qhat[b] for b, g in enumerate(spectrum)), sp.zeros(r, r)) + theta_sum.T * theta_sum,
            weight=s.weight[a],
            directions=tuple(
                par.muhat[k] for k in range(model.positions.directions) if model.positions.atom_of(k) == a
            ),
        )
        psi_w += model.regulariser.entropic_potential(law, s.strengths)
    return psi_w


@dataclass(frozen=True)
class _Stationarity:
    """The saddle-point equations (THEORY.md sec. 4) solved for the updates: each conjugate from
    ``dPhi/dX = 0`` given the energetic expectations ``E[dM/dX]`` (``expectations``), each order parameter
    from ``dPhi/dXhat = 0`` (closed form), and ``dPhi/dX`` itself (``gradient``)."""

    expectations: dict[sp.Symbol, sp.Symbol]
    conjugate_updates: dict[sp.Symbol, sp.Expr]
    order_updates: dict[sp.Symbol, sp.Expr]
    gradient: dict[sp.Symbol, sp.Expr]


def _stationarity(s: _Setting, trace_terms: sp.Expr, psi_w: sp.Expr) -> _Stationarity:
    """Each stationarity condition is linear in the variable paired with the one differentiated
    (:func:`_solve_linear`)."""
    par, alpha = s.par, s.alpha
    expectations = {e.symbol: sp.Symbol(f"E_d{e.symbol.name}", real=True) for e in par.entries}
    conjugate_updates: dict[sp.Symbol, sp.Expr] = {}
    order_updates: dict[sp.Symbol, sp.Expr] = {}
    conjugate_symbols, order_symbols = set(par.conjugates), set(par.symbols)
    for e in par.entries:
        # dPhi/dX = d(trace)/dX - alpha E[dM/dX] = 0: linear in the conjugate paired with X
        paired = sp.diff(trace_terms, e.symbol)
        (partner,) = paired.free_symbols & conjugate_symbols
        conjugate_updates[partner] = _solve_linear(paired - alpha * expectations[e.symbol], partner)
        # dPhi/dXhat = d(trace)/dXhat + dPsi_w/dXhat = 0: linear in the parameter paired with Xhat
        paired = sp.diff(trace_terms, e.conjugate)
        (partner,) = paired.free_symbols & order_symbols
        order_updates[partner] = _simplified(_solve_linear(paired + sp.diff(psi_w, e.conjugate), partner))
    return _Stationarity(
        expectations=expectations,
        conjugate_updates={e.conjugate: conjugate_updates[e.conjugate] for e in par.entries},
        order_updates={e.symbol: order_updates[e.symbol] for e in par.entries},
        gradient={e.symbol: sp.diff(trace_terms, e.symbol) - alpha * expectations[e.symbol] for e in par.entries},
    )


def _derive(model: AttentionModel) -> ReplicaSystem:
    """The derivation in its stages: the setting, the fields, the envelope, the energetic integrands,
    the free entropy and its stationarity conditions."""
    s = _Setting.of(model)
    fields = _fields(s)
    envelope = _envelope(s, fields)
    energetic, score = _energetic_integrands(s, fields, envelope)
    trace_terms, psi_w = _trace_terms(s), _entropic_potential(s)
    psi_out = sp.Symbol("Psi_out", real=True)
    stationarity = _stationarity(s, trace_terms, psi_w)
    # E[g(w*)] = -sum_s s dPsi_w/ds: g is linear in each of its strengths s (envelope theorem)
    regulariser_energy = _simplified(-sum(k * sp.diff(psi_w, k) for k in s.strengths.values()))
    z_flat = tuple(fields.z)
    test_error = sp.Rational(2, model.length) * envelope.loss.subs(dict(zip(z_flat, tuple(fields.omega), strict=True)))
    return ReplicaSystem(
        model=model,
        parameters=s.par,
        alpha=s.alpha,
        constants=tuple(s.consts[name] for name in model.constants()),
        nodes=fields.nodes,
        labels=s.labels,
        z=z_flat,
        student_fields=fields.omega,
        teacher_fields=fields.hstar,
        teacher_attention=envelope.teacher,
        sigma_tilde=s.sigma_tilde,
        teacher_overlap=tuple(s.trace_sigma[c] for c in s.basis),
        per_token=fields.per_token,
        loss=envelope.loss,
        envelope=envelope.envelope,
        envelope_gradient=envelope.gradient,
        envelope_hessian=envelope.hessian,
        prox_starts=_prox_starts(fields.omega, fields.hstar),
        energetic_integrands=energetic,
        score_integrands=score,
        expectations=stationarity.expectations,
        conjugate_updates=stationarity.conjugate_updates,
        order_updates=stationarity.order_updates,
        entropic_potential=psi_w,
        trace_terms=trace_terms,
        psi_out=psi_out,
        free_entropy=trace_terms + psi_w + s.alpha * psi_out,
        regulariser_energy=regulariser_energy,
        regulariser_slope=model.regulariser.slope_at_zero(s.strengths),
        test_error_integrand=test_error,
        free_entropy_gradient=stationarity.gradient,
    )


def _prox_starts(omega: sp.Matrix, hstar: sp.Matrix) -> tuple[tuple[sp.Expr, ...], ...]:
    """Natural starting points of the prox search, closed under ``z -> -z``: the prior mean
    ``omega`` and, where the student can reproduce the teacher's semantic attention
    (:func:`_exact_fit`), that fit and its sums with ``omega``."""
    starts = [omega]
    fit = _exact_fit(hstar, omega.cols)
    if fit is not None:
        starts += [fit, omega + fit, omega - fit]
    return tuple(tuple(sign * s) for s in starts for sign in (1, -1))


def _exact_fit(hstar: sp.Matrix, rank: int) -> sp.Matrix | None:
    """Student fields ``z`` (L x ``rank``) with ``z z^T = h* h*^T``, so that the student's attention
    equals the teacher's semantic part: ``h*`` itself, padded with zero columns when the student's
    rank exceeds the teacher's; ``None`` when it is lower (no such ``z``)."""
    if hstar.cols > rank:
        return None
    return hstar.row_join(sp.zeros(hstar.rows, rank - hstar.cols))


def _solve_linear(expression: sp.Expr, unknown: sp.Symbol) -> sp.Expr:
    """Solve ``expression = 0`` for ``unknown``, which it contains linearly."""
    slope = sp.diff(expression, unknown)
    if slope.has(unknown) or slope == 0:
        raise ValueError(f"stationarity condition is not linear in {unknown}: {expression}")
    return _simplified(-expression.subs(unknown, 0) / slope)


def _simplified(expression: sp.Expr) -> sp.Expr:
    """``expression`` simplified if it is algebraic (ridge's rational updates); left as derived if it
    holds exponentials or error functions, which simplification rewrites with growing exponents that
    overflow (``exp(a) / exp(b)`` for ``exp(a - b)``)."""
    if expression.has(sp.exp, sp.erf):
        return expression
    return sp.simplify(expression)


__all__ = [
    "FAMILIES",
    "HAT_NAMES",
    "ConstrainedSystem",
    "IntegrandDerivatives",
    "LabelIndicators",
    "ReplicaSystem",
    "derive",
]
