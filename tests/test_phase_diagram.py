"""Phase diagrams: one scan per parameter point, gathered; equal to single scans; resumed exactly."""

from __future__ import annotations

import json
import logging
import shutil

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from attnphase import paper_model
from attnphase.experiments import phase_diagram as module
from attnphase.experiments.cli import app
from attnphase.experiments.phase_diagram import phase_diagram, unit_names
from attnphase.experiments.scan import scan
from attnphase.replica.declaration import InputTypeError
from attnphase.saddle.validation import ParameterError

#: Two parameter points whose alpha_c lies inside the grid (about 1.18 and 1.33 at this rule).
OMEGAS = (0.28, 0.32)
ALPHAS = "1.1,1.4"
OPTIONS = {"order": 10, "threshold_order": 0, "stability": False}
TABLES = ("thresholds.csv", "branches.csv", "transitions.csv")


def models():
    return [paper_model(omega=w) for w in OMEGAS]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    out = tmp_path_factory.mktemp("uninterrupted")
    return phase_diagram(models(), ALPHAS, **OPTIONS, out=out, progress=False), out


def test_unit_directories_are_named_by_the_parameters_that_vary():
    assert unit_names(models()) == ["0_omega=0.28", "1_omega=0.32"]
    assert unit_names([paper_model(omega=0.3, sigma=s) for s in (0.5, 0.7)]) == ["0_sigma=0.5", "1_sigma=0.7"]


@pytest.mark.slow
def test_thresholds_equal_those_of_single_scans(uninterrupted):
    result, _ = uninterrupted
    table = result.thresholds
    assert table["omega"].tolist() == list(OMEGAS)
    for omega, row in zip(OMEGAS, table.itertuples(), strict=True):
        single = scan(paper_model(omega=omega), ALPHAS, **OPTIONS, progress=False)
        assert row.alpha_c == pytest.approx(single.alpha_c, rel=1e-10)
        assert row.alpha_c_status == "found" and 1.1 < row.alpha_c < 1.4
        assert (row.alpha_c_low, row.alpha_c_high) == (1.1, 1.4)
        if np.isnan(single.alpha_l):
            assert np.isnan(row.alpha_l) and row.alpha_l_status == "absent in range"
        else:
            assert row.alpha_l == pytest.approx(single.alpha_l, rel=1e-10)
    assert table["alpha_c"].is_monotonic_increasing  # a more positional target is learnt semantically later


def test_gathered_tables_carry_the_parameters(uninterrupted):
    result, out = uninterrupted
    branches = pd.read_csv(out / "branches.csv")
    assert list(branches.columns[:2]) == ["unit", "omega"]
    assert set(branches["omega"]) == set(OMEGAS)
    assert set(branches["branch"]) >= {"positional", "semantic", "agnostic"}
    converged = branches[branches["converged"]]
    assert set(converged["alpha"]) == {1.1, 1.4}
    transitions = pd.read_csv(out / "transitions.csv")
    assert transitions[["omega", "before", "after"]].values.tolist() == [
        [0.28, "positional", "semantic"],
        [0.32, "positional", "semantic"],
    ]
    for name in ("phase_diagram.png", "phase_diagram.pdf", "gap.png", "gap.pdf"):
        assert (out / name).stat().st_size > 0
    record = json.loads((out / "run.json").read_text())
    assert record["status"] == "complete" and set(record["unit_seconds"]) == set(result.names)


@pytest.mark.slow
def test_a_killed_run_resumes_to_identical_tables(uninterrupted, tmp_path, monkeypatch):
    _, reference = uninterrupted
    computed = []
    real_scan = module.scan

    def killed_in_the_second_unit(model, alphas, options=None, **kwargs):
        computed.append(model.teacher.omega)
        if len(computed) == 2:  # a kill part-way through the second scan leaves its directory "running"
            real_scan(model, alphas[:1], options, **kwargs)
            record = json.loads((kwargs["out"] / "run.json").read_text())
            (kwargs["out"] / "run.json").write_text(json.dumps({**record, "status": "running"}))
            raise KeyboardInterrupt
        return real_scan(model, alphas, options, **kwargs)

    monkeypatch.setattr(module, "scan", killed_in_the_second_unit)
    with pytest.raises(KeyboardInterrupt):
        phase_diagram(models(), ALPHAS, **OPTIONS, out=tmp_path, progress=False)
    assert not (tmp_path / "thresholds.csv").exists()
    assert json.loads((tmp_path / "run.json").read_text())["status"] == "running"

    counting = []
    monkeypatch.setattr(module, "scan", lambda model, *a, **k: counting.append(model) or real_scan(model, *a, **k))
    phase_diagram(models(), ALPHAS, **OPTIONS, out=tmp_path, progress=False)
    assert [m.teacher.omega for m in counting] == [OMEGAS[1]]  # the finished unit is read back
    for name in TABLES:
        assert (tmp_path / name).read_text() == (reference / name).read_text(), name


