"""Studies built on the simulations: basin classification, finite-size scaling, uninformed starts with Adam."""

from __future__ import annotations

import json
import math
import threading

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from attnphase.experiments.cli import app
from attnphase.experiments.finite_size import fit_power_law, gap_table
from attnphase.experiments.training import branch_overlaps, classify_basin, norm_spread
from attnphase.experiments.uninformed import basin_fractions
from attnphase.replica.declaration import paper_model
from attnphase.replica.variants import variant
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.search.anchors import AnchorSearch

#: The paper's branches (THEORY.md sec. 6), named as its declaration names them.
SEMANTIC = Branch("semantic", ("m",))

OVERLAPS = pd.DataFrame(
    {"alpha": [1.5, 0.5, 3.0], "m_positional": [0.25, 0.22, 0.1], "theta_semantic": [0.14, 1e-14, 0.3]}
)


@pytest.mark.parametrize(
    ("alpha", "d", "m", "theta", "basin"),
    [
        (1.5, 400, 0.25, 0.01, "positional"),
        (1.5, 400, -0.25, -0.01, "positional"),  # Q and -Q are the same minimum
        (1.5, 400, 0.01, 0.14, "semantic"),
        (1.5, 400, -0.01, -0.14, "semantic"),
        (1.5, 400, 0.125, 0.0, "positional"),  # ||m| - m_P| = m_P/2: inside
        (1.5, 400, 0.375, 0.0, "positional"),
        (1.5, 400, 0.12, 0.0, "neither"),
        (1.5, 400, 0.25, 0.049, "positional"),
        (1.5, 400, 0.25, 0.05, "neither"),  # |theta| = 1/sqrt(d): outside
        (1.5, 400, 0.05, 0.14, "neither"),  # |m| = 1/sqrt(d): outside
        (1.5, 400, 0.0, 0.07, "semantic"),  # ||theta| - theta_S| = theta_S/2: inside
        (1.5, 400, 0.0, 0.069, "neither"),
        (1.5, 400, 0.0, 0.0, "neither"),  # agnostic
        (1.5, 400, 0.25, 0.14, "neither"),  # mixed
        (1.5, 16, 0.25, 0.2, "positional"),  # d = 16: |theta| < 1/sqrt(d) = 0.25
        (1.5, 16, 0.0, 0.14, "neither"),  # theta_S < 1/sqrt(d): semantic not resolvable
        (1.5, 15, 0.25, 0.0, "neither"),  # m_P < 1/sqrt(d): positional not resolvable
        (0.5, 400, 0.22, 0.01, "positional"),  # semantic branch collapsed to theta_S = 0
        (0.5, 400, 0.0, 0.0, "neither"),
        (3.0, 100, 0.049, 0.3, "semantic"),  # |m| < m_P/2 = 0.05 binds, not 1/sqrt(d) = 0.1
        (3.0, 100, 0.05, 0.3, "neither"),
        (2.0, 400, 0.25, 0.0, "neither"),  # no theory at this alpha
    ],
)
def test_basin_classification(alpha, d, m, theta, basin):
    row = pd.DataFrame({"alpha": [alpha], "d": [d], "m": [m], "theta": [theta], "seed": [7]})
    classified = classify_basin(row, OVERLAPS)
    assert classified["basin"].tolist() == [basin]
    assert classified["seed"].tolist() == [7]


def test_classification_keeps_row_order_and_index():
    rows = pd.DataFrame(
        {"alpha": [1.5, 1.5, 1.5], "d": [400] * 3, "m": [0.0, 0.25, 0.0], "theta": [0.14, 0.0, 0.0]}, index=[5, 3, 9]
    )
    classified = classify_basin(rows, pd.concat([OVERLAPS, OVERLAPS]).iloc[::-1])
    assert classified["basin"].tolist() == ["semantic", "positional", "neither"]
    assert classified.index.tolist() == [5, 3, 9]


