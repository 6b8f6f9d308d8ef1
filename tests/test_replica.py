"""Specification of the symbolic layer: ``replica.saddle_equations.derive(model)``.

Every check compares the derived sympy objects with quantities written out independently
here from THEORY.md (closed forms of sec. 6, field law of sec. 2, free entropy of sec. 3,
score identity of sec. 4), or with finite differences of the derived expressions.
"""

from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from attnphase.replica.declaration import (
    AttentionModel,
    DeclarationError,
    DotProductAttention,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    paper_model,
)
from attnphase.replica.latex import latex
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.quadrature.rules import GaussHermite

#: Order parameter -> the conjugate whose stationarity condition fixes it (THEORY.md sec. 4):
#: ``q = -2 dPsi_w/dVhat``, ``V = 2 dPsi_w/dqhat``, ``m = dPsi_w/dmhat``, ``theta = dPsi_w/dthetahat``.
PAIRED_CONJUGATE = {"q": "Vhat", "V": "qhat", "m": "mhat", "theta": "thetahat"}

#: Interior points of the order parameters (theta^2 < q rho keeps the teacher field law regular).
PARAMETER_POINTS = (
    {"q": 0.05, "m": 0.25, "V": 11.0, "theta": 0.1},
    {"q": 0.3, "m": -0.1, "V": 2.0, "theta": 0.15},
)


# --------------------------------------------------------------------------- helpers


@pytest.fixture(scope="module")
def paper_system():
    """The paper's instance at its defaults (sigma = 0.5, lambda = 0.01, omega = 0.3)."""
    return derive(paper_model())


def symbols_by_name(system) -> dict[str, sp.Symbol]:
    """Every free symbol a system uses (parameters, conjugates, constants, nodes, z), by name."""
    table = {s.name: s for s in system.constants + system.nodes + system.z}
    for e in system.entries:
        table[e.symbol.name] = e.symbol
        table[e.conjugate.name] = e.conjugate
    table[system.alpha.name] = system.alpha
    table[system.psi_out.name] = system.psi_out
    return table


def evaluate(expr: sp.Expr, values: dict[str, float]) -> float:
    """Value of ``expr`` with every free symbol replaced by ``values[name]`` (30 digits)."""
    substitution = {s: sp.Float(values[s.name], 30) for s in expr.free_symbols}
    return float(sp.N(expr.xreplace(substitution), 30))


def constants_by_name(system) -> dict[str, float]:
    return {s.name: v for s, v in system.constant_values().items()}


def random_conjugates(rng: np.random.Generator, system) -> dict[str, float]:
    """Conjugates with ``Vhat > 0`` (so ``lambda + sigma^2 Vhat > 0``) and arbitrary-sign others."""
    values = {}
    for e in system.entries:
        if e.family == "V":
            values[e.conjugate.name] = rng.uniform(0.05, 5.0)
        elif e.family == "q":
            values[e.conjugate.name] = rng.uniform(0.01, 3.0)
        else:
            values[e.conjugate.name] = rng.uniform(-1.5, 1.5)
    return values


def numeric_function(system, expressions):
    """Lambdify ``expressions`` as a numpy function of ``(z, nodes, parameters, constants)``."""
    args = [list(system.z), list(system.nodes), list(system.parameters.symbols), list(system.constants)]
    return sp.lambdify(args, expressions, modules="numpy")


def parameter_vector(system, point: dict[str, float]) -> list[float]:
    return [point[e.symbol.name] for e in system.entries]


def constant_vector(system) -> list[float]:
    values = system.constant_values()
    return [values[c] for c in system.constants]


def softmax_rows_numpy(scores: np.ndarray) -> np.ndarray:
    """Row softmax over axis 1 of an array shaped ``(L, L, ...)``."""
    shifted = scores - scores.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    return e / e.sum(axis=1, keepdims=True)


def paper_fields_numpy(nodes: dict[str, np.ndarray], point: dict[str, float], rho: float):
    """Sec. 2 fields of the paper's instance, written independently of the package:
    ``omega_l = m_l + sqrt(q) xi_l`` with ``m_1 = -m_2 = m`` and
    ``h*_l = theta q^{-1} (omega_l - m_l) + sqrt(rho - theta^2/q) eta_l``."""
    q, m, theta = point["q"], point["m"], point["theta"]
    means = (m, -m)
    omega = np.stack([means[k] + np.sqrt(q) * nodes[f"xi_{k + 1}"] for k in range(2)])
    hstar = np.stack(
        [theta / q * (omega[k] - means[k]) + np.sqrt(rho - theta**2 / q) * nodes[f"eta_{k + 1}"] for k in range(2)]
    )
    return omega, hstar


