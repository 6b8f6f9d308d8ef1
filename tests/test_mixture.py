"""Gaussian-mixture tokens with jointly drawn cluster labels (THEORY.md sec. 8): the declaration and
its checks, the reductions to the Gaussian model, the label law as nodes of the expectations, and the
simulator's tokens."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import sympy as sp
import torch

from attnphase.experiments.finite_model import FiniteModel
from attnphase.replica.declaration import (
    DeclarationError,
    GaussianMixtureTokens,
    GaussianTokens,
    paper_model,
)
from attnphase.replica.saddle_equations import derive
from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol, with_labels
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings

TWO_CLUSTERS = {
    "variances": ((0.16, 0.36), (0.36, 0.16)),
    "weights": (0.5, 0.5),
    "means": ((0.0, 0.5), (0.0, -0.5)),
    "label_law": (((0, 0), 0.375), ((0, 1), 0.125), ((1, 0), 0.125), ((1, 1), 0.375)),
}


def mixture(**changes) -> GaussianMixtureTokens:
    return GaussianMixtureTokens(**{**TWO_CLUSTERS, **changes})


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"label_law": (((0, 0, 1), 0.5), ((1, 1), 0.5))}, "label_law must be configurations of one length L = 3"),
        ({"label_law": (((0, 2), 1.0),)}, "label_law must be cluster indices in [0, 1]"),
        (
            {"label_law": (((0, 0), 0.5), ((1, 1), 0.4))},
            "label_law must be probabilities summing to 1",
        ),
        ({"label_law": (((0, 0), 0.5), ((0, 0), 0.5))}, "label_law must be distinct configurations"),
        ({"label_law": (((0, 0), 0.0), ((1, 1), 1.0))}, "label probability must be in (0, 1]"),
        ({"label_law": (((0, 0),),)}, "label_law must be pairs ((c_1, ..., c_L), probability)"),
        ({"means": ((0.0, 0.5),)}, "means must be one row per cluster (2)"),
        ({"variances": ((0.16, -0.36), (0.36, 0.16))}, "sigma^2 (variances) must be in [1e-06, 1000000]"),
        ({"variances": ((0.16, 0.36), (0.36,))}, "variances must be rows of equal length (one variance per cluster)"),
        ({"weights": (0.5, 0.6)}, "weights must be numbers summing to 1"),
    ],
)
def test_a_malformed_mixture_fails_at_declaration_naming_the_field(changes, message):
    with pytest.raises(DeclarationError) as error:
        mixture(**changes)
    assert message in str(error.value)


def test_means_need_one_coefficient_per_positional_direction():
    with pytest.raises(DeclarationError, match=r"means must be rows of 1 coefficients \(one per direction u_k"):
        dataclasses.replace(paper_model(), tokens=mixture())


def test_independent_labels_are_the_product_of_the_cluster_weights():
    tokens = GaussianMixtureTokens.independent(3, ((0.25, 0.5),), ((0.0,), (1.0,)), (0.25, 0.75))
    law = dict(tokens.configurations())
    assert len(law) == 8 and law[(0, 1, 1)] == pytest.approx(0.25 * 0.75**2, rel=1e-15)
    with pytest.raises(DeclarationError, match="cluster_weights must be numbers summing to 1"):
        GaussianMixtureTokens.independent(2, ((0.25, 0.5),), ((0.0,), (1.0,)), (0.25, 0.5))


@pytest.mark.slow
def test_labels_are_nodes_with_the_law_as_weights():
    """``Psi_out = sum_c P_c Psi_out(c)``: one indicator per (token, cluster) it takes, and a rule that is
    the product of the Gaussian rule with the label law."""
    system = derive(variant("mixture").model())
    assert [s.name for s in system.labels.symbols] == ["s_1_1", "s_1_2", "s_2_1", "s_2_2"]
    assert system.gaussian_dimension == 4 and len(system.nodes) == 8
    values, probabilities = system.label_rule()
    assert probabilities == pytest.approx((0.48, 0.12, 0.12, 0.28), rel=1e-12)  # share_1 0.6, correlation 0.5
    assert values[1] == (0.0, 0.0, 1.0, 1.0)  # token 1 in cluster 2 in the last two configurations
    nodes, weights = with_labels(*GaussHermite(4, prune=0.0).nodes(4), values, probabilities)
    assert nodes.shape == (8, 4 * 4**4) and weights.sum() == pytest.approx(1.0, rel=1e-14)
    # each token is in exactly one cluster at every node
    np.testing.assert_array_equal(nodes[4] + nodes[5], 1.0)
    # the field of token 1 is its cluster's: m_1 + m_2 / 2 + sqrt(q_1) xi_1 in cluster 1
    fields = system.student_fields[0, 0]
    s = {x.name: x for x in fields.free_symbols}
    in_first = fields.subs({s["s_1_1"]: 1, s["s_1_2"]: 0})
    assert sp.simplify(in_first - (s["m_1"] + s["m_2"] / 2 + sp.sqrt(s["q_1"]) * s["xi_1"])) == 0


def test_a_one_component_mixture_is_the_gaussian_model():
    """One cluster of mean zero and variance sigma^2: the paper's model, term for term."""
    one = GaussianMixtureTokens(variances=((0.25,),), means=((0.0,),), label_law=(((0, 0), 1.0),))
    model = dataclasses.replace(paper_model(), tokens=one)
    assert derive(model).free_entropy == derive(paper_model()).free_entropy
    assert derive(model).envelope == derive(paper_model()).envelope


