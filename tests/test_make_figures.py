"""The script that regenerates the full figures: its record of compute time, its threshold check."""

import importlib.util
from pathlib import Path

import pandas as pd
import pytest

SCRIPT = Path(__file__).parents[1] / "docs" / "figures" / "make_figures.py"


@pytest.fixture
def script(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("make_figures", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    monkeypatch.setattr(module, "MINUTES", tmp_path / "minutes.json")
    return module


def test_a_figure_computed_over_several_calls_takes_their_sum(script):
    assert script.spent_minutes("fig14", 90.0, fresh=True, computed=True) == 90.0
    assert script.spent_minutes("fig14", 60.0, fresh=False, computed=True) == 150.0


def test_a_redraw_keeps_the_time_and_fresh_studies_restart_it(script):
    script.spent_minutes("fig2", 4.0, fresh=True, computed=True)
    assert script.spent_minutes("fig2", 0.5, fresh=False, computed=False) == 4.0
    assert script.spent_minutes("fig2", 5.0, fresh=True, computed=True) == 5.0


def test_the_digest_changes_with_a_table_only(script, tmp_path):
    studies = tmp_path / "studies"
    (studies / "scan").mkdir(parents=True)
    (studies / "scan" / "branches.csv").write_text("alpha\n0.1\n")
    before = script.tables_digest(studies)
    (studies / "scan" / "scan.png").write_bytes(b"image")
    assert script.tables_digest(studies) == before
    (studies / "scan" / "branches.csv").write_text("alpha\n0.2\n")
    assert script.tables_digest(studies) != before


def write_thresholds(path, alpha_c, **more):
    path.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"alpha_c": alpha_c, "alpha_l": [1.0] * len(alpha_c), **more}).to_csv(path, index=False)


def test_a_figure_of_several_models_draws_each_models_thresholds(script, tmp_path):
    studies, out = tmp_path / "studies", tmp_path / "out"
    write_thresholds(studies / "paper" / "phase_diagram" / "thresholds.csv", [0.9, 1.2])
    write_thresholds(studies / "rank2" / "phase_diagram" / "thresholds.csv", [0.8, float("nan")])
    drawn = out / "thresholds.csv"
    write_thresholds(drawn, [0.9, 1.2, 0.8, float("nan")], model=["paper"] * 2 + ["rank2"] * 2)
    script.check_thresholds("fig14", out, studies)
    write_thresholds(drawn, [0.9, 1.2, 0.8, 1.0], model=["paper"] * 2 + ["rank2"] * 2)
    with pytest.raises(AssertionError, match="alpha_c differs from .*rank2"):
        script.check_thresholds("fig14", out, studies)


def test_a_figure_of_one_model_draws_its_thresholds(script, tmp_path):
    studies, out = tmp_path / "studies", tmp_path / "out"
    write_thresholds(studies / "phase_diagram" / "thresholds.csv", [0.9, 1.2])
    write_thresholds(out / "thresholds.csv", [0.9, 1.2])
    script.check_thresholds("fig3-right", out, studies)
    write_thresholds(out / "thresholds.csv", [0.9, 1.3])
    with pytest.raises(AssertionError, match="alpha_c differs"):
        script.check_thresholds("fig3-right", out, studies)