def paper_teacher_numpy(hstar: np.ndarray, omega_mix: float, a: np.ndarray) -> np.ndarray:
    """``T(h*) = (1 - omega) softmax_row(h* h*^T) + omega A`` (sec. 6), shape ``(L, L, ...)``."""
    semantic = softmax_rows_numpy(hstar[:, None] * hstar[None, :])
    return (1 - omega_mix) * semantic + omega_mix * a.reshape(a.shape + (1,) * (hstar.ndim - 1))


def gauss_hermite_expectation(system, expressions, point, z_value=None, order: int = 12):
    """``E_n[expr]`` for each expression, with ``n ~ N(0, I_D)`` on the unpruned tensor rule."""
    nodes, weights = GaussHermite(order, prune=0.0).nodes(len(system.nodes))
    z_value = np.zeros(len(system.z)) if z_value is None else z_value
    values = numeric_function(system, list(expressions))(
        list(z_value), list(nodes), parameter_vector(system, point), constant_vector(system)
    )
    return np.array([np.broadcast_to(np.asarray(v, dtype=float), weights.shape) @ weights for v in values])


def smooth_field_function(system) -> sp.Expr:
    """A smooth f(student fields, teacher fields): polynomial plus a cosine that mixes tokens."""
    omega = list(system.student_fields)
    hstar = list(system.teacher_fields)
    poly = sp.Add(*[w**2 + 2 * w * h for w, h in zip(omega, hstar, strict=True)])
    return poly + sp.cos(omega[0] + hstar[-1] - omega[-1] + sp.Rational(3, 10))


# --------------------------------------------------------------------------- sec. 6: symmetry reduction


def test_paper_instance_reduces_per_token_parameters_by_symmetry(paper_system):
    """Sec. 6: ``m_1 = m, m_2 = -m, q_1 = q_2 = q, V_1 = V_2 = V, theta_1 = theta_2 = theta``,
    with one scalar reduced parameter per family."""
    names = [e.symbol.name for e in paper_system.entries]
    assert sorted(names) == ["V", "m", "q", "theta"]
    s = symbols_by_name(paper_system)
    m, q, v, theta = s["m"], s["q"], s["V"], s["theta"]
    expected = {"m_1": m, "m_2": -m, "q_1": q, "q_2": q, "V_1": v, "V_2": v, "theta_1": theta, "theta_2": theta}
    assert set(paper_system.per_token) == set(expected)
    for key, value in expected.items():
        assert sp.simplify(paper_system.per_token[key] - value) == 0, key


def test_paper_instance_constants_are_the_declared_values(paper_system):
    """Sec. 6 defaults: ``gamma_1_1 = sigma^2 = 0.25``, ``w_1 = 1``, ``lambda = 0.01``, ``omega = 0.3``, standard A;
    ``Sigma_tilde = sigma^2 I_2`` and two Gaussian nodes per token kind (xi_1, xi_2, eta_1, eta_2)."""
    values = constants_by_name(paper_system)
    assert values == pytest.approx(
        {
            "gamma_1_1": 0.25,
            "w_1": 1.0,
            "lambda": 0.01,
            "omega": 0.3,
            "A_1_1": 0.6,
            "A_1_2": 0.4,
            "A_2_1": 0.4,
            "A_2_2": 0.6,
        }
    )
    assert sorted(s.name for s in paper_system.nodes) == ["eta_1", "eta_2", "xi_1", "xi_2"]
    sigma_tilde = paper_system.sigma_tilde.xreplace(paper_system.constant_values())
    assert np.allclose(np.array(sigma_tilde, dtype=float), 0.25 * np.eye(2), rtol=0, atol=1e-15)


# --------------------------------------------------------------------------- sec. 6: entropic updates


