"""Separable regularisers (THEORY.md sec. 3): ``Psi_w`` as the Gaussian average of the Moreau
envelope of ``g``, declared by the regulariser and derived, solved and checked like ridge.

The elastic net's closed form (soft-thresholding) is checked against the envelope minimised
numerically and integrated by quadrature over the field's law; its reduction to ridge, and its
continuity as the l1 weight goes to zero, at fixed points of the paper's model.
"""

from __future__ import annotations

import dataclasses
from itertools import product

import numpy as np
import pytest
import scipy.integrate
import scipy.optimize
import sympy as sp

from attnphase.replica.declaration import DeclarationError, ElasticNet, FieldLaw, Ridge, paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.settings import SolverSettings

RULE = GaussHermite(12)
SETTINGS = SolverSettings(quadrature=RULE, test_quadrature=RULE)
POSITIONAL = Branch("positional", ("theta",))
SEMANTIC = Branch("semantic", ("m",))


def with_regulariser(regulariser):
    return dataclasses.replace(paper_model(), regulariser=regulariser)


def numerical_envelope(b: float, a: float, l1: float, l2: float) -> float:
    """``-min_w {l1 |w| + l2 w^2/2 + a w^2/2 - w b}`` by a bounded scalar minimisation."""
    bound = 10 * (abs(b) + 1) / (a + l2)
    found = scipy.optimize.minimize_scalar(
        lambda w: l1 * abs(w) + (l2 + a) * w**2 / 2 - w * b,
        bounds=(-bound, bound),
        method="bounded",
        options={"xatol": 1e-12},
    )
    return -found.fun


@pytest.mark.parametrize(
    ("a", "spread", "weight", "means", "l1", "l2"),
    [(0.8, 0.3, 1.0, (0.2,), 0.1, 0.0), (2.0, 0.5, 0.4, (0.3, -0.1), 0.25, 0.05), (1.0, 0.2, 1.0, (), 0.05, 0.02)],
)
def test_the_elastic_net_potential_is_the_averaged_moreau_envelope(a, spread, weight, means, l1, l2):
    """``weight E_b[-min_w {g(w) + A w^2/2 - w b}]`` over ``b = G + sum_k s_k muhat_k / sqrt(weight)``,
    ``G ~ N(0, spread^2)``, uniform signs: the closed form against the envelope minimised numerically
    and integrated over ``G`` by adaptive quadrature, every sign pattern enumerated."""
    law = FieldLaw(
        a_matrix=sp.Matrix([[a]]),
        covariance=sp.Matrix([[spread**2]]),
        weight=sp.Float(weight),
        directions=tuple(sp.Matrix([[mu]]) for mu in means),
    )
    strengths = {"lambda_1": sp.Float(l1), "lambda_2": sp.Float(l2)}
    closed = float(ElasticNet(l1, l2).entropic_potential(law, strengths))
    values = []

    def density(g: float) -> float:
        return np.exp(-(g**2) / (2 * spread**2)) / np.sqrt(2 * np.pi * spread**2)

    for signs in product((1, -1), repeat=len(means)):
        centre = sum(s * mu for s, mu in zip(signs, means, strict=True)) / np.sqrt(weight)
        integral, _ = scipy.integrate.quad(
            lambda g, c=centre: numerical_envelope(c + g, a, l1, l2) * density(g),
            -12 * spread,
            12 * spread,
            points=[l1 - centre, -l1 - centre],
            epsabs=1e-13,
            epsrel=1e-11,
            limit=200,
        )
        values.append(integral)
    assert closed == pytest.approx(weight * np.mean(values), rel=1e-7, abs=1e-12)


def test_the_ridge_potential_is_the_same_averaged_envelope():
    """Ridge's closed form through the same field law: ``E[b^2] / (2 (A + lambda))`` per coordinate."""
    law = FieldLaw(sp.Matrix([[1.5]]), sp.Matrix([[0.09]]), sp.Float(0.5), (sp.Matrix([[0.2]]),))
    closed = float(Ridge(0.1).entropic_potential(law, {"lambda": sp.Float(0.1)}))
    second_moment = 0.09 + 0.2**2 / 0.5
    assert closed == pytest.approx(0.5 * second_moment / (2 * (1.5 + 0.1)), rel=1e-14)


