"""Compiled, vectorised form of a :class:`replica.saddle_equations.ReplicaSystem`.

This module knows nothing about attention: it sees integrands of the node variables, the
prox variables ``z``, the order parameters and the constants, and closed-form updates.
Node-level integrands are compiled to numba kernels (:mod:`saddle.compilation.codegen`,
:mod:`saddle.compilation.templates`; the machine code is cached on disk, per model); the closed-form
scalar updates are lambdified to numpy. Compilation happens once per model structure and
process, and is cached.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from types import ModuleType

import numpy as np
import sympy as sp

from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.compilation import templates
from attnphase.saddle.compilation.ahead import KERNEL_ARGUMENTS, compile_ahead
from attnphase.saddle.compilation.codegen import ModuleSource, Recipe
from attnphase.saddle.quadrature.rules import QuadratureRule, with_labels
from attnphase.saddle.tuning import KernelTuning


def _lambdify_vector(args: Sequence[Sequence[sp.Symbol]], exprs: Sequence[sp.Expr]) -> Callable[..., np.ndarray]:
    function = sp.lambdify([list(a) for a in args], list(exprs), modules="numpy", cse=True)

    def stacked(*values: object) -> np.ndarray:
        outputs = function(*values)
        return np.stack(np.broadcast_arrays(*[np.asarray(o, dtype=float) for o in outputs]))

    return stacked


def _read_only(value: object) -> object:
    """``value`` as a kernel argument: an array C-contiguous, float and read-only (a read-only view, copied
    only if it is not C-contiguous float already); anything else as it is."""
    if not isinstance(value, np.ndarray):
        return value
    view = np.ascontiguousarray(value, dtype=float).view()
    view.setflags(write=False)
    return view


@dataclass(frozen=True)
class OneSignature:
    """A jitted ``kernel`` called with its arrays in one form (:func:`_read_only`). Numba compiles a
    function once per combination of argument types, and a writable array, a read-only one and a
    Fortran-ordered one are three types: called with the rules' read-only nodes, a fold's or a check's
    nodes and the work arrays of the solver as they come, each kernel would be compiled two or three
    times in a new process (``kernel.signatures``)."""

    kernel: Callable[..., object]

    def __call__(self, *args: object) -> object:
        return self.kernel(*(_read_only(a) for a in args))


@dataclass(frozen=True, eq=False)
class CompiledSystem:
    """Numerical callables of a replica system.

    Shapes: ``nodes (D, N)``, ``weights (N,)``, ``z (k, N)``, ``params`` and ``conj (P,)``,
    ``consts (C,)``.

    * ``prox(nodes, params, consts, starts (S, k, N), tol, maxit) -> (z, M, |grad M|)``
      the best of the Newton-refined starts at every node;
    * ``starts(nodes, params, consts, first=None) -> (S, k, N)`` the deterministic starts (the ``first``
      of them if given);
    * ``energetic(z, nodes, weights, params, consts) -> (2 + P,)``:
      ``E[M], E[l], E[dM/dX]`` (envelope form);
    * ``score(z, nodes, weights, params, consts) -> (2 + P,)``: ``E[M], E[l]`` and
      ``E[M s_X + partial_X M]`` (Gaussian integration-by-parts form of the same derivatives);
    * ``energetic_jacobian``, ``score_jacobian`` (same arguments) ``-> (P, P)``: the derivative of the
      expectations ``E[dM/dX]`` of the form in the order parameters, the prox moving with them
      (:class:`~attnphase.replica.saddle_equations.IntegrandDerivatives`);
    * ``test_error(nodes, weights, params, consts) -> (1,)``;
    * ``conjugates(alpha, expectations, consts)``, ``orders(conj, consts)``: the updates;
      ``entropic(conj, consts)``, ``trace(params, conj)``, ``regulariser(conj, consts)``;
      ``regulariser_slope(consts)``: the least rate at which ``g`` grows from ``w = 0``;
    * ``coupling (P, P)``: ``d^2 Phi / dX dXhat'`` (constant); ``entropic_hessian(conj, consts)
      -> (P, P)``: ``d^2 Psi_w / dXhat dXhat'``;
    * ``order_jacobian(conj, consts) -> (P, P)``: ``d orders / d conj``;
      ``conjugate_jacobian(alpha, expectations, consts) -> (P, P)``: ``d conjugates / d expectations``;
      ``conjugate_alpha_derivative(alpha, expectations, consts) -> (P,)``: ``d conjugates / d alpha``.
    """

    system: ReplicaSystem
    prox: Callable[..., tuple[np.ndarray, np.ndarray, np.ndarray]]
    starts: Callable[..., np.ndarray]
    energetic: Callable[..., np.ndarray]
    score: Callable[..., np.ndarray]
    energetic_jacobian: Callable[..., np.ndarray]
    score_jacobian: Callable[..., np.ndarray]
    test_error: Callable[..., np.ndarray]
    conjugates: Callable[..., np.ndarray]
    orders: Callable[..., np.ndarray]
    entropic: Callable[..., np.ndarray]
    trace: Callable[..., np.ndarray]
    regulariser: Callable[..., np.ndarray]
    regulariser_slope: Callable[..., float]
    gradient: Callable[..., np.ndarray]
    coupling: np.ndarray
    entropic_hessian: Callable[..., np.ndarray]
    order_jacobian: Callable[..., np.ndarray]
    conjugate_jacobian: Callable[..., np.ndarray]
    conjugate_alpha_derivative: Callable[..., np.ndarray]

    @property
    def names(self) -> tuple[str, ...]:
        """The order-parameter names, in the order of every vector of parameters."""
        return tuple(e.symbol.name for e in self.system.entries)

    @property
    def conjugate_names(self) -> tuple[str, ...]:
        """The conjugate names, in the same order."""
        return tuple(e.conjugate.name for e in self.system.entries)

    @property
    def families(self) -> tuple[str, ...]:
        """The family (``q``, ``m``, ``V``, ``theta``) of each order parameter."""
        return tuple(e.family for e in self.system.entries)

    @property
    def dimension(self) -> int:
        """Number of Gaussian node variables ``D = L (r + t)`` (the label nodes of a mixture follow them)."""
        return self.system.gaussian_dimension

    def rule(self, quadrature: QuadratureRule) -> tuple[np.ndarray, np.ndarray]:
        """The nodes ``(D + labels, N)`` and weights ``(N,)`` of ``quadrature`` over the Gaussian nodes,
        times the declaration's label law (:func:`~attnphase.saddle.quadrature.rules.with_labels`): the rule
        of every expectation of the kernels."""
        return with_labels(*quadrature.nodes(self.dimension), *self.system.label_rule())

    @property
    def prox_dimension(self) -> int:
        """Number of prox variables ``k = L r``."""
        return len(self.system.z)

    def constant_vector(self) -> np.ndarray:
        """The values of the declaration's named constants, in the compiled order."""
        values = self.system.constant_values()
        return np.array([values[c] for c in self.system.constants], dtype=float)