def ridge_closed_forms():
    """THEORY.md sec. 6 for ridge, written with fresh sympy symbols."""
    sigma, lam, qhat, mhat, vhat, thetahat = sp.symbols("sigma lambda qhat mhat Vhat thetahat", real=True)
    rho = sigma**2
    denominator = lam + vhat * sigma**2
    updates = {
        "V": sigma**2 / denominator,
        "m": mhat / denominator,
        "q": sigma**2 * (qhat * sigma**2 + mhat**2 + thetahat**2 * sigma**2 * rho) / denominator**2,
        "theta": sigma**2 * rho * thetahat / denominator,
    }
    psi_w = sp.Rational(1, 2) * (qhat * sigma**2 + mhat**2 + thetahat**2 * rho * sigma**2) / denominator
    return updates, psi_w


@pytest.mark.parametrize(
    "model_kwargs",
    [dict(), dict(omega=0.7, sigma=0.8, lam=0.3), dict(omega=0.0, sigma=1.3, lam=0.0)],
    ids=["paper-defaults", "sigma0.8-lambda0.3", "sigma1.3-lambda0"],
)
def test_order_updates_and_entropic_potential_match_ridge_closed_forms(model_kwargs):
    """Sec. 6: V, m, q, theta updates and Psi_w equal the ridge closed forms (relative 1e-12)."""
    system = derive(paper_model(**model_kwargs))
    consts = constants_by_name(system)
    sigma = np.sqrt(consts["gamma_1_1"])
    assert consts["w_1"] == 1.0
    updates, psi_w = ridge_closed_forms()
    rng = np.random.default_rng(20240611)
    for _ in range(6):
        conj = random_conjugates(rng, system)
        mine = {"sigma": sigma, "lambda": consts["lambda"], **conj}
        for e in system.entries:
            got = evaluate(system.order_updates[e.symbol], {**conj, **consts})
            want = evaluate(updates[e.symbol.name], mine)
            assert got == pytest.approx(want, rel=1e-12, abs=1e-300), e.symbol.name
        got = evaluate(system.entropic_potential, {**conj, **consts})
        assert got == pytest.approx(evaluate(psi_w, mine), rel=1e-12)


def test_free_entropy_is_trace_terms_plus_psi_w_plus_alpha_psi_out(paper_system):
    """Sec. 3 (paper instance): ``Phi = Vhat q/2 - qhat V/2 - mhat m - thetahat theta + Psi_w + alpha Psi_out``."""
    s = symbols_by_name(paper_system)
    updates, psi_w = ridge_closed_forms()
    trace = s["Vhat"] * s["q"] / 2 - s["qhat"] * s["V"] / 2 - s["mhat"] * s["m"] - s["thetahat"] * s["theta"]
    consts = constants_by_name(paper_system)
    rng = np.random.default_rng(7)
    for _ in range(5):
        values = {
            **consts,
            **random_conjugates(rng, paper_system),
            "q": rng.uniform(0.01, 1),
            "m": rng.uniform(-1, 1),
            "V": rng.uniform(0.1, 20),
            "theta": rng.uniform(-0.2, 0.2),
            "alpha": rng.uniform(0.1, 5),
            "Psi_out": rng.uniform(-1, 1),
        }
        mine = {**values, "sigma": np.sqrt(consts["gamma_1_1"])}
        expected = evaluate(trace, values) + evaluate(psi_w, mine) + values["alpha"] * values["Psi_out"]
        assert evaluate(paper_system.free_entropy, values) == pytest.approx(expected, rel=1e-12)
        assert evaluate(paper_system.trace_terms, values) == pytest.approx(evaluate(trace, values), rel=1e-12)


def test_order_updates_make_the_conjugate_derivative_of_phi_vanish(paper_system):
    """Sec. 4: ``X = update(Xhat)`` solves ``d(trace_terms + Psi_w)/d(conjugate paired with X) = 0``."""
    s = symbols_by_name(paper_system)
    consts = constants_by_name(paper_system)
    entropic_part = paper_system.trace_terms + paper_system.entropic_potential
    substitution = dict(paper_system.order_updates)
    rng = np.random.default_rng(3)
    for _ in range(4):
        conj = random_conjugates(rng, paper_system)
        for name, conjugate in PAIRED_CONJUGATE.items():
            derivative = sp.diff(entropic_part, s[conjugate])
            assert derivative.has(s[name]), (name, conjugate)  # the condition involves X itself ...
            residual = evaluate(derivative.xreplace(substitution), {**conj, **consts})
            scale = abs(evaluate(paper_system.order_updates[s[name]], {**conj, **consts}))
            assert abs(residual) <= 1e-12 * max(scale, 1e-3), (name, residual)  # ... and the update zeroes it


