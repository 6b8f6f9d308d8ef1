"""The public API: one namespace, one call per study, the same tables as the command line, documented."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
import re
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from matplotlib.figure import Figure
from typer.testing import CliRunner

import attnphase as ap
from attnphase.experiments.cli import app
from attnphase.saddle.points.checks import Assessment, Failure, HessianCheck

SMALL_ALPHAS = "1.9,2.0,2.1"
SMALL_ORDER = 10


def _public_modules() -> list[str]:
    """Every module of the package, those of the stages' subpackages (``saddle.prox``, ...) included."""
    names = ["attnphase"]
    for sub in ("replica", "saddle", "baseline", "experiments"):
        package = importlib.import_module(f"attnphase.{sub}")
        names.append(package.__name__)
        names += [m.name for m in pkgutil.walk_packages(package.__path__, package.__name__ + ".")]
    return names


def _public_objects():
    """Every public function, class, method and property defined in the package's modules."""
    for module_name in _public_modules():
        module = importlib.import_module(module_name)
        yield module_name, module
        for name, obj in vars(module).items():
            if name.startswith("_") or getattr(obj, "__module__", None) != module_name:
                continue
            if inspect.isfunction(obj) or inspect.isclass(obj):
                yield f"{module_name}.{name}", obj
            if inspect.isclass(obj):
                for member in vars(obj):
                    attribute = inspect.getattr_static(obj, member)
                    if (
                        member.startswith("_")
                        or not isinstance(attribute, property | staticmethod | classmethod)
                        and not inspect.isfunction(attribute)
                    ):
                        continue
                    yield f"{module_name}.{name}.{member}", getattr(obj, member)


def test_every_public_object_has_a_docstring():
    missing = [name for name, obj in _public_objects() if not (inspect.getdoc(obj) or "").strip()]
    assert missing == []


def test_the_namespace_exports_what_it_lists_and_each_entry_states_its_science():
    assert ap.__version__ != "unknown"
    for name in ap.__all__:
        obj = getattr(ap, name)
        if name == "__version__":
            continue
        doc = inspect.getdoc(obj) or ""
        assert doc, name
        # the studies and the declaration's entry points cite the mathematics they implement
        studies = {"paper_model", "derive", "scan", "simulate", "finite_size", "uninformed", "histogram", "fixed_point"}
        if name in studies:
            assert re.search(r"THEORY\.md sec\. \d|paper App\. [A-E]", doc), name
    assert set(ap.__all__) <= set(dir(ap))


@pytest.mark.slow
def test_importing_the_namespace_does_not_load_torch():
    code = "import sys, attnphase; assert 'torch' not in sys.modules; attnphase.simulate; assert 'torch' in sys.modules"
    import subprocess
    import sys

    subprocess.run([sys.executable, "-c", code], check=True)


def test_paper_model_takes_the_command_line_names_and_arrays():
    model = ap.paper_model(omega=0.4, sigma=0.7, lam=0.02, A=np.array([[0.3, 0.7], [0.8, 0.2]]))
    assert model.parameters() == {
        "omega": 0.4,
        "A_1_1": 0.3,
        "A_1_2": 0.7,
        "A_2_1": 0.8,
        "A_2_2": 0.2,
        "sigma": pytest.approx(0.7),
        "lambda": 0.02,
    }
    assert model.record()["teacher"]["positional"] == [[0.3, 0.7], [0.8, 0.2]]
    assert model.record() != ap.paper_model().record()


@pytest.fixture(scope="module")
def api_scan() -> ap.ScanResult:
    return ap.scan(ap.paper_model(), SMALL_ALPHAS, order=SMALL_ORDER, progress=False)


@pytest.fixture(scope="module")
def cli_scan(tmp_path_factory):
    out = tmp_path_factory.mktemp("cli-scan")
    result = CliRunner().invoke(app, ["scan", "--out", str(out), "--alphas", SMALL_ALPHAS, "--order", str(SMALL_ORDER)])
    assert result.exit_code == 0, result.output
    return out