def test_branch_overlaps_interpolate_converged_points_and_are_absent_beyond_a_branch():
    branches = pd.DataFrame(
        {
            "branch": ["positional", "positional", "semantic", "semantic", "semantic"],
            "alpha": [1.0, 2.0, 1.0, 2.0, 1.5],
            "m": [-0.2, -0.3, 0.0, 0.0, 0.0],
            "theta": [0.0, 0.0, 0.1, 0.2, 0.9],
            "converged": [True, True, True, True, False],
        }
    )
    overlaps = branch_overlaps(branches, [1.0, 1.5, 3.0, 0.5])
    np.testing.assert_allclose(overlaps["m_positional"], [0.2, 0.25, np.nan, np.nan])
    np.testing.assert_allclose(overlaps["theta_semantic"], [0.1, 0.15, np.nan, np.nan])
    runs = pd.DataFrame({"alpha": [3.0, 3.0], "d": [400, 400], "m": [0.3, 0.0], "theta": [0.0, 0.2]})
    assert classify_basin(runs, overlaps)["basin"].tolist() == ["neither", "neither"]
    assert branch_overlaps(branches[branches["branch"] == "semantic"], [1.5])["m_positional"].isna().all()


@pytest.mark.parametrize(
    ("m", "theta", "basin"),
    [
        (0.21, 0.13, "mixed"),  # a rank-2 student: one column positional, the other semantic
        (-0.21, 0.07, "mixed"),  # ||theta| - theta_M| = theta_M/2: inside
        (0.21, 0.06, "neither"),
        (0.21, 0.01, "positional"),  # the pure branches first, as without a mixed point
        (0.0, 0.14, "semantic"),
    ],
)
def test_a_run_near_the_mixed_point_is_in_its_basin(m, theta, basin):
    branches = pd.DataFrame(
        {
            "branch": ["positional", "semantic", "mixed"],
            "alpha": [1.5, 1.5, 1.5],
            "m": [0.25, 0.0, 0.21],
            "theta": [0.0, 0.14, 0.13],
            "converged": [True, True, True],
        }
    )
    overlaps = branch_overlaps(branches, [1.5])
    assert overlaps[["m_mixed", "theta_mixed"]].iloc[0].tolist() == pytest.approx([0.21, 0.13])
    run = pd.DataFrame({"alpha": [1.5], "d": [400], "m": [m], "theta": [theta]})
    assert classify_basin(run, overlaps)["basin"].tolist() == [basin]


@pytest.mark.parametrize(
    ("theta_1", "theta_2", "basin"),
    [
        (0.04, 0.035, "positional"),  # |theta| = 0.053: above 1/sqrt(d), below the spread of two entries
        (0.042, 0.04, "neither"),  # |theta| = 0.058 > 1.146/sqrt(d)
        (0.05, 0.0, "positional"),
    ],
)
def test_a_family_of_two_entries_has_the_spread_of_a_norm_of_two(theta_1, theta_2, basin):
    """The rank-2 student's ``|theta| = sqrt(theta_1^2 + theta_2^2)`` fluctuates about a vanishing value
    as ``sigma chi_2``, more than one entry (``sigma chi_1``): its spread at the same confidence is
    ``1.146/sqrt(d)`` (``norm_spread``), not the single entry's ``1/sqrt(d)``."""
    assert norm_spread(400, 1) == pytest.approx(0.05)
    assert norm_spread(400, 2) == pytest.approx(0.05 * 1.1465, rel=1e-4)
    model = variant("rank2").model()
    overlaps = pd.DataFrame({"alpha": [0.8], "m_positional": [0.217], "theta_semantic": [0.044]})
    run = pd.DataFrame(
        {"alpha": [0.8], "d": [400], "m_1": [0.15], "m_2": [0.15], "theta_1": [theta_1], "theta_2": [theta_2]}
    )
    assert classify_basin(run, overlaps, model)["basin"].tolist() == [basin]


