"""The command line: bad input, a small end-to-end scan, and resuming an interrupted scan."""

from __future__ import annotations

import json
import logging
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from attnphase.experiments.cli import app
from attnphase.saddle.phases import survey as survey_module

runner = CliRunner()
SMALL = ["--alphas", "1.9,2.0,2.1", "--order", "10", "--no-stability"]


def test_help_lists_the_commands():
    result = runner.invoke(app, ["--help"])
    assert result.exit_code == 0
    assert "scan" in result.output and "equations" in result.output


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--omega", "1.5", "omega must be in [0, 1]"),
        ("--sigma", "0", "sigma must be in [0.001, 1000]"),
        ("--lambda", "-0.1", "lambda must be in [0, 1000]"),
        ("--A", "0.5,0.4,0.4,0.6", "A must be row-stochastic"),
        ("--A", "1,0,0", "A must be a square matrix"),
        ("--alphas", "0:1:0.1", "alphas must be in [1e-06, 10000]; got 0.0"),
        ("--alphas", "-1,2", "alphas must be in [1e-06, 10000]; got -1.0"),
        ("--alphas", "a:b", "alphas must be start:stop:step"),
        ("--order", "1", "order must be an integer in [2, 64]"),
        ("--quadrature", "simpson", "quadrature must be one of"),
    ],
)
def test_bad_input_is_one_readable_line(tmp_path, option, value, message):
    result = runner.invoke(app, ["scan", "--out", str(tmp_path / "x"), option, value])
    assert result.exit_code == 2
    assert message in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