@pytest.mark.slow
def test_a_scan_is_one_call_with_tidy_tables(api_scan):
    branches = api_scan.branches
    assert {"positional", "semantic", "agnostic"} <= set(branches["branch"]) <= {*api_scan.solution.traces}
    assert sorted(set(branches["alpha"])) == [1.9, 2.0, 2.1]
    assert branches[branches["branch"] != "mixed"]["converged"].all()
    assert len(api_scan.thresholds) == 1
    assert {"omega", "sigma", "lambda", "alpha_c", "alpha_l", "baseline_test_error"} <= set(api_scan.thresholds)
    minimum = api_scan.global_minimum
    assert list(minimum["alpha"]) == [1.9, 2.0, 2.1]
    by_alpha = branches[branches["converged"]].groupby("alpha")["train_loss"].min()  # over converged points
    np.testing.assert_array_equal(minimum["train_loss"], by_alpha.loc[minimum["alpha"]])
    assert isinstance(api_scan.plot(), Figure)
    # every converged point is assessed: at alpha near 2 (omega = 0.3) both informed branches are
    # minima and the agnostic point is unstable along theta (the semantic branch exists)
    ok = branches[branches["converged"]]
    assert ok["stable"].notna().all() and {"curvature_m", "curvature_theta"} <= set(ok)
    for name, stable in (("positional", True), ("semantic", True), ("agnostic", False)):
        assert (ok.loc[ok["branch"] == name, "stable"] == stable).all(), name
    assert (ok.loc[ok["branch"] == "agnostic", "curvature_theta"] < 0).all()
    assert (ok["stability_status"] == "assessed").all()


def test_the_summary_names_the_converged_points_without_stability(api_scan, monkeypatch):
    assert "no stability" not in api_scan.summary()  # every converged point was assessed
    points = api_scan.points
    first = next(i for i, p in enumerate(points) if p.converged)
    failure = Failure(HessianCheck.NOT_FINITE, "not finite")  # stability_status "hessian: not finite"
    unassessed = replace(points[first], stable=None, assessment=Assessment.FAILED, stability_problem=failure)
    monkeypatch.setattr(
        type(api_scan), "points", property(lambda _: [*points[:first], unassessed, *points[first + 1 :]])
    )
    where = f"{unassessed.branch} at alpha={unassessed.alpha:g}"
    assert f"no stability at 1 converged points ({where}; why: stability_status)" in api_scan.summary()


@pytest.mark.slow
def test_the_command_line_and_the_api_give_identical_tables(api_scan, cli_scan):
    for name, table in api_scan.tables.items():
        written = pd.read_csv(cli_scan / f"{name}.csv")
        assert list(written.columns) == list(table.columns), name
        expected = pd.read_csv(pd.io.common.StringIO(table.to_csv(index=False)))
        pd.testing.assert_frame_equal(written, expected, check_exact=True)


def test_saving_writes_what_the_command_writes(api_scan, cli_scan, tmp_path):
    paths = api_scan.save(tmp_path / "saved")
    written = {p.name for p in paths}
    assert written == {p.name for p in cli_scan.iterdir()}
    for name in ("branches.csv", "thresholds.csv"):
        assert (tmp_path / "saved" / name).read_text() == (cli_scan / name).read_text()
    saved, command = (json.loads((d / "run.json").read_text()) for d in (tmp_path / "saved", cli_scan))
    assert saved.keys() == command.keys()
    assert {k: saved[k] for k in ("model", "options", "seeds", "status")} == {
        k: command[k] for k in ("model", "options", "seeds", "status")
    }


def test_a_fixed_point_is_one_call(api_scan):
    point = ap.fixed_point(ap.paper_model(), 2.0, "semantic", order=SMALL_ORDER)
    row = api_scan.branches.set_index(["branch", "alpha"]).loc[("semantic", 2.0)]
    assert point.converged and point.branch == "semantic"
    assert point.train_loss == pytest.approx(row["train_loss"], rel=1e-7)
    with pytest.raises(ValueError, match="branch must be one of agnostic, semantic, positional, mixed; got 'x'"):
        ap.fixed_point(ap.paper_model(), 2.0, "x")