def test_entropic_potential_derivatives_match_finite_differences(paper_system):
    """Sec. 3-4: sympy derivatives of Psi_w in each conjugate agree with central differences (relative 1e-6)."""
    conjugates = list(paper_system.parameters.conjugates)
    consts = constant_vector(paper_system)
    args = [conjugates, list(paper_system.constants)]
    psi = sp.lambdify(args, paper_system.entropic_potential, modules="numpy")
    grad = sp.lambdify(args, [sp.diff(paper_system.entropic_potential, c) for c in conjugates], modules="numpy")
    rng = np.random.default_rng(11)
    for _ in range(5):
        point = random_conjugates(rng, paper_system)
        x = np.array([point[c.name] for c in conjugates])
        analytic = np.array(grad(list(x), consts), dtype=float)
        for k in range(len(x)):
            h = 1e-6 * max(1.0, abs(x[k]))
            up, down = x.copy(), x.copy()
            up[k] += h
            down[k] -= h
            numeric = (psi(list(up), consts) - psi(list(down), consts)) / (2 * h)
            assert numeric == pytest.approx(analytic[k], rel=1e-6, abs=1e-9), conjugates[k]


def test_regulariser_energy_is_half_lambda_times_squared_norm(paper_system):
    """Sec. 5: for ridge with isotropic covariance, ``E[R]/d = lambda/2 ||Q||^2/d = lambda/2 q/sigma^2``."""
    consts = constants_by_name(paper_system)
    s = symbols_by_name(paper_system)
    rng = np.random.default_rng(5)
    for _ in range(4):
        conj = random_conjugates(rng, paper_system)
        q = evaluate(paper_system.order_updates[s["q"]], {**conj, **consts})
        got = evaluate(paper_system.regulariser_energy, {**conj, **consts})
        assert got == pytest.approx(consts["lambda"] / 2 * q / consts["gamma_1_1"], rel=1e-12)


# --------------------------------------------------------------------------- sec. 2-3: fields, envelope


@pytest.mark.parametrize("point", PARAMETER_POINTS, ids=["q0.05", "q0.3"])
def test_field_law_has_the_sec2_moments(paper_system, point):
    """Sec. 2: ``E[omega_l] = m_l``, ``Cov(omega_l) = q``, ``Cov(h*_l, omega_l) = theta``, ``Var(h*_l) = rho``,
    ``E[h*_l] = 0``, tokens independent (unpruned Gauss-Hermite 12 is exact for these quadratics)."""
    omega = list(paper_system.student_fields)
    hstar = list(paper_system.teacher_fields)
    rho = constants_by_name(paper_system)["gamma_1_1"]
    q, m, theta = point["q"], point["m"], point["theta"]
    exprs = [omega[0], omega[1], hstar[0], hstar[1]]
    exprs += [omega[0] ** 2, omega[1] ** 2, hstar[0] * omega[0], hstar[1] * omega[1], hstar[0] ** 2, hstar[1] ** 2]
    exprs += [omega[0] * omega[1], hstar[0] * hstar[1], omega[0] * hstar[1]]
    got = gauss_hermite_expectation(paper_system, exprs, point)
    want = [m, -m, 0, 0, q + m**2, q + m**2, theta, theta, rho, rho, -(m**2), 0, 0]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("point", PARAMETER_POINTS, ids=["q0.05", "q0.3"])
def test_envelope_and_test_error_integrand_match_independent_numpy(paper_system, point):
    """Sec. 1-3, 5: ``M = sum_l (z_l - omega_l)^2/(2V) + 1/2 tr[(T - S(z)) Sigma_tilde (T - S(z))^T]`` and
    ``test_error_integrand = (1/L) tr[(T - S(omega)) Sigma_tilde (T - S(omega))^T]`` (written here in numpy)."""
    consts = constants_by_name(paper_system)
    rho = consts["gamma_1_1"]
    a = np.array([[consts["A_1_1"], consts["A_1_2"]], [consts["A_2_1"], consts["A_2_2"]]])
    rng = np.random.default_rng(17)
    n = 50
    nodes = {s.name: rng.standard_normal(n) for s in paper_system.nodes}
    z = rng.standard_normal((2, n))
    omega, hstar = paper_fields_numpy(nodes, point, rho)
    teacher = paper_teacher_numpy(hstar, consts["omega"], a)

    def loss(student):
        diff = teacher - student
        return 0.5 * rho * np.einsum("ijn,ijn->n", diff, diff)

    want_envelope = ((z - omega) ** 2).sum(axis=0) / (2 * point["V"]) + loss(softmax_rows_numpy(z[:, None] * z[None]))
    want_test_error = 2 / 2 * loss(softmax_rows_numpy(omega[:, None] * omega[None]))  # (2/L) l, L = 2
    f = numeric_function(paper_system, [paper_system.envelope, paper_system.test_error_integrand])
    node_list = [nodes[s.name] for s in paper_system.nodes]
    got_envelope, got_test_error = f(
        list(z), node_list, parameter_vector(paper_system, point), constant_vector(paper_system)
    )
    np.testing.assert_allclose(got_envelope, want_envelope, rtol=1e-12)
    np.testing.assert_allclose(got_test_error, want_test_error, rtol=1e-11, atol=1e-15)
    assert np.all(np.asarray(got_test_error) >= 0)