def test_power_law_fit_recovers_a_known_rate():
    rng = np.random.default_rng(3)
    d = np.geomspace(50, 5000, 12)
    gap = 0.4 * d**-0.75 * np.exp(0.1 * rng.standard_normal(d.size))
    rate, rate_se, c = fit_power_law(d, gap)
    assert 0.0 < rate_se < 0.1
    assert abs(rate - 0.75) < 3 * rate_se
    assert 0.2 < c < 0.8
    exact = fit_power_law([10, 100, 1000], [2.0, 2.0 / math.sqrt(10), 0.2])
    np.testing.assert_allclose(exact, (0.5, 0.0, 6.324555320336759), atol=1e-12)


def test_power_law_fit_with_too_few_points():
    assert np.isnan(fit_power_law([10, 20], [0.0, 0.1])[0])
    rate, rate_se, _ = fit_power_law([10, 100], [1.0, 0.1])
    assert rate == pytest.approx(1.0) and np.isnan(rate_se)


def test_gap_table_compares_means_with_their_branch():
    runs = pd.DataFrame(
        {
            "d": [10, 10, 10, 10],
            "init": ["positional", "positional", "semantic", "semantic"],
            "train_loss": [1.0, 3.0, 2.0, 2.0],
            "test_error": [2.0, 2.0, 1.0, 5.0],
            "m": [-0.3, 0.1, 0.0, 0.0],
            "theta": [0.0, 0.0, 0.5, 0.7],
        }
    )
    theory = {
        "positional": {"train_loss": 2.5, "test_error": 1.0, "m": 0.1, "theta": 0.0},
        "semantic": {"train_loss": 1.0, "test_error": 2.0, "m": 0.0, "theta": 0.4},
    }
    table = gap_table(runs, theory, paper_model()).set_index(["init", "quantity"])
    assert list(table.index) == [
        ("positional", "train_loss"),
        ("positional", "test_error"),
        ("positional", "m"),
        ("semantic", "train_loss"),
        ("semantic", "test_error"),
        ("semantic", "theta"),
    ]
    np.testing.assert_allclose(table["sim_mean"], [2.0, 2.0, 0.2, 2.0, 3.0, 0.6])
    np.testing.assert_allclose(table["gap"], [0.5, 1.0, 0.1, 1.0, 1.0, 0.2])
    np.testing.assert_allclose(table["sim_se"], [1.0, 0.0, 0.1, 0.0, 2.0, 0.1])


def test_basin_fractions_list_every_basin():
    runs = pd.DataFrame({"alpha": [1.0, 1.0, 1.0, 2.0], "basin": ["positional", "neither", "positional", "semantic"]})
    table = basin_fractions(runs, ("positional", "semantic", "neither")).set_index(["alpha", "basin"])
    assert table.loc[(1.0, "positional"), "count"] == 2 and table.loc[(1.0, "semantic"), "count"] == 0
    assert table.loc[(1.0, "neither"), "fraction"] == pytest.approx(1 / 3)
    assert table.loc[(2.0, "semantic"), "fraction"] == 1.0 and table.loc[(2.0, "positional"), "fraction"] == 0.0
    assert len(table) == 6


def _app() -> typer.Typer:
    return app


@pytest.mark.slow
def test_finite_size_command_writes_its_files(tmp_path, paper_solver, monkeypatch):
    monkeypatch.setattr("attnphase.experiments.finite_size.make_solver", lambda _model: paper_solver)  # the same model
    out = tmp_path / "fs"
    arguments = ["finite-size", "--out", str(out), "--dims", "8,12,16", "--seeds", "2"]
    result = CliRunner().invoke(_app(), [*arguments, "--n-test", "50", "--max-steps", "50"])
    assert result.exit_code == 0, result.output
    gaps = pd.read_csv(out / "finite_size.csv")
    assert set(gaps["d"]) == {8, 12, 16} and len(gaps) == 3 * 2 * 3 and (gaps["runs"] == 2).all()
    theory = AnchorSearch(paper_solver)(1.5, SEMANTIC)
    semantic_theta = gaps[(gaps["init"] == "semantic") & (gaps["quantity"] == "theta")]
    np.testing.assert_allclose(semantic_theta["theory"], theory["theta"], rtol=1e-8)
    np.testing.assert_allclose(semantic_theta["gap"], (semantic_theta["sim_mean"] - theory["theta"]).abs())
    fits = pd.read_csv(out / "finite_size_fit.csv")
    assert len(fits) == 6 and list(fits.columns[:5]) == ["init", "quantity", "rate", "rate_se", "C"]
    assert len(pd.read_csv(out / "finite_size_runs.csv")) == 3 * 2 * 2
    assert (out / "finite_size.png").stat().st_size > 0 and (out / "finite_size.pdf").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["seeds"] == [0, 1] and run["settings"]["dims"] == [8, 12, 16] and "torch" in run["versions"]


