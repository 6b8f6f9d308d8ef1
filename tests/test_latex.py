"""Specification of the paper-ready rendering ``replica.latex`` (THEORY.md sec. 1-5).

For the paper's model, a three-token model with two covariance classes and two positional
directions, and a rank-2 student: every equation must render with matplotlib's mathtext, the
document must state each saddle-point equation once with no placeholder left, and its
chain-rule integrands, fields, loss and envelope must equal what ``derive`` computed
(compared numerically at random points: symbolic simplification would be slow).
"""

from __future__ import annotations

import ast
import io
from pathlib import Path

import matplotlib
import numpy as np
import pytest
import sympy as sp

matplotlib.use("Agg")
from matplotlib import mathtext  # noqa: E402

from attnphase.replica.declaration import (  # noqa: E402
    AttentionModel,
    DotProductAttention,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    paper_model,
)
from attnphase.replica.latex import (  # noqa: E402
    SECTIONS,
    GaussianExpectation,
    build_document,
    latex,
)
from attnphase.replica.saddle_equations import derive  # noqa: E402
from attnphase.replica.variants import variant


def three_token_model() -> AttentionModel:
    """``examples/three_tokens.py``: L = 3, two positional directions, two covariance classes."""
    return AttentionModel(
        tokens=GaussianTokens(variances=((0.25, 0.25, 0.5),)),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )


def rank_two_model() -> AttentionModel:
    """The paper's model with a rank-2 student (r = 2, t = 1)."""
    paper = paper_model()
    return AttentionModel(
        tokens=paper.tokens,
        positions=paper.positions,
        teacher=paper.teacher,
        student=paper.student,
        regulariser=paper.regulariser,
        rank=2,
    )


def mixture_model():
    """The shipped mixture: two clusters, four label configurations, a cluster-mean direction."""
    return variant("mixture").model()


MODELS = {
    "paper": paper_model,
    "three_tokens": three_token_model,
    "rank_two": rank_two_model,
    "mixture": mixture_model,
}


#: The declarations whose derivation takes longest (rank 2, the mixture) run in the full suite only.
SLOW_MODELS = ("rank_two", "mixture", "three_tokens")


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=pytest.mark.slow) if name in SLOW_MODELS else name for name in MODELS],
)
def case(request):
    system = derive(MODELS[request.param]())
    return request.param, system, system.equations_document()


# --------------------------------------------------------------------------- numerics


def random_point(system, rng: np.random.Generator) -> dict[sp.Symbol, float]:
    """Nodes, prox variables, constants and an admissible point of the reduced parameters:
    ``q_c, V_c`` positive definite and ``rho_c - theta_c q_c^{-1} theta_c^T > 0`` (THEORY.md sec. 2); the
    label nodes of a mixture at one of its configurations, drawn from the label law."""
    par = system.parameters
    values = {s: float(v) for s, v in system.constant_values().items()}
    gaussian = system.nodes[: system.gaussian_dimension]
    values |= {s: float(x) for s, x in zip(gaussian, rng.normal(size=len(gaussian)), strict=True)}
    indicators, probabilities = system.label_rule()
    chosen = rng.choice(len(probabilities), p=probabilities)
    values |= {s: row[chosen] for s, row in zip(system.labels.symbols, indicators, strict=True)}
    values |= {s: float(x) for s, x in zip(system.z, 0.8 * rng.normal(size=len(system.z)), strict=True)}
    r, t = system.model.rank, system.model.teacher_rank

    def assign(symbols: sp.Matrix, numbers: np.ndarray) -> None:
        for (i, j), s in np.ndenumerate(np.array(symbols, dtype=object)):
            if isinstance(s, sp.Symbol):
                values[s] = float(numbers[i, j])

    for c, rho_expr in enumerate(system.teacher_overlap):
        rho = float(rho_expr.xreplace(values))
        a, b = rng.normal(size=(r, r)), rng.normal(size=(r, r))
        q = 0.3 * a @ a.T + 0.2 * np.eye(r)
        assign(par.q[c], q)
        assign(par.V[c], 0.5 * b @ b.T + 0.5 * np.eye(r))
        while True:
            theta = 0.4 * rng.normal(size=(t, r))
            if np.all(np.linalg.eigvalsh(rho * np.eye(t) - theta @ np.linalg.solve(q, theta.T)) > 0.02):
                break
        assign(par.theta[c], theta)
    for mu in par.mu:
        assign(mu, 0.5 * rng.normal(size=(r, 1)))
    return values