@pytest.mark.slow
def test_bad_input_from_a_real_process_exits_2_without_traceback(tmp_path):
    process = subprocess.run(
        [sys.executable, "-m", "attnphase", "scan", "--omega", "2", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert process.returncode == 2
    assert process.stderr.strip() == "error: omega must be in [0, 1]; got 2.0"
    assert "Traceback" not in process.stdout + process.stderr


def test_equations_prints_the_whole_system_as_text_and_latex():
    latex = runner.invoke(app, ["equations", "--latex"])
    assert latex.exit_code == 0
    assert "m_{2} &= - m" in latex.output and r"\hat{V} &= 2 \alpha \mathbb{E}_{\xi,\eta}" in latex.output
    assert latex.output.count(r"\begin{align*}") == latex.output.count(r"\end{align*}") == 9
    assert "E_d" not in latex.output
    text = runner.invoke(app, ["equations", "--omega", "0.4"])
    assert text.exit_code == 0
    assert "m_2 = -m" in text.output and "E[" in text.output and "omega = 0.4" in text.output


@pytest.fixture(scope="module")
def small_scan(tmp_path_factory):
    out = tmp_path_factory.mktemp("scan")
    result = runner.invoke(app, ["scan", "--out", str(out), *SMALL])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_scan_writes_tidy_tables_and_figures(small_scan):
    branches = pd.read_csv(small_scan / "branches.csv")
    for column in (
        "alpha",
        "branch",
        "q",
        "m",
        "V",
        "theta",
        "qhat",
        "mhat",
        "Vhat",
        "thetahat",
        "train_loss",
        "test_error",
        "converged",
        "residual",
        "iterations",
    ):
        assert column in branches.columns
    labels = set(branches["branch"])
    assert {"positional", "semantic", "agnostic"} <= labels <= {"positional", "semantic", "agnostic", "mixed"}
    assert sorted(set(branches["alpha"])) == [1.9, 2.0, 2.1]
    transitions = pd.read_csv(small_scan / "transitions.csv")
    assert list(transitions.columns) == ["below", "above", "before", "after", "prox"]
    assert (branches["prox"] == "global").all()
    thresholds = pd.read_csv(small_scan / "thresholds.csv")
    for column in ("omega", "sigma", "lambda", "alpha_c", "alpha_l", "baseline_test_error", "prox"):
        assert column in thresholds.columns
    for name in ("scan.png", "scan.pdf"):
        assert (small_scan / name).stat().st_size > 10_000
    run = json.loads((small_scan / "run.json").read_text())
    assert run["status"] == "complete" and run["seeds"] == {"prox": 0, "quadrature": 0, "error_check": 0}


@pytest.fixture
def traced(monkeypatch) -> list[str]:
    """The names of the branches traced (not read back) by the scans of a test."""
    names: list[str] = []

    class Counting(survey_module.BranchTracer):
        def trace(self, alphas):
            names.append(self.branch.name)
            return super().trace(alphas)

    monkeypatch.setattr(survey_module, "BranchTracer", Counting)
    return names


def _copy(scan: Path, to: Path) -> Path:
    shutil.copytree(scan, to)
    return to


def _same_tables(one: Path, other: Path) -> bool:
    return all((one / n).read_text() == (other / n).read_text() for n in ("branches.csv", "thresholds.csv"))


def test_rerunning_a_finished_scan_traces_nothing_again(small_scan, tmp_path, traced):
    out = _copy(small_scan, tmp_path / "scan")
    assert runner.invoke(app, ["scan", "--out", str(out), *SMALL]).exit_code == 0
    assert traced == [] and _same_tables(out, small_scan)


@pytest.mark.slow
def test_a_rerun_traces_again_only_the_branch_that_was_not_finished(small_scan, tmp_path, traced):
    out = _copy(small_scan, tmp_path / "scan")
    run = json.loads((out / "run.json").read_text())
    for record in ("branch_ends", "anchors", "traced_points"):
        del run[record]["semantic"]
    (out / "run.json").write_text(json.dumps({**run, "status": "running"}))
    table = pd.read_csv(out / "branches.csv")
    part = table[(table["branch"] != "semantic") | (table["alpha"] == 2.1)]  # as if stopped part-way through it
    part.to_csv(out / "branches.csv", index=False)
    assert runner.invoke(app, ["scan", "--out", str(out), *SMALL]).exit_code == 0
    assert traced == ["semantic"] and _same_tables(out, small_scan)


@pytest.mark.slow
def test_a_finished_trace_whose_points_the_table_lacks_is_traced_again(small_scan, tmp_path, traced, caplog):
    out = _copy(small_scan, tmp_path / "scan")
    table = pd.read_csv(out / "branches.csv")
    table[(table["branch"] != "positional") | (table["alpha"] != 2.1)].to_csv(out / "branches.csv", index=False)
    with caplog.at_level(logging.WARNING, logger="attnphase"):
        assert runner.invoke(app, ["scan", "--out", str(out), *SMALL]).exit_code == 0
    assert traced == ["positional"] and _same_tables(out, small_scan)
    assert any("does not match the finished positional trace" in r.getMessage() for r in caplog.records)


def test_a_scan_with_other_settings_needs_overwrite(small_scan):
    result = runner.invoke(app, ["scan", "--out", str(small_scan), "--omega", "0.4", *SMALL])
    assert result.exit_code == 2
    assert "other settings" in result.output


@pytest.mark.slow
def test_a_scan_on_another_prune_is_another_scan_and_its_tables_name_the_rule(small_scan, tmp_path):
    refused = runner.invoke(app, ["scan", "--out", str(small_scan), "--prune", "1e-6", *SMALL])
    assert refused.exit_code == 2
    assert "other settings" in refused.output
    out = tmp_path / "pruned"
    tiny = ["--alphas", "2.0", "--order", "6", "--threshold-order", "0", "--no-stability", "--error-check", "0"]
    result = runner.invoke(app, ["scan", "--out", str(out), "--prune", "1e-6", *tiny])
    assert result.exit_code == 0, result.output
    assert set(pd.read_csv(out / "branches.csv")["quadrature"]) == {"gauss-hermite-6-prune1e-06"}
    assert json.loads((out / "run.json").read_text())["options"]["prune"] == 1e-6