def test_uninformed_command_writes_its_files(tmp_path, paper_solver, monkeypatch):
    monkeypatch.setattr("attnphase.experiments.uninformed.make_solver", lambda _model: paper_solver)  # the same model
    out = tmp_path / "un"
    arguments = ["uninformed", "--out", str(out), "--d", "8", "--alphas", "1.0,2.0", "--seeds", "3"]
    result = CliRunner().invoke(_app(), [*arguments, "--n-test", "50", "--max-steps", "40"])
    assert result.exit_code == 0, result.output
    runs = pd.read_csv(out / "uninformed.csv")
    assert len(runs) == 6 and set(runs["init"]) == {"random"} and set(runs["optimiser"]) == {"adam"}
    assert set(runs["basin"]) <= {"positional", "semantic", "mixed", "neither"} and (runs["steps"] <= 40).all()
    fractions = pd.read_csv(out / "uninformed_fractions.csv")
    assert len(fractions) == 2 * 4  # positional, semantic, mixed, neither
    np.testing.assert_allclose(fractions.groupby("alpha")["fraction"].sum(), 1.0)
    assert (fractions.groupby("alpha")["count"].sum() == 3).all()
    assert (out / "uninformed.png").stat().st_size > 0 and (out / "uninformed.pdf").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["seeds"] == [0, 1, 2] and run["settings"]["max_steps"] == 40


@pytest.mark.parametrize(
    ("command", "option", "value", "message"),
    [
        ("finite-size", "--dims", "100", "at least two distinct integers"),
        ("finite-size", "--dims", "100,abc", "comma-separated integers"),
        ("finite-size", "--seeds", "0", "seeds must be"),
        ("finite-size", "--omega", "2", "omega"),
        ("uninformed", "--d", "1", "d must be an integer in [2, 100000]"),
        ("uninformed", "--alphas", "x", "alphas must be"),
        ("uninformed", "--lr", "0", "lr must be in (0, 1]"),
    ],
)
def test_bad_input_is_one_line(tmp_path, command, option, value, message):
    result = CliRunner().invoke(_app(), [command, "--out", str(tmp_path / "x"), option, value])
    assert result.exit_code == 2
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()


# ---------------------------------------------------------------- every study holds, resumes or refuses its directory


class _Killed(Exception):
    """Stands for a kill part-way through a study."""


def _killed_after(blocks: int, monkeypatch) -> None:
    """Make the simulator fail after ``blocks`` more blocks (as a kill would stop it)."""
    from attnphase.experiments import training

    real, calls = training.simulate_block, {"n": 0}

    def block(*args, **kwargs):
        if calls["n"] == blocks:
            raise _Killed
        calls["n"] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(training, "simulate_block", block)


FINITE_SIZE = {"alpha": 1.5, "dims": "8,12", "seeds": 2, "max_steps": 30, "n_test": 50, "progress": False}