@pytest.mark.slow
@pytest.mark.parametrize(("sigma", "branch", "alpha"), [(0.6, "semantic", 1.5), (0.5, "positional", 0.8)])
def test_identical_clusters_under_a_correlated_label_law_are_the_gaussian_model(sigma, branch, alpha):
    """Two clusters of the same spectrum and mean zero, under a correlated label law: four label
    configurations on the nodes, each the paper's integrand, so the paper's fixed points to solver
    precision, and its training loss with the kink correction."""
    same = mixture(variances=((sigma**2, sigma**2),), weights=(1.0,), means=((0.0,), (0.0,)))
    model = dataclasses.replace(paper_model(sigma=sigma), tokens=same)
    solver, reference = make_solver(model), make_solver(paper_model(sigma=sigma))
    assert solver.problem.map.nodes.shape[1] == 4 * reference.problem.map.nodes.shape[1]
    first, second = (AnchorSearch(s)(alpha, s.branch(branch)) for s in (solver, reference))
    assert first.converged and second.converged and first.branch == second.branch == branch
    np.testing.assert_allclose(first.values, second.values, rtol=1e-8, atol=1e-12)
    assert first.row()["train_loss"] == pytest.approx(second.row()["train_loss"], rel=1e-9)
    assert first.row()["line_correction"] == pytest.approx(second.row()["line_correction"], rel=1e-6, abs=1e-14)


@pytest.mark.slow
def test_one_label_configuration_is_tokens_with_their_clusters_covariances():
    """Labels fixed at (cluster 2, cluster 1): the Gaussian model whose tokens have those clusters'
    spectra, equation for equation."""
    fixed = mixture(means=((0.0,), (0.0,)), label_law=(((1, 0), 1.0),))
    tokens = GaussianTokens(variances=((0.36, 0.16), (0.16, 0.36)), weights=(0.5, 0.5))
    first = derive(dataclasses.replace(paper_model(), tokens=fixed))
    second = derive(dataclasses.replace(paper_model(), tokens=tokens))
    rename = {
        sp.Symbol(f"gamma_{a}_{c}", real=True, nonnegative=True): sp.Symbol(
            f"gamma_{a}_{3 - c}", real=True, nonnegative=True
        )
        for a in (1, 2)
        for c in (1, 2)
    }
    by_name = {e.symbol.name: e for e in second.entries}
    swap = {}
    for e in first.entries:  # the first token's class is cluster 2: class indices swap
        other = by_name[e.symbol.name.replace("_1", "_x").replace("_2", "_1").replace("_x", "_2")]
        swap[e.symbol], swap[e.conjugate] = other.symbol, other.conjugate
    assert sp.simplify(first.envelope.xreplace({**rename, **swap}) - second.envelope) == 0