#: The forms of the energetic integrands (:meth:`ReplicaSystem.integrands`) and the names of their kernels.
FORMS = {"envelope": "energetic", "score": "score"}

_COMPILED: dict[tuple, CompiledSystem] = {}


def compile_system(system: ReplicaSystem, kernels: KernelTuning | None = None) -> CompiledSystem:
    """Compile every integrand and update of ``system``, the kernels with the constants of ``kernels``
    (default: the package's), cached per model structure and constants."""
    constants = (kernels or KernelTuning()).template_constants()
    key = (system.model.structure(), tuple(constants.items()))
    if key not in _COMPILED:
        _COMPILED[key] = _compile(system, constants)
    cached = _COMPILED[key]
    return cached if cached.system is system else replace(cached, system=system)


def _compile(system: ReplicaSystem, constants: dict[str, int | float]) -> CompiledSystem:
    z, nodes = system.z, system.nodes
    params, conj, consts = system.parameters.symbols, system.parameters.conjugates, system.constants
    k, n_params = len(z), len(params)
    module = _kernel_module(system, constants)

    expectations = [system.expectations[s] for s in params]
    first_starts: dict[int, Callable[..., np.ndarray]] = {}

    def starts(*values: object, first: int | None = None) -> np.ndarray:
        count = len(system.prox_starts) if first is None else min(first, len(system.prox_starts))
        if count not in first_starts:
            chosen = [x for start in system.prox_starts[:count] for x in start]
            first_starts[count] = _lambdify_vector([nodes, params, consts], chosen)
        flat = first_starts[count](*values)
        return flat.reshape((count, k) + flat.shape[1:])

    scalar = lambda args, exprs: (lambda f: lambda *a: f(*a)[0])(_lambdify_vector(args, exprs))  # noqa: E731
    entropic_hessian = _lambdify_vector([conj, consts], list(system.entropic_hessian))
    coupling = np.array(system.coupling.tolist(), dtype=float)
    coupling.setflags(write=False)
    square = lambda function: lambda *values: function(*values).reshape(n_params, n_params)  # noqa: E731

    return CompiledSystem(
        system=system,
        prox=OneSignature(module.prox_kernel),
        starts=starts,
        energetic=OneSignature(module.energetic),
        score=OneSignature(module.score),
        energetic_jacobian=square(OneSignature(module.energetic_jacobian)),
        score_jacobian=square(OneSignature(module.score_jacobian)),
        test_error=OneSignature(module.test_error),
        conjugates=_lambdify_vector(
            [[system.alpha], expectations, consts], [system.conjugate_updates[c] for c in conj]
        ),
        orders=_lambdify_vector([conj, consts], [system.order_updates[s] for s in params]),
        entropic=scalar([conj, consts], [system.entropic_potential]),
        trace=scalar([params, conj], [system.trace_terms]),
        regulariser=scalar([conj, consts], [system.regulariser_energy]),
        regulariser_slope=scalar([consts], [system.regulariser_slope]),
        gradient=_lambdify_vector(
            [[system.alpha], expectations, params, conj, consts], [system.free_entropy_gradient[s] for s in params]
        ),
        coupling=coupling,
        entropic_hessian=square(entropic_hessian),
        order_jacobian=square(_lambdify_vector([conj, consts], list(system.order_jacobian))),
        conjugate_jacobian=square(
            _lambdify_vector([[system.alpha], expectations, consts], list(system.conjugate_jacobian))
        ),
        conjugate_alpha_derivative=_lambdify_vector(
            [[system.alpha], expectations, consts], list(system.conjugate_alpha_derivative)
        ),
    )