@pytest.mark.slow
def test_a_killed_finite_size_study_resumes_and_ends_as_an_uninterrupted_one(tmp_path, paper_solver, monkeypatch):
    from attnphase import paper_model
    from attnphase.experiments.finite_size import finite_size

    monkeypatch.setattr("attnphase.experiments.finite_size.make_solver", lambda _model: paper_solver)
    whole = finite_size(paper_model(), out=tmp_path / "whole", **FINITE_SIZE)
    with monkeypatch.context() as patched:
        _killed_after(3, patched)  # of 2 dims x 2 inits
        with pytest.raises(_Killed):
            finite_size(paper_model(), out=tmp_path / "killed", **FINITE_SIZE)
    kept = pd.read_csv(tmp_path / "killed" / "finite_size_runs.csv")
    assert len(kept) == 3 * 2 and json.loads((tmp_path / "killed" / "run.json").read_text())["status"] == "running"
    with monkeypatch.context() as patched:
        _killed_after(1, patched)  # the rerun trains the one missing block only
        resumed = finite_size(paper_model(), out=tmp_path / "killed", **FINITE_SIZE)
    for name in ("finite_size_runs.csv", "finite_size.csv", "finite_size_fit.csv"):  # all but the wall-clock times
        tables = [pd.read_csv(tmp_path / run / name) for run in ("killed", "whole")]
        tables = [table.drop(columns="seconds", errors="ignore") for table in tables]
        pd.testing.assert_frame_equal(*tables)
    pd.testing.assert_frame_equal(resumed.gaps, whole.gaps)
    assert json.loads((tmp_path / "killed" / "run.json").read_text())["status"] == "complete"


def test_an_uninformed_study_refuses_other_settings_and_a_held_directory(tmp_path, paper_solver, monkeypatch):
    from attnphase import paper_model
    from attnphase.experiments.storage import DirectoryInUseError, exclusive
    from attnphase.experiments.uninformed import uninformed

    monkeypatch.setattr("attnphase.experiments.uninformed.make_solver", lambda _model: paper_solver)
    tiny = {"d": 8, "alphas": "1.0", "seeds": 2, "max_steps": 20, "n_test": 50, "progress": False}
    first = uninformed(paper_model(), out=tmp_path, **tiny)
    _killed_after(0, monkeypatch)  # a rerun of the same settings trains nothing
    again = uninformed(paper_model(), out=tmp_path, **tiny)
    pd.testing.assert_frame_equal(again.runs, first.runs, check_dtype=False)
    with pytest.raises(FileExistsError, match=r"settings.lr differs: 0.02 here, 0.01 in"):
        uninformed(paper_model(), out=tmp_path, **{**tiny, "lr": 0.02})
    assert (tmp_path / "uninformed.png").exists()  # refused: nothing removed
    held, release = threading.Event(), threading.Event()

    def holder() -> None:
        with exclusive(tmp_path):
            held.set()
            release.wait()

    thread = threading.Thread(target=holder)
    thread.start()
    held.wait()
    try:
        with pytest.raises(DirectoryInUseError):
            uninformed(paper_model(), out=tmp_path, **tiny)
    finally:
        release.set()
        thread.join()


def test_a_histogram_run_refuses_other_settings_before_training(tmp_path, monkeypatch):
    from attnphase.experiments import histogram as module

    previous = module.settings_dict(module.HistogramSettings(seed=1))
    (tmp_path / "run.json").write_text(json.dumps({"settings": previous, "status": "complete"}))
    (tmp_path / "histogram.csv").write_text("solution\npositional\n")
    monkeypatch.setattr(module, "run_histogram", lambda *_a, **_k: pytest.fail("trained before refusing"))
    with pytest.raises(FileExistsError, match=r"settings.seed differs: 0 here, 1 in .*--overwrite"):
        module.histogram(seed=0, out=tmp_path, progress=False)
    assert (tmp_path / "histogram.csv").exists()


def test_figures_are_written_atomically(tmp_path, monkeypatch):
    from matplotlib.figure import Figure

    from attnphase.experiments.study import save_figure

    figure = Figure()
    figure.subplots().plot([0, 1])
    save_figure(figure, tmp_path / "plot")
    before = (tmp_path / "plot.png").read_bytes()

    def interrupted(self, handle, **_kwargs):
        handle.write(b"\x89PNG half a figure")
        raise KeyboardInterrupt

    monkeypatch.setattr(Figure, "savefig", interrupted)
    with pytest.raises(KeyboardInterrupt):
        save_figure(figure, tmp_path / "plot")
    assert (tmp_path / "plot.png").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png"]