def number(expr: sp.Basic, values: dict[sp.Symbol, float]) -> float:
    """Value of ``expr`` at ``values`` (every free symbol must be given)."""
    substituted = expr.xreplace({s: sp.Float(v, 30) for s, v in values.items()})
    assert not substituted.free_symbols, substituted.free_symbols
    return float(sp.N(substituted, 30))


def declared_maps(system):
    """``T(H)``, ``S(Z)`` and the loss of THEORY.md sec. 1 built from the declaration, with
    ``H`` (L x t) and ``Z`` (L x r) symbol matrices: independent of the document."""
    model = system.model
    constants = {c.name: c for c in system.constants}
    h = sp.Matrix(model.length, model.teacher_rank, lambda l, a: sp.Symbol(f"H_{l}_{a}", real=True))
    z = sp.Matrix(model.length, model.rank, system.z)
    teacher, student = model.teacher.expression(h, constants), model.student.expression(z, constants)
    loss = sp.Rational(1, 2) * ((teacher - student) * system.sigma_tilde * (teacher - student).T).trace()
    return h, teacher, student, loss


def document_values(system, document, values: dict[sp.Symbol, float]) -> dict[sp.Symbol, float]:
    """Values of the document's own symbols at ``values``, computed from the system (fields,
    prox ``z* = z``), from the declaration (attention entries, dl/dh*, dT/dh*) and from
    ``Sigma_tilde``: what the document's symbols stand for."""
    n = document.notation
    h, teacher, student, loss = declared_maps(system)
    out = dict(values)
    out |= {w: number(f, values) for w, f in zip(n.student_fields, system.student_fields, strict=True)}
    fields = {hs: number(f, values) for hs, f in zip(n.teacher_fields, system.teacher_fields, strict=True)}
    out |= fields
    out |= {zs: values[z] for zs, z in zip(n.prox, system.z, strict=True)}
    at_h = {**values, **{hk: fields[hs] for hk, hs in zip(h, n.teacher_fields, strict=True)}}
    out |= {d: number(sp.diff(loss, hk), at_h) for d, hk in zip(n.loss_gradient, h, strict=True)}
    out |= {s: number(e, at_h) for s, e in zip(n.student_attention, student, strict=True)}
    out |= {s: number(e, at_h) for s, e in zip(n.teacher_attention, teacher, strict=True)}
    out |= {s: number(e, values) for s, e in zip(n.sigma_tilde, system.sigma_tilde, strict=True) if s != 0}
    for (k, column), symbol in np.ndenumerate(np.array(n.teacher_jacobian, dtype=object)):
        if symbol != 0:
            out[symbol] = number(sp.diff(teacher[k], h[column]), at_h)
    out[n.loss] = number(loss, at_h)
    return out


# --------------------------------------------------------------------------- rendering


@pytest.mark.slow
def test_every_equation_renders_with_mathtext(case):
    """Malformed LaTeX (or anything mathtext cannot typeset, e.g. matrix environments) fails."""
    _, _, document = case
    for equation in document.equations:
        lhs, rhs = document.latex_pair(equation)
        assert r"\begin" not in lhs + rhs and r"\operatorname*" not in lhs + rhs
        mathtext.math_to_image(f"${lhs} = {rhs}$", io.BytesIO(), format="png")