@pytest.mark.slow
def test_the_elastic_net_without_l1_weight_is_ridge():
    """The general path of the elastic net at ``l1 = 0`` gives ridge's potential and its fixed points."""
    ridge, net = derive(with_regulariser(Ridge(0.01))), derive(with_regulariser(ElasticNet(0.0, 0.01)))
    conjugates = ridge.parameters.conjugates
    rng = np.random.default_rng(0)
    for _ in range(5):
        point = dict(zip(conjugates, rng.uniform(0.05, 2.0, len(conjugates)), strict=True))
        shared = {**point, sp.Symbol("w_1", real=True, nonnegative=True): 1.0}
        shared[sp.Symbol("gamma_1_1", real=True, nonnegative=True)] = 0.25
        value = float(ridge.entropic_potential.subs({**shared, sp.Symbol("lambda", real=True, nonnegative=True): 0.01}))
        other = net.entropic_potential.subs(
            {
                **shared,
                sp.Symbol("lambda_1", real=True, nonnegative=True): 0.0,
                sp.Symbol("lambda_2", real=True, nonnegative=True): 0.01,
            }
        )
        assert float(other) == pytest.approx(value, rel=1e-12)
    for branch in (POSITIONAL, SEMANTIC):
        points = [
            AnchorSearch(make_solver(with_regulariser(reg), SETTINGS))(2.0, branch)
            for reg in (Ridge(0.01), ElasticNet(0.0, 0.01))
        ]
        assert all(p.converged and p.branch == branch.name for p in points)
        np.testing.assert_allclose(points[1].values, points[0].values, rtol=1e-8, atol=1e-12)
        assert points[1].train_loss == pytest.approx(points[0].train_loss, rel=1e-9)


@pytest.mark.slow
def test_elastic_net_fixed_points_approach_ridge_linearly_as_the_l1_weight_vanishes():
    """At the positional point (alpha = 2, l2 = 0.01) the distance to ridge's point is linear in the l1
    weight (a quarter of the weight, a quarter of the distance), and every point meets its checks,
    the energy identity ``eps_t = alpha E[l] + E[g(w*)]`` among them (``E[g] = -sum_s s dPsi_w/ds``)."""
    ridge = AnchorSearch(make_solver(with_regulariser(Ridge(0.01)), SETTINGS))(2.0, POSITIONAL)
    distances = []
    for l1 in (1e-3, 2.5e-4, 6.25e-5):
        point = AnchorSearch(make_solver(with_regulariser(ElasticNet(l1, 0.01)), SETTINGS))(2.0, POSITIONAL)
        assert point.converged and point.branch == "positional"
        distances.append(np.abs(point.values - ridge.values).max() / np.abs(ridge.values).max())
    ratios = np.array(distances[:-1]) / np.array(distances[1:])
    assert np.all((ratios > 3.3) & (ratios < 4.5)), ratios
    assert distances[-1] < 1e-2


@pytest.mark.slow
def test_the_lasso_alone_is_solved_from_a_finite_guess():
    """Without a ridge term the alpha -> 0 limit has ``V`` infinite; the guess is taken at small
    conjugates, and the semantic point of the lasso at alpha = 2 is found and meets its checks."""
    solver = make_solver(with_regulariser(ElasticNet(0.01, 0.0)), SETTINGS)
    assert np.isfinite(generic_guess(solver)).all()
    point = AnchorSearch(solver)(2.0, SEMANTIC)
    assert point.converged and point.branch == "semantic" and point["theta"] > 0.05


def test_the_elastic_net_is_declared_for_rank_one():
    with pytest.raises(DeclarationError, match="rank must be 1 with the elastic net"):
        dataclasses.replace(paper_model(), regulariser=ElasticNet(0.01), rank=2)
