"""The shipped variants: each a declaration built from named parameters, chosen on the command line
with ``--model NAME --set name=value``, listed by ``attnphase models``; and a reduction each one
admits, solved."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
import sympy as sp
import torch
from typer.testing import CliRunner

from attnphase.experiments.cli import app
from attnphase.experiments.finite_model import FiniteModel
from attnphase.experiments.finite_size import finite_size
from attnphase.experiments.parsing import UsageError, parse_settings
from attnphase.experiments.uninformed import uninformed
from attnphase.replica.declaration import (
    AttentionModel,
    BranchLabels,
    DeclarationError,
    DotProductAttention,
    ElasticNet,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    paper_model,
)
from attnphase.replica.saddle_equations import derive
from attnphase.replica.variants import VARIANTS, variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.anchors import AnchorSearch


def test_every_variant_builds_at_its_defaults_and_names_its_parameters():
    for chosen in VARIANTS.values():
        model = chosen.model()
        assert model.length in (2, 3)
        assert set(chosen.defaults()) == {p.name for p in chosen.parameters}
    assert variant("paper").model() == paper_model()
    assert variant("l1").model().regulariser == ElasticNet(0.005, 0.0)
    assert variant("elastic-net").model({"lambda_2": 0.02}).regulariser == ElasticNet(0.005, 0.02)
    three = variant("L3").model({"sigma": 0.7})
    assert three.tokens == GaussianTokens.isotropic(3, 0.7) and three.regulariser == Ridge(0.01)
    spectrum = variant("spectrum").model({"weight_1": 0.25})
    assert spectrum.tokens.weights == (0.25, 0.75)
    np.testing.assert_allclose(spectrum.tokens.variances, ((0.25, 0.25), (0.64, 0.64)), rtol=1e-15)


@pytest.mark.parametrize(
    ("name", "values", "message"),
    [
        ("paper", {"sigma_1": 0.5}, "parameter must be one of omega, sigma, lambda, A for the model 'paper'"),
        ("spectrum", {"weight_1": 1.0}, "weight_1 must be in (0, 1); got 1.0"),
        ("spectrum", {"sigma_2": 0.0}, "sigma_2 must be in [0.001, 1000]; got 0.0"),
        ("L3", {"A": ((0.5, 0.5), (0.5, 0.5))}, "A must be a 3 x 3 matrix"),
        ("l1", {"lambda_1": -1.0}, "lambda_1 must be in [0, 1000]; got -1.0"),
    ],
)
def test_a_bad_parameter_is_refused_by_name(name, values, message):
    with pytest.raises(DeclarationError, match=None) as error:
        variant(name).model(values)
    assert message in str(error.value)


def test_an_unknown_model_lists_the_shipped_ones():
    names = "paper, elastic-net, l1, untied, rank2, L3, spectrum, mixture"
    with pytest.raises(DeclarationError, match=f"model must be one of {names}; got 'x'"):
        variant("x")


def test_settings_are_parsed_as_numbers_never_evaluated():
    chosen = variant("L3")
    values = parse_settings(["omega=0.2", " A = 0.5,0.25,0.25,0.25,0.5,0.25,0.25,0.25,0.5"], chosen)
    assert values == {"omega": 0.2, "A": ((0.5, 0.25, 0.25), (0.25, 0.5, 0.25), (0.25, 0.25, 0.5))}
    for item, message in (
        ("omega=__import__('os').getcwd()", "omega must be a number"),
        ("omega", "set must be name=value"),
        ("omega=0.1,0.2", "omega must be a number"),
        ("A=0.5,0.5,0.5", "A must be a square matrix"),
    ):
        with pytest.raises(ValueError, match=message.replace("(", r"\(")):
            parse_settings([item], chosen)
    with pytest.raises(UsageError, match="set gives omega twice"):
        parse_settings(["omega=0.1", "omega=0.2"], chosen)


def test_models_lists_every_variant_with_its_defaults():
    result = CliRunner().invoke(app, ["models"])
    assert result.exit_code == 0
    for name in VARIANTS:
        assert f"{name}: " in result.output
    assert "lambda_1 = 0.005" in result.output and "A = 0.6,0.2,0.2,0.2,0.6,0.2,0.2,0.2,0.6" in result.output


def test_equations_of_a_chosen_model():
    result = CliRunner().invoke(app, ["equations", "--model", "L3", "--set", "omega=0.2"])
    assert result.exit_code == 0, result.output
    assert "m^(3) = -m_1 - m_2" in result.output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--model", "spectrum", "--sigma", "0.3"], "parameter must be one of omega, sigma_1, sigma_2"),
        (["--omega", "0.2", "--set", "omega=0.1"], "omega is given twice"),
        (["--model", "paper", "--set", "omega=x"], "omega must be a number; got 'x'"),
        (["--model", "nope"], "model must be one of paper"),
    ],
)
def test_command_line_model_errors_are_one_line(arguments, message):
    result = CliRunner().invoke(app, ["equations", *arguments])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output


@pytest.mark.slow
def test_a_spectrum_of_two_equal_atoms_is_the_isotropic_model():
    """Two atoms carrying the same variance are one atom (THEORY.md sec. 1): the semantic fixed point of
    the spectrum variant equals the paper's at sigma = 0.6, whatever the atoms' shares."""
    spectrum = make_solver(variant("spectrum").model({"sigma_1": 0.6, "sigma_2": 0.6, "weight_1": 0.3}))
    paper = make_solver(paper_model(sigma=0.6))
    first, second = (AnchorSearch(s)(1.5, s.branch("semantic")) for s in (spectrum, paper))
    assert first.converged and second.converged and first.branch == second.branch == "semantic"
    np.testing.assert_allclose(first.values, second.values, rtol=1e-8, atol=1e-12)
    assert first.row()["train_loss"] == pytest.approx(second.row()["train_loss"], rel=1e-9)


@pytest.mark.slow
def test_a_third_token_without_encoding_keeps_the_order_parameters_and_prior_side_of_two():
    """L = 3 with ``p_3 = 0``, a token of the same law as the others and a target that leaves it alone
    (THEORY.md sec. 1-4). The order parameters describe ``Q`` against the encodings and the teacher, and
    the prior side of Phi (``Psi_w``, the trace terms, the updates of the order parameters) depends on the
    encodings' directions and the tokens' spectra only: those are the two-token model's, term for term.
    The energetic side is not: the third token's score, 0 in every row, still enters the softmax's
    normalisation, so ``Psi_out`` has six Gaussian dimensions, not four, and no exact reduction to L = 2
    exists for softmax attention."""
    two = derive(paper_model())
    three = derive(
        AttentionModel(
            tokens=GaussianTokens.isotropic(3, 0.5),
            positions=PositionalEncodings(coefficients=((1.0,), (-1.0,), (0.0,))),
            teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.4, 0.0), (0.4, 0.6, 0.0), (0.0, 0.0, 1.0))),
            student=DotProductAttention(),
            regulariser=Ridge(0.01),
        )
    )
    assert [e.name for e in three.parameters.entries] == [e.name for e in two.parameters.entries]
    assert sp.simplify(three.entropic_potential - two.entropic_potential) == 0
    assert sp.simplify(three.trace_terms - two.trace_terms) == 0
    assert set(three.order_updates) == set(two.order_updates)
    assert all(sp.simplify(three.order_updates[x] - two.order_updates[x]) == 0 for x in two.order_updates)
    assert three.sigma_tilde.shape == (3, 3) and two.sigma_tilde.shape == (2, 2)


def test_untied_attention_is_softmax_of_query_and_key_fields():
    """``S(h)_lk = softmax_k(hQ_l . hK_k)`` with ``h = [hQ, hK]`` (THEORY.md sec. 8), in the declaration
    and in the simulator compiled from it; with ``K = Q`` it is the tied map."""
    model = variant("untied").model()
    assert model.rank == 2
    with pytest.raises(DeclarationError, match="rank must be even with untied key and query"):
        dataclasses.replace(model, rank=3)
    finite = FiniteModel(model, 8)
    h = torch.randn((5, 2, 2), generator=torch.Generator().manual_seed(3), dtype=torch.float64)
    scores = h[..., :1] @ h[..., 1:].transpose(-1, -2)
    torch.testing.assert_close(finite.student_attention(h), torch.softmax(scores, -1), rtol=1e-13, atol=0)
    tied = FiniteModel(paper_model(), 8)
    same = h[..., :1].expand(5, 2, 2)
    torch.testing.assert_close(finite.student_attention(same), tied.student_attention(h[..., :1]), rtol=1e-13, atol=0)


def test_untied_order_parameters_are_two_by_two_blocks():
    """``q = W^T Sigma W / d`` holds ``Q^T Sigma Q``, ``Q^T Sigma K`` and ``K^T Sigma K``; ``m`` and ``theta``
    have one entry per column of ``W``."""
    names = [e.name for e in variant("untied").model().reduced_parameters().entries]
    assert names == ["q_1_1", "q_1_2", "q_2_2", "m_1", "m_2", "V_1_1", "V_1_2", "V_2_2", "theta_1", "theta_2"]


@pytest.mark.parametrize("study", [finite_size, uninformed])
def test_studies_of_the_two_minima_refuse_a_declaration_without_both_families(tmp_path, study):
    """The finite-size and uninformed studies set the positional and semantic starts against the branches
    where m alone and theta alone are non-zero: a declaration that names no branch for m is refused."""
    labels = BranchLabels(meanings=(("theta", "semantic"),), critical=("agnostic", "semantic"))
    model = dataclasses.replace(paper_model(), labels=labels)
    with pytest.raises(ValueError, match="model must have both overlap families m and theta"):
        study(model, out=tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_the_finite_size_study_runs_on_a_mixture_with_family_norms():
    """Per-cluster theta and two m directions: the study compares |m| and |theta|, the family norms."""
    model = variant("mixture").model()
    result = finite_size(model, dims="8,12", seeds=1, max_steps=20, n_test=50, progress=False)
    gaps = result.gaps.set_index(["init", "quantity"])
    assert set(gaps.index) == {
        (init, quantity)
        for init, family in (("positional", "m"), ("semantic", "theta"))
        for quantity in ("train_loss", "test_error", family)
    }
    solver = make_solver(model)
    point = AnchorSearch(solver)(1.5, solver.branch("semantic"))
    values = dict(zip(point.names, point.values, strict=True))
    expected = np.hypot(values["theta_1"], values["theta_2"])
    np.testing.assert_allclose(gaps.loc[("semantic", "theta"), "theory"], expected, rtol=1e-8)


def test_a_scan_of_the_paper_variant_records_the_parameters_set(tmp_path):
    out = tmp_path / "scan"
    arguments = ["scan", "--model", "paper", "--set", "sigma=0.4", "--set", "lambda=0.02", "--out", str(out)]
    arguments += ["--alphas", "2.0", "--order", "6", "--threshold-order", "0", "--no-stability"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    thresholds = pd.read_csv(out / "thresholds.csv")
    assert (thresholds.loc[0, "sigma"], thresholds.loc[0, "lambda"], thresholds.loc[0, "omega"]) == (0.4, 0.02, 0.3)
    assert (
        json.loads((out / "run.json").read_text())["model"]
        == variant("paper").model({"sigma": 0.4, "lambda": 0.02}).record()
    )


@pytest.mark.slow
def test_a_scan_of_a_chosen_model_records_its_declaration(tmp_path):
    out = tmp_path / "scan"
    arguments = ["scan", "--model", "elastic-net", "--set", "lambda_1=0.01", "--omega", "0.2", "--out", str(out)]
    arguments += ["--alphas", "2.0", "--order", "6", "--threshold-order", "0", "--no-stability"]
    result = CliRunner().invoke(app, arguments)
    assert result.exit_code == 0, result.output
    thresholds = pd.read_csv(out / "thresholds.csv")
    assert thresholds.loc[0, "omega"] == 0.2 and thresholds.loc[0, "lambda_1"] == 0.01
    assert thresholds.loc[0, "lambda_2"] == 0.01
    assert set(pd.read_csv(out / "branches.csv")["branch"]) <= {"agnostic", "positional", "semantic", "mixed"}