@pytest.mark.slow
def test_a_corrupt_unit_is_computed_again(uninterrupted, tmp_path, caplog):
    _, reference = uninterrupted
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
    table = tmp_path / "units" / "1_omega=0.32" / "branches.csv"
    table.write_text(table.read_text()[:-40])  # cut off mid-line
    with caplog.at_level(logging.WARNING, logger="attnphase"):
        phase_diagram(models(), ALPHAS, **OPTIONS, out=tmp_path, progress=False)
    assert any("branches.csv" in r.getMessage() and "computed again" in r.getMessage() for r in caplog.records)
    for name in TABLES:
        assert (tmp_path / name).read_text() == (reference / name).read_text(), name


def test_the_command_line_reads_a_finished_run_back_and_refuses_other_settings(uninterrupted, tmp_path):
    _, reference = uninterrupted
    shutil.copytree(reference, tmp_path, dirs_exist_ok=True)
    runner = CliRunner()
    args = ["phase-diagram", "--omegas", "0.28,0.32", "--alphas", ALPHAS, "--order", "10", "--no-stability"]
    args += ["--threshold-order", "0"]
    again = runner.invoke(app, [*args, "--jobs", "1", "--out", str(tmp_path)])
    assert again.exit_code == 0, again.output
    assert "alpha_c = 1.1" in again.output and "(found)" in again.output
    for name in TABLES:  # the command line's models and options are the API's: every unit is read back
        assert (tmp_path / name).read_text() == (reference / name).read_text(), name
    other = runner.invoke(app, [*args[:-1], "12", "--out", str(tmp_path)])
    assert other.exit_code == 2
    assert "other settings" in other.output and "threshold_order" in other.output and "--overwrite" in other.output
    assert len(other.output.strip().splitlines()) == 1


@pytest.mark.slow
def test_local_processes_and_a_dask_cluster_agree_with_one_process(uninterrupted, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    _, reference = uninterrupted
    expected = pd.read_csv(reference / "thresholds.csv").iloc[:1]
    first = models()[:1]
    parallel = phase_diagram(first, ALPHAS, **OPTIONS, out=tmp_path / "jobs", jobs=2, progress=False)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=False) as cluster:
        on_dask = phase_diagram(
            first, ALPHAS, **OPTIONS, out=tmp_path / "dask", scheduler=cluster.scheduler_address, progress=False
        )
    for result in (parallel, on_dask):
        table = result.thresholds
        for column in ("alpha_c", "alpha_l"):
            np.testing.assert_allclose(table[column], expected[column], rtol=1e-8)
        assert table["alpha_c_status"].tolist() == expected["alpha_c_status"].tolist()


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"models": paper_model()}, InputTypeError, "models must be a sequence"),
        ({"models": []}, InputTypeError, "non-empty"),
        ({"models": [paper_model(), paper_model(A=((0.3, 0.7), (0.8, 0.2)))], "jobs": 0}, ParameterError, "jobs"),
        ({"models": [paper_model()], "order": 1}, ParameterError, "order"),
        ({"models": [paper_model()], "alphas": "1:0.5:0.1"}, ParameterError, "alphas"),
    ],
)
def test_bad_input_is_refused_before_any_computation(kwargs, error, message, tmp_path):
    with pytest.raises(error, match=message):
        phase_diagram(**kwargs, out=tmp_path / "never")
    assert not (tmp_path / "never").exists()


def test_the_command_line_refuses_a_bad_grid_in_one_line(tmp_path):
    result = CliRunner().invoke(app, ["phase-diagram", "--omegas", "0.1:1.5:0.1", "--out", str(tmp_path / "x")])
    assert result.exit_code == 2
    assert "omegas" in result.output and "[0, 1]" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_a_phase_diagram_under_both_policies_keeps_alpha_c_on_the_global_one(tmp_path):
    """``prox="both"``: every unit is a scan under each policy; the gathered thresholds have a row per unit
    and policy, the global rows equal a global-only diagram's, and the figures draw from them."""
    both = phase_diagram(models(), ALPHAS, **OPTIONS, prox="both", out=tmp_path / "both", progress=False)
    alone = phase_diagram(models(), ALPHAS, **OPTIONS, out=tmp_path / "global", progress=False)
    thresholds = both.thresholds
    assert thresholds.groupby("unit")["prox"].agg(list).tolist() == [["global", "local"]] * len(OMEGAS)
    global_rows = thresholds[thresholds["prox"] == "global"].reset_index(drop=True)
    assert global_rows["alpha_c"].to_numpy() == pytest.approx(alone.thresholds["alpha_c"].to_numpy(), rel=1e-9)
    assert set(both.branches["prox"]) == {"global", "local"}
    assert "local prox" in both.summary() or "(local prox)" in both.summary()
    assert (tmp_path / "both" / "phase_diagram.png").exists()