def test_test_error_integrand_vanishes_when_student_reproduces_teacher():
    """Sec. 5: with a purely semantic target (omega = 0), ``m = 0`` and ``q = theta = rho`` the student field equals
    the teacher field (``h* = omega`` since ``rho - theta^2/q = 0``), so ``S(h) = T(h*)`` and the integrand is 0.
    (With ``theta = 0`` the two fields are independent, so no such exact case exists there.)"""
    system = derive(paper_model(omega=0.0, sigma=0.5))
    rho = constants_by_name(system)["gamma_1_1"]
    point = {"q": rho, "m": 0.0, "V": 1.0, "theta": rho}
    rng = np.random.default_rng(23)
    nodes = rng.standard_normal((len(system.nodes), 200)) * 2
    f = numeric_function(system, [system.test_error_integrand])
    (values,) = f([0.0, 0.0], list(nodes), parameter_vector(system, point), constant_vector(system))
    assert np.max(np.abs(values)) < 1e-20
    # ... and it is not identically zero: a slightly different theta gives a positive error
    (values,) = f(
        [0.0, 0.0], list(nodes), parameter_vector(system, {**point, "theta": 0.9 * rho}), constant_vector(system)
    )
    assert np.mean(values) > 1e-6


def test_envelope_gradient_and_hessian_match_finite_differences(paper_system):
    """Sec. 3: ``envelope_gradient`` / ``envelope_hessian`` are the z-derivatives of M (central differences)."""
    point = {"q": 0.05, "m": 0.25, "V": 11.0, "theta": 0.1}
    params, consts = parameter_vector(paper_system, point), constant_vector(paper_system)
    envelope = numeric_function(paper_system, paper_system.envelope)
    gradient = numeric_function(paper_system, list(paper_system.envelope_gradient))
    hessian = numeric_function(paper_system, [list(row) for row in paper_system.envelope_hessian])
    rng = np.random.default_rng(29)
    dim = len(paper_system.z)
    for _ in range(8):
        z = rng.standard_normal(dim) * 1.5
        nodes = list(rng.standard_normal(len(paper_system.nodes)))

        def m_of(zz, nodes=nodes):
            return float(envelope(list(zz), nodes, params, consts))

        g = np.array(gradient(list(z), nodes, params, consts), dtype=float)
        hess = np.array(hessian(list(z), nodes, params, consts), dtype=float)
        assert np.allclose(hess, hess.T, rtol=1e-13, atol=1e-14)
        h1, h2 = 1e-6, 1e-4
        for i in range(dim):
            e_i = np.eye(dim)[i]
            numeric = (m_of(z + h1 * e_i) - m_of(z - h1 * e_i)) / (2 * h1)
            assert numeric == pytest.approx(g[i], rel=1e-6, abs=1e-8)
            for j in range(dim):
                e_j = np.eye(dim)[j]
                second = (
                    m_of(z + h2 * e_i + h2 * e_j)
                    - m_of(z + h2 * e_i - h2 * e_j)
                    - m_of(z - h2 * e_i + h2 * e_j)
                    + m_of(z - h2 * e_i - h2 * e_j)
                ) / (4 * h2**2)
                assert second == pytest.approx(hess[i, j], rel=1e-5, abs=1e-6), (i, j)


# --------------------------------------------------------------------------- sec. 4: score form


