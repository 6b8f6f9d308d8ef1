"""Finite-d simulations: objective and gradient, reproducibility, settings, agreement with the theory, command."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pandas as pd
import pytest
import torch
import typer
from runs import simulate_into
from typer.testing import CliRunner

from attnphase.experiments.cli import app
from attnphase.experiments.training import (
    SimulationSettings,
    generator,
    gradient_mapping,
    initial_weights,
    objective,
    objective_and_gradient,
    simulate,
    teacher,
    training_data,
)
from attnphase.replica.declaration import ElasticNet, paper_model
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.search.anchors import AnchorSearch

#: The paper's branches (THEORY.md sec. 6), named as its declaration names them.
POSITIONAL = Branch("positional", ("theta",))
SEMANTIC = Branch("semantic", ("m",))

TINY = SimulationSettings(d=6, alphas=(1.0,), seeds=2, n_test=50, max_steps=50)


def test_gradient_matches_central_finite_differences():
    settings = SimulationSettings(d=7, alphas=(1.5,), seeds=(3, 5))
    data = training_data(1.5, settings.seed_list, settings)
    q = torch.randn((2, 7, 1), generator=torch.Generator().manual_seed(11), dtype=torch.float64)
    _, grad = objective_and_gradient(q, data, settings)
    step = 1e-6
    numeric = torch.zeros_like(q)
    for i in range(7):
        e = torch.zeros_like(q)
        e[:, i] = step
        numeric[:, i, 0] = (objective(q + e, data, settings) - objective(q - e, data, settings)) / (2 * step)
    np.testing.assert_allclose(grad.numpy(), numeric.numpy(), rtol=1e-6, atol=1e-9)


def _softmax_rows(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def test_objective_matches_its_definition_computed_sample_by_sample():
    """E(Q) = sum_mu ||T(h*) z - softmax(h h^T) (z + p)||^2/(2d) + lambda/2 ||Q||^2 (THEORY.md sec. 1, 6)."""
    settings = SimulationSettings(d=5, alphas=(0.8,), seeds=(4,), model=paper_model(omega=0.4, sigma=0.7, lam=0.03))
    d, n, alpha = 5, 4, 0.8
    data = training_data(alpha, [4], settings)
    q = np.array([0.3, -1.2, 0.5, 2.0, -0.7])
    q_star = teacher(4, settings).numpy()[:, 0]
    z = 0.7 * torch.randn((n, 2, d), generator=generator(4, d, 2, alpha), dtype=torch.float64).numpy()
    a = np.array([[0.6, 0.4], [0.4, 0.6]])
    p = np.stack([np.ones(d), -np.ones(d)]) / math.sqrt(d)
    total = 0.0
    for mu in range(n):
        x = z[mu] + p
        h_star = np.array([z[mu][l] @ q_star for l in range(2)]) / math.sqrt(d)
        h = np.array([x[l] @ q for l in range(2)]) / math.sqrt(d)
        t = (1 - 0.4) * _softmax_rows(np.outer(h_star, h_star)) + 0.4 * a
        s = _softmax_rows(np.outer(h, h))
        total += sum((t @ z[mu] - s @ x)[l, i] ** 2 for l in range(2) for i in range(d)) / (2 * d)
    total += 0.03 / 2 * q @ q
    value = objective(torch.tensor(q)[None, :, None], data, settings)
    assert data.n == n
    assert float(value[0]) == pytest.approx(total, rel=1e-12)


def test_runs_are_reproducible_and_independent_of_the_batch():
    first = simulate(TINY)
    again = simulate(TINY)
    alone = simulate(dataclasses.replace(TINY, seeds=(1,)))
    columns = ["train_loss", "test_error", "theta", "m", "q", "grad_norm", "steps"]
    pd.testing.assert_frame_equal(first[columns], again[columns])
    row = first[(first["seed"] == 1) & (first["init"] == "positional")]
    np.testing.assert_allclose(
        row[columns].to_numpy(float), alone[alone["init"] == "positional"][columns].to_numpy(float)
    )
    assert first.loc[first["seed"] == 0, "train_loss"].iloc[0] != row["train_loss"].iloc[0]


def test_initialisations_follow_the_authors():
    settings = SimulationSettings(d=16, alphas=(1.0,), seeds=2, inits=("positional", "semantic", "random"))
    data = training_data(1.0, [0, 1], settings)
    positional = initial_weights("positional", [0, 1], data, settings)
    assert torch.allclose(positional.sum((-1, -2)) / 16, torch.full((2,), 1 / 4, dtype=torch.float64))
    assert torch.equal(initial_weights("semantic", [0, 1], data, settings), data.teachers)
    random = initial_weights("random", [0, 1], data, settings)
    assert 0.05 < float(random.std()) < 0.2


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"d": 1}, "d must be an integer in [2, 100000]; got 1"),
        ({"alphas": ()}, "alphas must be a non-empty list"),
        ({"alphas": (1.0, -0.5)}, "alpha must be in [1e-06, 10000]; got -0.5"),
        ({"alphas": (0.01,), "d": 10}, "alpha * d must be >= 1"),
        ({"seeds": 0}, "seeds must be an integer in [1, 1000]; got 0"),
        ({"seeds": (1, 1)}, "seeds must be a count (an integer in [1, 1000]) or a list of at most 1000 distinct"),
        ({"inits": ("positional", "clever")}, "inits must be distinct values among positional, semantic, random"),
        ({"optimiser": "sgd"}, "optimiser must be one of gd, lbfgs, adam"),
        ({"lr": 0.0}, "lr must be in (0, 1]; got 0.0"),
        ({"max_steps": 0}, "max_steps must be an integer in [1, 1000000]; got 0"),
        ({"tolerance": -1.0}, "tolerance must be in (0, 1]; got -1.0"),
        ({"n_test": 0}, "n_test must be an integer in [1, 10000000]; got 0"),
        ({"dtype": "float16"}, "dtype must be one of float64, float32"),
        ({"model": "paper"}, "model must be an AttentionModel; got 'paper'"),
    ],
)
def test_bad_settings_name_the_parameter(change, message):
    with pytest.raises(ValueError) as error:
        dataclasses.replace(TINY, **change).validate()
    assert message in str(error.value)


# Agreement with the replica theory (THEORY.md sec. 6) on each side of alpha_c ~ 1.25.
# Bound per quantity: 4 standard errors over seeds plus a finite-size allowance. The allowance
# is measured: at d = 400 with 8 seeds the seed means were within 2 s.e. of the theory for
# eps_t, eps_g and the overlaps, except |m| on the semantic branch, whose theory value is 0 while a
# finite-d overlap fluctuates by O(d^-1/2) around 0 (s.d. 0.018 at d = 400), so E|m| > 0. The
# allowance is 2/sqrt(d) for the overlaps (0.1 at d = 400, against |m| = 0.24, theta = 0.16) and 5 %
# of the theory value for eps_t, eps_g (largest |bias| measured: 4.5 % at d = 400, 4 % at d = 800).
AGREEMENT_D, AGREEMENT_SEEDS = 400, 6


@pytest.mark.slow
@pytest.mark.parametrize(("alpha", "init", "branch"), [(0.8, "positional", POSITIONAL), (2.0, "semantic", SEMANTIC)])
def test_simulations_agree_with_the_theory(paper_solver, alpha, init, branch):
    settings = SimulationSettings(
        d=AGREEMENT_D, alphas=(alpha,), seeds=AGREEMENT_SEEDS, inits=(init,), optimiser="lbfgs", n_test=5000
    )
    runs = simulate(settings)
    assert runs["converged"].all()
    theory = AnchorSearch(paper_solver)(alpha, branch).row()
    assert theory["converged"]
    assert_runs_agree(runs.assign(m=runs["m"].abs()), {**theory, "m": abs(theory["m"])}, ("m", "theta"))


def assert_runs_agree(runs: pd.DataFrame, theory: dict, overlaps: tuple[str, ...]) -> None:
    """The seed means within four standard errors plus the finite-size allowance of the theory's
    values: 5 % for eps_t and eps_g, ``2/sqrt(d)`` for the ``overlaps``."""
    allowances = {"train_loss": 0.05 * theory["train_loss"], "test_error": 0.05 * theory["test_error"]}
    allowances.update(dict.fromkeys(overlaps, 2 / math.sqrt(AGREEMENT_D)))
    for column, allowance in allowances.items():
        mean, se = runs[column].mean(), runs[column].std(ddof=1) / math.sqrt(len(runs))
        assert abs(mean - theory[column]) <= 4 * se + allowance, (column, mean, se, theory[column])


def _app() -> typer.Typer:
    return app


def _theory_dir(tmp_path, paper_solver):
    theory = tmp_path / "theory"
    theory.mkdir()
    search = AnchorSearch(paper_solver)
    rows = [search(2.0, SEMANTIC).row(), search(2.0, POSITIONAL).row()]
    pd.DataFrame(rows).to_csv(theory / "branches.csv", index=False)
    pd.DataFrame([{"alpha_c": 1.25}]).to_csv(theory / "thresholds.csv", index=False)
    (theory / "run.json").write_text(json.dumps({"model": paper_model().record()}))
    return theory


def test_command_writes_its_files_and_resumes(tmp_path, paper_solver):
    runner = CliRunner()
    out = tmp_path / "sim"
    arguments = ["simulate", "--out", str(out), "--d", "12", "--alphas", "1.5,2.0", "--seeds", "2", "--n-test", "100"]
    arguments += ["--theory", str(_theory_dir(tmp_path, paper_solver))]
    result = runner.invoke(_app(), arguments)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "simulations.csv")
    assert len(table) == 2 * 2 * 2 and set(table["seed"]) == {0, 1}
    assert (out / "simulate.png").stat().st_size > 0 and (out / "simulate.pdf").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "complete" and run["seeds"] == [0, 1] and "torch" in run["versions"]
    table.loc[0, "train_loss"] = -1.0  # a resumed run keeps finished blocks
    table.to_csv(out / "simulations.csv", index=False)
    assert runner.invoke(_app(), arguments).exit_code == 0
    assert pd.read_csv(out / "simulations.csv").loc[0, "train_loss"] == -1.0
    other = runner.invoke(_app(), [*arguments[:-2], "--seeds", "3"])
    assert other.exit_code == 2 and "other settings" in other.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--d", "1", "d must be an integer in [2, 100000]"),
        ("--optimiser", "sgd", "optimiser must be one of"),
        ("--omega", "2", "omega"),
    ],
)
def test_command_bad_input_is_one_line(tmp_path, option, value, message):
    result = CliRunner().invoke(_app(), ["simulate", "--out", str(tmp_path / "x"), option, value])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_resumable_writer_skips_finished_blocks(tmp_path):
    seen = []
    simulate_into(tmp_path, TINY, progress=seen.append)
    assert len(seen) == 2
    simulate_into(tmp_path, TINY, progress=seen.append)
    assert len(seen) == 2


# The elastic net (THEORY.md sec. 3) trained by proximal gradient descent, against its theory.
NET = dataclasses.replace(paper_model(), regulariser=ElasticNet(0.005, 0.01))


def test_the_elastic_net_is_simulated_from_its_declaration():
    settings = SimulationSettings.of_model(NET, d=50)
    assert (settings.l1, settings.l2) == (0.005, 0.01)
    assert settings.model == NET
    with pytest.raises(ValueError, match="optimiser must be gd with an l1 term"):
        SimulationSettings.of_model(NET, optimiser="lbfgs").validate()


def test_the_gradient_mapping_vanishes_exactly_where_the_l1_subgradient_holds():
    """``G = (Q - soft(Q - lr g, lr l1)) / lr``: zero at ``Q = 0`` where ``|g| <= l1``, ``g + l1 sign(Q)``
    where ``Q`` stays away from zero, and ``g`` itself without an l1 term."""
    settings = SimulationSettings(model=dataclasses.replace(paper_model(), regulariser=ElasticNet(0.1)), lr=0.5)
    q = torch.tensor([[0.0, 0.0, 2.0, -2.0]], dtype=torch.float64)
    grad = torch.tensor([[0.05, -0.3, 0.2, 0.2]], dtype=torch.float64)
    mapping = gradient_mapping(q, grad, settings)
    torch.testing.assert_close(mapping, torch.tensor([[0.0, -0.2, 0.3, 0.1]], dtype=torch.float64))
    assert gradient_mapping(q, grad, SimulationSettings()) is grad


@pytest.mark.slow
def test_elastic_net_simulations_agree_with_the_theory():
    """The semantic point at alpha = 2, with the bounds of the ridge agreement test (d = 400, six seeds):
    the seed means within four standard errors plus 5 % (losses) or 2/sqrt(d) (overlaps)."""
    from attnphase.saddle.phases.survey import make_solver

    settings = SimulationSettings.of_model(
        NET,
        d=AGREEMENT_D,
        alphas=(2.0,),
        seeds=AGREEMENT_SEEDS,
        inits=("semantic",),
        lr=0.5,
        tolerance=1e-5,
        max_steps=20_000,
        n_test=5000,
    )
    runs = simulate(settings)
    assert runs["converged"].all()
    theory = AnchorSearch(make_solver(NET))(2.0, SEMANTIC).row()
    assert theory["converged"] and theory["branch"] == "semantic"
    assert_runs_agree(runs, theory, ("theta", "q"))


def test_a_theory_point_alone_is_drawn_as_a_bar():
    """At a single alpha each branch's theory is one point, which a line would not show: it is a bar."""
    from attnphase.experiments.simulation_figures import simulation_figure

    branches = pd.DataFrame(
        {
            "alpha": [0.8, 0.8],
            "branch": ["positional", "semantic"],
            "converged": [True, True],
            "train_loss": [0.00183, 0.00201],
            "test_error": [0.00363, 0.00366],
            "m": [0.24, 0.0],
            "theta": [0.0, 0.07],
        }
    )
    runs = pd.DataFrame(
        {
            "alpha": [0.8] * 2,
            "d": [400] * 2,
            "init": ["positional"] * 2,
            "seed": [0, 1],
            "train_loss": [0.0018, 0.0019],
            "test_error": [0.0036, 0.0037],
            "m": [0.25, 0.24],
            "theta": [0.01, -0.01],
        }
    )
    fig = simulation_figure(runs, branches, None, paper_model())
    test_axis = fig.axes[0]
    theory = [line for line in test_axis.get_lines() if str(line.get_label()).startswith("theory")]
    assert len(theory) == 2 and all(line.get_marker() == "_" for line in theory)