def test_text_and_latex_contain_each_section_in_order(case):
    _, system, document = case
    source, plain = system.latex(), document.text()
    assert source == document.latex()
    # every section but the cluster labels, which only a mixture of tokens has
    expected = [s for s in SECTIONS if s.key != "labels" or system.labels.symbols]
    assert [s.key for s in document.sections] == [s.key for s in expected]
    positions_latex = [source.index(f"% {i}. {s.title}:") for i, s in enumerate(expected, 1)]
    positions_text = [plain.index(f"# {i}. {s.title}\n") for i, s in enumerate(expected, 1)]
    assert positions_latex == sorted(positions_latex) and positions_text == sorted(positions_text)
    assert source.count(r"\begin{align*}") == source.count(r"\end{align*}") == len(expected)
    for section in expected:
        for equation in document.section(section.key):
            lhs, rhs = document.latex_pair(equation)
            assert f"{lhs} &= {rhs}" in source


def test_document_states_every_saddle_point_equation_once_without_placeholders(case):
    """Each conjugate is an lhs once (energetic section), each order parameter once (entropic
    section); the energetic right-hand sides hold expectations, not the ``E_dX`` symbols."""
    _, system, document = case
    lhs = [eq.lhs for eq in document.equations]
    for e in system.entries:
        assert lhs.count(e.conjugate) == 1 and lhs.count(e.symbol) == 1
    assert [eq.lhs for eq in document.section("energetic")] == list(system.conjugate_updates)
    assert [eq.lhs for eq in document.section("entropic")] == list(system.order_updates)
    placeholders = set(system.expectations.values())
    for equation in document.equations:
        assert not any(s.name.startswith("E_d") for s in equation.rhs.free_symbols), equation
        assert not equation.rhs.has(*placeholders)
    for equation in document.section("energetic"):
        assert equation.rhs.atoms(GaussianExpectation)
        assert r"\mathbb{E}_{\xi,\eta}\left[" in document.latex_pair(equation)[1]
        assert "E[" in sp.sstr(equation.rhs)
    assert len(document.section("constants")) == len(system.constants)


def test_energetic_equations_are_the_conjugate_updates_with_the_chain_rule_integrands(case):
    _, system, document = case
    for equation in document.section("energetic"):
        expected = system.conjugate_updates[equation.lhs].xreplace(
            {system.expectations[x]: GaussianExpectation(document.integrand(x)) for x in system.expectations}
        )
        assert equation.rhs == expected


@pytest.mark.slow
def test_chain_rule_integrands_equal_the_derived_energetic_integrands(case):
    """``sum_l (dM/domega_l)(domega_l/dX) + sum_l (dl/dh*_l)(dh*_l/dX) + explicit`` at z* = z, with the
    fields and the derivative of the declared loss substituted, is ``system.energetic_integrands[X]``
    (THEORY.md sec. 4), for every reduced parameter X."""
    _, system, document = case
    rng = np.random.default_rng(11)
    for _ in range(2):
        values = random_point(system, rng)
        values_doc = document_values(system, document, values)
        for x, derived in system.energetic_integrands.items():
            got, want = number(document.integrand(x), values_doc), number(derived, values)
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12), x