def derivative_by_quadrature(system, expression, point, name, z_value=None, relative_step=1e-4):
    """Central difference in the order parameter ``name`` of ``E_n[expression]`` on the same rule."""
    step = relative_step * max(abs(point[name]), 0.05)
    up = gauss_hermite_expectation(system, [expression], {**point, name: point[name] + step}, z_value)[0]
    down = gauss_hermite_expectation(system, [expression], {**point, name: point[name] - step}, z_value)[0]
    return (up - down) / (2 * step)


@pytest.mark.parametrize("point", PARAMETER_POINTS, ids=["q0.05", "q0.3"])
def test_score_integrand_differentiates_expectations_of_field_functions(paper_system, point):
    """Sec. 4 (integration by parts): ``E[f(omega, h*) s_X] = d/dX E[f(omega, h*)]`` for every order parameter X,
    with f a smooth function of the student and teacher fields (Gauss-Hermite 12 vs central difference)."""
    f = smooth_field_function(paper_system)
    assert not f.has(*paper_system.z)
    nonzero = 0
    for e in paper_system.entries:
        score, _ = paper_system.score_integrands[e.symbol]
        (via_score,) = gauss_hermite_expectation(paper_system, [f * score], point)
        via_difference = derivative_by_quadrature(paper_system, f, point, e.symbol.name)
        assert via_score == pytest.approx(via_difference, rel=1e-5, abs=1e-8), e.symbol.name
        nonzero += abs(via_difference) > 1e-3
    assert nonzero == 3  # q, m and theta move the field law; V does not (s_V = 0)


@pytest.mark.parametrize("point", PARAMETER_POINTS, ids=["q0.05", "q0.3"])
def test_envelope_and_score_forms_of_energetic_integrands_agree(paper_system, point):
    """Sec. 4: at a fixed z, ``E[dM/dX] = d/dX E[M] = E[M s_X] + E[partial_X M |fields fixed]`` for every X."""
    rng = np.random.default_rng(31)
    z_value = rng.standard_normal(len(paper_system.z))
    for e in paper_system.entries:
        score, direct = paper_system.score_integrands[e.symbol]
        exprs = [paper_system.energetic_integrands[e.symbol], paper_system.envelope * score + direct]
        envelope_form, score_form = gauss_hermite_expectation(paper_system, exprs, point, z_value)
        via_difference = derivative_by_quadrature(paper_system, paper_system.envelope, point, e.symbol.name, z_value)
        assert envelope_form == pytest.approx(via_difference, rel=1e-6, abs=1e-9), e.symbol.name
        assert score_form == pytest.approx(via_difference, rel=1e-5, abs=1e-8), e.symbol.name


# --------------------------------------------------------------------------- other declarations


def three_token_model() -> AttentionModel:
    return AttentionModel(
        tokens=GaussianTokens.isotropic(3, 0.5),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.5, 0.3, 0.2), (0.1, 0.8, 0.1), (0.25, 0.25, 0.5))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )


@pytest.mark.slow
def test_three_token_declaration_has_one_m_per_positional_direction():
    """Sec. 1-2 with L = 3, r = t = 1: ``m_l = sum_k P_lk mu_k`` gives two m-parameters and ``m_3 = -(m_1 + m_2)``;
    one covariance class gives a single q, V, theta; six Gaussian nodes (xi_1..3, eta_1..3)."""
    system = derive(three_token_model())
    m_entries = system.parameters.of_family("m")
    assert len(m_entries) == 2
    m1, m2 = (e.symbol for e in m_entries)
    assert sp.simplify(system.per_token["m_1"] - m1) == 0
    assert sp.simplify(system.per_token["m_2"] - m2) == 0
    assert sp.simplify(system.per_token["m_3"] + m1 + m2) == 0
    for family in ("q", "V", "theta"):
        assert len(system.parameters.of_family(family)) == 1
        (symbol,) = (e.symbol for e in system.parameters.of_family(family))
        assert all(system.per_token[f"{family}_{k}"] == symbol for k in (1, 2, 3))
    assert len(system.nodes) == 6
    assert system.teacher_attention.shape == (3, 3)
    # the m-updates decouple: m_k = muhat_k/(lambda + sigma^2 Vhat), directions being orthonormal (sec. 3)
    consts = constants_by_name(system)
    conj = {"mhat_1": 0.3, "mhat_2": -0.7, "Vhat": 1.2, "qhat": 0.4, "thetahat": 0.1}
    for e, muhat in zip(m_entries, (0.3, -0.7), strict=True):
        got = evaluate(system.order_updates[e.symbol], {**conj, **consts})
        assert got == pytest.approx(muhat / (consts["lambda"] + consts["gamma_1_1"] * 1.2), rel=1e-12)


