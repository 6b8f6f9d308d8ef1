r"""Paper-ready rendering of a derived replica system (THEORY.md sec. 1-5).

:func:`build_document` turns the :class:`~attnphase.replica.saddle_equations.ReplicaSystem`
of any declaration into an :class:`EquationsDocument`: an ordered list of equations, each a
sympy ``lhs``/``rhs`` pair filed under one of the :data:`SECTIONS`, with two renderings:
:meth:`EquationsDocument.latex` (one ``align*`` environment per section, to paste into a paper)
and :meth:`EquationsDocument.text` (sympy's str printer, for a terminal). The document states

1. the symmetry reduction: each per-token order parameter (``q_l, m_l, V_l, theta_l`` of
   THEORY.md sec. 2) in terms of the reduced ones (one per covariance class or positional
   direction, sec. 6);
2. the fields ``omega_l = m_l + q_l^{1/2} xi_l`` and
   ``h*_l = theta_l q_l^{-1} (omega_l - m_l) + (rho_l - theta_l q_l^{-1} theta_l^T)^{1/2} eta_l``
   entry by entry in the standard Gaussian nodes ``xi_l, eta_l`` (sec. 2);
3. the declared attention maps ``S(z)`` and ``T(h*)`` entry by entry (sec. 1);
4. the loss ``l(z, h*) = 1/2 tr[(T - S) Sigma_tilde (T - S)^T]`` written out in the entries
   ``S_lk, T_lk, Sigma_tilde_lk``, and its derivative in the teacher fields (sec. 1);
5. the Moreau envelope ``M(z; xi, eta) = sum_l (z_l - omega_l)^T V_l^{-1} (z_l - omega_l)/2 + l``,
   the prox ``z* = argmin_z M`` and ``M* = min_z M`` (sec. 3);
6. the energetic equations: each conjugate as ``alpha`` times a Gaussian expectation at the
   prox (envelope theorem, sec. 4), the integrand ``dM/dX`` written by the chain rule
   ``sum_l (dM/domega_l)(domega_l/dX) + sum_l (dl/dh*_l)(dh*_l/dX) + (explicit dependence
   of the prior term on X at fixed fields)``, evaluated at ``z = z*``;
7. the entropic equations in closed form (sec. 3-4);
8. the free entropy ``Phi = trace terms + Psi_w + alpha Psi_out`` with ``Psi_w`` written out,
   ``Psi_out = -E[M*]`` and the training loss ``eps_t = -Phi`` at a fixed point (sec. 3, 5);
9. the named constants of the declaration and their values.

Notation: the token index ``l`` is a subscript (``omega_l``, ``z_l``); a component index
follows it after a comma (``omega_{l,i}``). A per-token order parameter is written ``q_l``
when its family has a single reduced symbol ``q`` (the paper's instance: ``m_2 = -m``) and
``q^{(l)}`` otherwise, so that it cannot be confused with the reduced ``q_c`` of class ``c``
(``q^{(3)} = q_2`` in the three-token example). Conjugates carry hats (``\hat{q}``).

Everything here is sympy: no numerics. Every LaTeX string stays within what matplotlib's
mathtext renders (matrices are written entry by entry; no ``matrix`` environments).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import TYPE_CHECKING

import sympy as sp
from sympy.printing.latex import LatexPrinter
from sympy.printing.str import StrPrinter

from attnphase.replica.order_parameters import FAMILIES

if TYPE_CHECKING:
    from attnphase.replica.saddle_equations import ReplicaSystem


# --------------------------------------------------------------------------- symbol names

_HAT_LATEX = {
    name: rf"\hat{{{latex_base}}}"
    for name, latex_base in (("qhat", "q"), ("mhat", "m"), ("Vhat", "V"), ("thetahat", r"\theta"))
}


def symbol_latex(name: str) -> str:
    r"""LaTeX of a symbol name of a :class:`ReplicaSystem`: ``base_i_j`` becomes ``base_{i,j}``,
    Greek bases become their letters and conjugate bases get hats (``thetahat_1`` ->
    ``\hat{\theta}_{1}``); non-numeric subscripts are upright (``Psi_out`` -> ``\Psi_{\mathrm{out}}``)."""
    base, *indices = name.split("_")
    if not base or any(not index for index in indices):
        return sp.latex(sp.Symbol(name))
    head = _HAT_LATEX.get(base) or sp.latex(sp.Symbol(base))
    if not indices:
        return head
    return head + "_{" + ",".join(i if i.isdigit() else rf"\mathrm{{{i}}}" for i in indices) + "}"


def latex(expr: sp.Basic, symbol_names: Mapping[sp.Symbol, str] | None = None) -> str:
    r"""LaTeX of an expression of a :class:`ReplicaSystem`, with hats on the conjugates.

    Every free symbol is named by :func:`symbol_latex` unless ``symbol_names`` gives its LaTeX
    explicitly (the document's own symbols: fields, attention entries, ...). Floats print
    with the digits they need (``0.3``, not ``0.300000000000000``).
    """
    names = {s: symbol_latex(s.name) for s in expr.free_symbols if isinstance(s, sp.Symbol)}
    names.update(symbol_names or {})
    return sp.latex(expr, symbol_names=names, full_prec=False)


def plain_text(expr: sp.Basic) -> str:
    """Plain text of an expression (sympy's str printer, short floats)."""
    return sp.sstr(expr, full_prec=False)


# --------------------------------------------------------------------------- unevaluated operators


class GaussianExpectation(sp.Function):
    r"""Unevaluated ``E_{xi,eta}[f]`` over the standard Gaussian nodes ``xi_l ~ N(0, I_r)``,
    ``eta_l ~ N(0, I_t)`` of THEORY.md sec. 2 (all independent). Printed
    ``\mathbb{E}_{\xi,\eta}\left[ f \right]`` in LaTeX and ``E[f]`` as text."""

    nargs = 1

    def _latex(self, printer: LatexPrinter) -> str:
        return rf"\mathbb{{E}}_{{\xi,\eta}}\left[ {printer._print(self.args[0])} \right]"

    def _sympystr(self, printer: StrPrinter) -> str:
        return f"E[{printer._print(self.args[0])}]"


class ArgMin(sp.Function):
    r"""Unevaluated ``argmin_{x in D} f`` (arguments ``f, x, D``): the prox of THEORY.md sec. 3,
    the GLOBAL minimiser of a non-convex envelope."""

    nargs = 3

    def _latex(self, printer: LatexPrinter) -> str:
        objective, variable, domain = (printer._print(a) for a in self.args)
        return rf"\mathrm{{argmin}}_{{{variable} \in {domain}}} {objective}"

    def _sympystr(self, printer: StrPrinter) -> str:
        objective, variable, domain = (printer._print(a) for a in self.args)
        return f"argmin_{{{variable} in {domain}}} {objective}"


class Minimum(sp.Function):
    r"""Unevaluated ``min_{x in D} f`` (arguments ``f, x, D``), THEORY.md sec. 3."""

    nargs = 3

    def _latex(self, printer: LatexPrinter) -> str:
        objective, variable, domain = (printer._print(a) for a in self.args)
        return rf"\min_{{{variable} \in {domain}}} {objective}"

    def _sympystr(self, printer: StrPrinter) -> str:
        objective, variable, domain = (printer._print(a) for a in self.args)
        return f"min_{{{variable} in {domain}}} {objective}"


# --------------------------------------------------------------------------- the document


@dataclass(frozen=True)
class Section:
    """One part of the document: ``key`` (used in :attr:`Equation.section`), a title and a
    one-line description (plain text, printed as a LaTeX ``%`` comment and a text header)."""

    key: str
    title: str
    description: str


#: The sections of an :class:`EquationsDocument`, in order.
SECTIONS: tuple[Section, ...] = (
    Section(
        "symmetry",
        "Symmetry reduction",
        "per-token order parameters in terms of the reduced ones (THEORY.md sec. 2, 6)",
    ),
    Section(
        "labels",
        "Cluster labels",
        "mixture tokens: s_l_j = 1 if token l is in cluster j, else 0, with the labels (c_1, ..., c_L) drawn "
        "from their joint law, whose configurations are listed; every expectation below runs over the labels "
        "too (THEORY.md sec. 8)",
    ),
    Section(
        "fields",
        "Fields",
        "student cavity field omega_l and teacher field h*_l; xi_l ~ N(0, I_r), eta_l ~ N(0, I_t) "
        "independent (THEORY.md sec. 2)",
    ),
    Section(
        "attention",
        "Attention maps",
        "declared student attention S(z) and teacher attention T(h*), entry by entry (THEORY.md sec. 1)",
    ),
    Section(
        "loss",
        "Loss",
        "l(z, h*) = 1/2 tr[(T - S) Sigma_tilde (T - S)^T] written out, and its derivative in the teacher "
        "fields through T, with dT_jk/dh*_l the derivatives of the map of section 3 (THEORY.md sec. 1)",
    ),
    Section(
        "envelope",
        "Moreau envelope and prox",
        "M = sum_l (z_l - omega_l)^T V_l^{-1} (z_l - omega_l)/2 + l; the prox is the global minimiser "
        "(THEORY.md sec. 3)",
    ),
    Section(
        "energetic",
        "Energetic equations",
        "conjugates as Gaussian expectations of dM/dX at z = z* (envelope theorem); dM/dX = "
        "sum_l (dM/domega_l)(domega_l/dX) + sum_l (dl/dh*_l)(dh*_l/dX) + explicit dependence at fixed "
        "fields, with omega_l and h*_l the fields of section 2 and dl/dh*_l that of section 4 at z = z* "
        "(THEORY.md sec. 4)",
    ),
    Section(
        "entropic",
        "Entropic equations",
        "order parameters in closed form in the conjugates (THEORY.md sec. 3, 4)",
    ),
    Section(
        "free_entropy",
        "Free entropy",
        "replica-symmetric free entropy at zero temperature; eps_t = -Phi at a fixed point (THEORY.md sec. 3, 5)",
    ),
    Section(
        "constants",
        "Constants",
        "named constants of the declaration and their values",
    ),
)

_SECTION_KEYS = tuple(s.key for s in SECTIONS)


@dataclass(frozen=True)
class Equation:
    """``lhs = rhs`` (sympy objects) in the section with key ``section`` (see :data:`SECTIONS`)."""

    section: str
    lhs: sp.Basic
    rhs: sp.Basic


@dataclass(frozen=True)
class Notation:
    """The document's own symbols, as matrices shaped like what they stand for.

    ``student_fields`` ``omega`` (L x r), ``teacher_fields`` ``h*`` (L x t), ``prox`` ``z*``
    (L x r), ``loss_gradient`` ``dl/dh*`` (L x t), ``student_attention`` ``S`` and
    ``teacher_attention`` ``T`` (L x L), ``sigma_tilde`` (L x L, zero where ``Sigma_tilde`` is),
    ``teacher_jacobian`` ``dT_jk/dh*_{l,a}`` (row ``j L + k``, column ``l t + a``; zero where
    ``T_jk`` does not depend on ``h*_{l,a}``), and the scalar symbols ``loss`` ``l``,
    ``envelope`` ``M``, ``envelope_min`` ``M*``.
    """

    student_fields: sp.ImmutableMatrix
    teacher_fields: sp.ImmutableMatrix
    prox: sp.ImmutableMatrix
    loss_gradient: sp.ImmutableMatrix
    student_attention: sp.ImmutableMatrix
    teacher_attention: sp.ImmutableMatrix
    sigma_tilde: sp.ImmutableMatrix
    teacher_jacobian: sp.ImmutableMatrix
    loss: sp.Symbol
    envelope: sp.Symbol
    envelope_min: sp.Symbol


@dataclass(frozen=True)
class EquationsDocument:
    """The whole derived system as equations (see the module docstring for the sections).

    ``equations`` in document order; ``integrands[X]`` is the chain-rule integrand ``dM/dX`` at
    ``z = z*`` of the reduced parameter ``X`` (inside the expectation of its conjugate's
    equation); ``notation`` the document's own symbols; ``symbol_names`` their LaTeX.
    """

    equations: tuple[Equation, ...]
    integrands: tuple[tuple[sp.Symbol, sp.Expr], ...]
    notation: Notation
    symbol_names: tuple[tuple[sp.Symbol, str], ...]

    @property
    def sections(self) -> tuple[Section, ...]:
        """The sections that hold at least one equation, in order."""
        present = {eq.section for eq in self.equations}
        return tuple(s for s in SECTIONS if s.key in present)

    def section(self, key: str) -> tuple[Equation, ...]:
        """The equations of the section ``key``, in order."""
        if key not in _SECTION_KEYS:
            raise KeyError(f"unknown section {key!r}; sections are {', '.join(_SECTION_KEYS)}")
        return tuple(eq for eq in self.equations if eq.section == key)

    def integrand(self, parameter: sp.Symbol) -> sp.Expr:
        """The chain-rule integrand ``dM/dX`` at the prox of the reduced parameter ``X``."""
        return dict(self.integrands)[parameter]

    def latex_of(self, expr: sp.Basic) -> str:
        """LaTeX of an expression in the document's notation (:func:`latex` with its names)."""
        return latex(expr, dict(self.symbol_names))

    def latex_pair(self, equation: Equation) -> tuple[str, str]:
        """LaTeX of the two sides of ``equation``."""
        names = dict(self.symbol_names)
        return latex(equation.lhs, names), latex(equation.rhs, names)

    def latex(self) -> str:
        """LaTeX source: per section a ``%`` comment line naming it, then one ``align*``
        environment with one ``lhs &= rhs`` line per equation."""
        names = dict(self.symbol_names)
        blocks = ["% Replica-symmetric saddle-point equations, derived by attnphase (docs/THEORY.md)"]
        for number, section in enumerate(self.sections, 1):
            rows = [f"{latex(eq.lhs, names)} &= {latex(eq.rhs, names)}" for eq in self.section(section.key)]
            body = " \\\\\n".join(rows)
            blocks.append(
                f"% {number}. {section.title}: {section.description}\n\\begin{{align*}}\n{body}\n\\end{{align*}}"
            )
        return "\n\n".join(blocks) + "\n"

    def text(self) -> str:
        """Plain text: per section a ``# n. Title`` header and its description, then one
        ``lhs = rhs`` line per equation (sympy's str printer)."""
        blocks = []
        for number, section in enumerate(self.sections, 1):
            rows = [f"{plain_text(eq.lhs)} = {plain_text(eq.rhs)}" for eq in self.section(section.key)]
            blocks.append("\n".join([f"# {number}. {section.title}", f"# ({section.description})", *rows]))
        return "\n\n".join(blocks) + "\n"


# --------------------------------------------------------------------------- building


class _Names:
    """Display symbols of the document and their LaTeX."""

    def __init__(self) -> None:
        self.latex: dict[sp.Symbol, str] = {}

    def symbol(self, text_name: str, latex_name: str) -> sp.Symbol:
        symbol = sp.Symbol(text_name)
        self.latex[symbol] = latex_name
        return symbol

    def indexed(self, text_base: str, latex_base: str, indices: Sequence[int]) -> sp.Symbol:
        """``base_{i,j}``; named ``base_i_j`` in text."""
        return self.symbol(
            text_base + "".join(f"_{i}" for i in indices),
            latex_base + ("_{" + ",".join(map(str, indices)) + "}" if indices else ""),
        )

    def matrix(self, rows: int, cols: int, text_base: str, latex_base: str, single: bool) -> sp.ImmutableMatrix:
        """``rows x cols`` display symbols, indexed by the row only when ``single``."""
        return sp.ImmutableMatrix(
            rows,
            cols,
            lambda i, j: self.indexed(text_base, latex_base, (i + 1,) if single else (i + 1, j + 1)),
        )


@dataclass(frozen=True)
class _QuadraticForm:
    """``u^T V^{-1} u / 2`` for a symmetric symbol matrix ``V`` and placeholder ``u``, written as
    ``u^T adj(V) u / (2 det V)`` with the numerator expanded in ``u`` (no nested fractions),
    with its gradient in ``u`` and its explicit derivatives in the entries of ``V``."""

    placeholders: tuple[sp.Dummy, ...]
    value: sp.Expr
    gradient: tuple[sp.Expr, ...]
    explicit: dict[sp.Symbol, sp.Expr]

    @classmethod
    def of(cls, v: sp.Matrix) -> _QuadraticForm:
        u = sp.Matrix([sp.Dummy(f"u{i + 1}") for i in range(v.rows)])
        value = sp.expand((u.T * v.adjugate() * u)[0, 0]) / (2 * sp.factor(v.det()))
        return cls(
            placeholders=tuple(u),
            value=value,
            gradient=tuple(sp.factor(sp.diff(value, ui)) for ui in u),
            explicit={s: sp.factor(sp.diff(value, s)) for s in sorted(v.free_symbols, key=sp.default_sort_key)},
        )

    def at(self, expr: sp.Expr, gap: sp.Matrix) -> sp.Expr:
        """``expr`` with the placeholder ``u`` replaced by ``gap`` (a row or column)."""
        return expr.xreplace(dict(zip(self.placeholders, gap, strict=True)))


@lru_cache(maxsize=4096)
def _compact(expr: sp.Expr) -> sp.Expr:
    """The shortest of ``expr``, its factored and (for small expressions) its simplified form:
    an equal expression that prints shorter. ``sp.factor`` alone is cheap and does most of
    the work on the rational-with-radicals coefficients of the fields."""
    candidates = [expr, sp.factor(expr)]
    if sp.count_ops(expr) <= _SIMPLIFY_OPS:
        candidates.append(sp.simplify(expr))
    return min(candidates, key=lambda e: (len(sp.srepr(e)), sp.default_sort_key(e)))


#: Expressions with at most this many operations are also tried with ``sp.simplify``.
_SIMPLIFY_OPS = 40


def _tidy(expr: sp.Expr, nodes: Sequence[sp.Symbol]) -> sp.Expr:
    """``expr`` (linear in the Gaussian ``nodes``, as the fields of THEORY.md sec. 2 are) as
    ``const + sum_n coef_n n`` with each coefficient simplified; unchanged if not linear."""
    present = [n for n in nodes if expr.has(n)]
    coefficients = [sp.diff(expr, n) for n in present]
    if any(c.has(*present) for c in coefficients):
        return expr
    rest = expr.xreplace(dict.fromkeys(present, sp.Integer(0)))
    return sp.Add(_compact(rest), *[_compact(c) * n for c, n in zip(coefficients, present, strict=True)])


def _entries(value: sp.Basic, symmetric: bool) -> Iterable[tuple[tuple[int, ...], sp.Expr]]:
    """Independent entries of a per-token order parameter, indexed like
    :mod:`~attnphase.replica.order_parameters` does (two indices for a matrix, one for a
    vector, none for a scalar)."""
    if not isinstance(value, sp.MatrixBase):
        yield (), value
        return
    rows, cols = value.shape
    for i in range(rows):
        for j in range(cols):
            if symmetric and j < i:
                continue
            if (rows, cols) == (1, 1):
                yield (), value[i, j]
            elif min(rows, cols) > 1:
                yield (i + 1, j + 1), value[i, j]
            else:
                yield (max(i, j) + 1,), value[i, j]


def _per_token_keys(length: int, rank: int) -> dict[str, tuple[str, int, tuple[int, ...]]]:
    """The keys of ``ReplicaSystem.per_token``: key -> (family, token, component)."""
    keys: dict[str, tuple[str, int, tuple[int, ...]]] = {}
    for l in range(1, length + 1):
        for family in FAMILIES:
            if family == "m" and rank > 1:
                for i in range(1, rank + 1):
                    keys[f"m_{l}{i}"] = ("m", l, (i,))
            else:
                keys[f"{family}_{l}"] = (family, l, ())
    return keys


def _symmetry_reduction(system: ReplicaSystem, names: _Names) -> list[Equation]:
    """Section 1: every per-token order parameter (entry by entry) in terms of the reduced ones."""
    keys = _per_token_keys(system.model.length, system.model.rank)
    single = {family: [e.symbol.name for e in system.parameters.of_family(family)] == [family] for family in FAMILIES}
    equations = []
    for key, value in system.per_token.items():
        if key not in keys:
            raise ValueError(f"unexpected per-token order parameter {key!r}")
        family, token, component = keys[key]
        base = symbol_latex(family)
        for entry, expr in _entries(value, symmetric=family in ("q", "V")):
            indices = component + entry
            if single[family]:
                lhs = names.symbol(f"{family}_{token}", f"{base}_{{{token}}}")
            else:
                lhs = names.symbol(
                    f"{family}^({token})" + "".join(f"_{i}" for i in indices),
                    f"{base}^{{({token})}}" + ("_{" + ",".join(map(str, indices)) + "}" if indices else ""),
                )
            equations.append(Equation("symmetry", lhs, expr))
    return equations


def _label_law(system: ReplicaSystem, names: _Names) -> list[Equation]:
    """The probability of each label configuration of a mixture (none for Gaussian tokens)."""
    if not system.labels.symbols:
        return []
    equations = []
    for labels, probability in system.model.tokens.configurations():
        shown = ", ".join(str(c + 1) for c in labels)
        lhs = names.symbol(f"P(c = ({shown}))", rf"P\left(c = ({shown})\right)")
        equations.append(Equation("labels", lhs, sp.Float(probability, 15)))
    return equations


def _token_responses(system: ReplicaSystem) -> list[sp.Expr | sp.Matrix]:
    """The response ``V_l`` of each token, in the reduced parameters (its class's, or for mixture tokens
    the selection by the token's label indicators)."""
    return [system.per_token[f"V_{l + 1}"] for l in range(system.model.length)]


def build_document(system: ReplicaSystem) -> EquationsDocument:
    """The :class:`EquationsDocument` of a derived system (any declaration: L tokens, ranks
    r and t, several covariance classes and positional directions)."""
    model = system.model
    L, r, t = model.length, model.rank, model.teacher_rank
    par = system.parameters
    constants = {c.name: c for c in system.constants}
    nodes = system.nodes[: system.gaussian_dimension]
    names = _Names()
    equations = _symmetry_reduction(system, names)
    equations += _label_law(system, names)

    # ---- 2. fields (THEORY.md sec. 2)
    omega = names.matrix(L, r, "omega", r"\omega", single=r == 1)
    hstar = names.matrix(L, t, "h*", r"h^*", single=t == 1)
    omega_value = sp.Matrix(L, r, lambda l, i: _tidy(system.student_fields[l, i], nodes))
    hstar_value = sp.Matrix(L, t, lambda l, a: _tidy(system.teacher_fields[l, a], nodes))
    equations += [Equation("fields", omega[k], omega_value[k]) for k in range(L * r)]
    equations += [Equation("fields", hstar[k], hstar_value[k]) for k in range(L * t)]

    # ---- 3. attention maps, as declared (THEORY.md sec. 1)
    z = sp.Matrix(L, r, system.z)
    student_map = model.student.expression(z, constants)
    teacher_map = model.teacher.expression(sp.Matrix(hstar), constants)
    s_sym = names.matrix(L, L, "S", "S", single=False)
    t_sym = names.matrix(L, L, "T", "T", single=False)
    equations += [Equation("attention", s_sym[k], student_map[k]) for k in range(L * L)]
    equations += [Equation("attention", t_sym[k], teacher_map[k]) for k in range(L * L)]

    # ---- 4. loss and its derivative in the teacher fields (THEORY.md sec. 1)
    sigma = sp.ImmutableMatrix(
        L,
        L,
        lambda i, j: 0 if system.sigma_tilde[i, j] == 0 else names.indexed("Sigma~", r"\tilde{\Sigma}", (i + 1, j + 1)),
    )
    equations += [Equation("loss", sigma[k], system.sigma_tilde[k]) for k in range(L * L) if system.sigma_tilde[k] != 0]
    loss_sym = names.symbol("l(z, h*)", r"\ell(z, h^*)")
    difference = sp.Matrix(t_sym) - sp.Matrix(s_sym)
    loss = sp.Rational(1, 2) * (difference * sp.Matrix(sigma) * difference.T).trace()
    equations.append(Equation("loss", loss_sym, loss))
    gradient = sp.ImmutableMatrix(
        L,
        t,
        lambda l, a: names.symbol(f"(dl/d{hstar[l, a].name})", r"\partial_{" + names.latex[hstar[l, a]] + r"} \ell"),
    )
    # dl/dh*_{l,a} = sum_{j,k} (dl/dT_jk)(dT_jk/dh*_{l,a}), the second factor named: it is the
    # derivative of the declared map of section 3 (written out, it would repeat that map)
    loss_by_target = [_compact(sp.diff(loss, t_sym[k])) for k in range(L * L)]
    jacobian = sp.zeros(L * L, L * t)
    for column, h in enumerate(hstar):
        for k in range(L * L):
            if teacher_map[k].has(h):
                jacobian[k, column] = names.symbol(
                    f"(d{t_sym[k].name}/d{h.name})",
                    rf"\frac{{\partial {names.latex[t_sym[k]]}}}{{\partial {names.latex[h]}}}",
                )
        chain = sp.Add(*[loss_by_target[k] * jacobian[k, column] for k in range(L * L)])
        equations.append(Equation("loss", gradient[column], chain))

    # ---- 5. Moreau envelope and prox (THEORY.md sec. 3)
    responses = [sp.ImmutableMatrix(sp.Matrix([[v]]) if r == 1 else v) for v in _token_responses(system)]
    by_response = {v: _QuadraticForm.of(sp.Matrix(v)) for v in dict.fromkeys(responses)}
    forms = [by_response[v] for v in responses]  # the quadratic form of each token's V_l

    def prior(at: sp.Matrix) -> sp.Expr:
        """``sum_l (omega_l - at_l)^T V_l^{-1} (omega_l - at_l) / 2`` with omega as symbols."""
        return sp.Add(*[forms[l].at(forms[l].value, omega[l, :] - at[l, :]) for l in range(L)])

    envelope_sym = names.symbol("M(z; xi, eta)", r"M(z; \xi, \eta)")
    envelope_min = names.symbol("M*", r"M^*")
    z_all = names.symbol("z", "z")
    domain = names.symbol(f"R^({L} x {r})", rf"\mathbb{{R}}^{{{L} \times {r}}}")
    equations += [
        Equation("envelope", envelope_sym, prior(z) + loss_sym),
        Equation("envelope", names.symbol("z*", "z^*"), ArgMin(envelope_sym, z_all, domain)),
        Equation("envelope", envelope_min, Minimum(envelope_sym, z_all, domain)),
    ]

    # ---- 6. energetic equations (THEORY.md sec. 4): E[dM/dX at z = z*] by the chain rule
    prox = names.matrix(L, r, "z*", "z^*", single=r == 1)
    # the placeholder of the quadratic forms is omega_l - z*_l, so dM/domega_l is its gradient
    gaps = [omega[l, :] - prox[l, :] for l in range(L)]
    d_omega = [[forms[l].at(forms[l].gradient[i], gaps[l]) for i in range(r)] for l in range(L)]
    integrands: dict[sp.Symbol, sp.Expr] = {}
    for e in par.entries:
        x = e.symbol
        terms = [
            d_omega[l][i] * _tidy(sp.diff(omega_value[l, i], x), nodes)
            for l in range(L)
            for i in range(r)
            if omega_value[l, i].has(x)
        ]
        # dl/dh* times each node's term of dh*/dX (not a parenthesised sum: ``\partial \ell (...)``
        # would read as the loss applied to the bracket)
        terms += [
            gradient[l, a] * term
            for l in range(L)
            for a in range(t)
            if hstar_value[l, a].has(x)
            for term in sp.Add.make_args(_tidy(sp.diff(hstar_value[l, a], x), nodes))
        ]
        # explicit dependence of the prior term on X at fixed fields (only through V)
        terms += [forms[l].at(forms[l].explicit[x], gaps[l]) for l in range(L) if x in forms[l].explicit]
        integrands[x] = sp.Add(*terms)
    expectations = {system.expectations[x]: GaussianExpectation(integrands[x]) for x in integrands}
    equations += [
        Equation("energetic", conjugate, update.xreplace(expectations))
        for conjugate, update in system.conjugate_updates.items()
    ]

    # ---- 7. entropic equations (THEORY.md sec. 3, 4)
    equations += [Equation("entropic", x, update) for x, update in system.order_updates.items()]

    # ---- 8. free entropy (THEORY.md sec. 3, 5)
    phi = names.symbol("Phi", r"\Phi")
    psi_w = names.symbol("Psi_w", r"\Psi_{w}")
    equations += [
        Equation("free_entropy", phi, system.trace_terms + psi_w + system.alpha * system.psi_out),
        Equation("free_entropy", psi_w, system.entropic_potential),
        Equation("free_entropy", system.psi_out, -GaussianExpectation(envelope_min)),
        Equation("free_entropy", names.symbol("eps_t", r"\epsilon_{t}"), -phi),
    ]

    # ---- 9. constants
    equations += [Equation("constants", c, sp.Float(v)) for c, v in system.constant_values().items()]

    notation = Notation(
        student_fields=omega,
        teacher_fields=hstar,
        prox=prox,
        loss_gradient=gradient,
        student_attention=s_sym,
        teacher_attention=t_sym,
        sigma_tilde=sigma,
        teacher_jacobian=sp.ImmutableMatrix(jacobian),
        loss=loss_sym,
        envelope=envelope_sym,
        envelope_min=envelope_min,
    )
    return EquationsDocument(
        equations=tuple(equations),
        integrands=tuple(integrands.items()),
        notation=notation,
        symbol_names=tuple(names.latex.items()),
    )


__all__ = [
    "SECTIONS",
    "ArgMin",
    "Equation",
    "EquationsDocument",
    "GaussianExpectation",
    "Minimum",
    "Notation",
    "Section",
    "build_document",
    "latex",
    "plain_text",
    "symbol_latex",
]