def test_progress_false_is_silent_and_the_library_prints_nothing(capfd):
    ap.scan(ap.paper_model(), "2.0", order=6, threshold_order=0, stability=False, progress=False)
    captured = capfd.readouterr()
    assert captured.out == "" and captured.err == ""


def test_progress_true_shows_a_bar_on_standard_error(capfd):
    ap.scan(ap.paper_model(), "2.0", order=6, threshold_order=0, stability=False, progress=True)
    captured = capfd.readouterr()
    assert captured.out == "" and "fixed points" in captured.err


@pytest.mark.slow
def test_the_simulation_api_and_command_give_identical_runs(tmp_path, api_scan):
    theory = tmp_path / "theory"
    api_scan.save(theory)
    options = {"d": 12, "alphas": "1.9,2.1", "seeds": 2, "n_test": 100, "max_steps": 200}
    result = ap.simulate(ap.paper_model(), **options, theory=theory, progress=False)
    arguments = ["simulate", "--out", str(tmp_path / "sim"), "--theory", str(theory)]
    for key, value in options.items():
        arguments += [f"--{key.replace('_', '-')}", str(value)]
    command = CliRunner().invoke(app, arguments)
    assert command.exit_code == 0, command.output
    written = pd.read_csv(tmp_path / "sim" / "simulations.csv").drop(columns="seconds")
    expected = pd.read_csv(pd.io.common.StringIO(result.runs.to_csv(index=False)))
    pd.testing.assert_frame_equal(written, expected.drop(columns="seconds"), check_exact=True)
    assert set(result.runs["basin"]) <= {"positional", "semantic", "mixed", "neither"}
    assert isinstance(result.plot(), Figure)


@pytest.mark.slow
def test_the_simulator_trains_another_declaration_and_measures_its_order_parameters():
    """Three tokens, two positional directions, a token of twice the others' covariance (one family of
    ``q, theta``): the runs carry the theory's reduced order parameters by name (the simulator is built
    from the declaration)."""
    from attnphase.experiments.training import SimulationSettings, simulate

    model = ap.AttentionModel(
        tokens=ap.GaussianTokens(variances=((0.25, 0.25, 0.5),)),
        positions=ap.PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=ap.MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
        student=ap.DotProductAttention(),
        regulariser=ap.Ridge(0.01),
    )
    runs = simulate(SimulationSettings(model=model, d=8, alphas=(1.0,), seeds=1, n_test=50, max_steps=50))
    measured = [e.name for e in ap.derive(model).entries if e.family != "V"]
    assert measured == ["q", "m_1", "m_2", "theta"]
    assert list(runs.columns[8 : 8 + len(measured)]) == measured and runs[measured].notna().all().all()


@pytest.mark.slow
def test_a_simulation_saves_the_scan_it_holds_under_theory(tmp_path, api_scan):
    options = {"d": 8, "alphas": [2.0], "seeds": 1, "n_test": 50, "max_steps": 50, "progress": False}
    held = ap.simulate(ap.paper_model(), **options, theory=api_scan)
    held.save(tmp_path / "held")
    assert held.record["theory"] == "theory"
    saved = pd.read_csv(tmp_path / "held" / "theory" / "branches.csv")
    assert saved.equals(pd.read_csv(pd.io.common.StringIO(api_scan.branches.to_csv(index=False))))
    api_scan.save(tmp_path / "scan")
    named = ap.simulate(ap.paper_model(), **options, theory=tmp_path / "scan")
    named.save(tmp_path / "named")
    assert named.record["theory"] == str(tmp_path / "scan") and not (tmp_path / "named" / "theory").exists()
    with pytest.raises(ValueError, match="theory must be a scan's output directory"):
        ap.simulate(ap.paper_model(), **options, theory=tmp_path / "nowhere")