@pytest.mark.slow
def test_two_covariance_classes_get_separate_parameters_and_sec3_entropic_potential():
    """Sec. 3: tokens with independent spectra (two atoms of share 1/2, gamma = (0.25, 0.5) and
    (0.5, 0.25)) get separate q, V, theta; Psi_w sums over the atoms
    ``w_a/2 [g_a1 qhat_1 + g_a2 qhat_2 + (g_a1 thetahat_1 + g_a2 thetahat_2)^2] / (lambda + A_a)``, with
    ``A_a = g_a1 Vhat_1 + g_a2 Vhat_2``, plus ``mhat^2 / (2 (lambda + A_1))`` for the encoding in atom 1;
    ``rho_c = sum_a w_a g_ac``."""
    gamma = ((0.25, 0.5), (0.5, 0.25))
    model = AttentionModel(
        tokens=GaussianTokens(variances=gamma, weights=(0.5, 0.5)),
        positions=PositionalEncodings(coefficients=((1.0,), (-1.0,))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.4), (0.4, 0.6))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )
    system = derive(model)
    names = {e.symbol.name for e in system.entries}
    assert {"q_1", "q_2", "V_1", "V_2", "theta_1", "theta_2", "m"} == names
    s = symbols_by_name(system)
    assert system.per_token["q_1"] == s["q_1"] and system.per_token["q_2"] == s["q_2"]
    assert system.per_token["V_2"] == s["V_2"] and system.per_token["theta_2"] == s["theta_2"]

    lam = 0.01
    rng = np.random.default_rng(37)
    consts = constants_by_name(system)
    for _ in range(4):
        c = random_conjugates(rng, system)
        potential, response = 0.0, 0.0
        for a, (g1, g2) in enumerate(gamma):
            denominator = lam + g1 * c["Vhat_1"] + g2 * c["Vhat_2"]
            spread = g1 * c["qhat_1"] + g2 * c["qhat_2"] + (g1 * c["thetahat_1"] + g2 * c["thetahat_2"]) ** 2
            potential += 0.5 * (0.5 * spread + (c["mhat"] ** 2 if a == 0 else 0.0)) / denominator
            response += 0.5 * g2 / denominator  # V_2 = 2 dPsi_w/dqhat_2
        assert evaluate(system.entropic_potential, {**c, **consts}) == pytest.approx(potential, rel=1e-12)
        assert evaluate(system.order_updates[s["V_2"]], {**c, **consts}) == pytest.approx(response, rel=1e-12)
    # rho_c = sum_a w_a gamma_ac = 0.375: the variance of the teacher field of token 2 (sec. 2)
    point = {"q_1": 0.1, "q_2": 0.2, "V_1": 1.0, "V_2": 1.0, "theta_1": 0.05, "theta_2": 0.1, "m": 0.2}
    h2 = system.teacher_fields[1, 0]
    (variance,) = gauss_hermite_expectation(system, [h2**2], point)
    assert variance == pytest.approx(0.375, rel=1e-9)


def test_proportional_covariances_share_their_order_parameters():
    """Sec. 2: in one atom, a token of variance 0.5 next to one of 0.25 has ``Sigma_2 = 2 Sigma_1``, so
    ``q_2 = 2 q_1``, ``theta_2 = 2 theta_1``, ``V_2 = 2 V_1``: one family of order parameters, whose
    conjugates the entropic potential determines (its Hessian in them is regular), and a teacher field of
    variance ``rho_2 = 0.5``."""
    model = AttentionModel(
        tokens=GaussianTokens(variances=((0.25, 0.5),)),
        positions=PositionalEncodings(coefficients=((1.0,), (-1.0,))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.4), (0.4, 0.6))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )
    system = derive(model)
    assert [e.name for e in system.entries] == ["q", "m", "V", "theta"]
    s = symbols_by_name(system)
    consts = constants_by_name(system)
    for family in ("q", "V", "theta"):
        assert evaluate(system.per_token[f"{family}_2"] / s[family], consts) == pytest.approx(2.0, rel=1e-14)
    rng = np.random.default_rng(41)
    for _ in range(3):
        c = random_conjugates(rng, system)
        values = {s[k]: v for k, v in {**c, **consts}.items()}
        assert abs(float(system.entropic_hessian.xreplace(values).det())) > 1e-9
    point = {"q": 0.1, "V": 1.0, "theta": 0.05, "m": 0.2}
    h2 = system.teacher_fields[1, 0]
    (variance,) = gauss_hermite_expectation(system, [h2**2], point)
    assert variance == pytest.approx(0.5, rel=1e-9)