def test_the_simulator_draws_labels_from_the_law_and_tokens_from_their_clusters():
    model = variant("mixture").model({"correlation": -0.5, "share_1": 0.5})
    finite = FiniteModel(model, 64)
    labels, x = finite.labelled_tokens(torch.Generator().manual_seed(5), 20000)
    assert float((labels[:, 0] == labels[:, 1]).double().mean()) == pytest.approx((1 - 0.5) / 2, abs=0.015)
    assert float(labels.double().mean()) == pytest.approx(0.5, abs=0.015)
    first_half, second_half = slice(0, 32), slice(32, 64)
    for cluster, (inside, outside) in enumerate(((0.16, 0.36), (0.36, 0.16))):
        tokens = x[:, 0][labels[:, 0] == cluster]
        mean = tokens.mean(0)  # mu_c = +-0.5 u_2
        assert float(mean @ finite.directions[1]) == pytest.approx(0.5 * (1 - 2 * cluster), abs=0.03)
        assert float(mean @ finite.directions[0]) == pytest.approx(0.0, abs=0.03)
        noise = tokens - finite.cluster_means[cluster]
        assert float(noise[:, first_half].var()) == pytest.approx(inside, rel=0.03)
        assert float(noise[:, second_half].var()) == pytest.approx(outside, rel=0.03)
    assert finite.measured_names() == ("q_1", "q_2", "m_1", "m_2", "theta_1", "theta_2")


@pytest.mark.slow
def test_a_relabelling_symmetric_mixture_converges_on_a_rule_without_nodes_on_its_ties():
    """Equally likely clusters with swapped spectra: at the agnostic point the two clusters are
    interchangeable, so in the mixed label configurations the prox is degenerate (two minimisers swapped
    by the tokens' exchange) on the nodes with ``xi_1 = xi_2``, which a tensor rule holds; which one a
    node keeps decides ``qhat_1 - qhat_2``, so the map jumps across ``q_1 = q_2`` and the point is reported
    unconverged there. Scrambled Sobol points lie on no such surface: the point converges, symmetric."""
    model = variant("mixture").model({"share_1": 0.5})
    rule = ScrambledSobol(13, 0)
    solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
    point = AnchorSearch(solver)(1.0, solver.branch("agnostic"))
    assert point.residual < 1e-8 and point.branch == "agnostic"
    values = dict(zip(point.names, point.values, strict=True))
    assert values["q_1"] == pytest.approx(values["q_2"], rel=1e-4)


@pytest.mark.slow
def test_the_equations_of_a_mixture_list_its_label_law():
    document = derive(variant("mixture").model()).equations_document()
    assert [str(eq.lhs) for eq in document.section("labels")] == [
        "P(c = (1, 1))",
        "P(c = (1, 2))",
        "P(c = (2, 1))",
        "P(c = (2, 2))",
    ]
    assert [float(eq.rhs) for eq in document.section("labels")] == pytest.approx([0.48, 0.12, 0.12, 0.28])
    assert r"P\left(c = (2, 1)\right) &= 0.12" in document.latex()
    assert not derive(paper_model()).equations_document().section("labels")


@pytest.mark.slow
def test_a_rounding_residue_of_an_overlap_does_not_cost_the_fold_its_symmetry():
    """On the mixture's positional branch the overlap with the cluster means, m_2, is held at zero by the
    tokens' swap (which flips it), up to the rounding residue the iterations leave; the fold treats an
    entry that small as zero and keeps the swap, as at m_2 = 0 exactly."""
    solver = make_solver(variant("mixture").model())
    names = [e.name for e in solver.problem.compiled.system.entries]
    fold = solver.problem.engine.fold
    point = dict(zip(names, (0.0424, 0.0546, 0.2496, 0.0, 16.6, 17.0, 0.0, 0.0), strict=True))
    exact = np.array(list(point.values()))
    residue = exact.copy()
    residue[names.index("m_2")] = -9.3e-18
    assert fold(residue).ratio == pytest.approx(fold(exact).ratio) and fold(exact).ratio > 3.9
    small = exact.copy()
    small[names.index("m_2")] = 1e-6  # an overlap on its way to zero is not folded away
    assert fold(small).ratio < 2.1