def _kernel_module(system: ReplicaSystem, constants: dict[str, int | float]) -> ModuleType:
    """The generated kernel module of ``system``: the one made before for the same recipe
    (:class:`~attnphase.saddle.compilation.codegen.Recipe`: the expressions the generator reads, its code and the
    library versions), else generated (:func:`_generate`) and remembered under its recipe."""
    recipe = Recipe(_recipe_parts(system, constants))
    module = recipe.load(tuple(KERNEL_ARGUMENTS))
    if module is None:
        module = _generate(system, constants).load()
        compile_ahead(module)
        recipe.remember(module)
    return module


def _recipe_parts(system: ReplicaSystem, constants: dict[str, int | float]) -> list[str]:
    """Everything :func:`_generate` reads of ``system``, printed exactly (``sympy.srepr``); the rest of
    what it generates (gradient, Hessian, the integrands' derivatives) is derived from these by the
    code the recipe also holds."""
    symbols = (system.z, system.nodes, system.parameters.symbols, system.constants)
    expressions = [system.envelope, system.loss, system.test_error_integrand]
    expressions += [system.energetic_integrands[x] for x in system.parameters.symbols]
    expressions += [e for x in system.parameters.symbols for e in system.score_integrands[x]]
    return [sp.srepr(group) for group in (*symbols, *expressions)] + [repr(constants)]


def _generate(system: ReplicaSystem, constants: dict[str, int | float]) -> ModuleSource:
    """The source of ``system``'s kernel module: the envelope split for the prox, the integrands of both
    forms and their derivatives (:class:`~attnphase.replica.saddle_equations.IntegrandDerivatives`), the
    test error, and the templates of :mod:`saddle.compilation.templates` over them."""
    z, nodes = system.z, system.nodes
    params, consts = system.parameters.symbols, system.constants
    k, n_params = len(z), len(params)
    with_z = [("z", z), ("n", nodes), ("p", params), ("c", consts)]
    without_z = [("n", nodes), ("p", params), ("c", consts)]
    source = ModuleSource(k, constants)
    hessian = [h for row in system.envelope_hessian for h in row]
    invariants = source.hoisted(
        "node_terms",
        without_z,
        z,
        {"derivatives": [*system.envelope_gradient, *hessian, system.envelope]},
    )
    source.constant("INVARIANTS", invariants)
    summary = [system.envelope, system.loss]
    for form in FORMS:
        source.vector(f"{form}_form", with_z, summary + list(system.integrands(form)))
        d = system.integrand_derivatives(form)
        flat = [e for block in (d.explicit, d.along_z, d.mixed, system.envelope_hessian) for row in block for e in row]
        source.vector(f"{form}_pieces", with_z, flat, factor=False)  # once per Newton step: generation dominates
    source.vector("test_error_integrand", without_z, [system.test_error_integrand])
    for template in templates.SHARED_TEMPLATES:
        source.template(template, parallel=template is templates.prox_kernel)
    size = str(2 + n_params)
    for form, name in FORMS.items():
        source.template(templates.integral_kernel_z, name, parallel=True, integrand=f"{form}_form", SIZE=size)
        bindings = {"pieces": f"{form}_pieces", "P": str(n_params)}
        source.template(templates.jacobian_kernel, f"{name}_jacobian", parallel=True, **bindings)
    source.template(templates.integral_kernel, "test_error", parallel=True, integrand="test_error_integrand", SIZE="1")
    return source