@pytest.mark.parametrize(
    ("build", "parameter"),
    [
        (lambda: paper_model(omega=1.5), "omega"),
        (lambda: paper_model(omega=-0.1), "omega"),
        (lambda: paper_model(sigma=0.0), "sigma"),
        (lambda: paper_model(sigma=-0.5), "sigma"),
        (lambda: GaussianTokens(variances=((0.25, -0.5),)).validate(), "sigma"),
        (lambda: paper_model(lam=-0.01), "lambda"),
        (lambda: paper_model(A=((0.6, 0.4),)), "A"),
        (lambda: paper_model(A=((0.6, 0.4, 0.0), (0.4, 0.6, 0.0))), "A"),
        (lambda: paper_model(A=((0.6, 0.5), (0.4, 0.6))), "A"),
        (lambda: paper_model(A=((1.2, -0.2), (0.4, 0.6))), "A"),
    ],
    ids=[
        "omega>1",
        "omega<0",
        "sigma=0",
        "sigma<0",
        "variance<0",
        "lambda<0",
        "A-not-square",
        "A-not-square-2",
        "A-row-sum",
        "A-negative",
    ],
)
def test_bad_declarations_raise_declaration_error_naming_the_parameter(build, parameter):
    """Sec. 6 ranges: omega in [0, 1], sigma > 0, lambda >= 0, A square and row-stochastic."""
    with pytest.raises(DeclarationError, match=rf"^{parameter}\b"):
        build()


def test_boundary_declarations_are_accepted():
    """The closed ends of the ranges are allowed: omega = 0 and 1, lambda = 0."""
    for model in (paper_model(omega=0.0), paper_model(omega=1.0), paper_model(lam=0.0)):
        assert model.length == 2


def test_latex_puts_hats_on_conjugates(paper_system):
    """``latex`` renders conjugates with ``\\hat`` (here the V update, which involves Vhat)."""
    s = symbols_by_name(paper_system)
    text = latex(sp.Eq(s["V"], paper_system.order_updates[s["V"]]))
    assert isinstance(text, str)
    assert r"\hat{V}" in text
    assert "Vhat" not in text
    text = latex(paper_system.entropic_potential)
    assert r"\hat{q}" in text and r"\hat{m}" in text and r"\hat{\theta}" in text


def test_teacher_constants_have_one_name_per_entry_of_a():
    """Every entry of A must become its own named constant (sec. 6), for any L."""
    length = 11
    a = tuple(tuple(1.0 / length for _ in range(length)) for _ in range(length))
    teacher = MixedPositionalTeacher(omega=0.3, positional=a)
    assert len(teacher.constants()) == 1 + length * length


@pytest.mark.parametrize(("rank", "teacher_rank", "fits"), [(1, 1, True), (2, 1, True), (1, 2, False)])
def test_the_prox_starts_include_the_exact_fit_of_the_teacher_where_the_student_can_make_it(rank, teacher_rank, fits):
    """Starts ``+-omega`` always; where the student's rank is at least the teacher's, also ``+-z_fit``
    and ``+-(omega +- z_fit)`` with ``z_fit z_fit^T = h* h*^T`` (the teacher's semantic attention)."""
    paper = paper_model()
    model = AttentionModel(
        tokens=paper.tokens,
        positions=paper.positions,
        teacher=paper.teacher,
        student=paper.student,
        regulariser=paper.regulariser,
        rank=rank,
        teacher_rank=teacher_rank,
    )
    system = derive(model)
    omega, hstar = system.student_fields, system.teacher_fields
    starts = [sp.Matrix(omega.rows, omega.cols, list(s)) for s in system.prox_starts]
    assert len(starts) == (8 if fits else 2)
    assert starts[0] == omega and starts[1] == -omega
    if fits:
        fit = starts[2]
        assert fit.shape == omega.shape
        assert sp.simplify(fit * fit.T - hstar * hstar.T) == sp.zeros(omega.rows, omega.rows)
        assert starts[4] == omega + fit and starts[6] == omega - fit