def test_fields_loss_and_envelope_equal_the_derived_ones(case):
    """Sections 2-5 recompose ``student_fields``, ``teacher_fields``, ``loss`` and ``envelope``:
    fields entry by entry, the written-out loss with the declared attention entries, its
    derivative in h* by the chain rule through T, and the envelope with omega as symbols."""
    _, system, document = case
    n = document.notation
    rng = np.random.default_rng(5)
    values = random_point(system, rng)
    values_doc = document_values(system, document, values)
    rhs = {eq.lhs: eq.rhs for eq in document.equations}
    for symbol, derived in [
        *zip(n.student_fields, system.student_fields, strict=True),
        *zip(n.teacher_fields, system.teacher_fields, strict=True),
    ]:
        assert number(rhs[symbol], values) == pytest.approx(number(derived, values), rel=1e-12)
    # attention entries are the declared maps (at z and at the teacher fields)
    for symbol in (*n.student_attention, *n.teacher_attention):
        at_fields = rhs[symbol].xreplace(dict(zip(n.teacher_fields, system.teacher_fields, strict=True)))
        assert number(at_fields, values) == pytest.approx(values_doc[symbol], rel=1e-12)
    assert number(rhs[n.loss], values_doc) == pytest.approx(number(system.loss, values), rel=1e-12)
    for symbol in n.loss_gradient:
        assert number(rhs[symbol], values_doc) == pytest.approx(values_doc[symbol], rel=1e-10, abs=1e-14)
    assert number(rhs[n.envelope], values_doc) == pytest.approx(number(system.envelope, values), rel=1e-12)


def test_symmetry_reduction_and_free_entropy_sections(case):
    name, system, document = case
    plain, source = document.text(), document.latex()
    if name == "paper":
        assert "m_2 = -m" in plain and r"m_{2} &= - m" in source
        assert r"\hat{q} &= - 2 \alpha \mathbb{E}_{\xi,\eta}\left[" in source
    if name == "three_tokens":
        # per-token parameters carry the token as a superscript when the reduced ones are indexed
        # token 3's covariance is twice the others': its q is theirs, doubled
        assert "m^(3) = -m_1 - m_2" in plain and "q_3 = gamma_1_2*q/gamma_1_1" in plain and "q_2 = q" in plain
    if name == "rank_two":
        assert "q^(2)_1_2 = q_1_2" in plain and "m^(2)_2 = -m_2" in plain
    per_token_entries = sum(
        1 if not isinstance(v, sp.MatrixBase) else (v.rows * (v.rows + 1) // 2 if v.is_symmetric() else len(v))
        for v in system.per_token.values()
    )
    assert len(document.section("symmetry")) == per_token_entries
    free = {eq.lhs.name: eq.rhs for eq in document.section("free_entropy")}
    assert free["Psi_w"] == system.entropic_potential
    assert free["Phi"].xreplace({sp.Symbol("Psi_w"): system.entropic_potential}) == system.free_entropy
    assert free["eps_t"] == -sp.Symbol("Phi")
    assert free["Psi_out"] == -GaussianExpectation(document.notation.envelope_min)


# --------------------------------------------------------------------------- helpers


def test_latex_helper_hats_conjugates_and_comma_separates_indices():
    qhat, theta_hat, xi = sp.Symbol("qhat_1_2"), sp.Symbol("thetahat"), sp.Symbol("xi_2_1")
    assert latex(qhat) == r"\hat{q}_{1,2}"
    assert latex(theta_hat * xi) == r"\hat{\theta} \xi_{2,1}"
    assert latex(sp.Symbol("Psi_out")) == r"\Psi_{\mathrm{out}}"
    assert latex(sp.Float(0.3)) == "0.3"
    expectation = GaussianExpectation(xi**2)
    assert latex(expectation) == r"\mathbb{E}_{\xi,\eta}\left[ \xi_{2,1}^{2} \right]"
    assert sp.sstr(expectation) == "E[xi_2_1**2]"


def test_document_is_built_once_per_system_and_equations_still_work():
    system = derive(paper_model())
    assert system.equations_document() is system.equations_document()
    assert build_document(system).equations == system.equations_document().equations
    assert len(system.equations()) == 2 * len(system.entries)


def test_latex_module_imports_nothing_numeric():
    """``replica/`` is sympy only (README): the rendering module imports no numerics."""
    source = (Path(__file__).parents[1] / "replica" / "latex.py").read_text()
    imported = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            imported |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            imported.add(node.module.split(".")[0])
    assert imported <= {"__future__", "collections", "dataclasses", "functools", "typing", "sympy", "attnphase"}
