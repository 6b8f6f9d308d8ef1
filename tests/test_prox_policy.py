"""The prox policies (THEORY.md sec. 12): the local policy's minimiser against the global one at every
node, its fixed points, where the two differ, and the choice as an option of every study."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

import attnphase as ap
from attnphase.experiments.cli import app
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import ProxChoice, disagreement_weight, make_policy
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.validation import ParameterError


def _solver(omega: float, prox: str = "global"):
    model = ap.paper_model(omega=omega)
    settings = dataclasses.replace(ap.ScanOptions(prox=prox).settings(model), threshold_quadrature=None)
    return make_solver(model, settings)


def _both_proxes(solver, params):
    """The envelope at the global and at the local policy's prox on the solver's rule, and at z = omega."""
    problem = solver.problem
    kernel, nodes = problem.engine.kernel, problem.map.nodes
    values = {}
    for choice in ProxChoice:
        policy = make_policy(choice, kernel, problem.geometry.largest_response, kernel.tuning, 0)
        values[choice] = problem.engine.full_on(nodes, params, policy).value
    point = problem.geometry.kernel_point(params)
    omega = kernel.declared_starts(nodes, point, first=1)[0]
    return values[ProxChoice.GLOBAL], values[ProxChoice.LOCAL], kernel.envelope(point)(omega, nodes)


def test_the_disagreement_counts_distinct_minima_and_not_ties():
    weights = np.array([0.5, 0.25, 0.125, 0.125])
    lowest = np.array([1.0, -2.0, 3.0, 0.5])
    assert disagreement_weight(weights, lowest.copy(), lowest) == 0.0
    assert disagreement_weight(weights, lowest + np.array([0, 1e-12, 0, 0]), lowest) == 0.0  # rounding: a tie
    assert disagreement_weight(weights, lowest + np.array([0, 0.1, 0, 0]), lowest) == pytest.approx(0.25)
    assert disagreement_weight(weights, lowest + np.array([0, 0, np.nan, 0]), lowest) == pytest.approx(0.125)


@pytest.mark.parametrize(("omega", "alpha", "branch"), [(0.2, 1.4, "positional"), (0.3, 1.0, "agnostic")])
def test_the_local_minimiser_lies_between_the_global_minimum_and_its_start(omega, alpha, branch):
    """At every node the descent from the cavity mean ends no higher than it started and no lower than the
    global minimum; at the global policy's agnostic point it ends higher on a share of the weight."""
    solver = _solver(omega)
    point = ap.fixed_point(ap.paper_model(omega=omega), alpha, branch)
    assert point.converged and point.branch == branch
    lowest, local, start = _both_proxes(solver, point.values)
    scale = 1e-9 * (1 + np.abs(lowest))
    assert np.all(local >= lowest - scale) and np.all(local <= start + scale)
    share = disagreement_weight(solver.problem.map.weights, local, lowest)
    assert share == pytest.approx(point.prox_disagreement, rel=1e-6, abs=1e-12)
    assert share > 1e-3 if branch == "agnostic" else share < 1e-2


def test_a_local_fixed_point_solves_its_own_equations_and_is_assessed():
    """Away from the default (omega 0.4): the local policy's positional point converges, is labelled with
    its policy, lies within its disagreement share of the global point, and has its Hessian stability
    and replica symmetry assessed."""
    model = ap.paper_model(omega=0.4)
    local = ap.fixed_point(model, 1.0, "positional", prox="local")
    global_ = ap.fixed_point(model, 1.0, "positional")
    assert local.converged and local.branch == "positional" and (local.prox, global_.prox) == ("local", "global")
    assert local.prox_disagreement < 1e-2
    assert local["m"] == pytest.approx(global_["m"], abs=1e-2)
    assessed = assess(_solver(0.4, "local"), local)
    assert assessed.stable is not None and np.isfinite(assessed.replicon_smooth)
    assert assessed.row()["prox"] == "local"


def test_the_local_agnostic_point_lies_above_the_global_one():
    """At omega 0.3, alpha 1 the descent from the cavity mean misses the global minimiser on about 1 % of
    the weight at the agnostic point: its fixed point has a higher training loss."""
    model = ap.paper_model(omega=0.3)
    local = ap.fixed_point(model, 1.0, "agnostic", prox="local")
    global_ = ap.fixed_point(model, 1.0, "agnostic")
    assert local.converged and global_.converged
    assert local.train_loss > global_.train_loss * 1.005
    assert 1e-3 < local.prox_disagreement < 0.1


def test_a_bad_prox_is_named():
    with pytest.raises(ParameterError, match="prox must be one of global, local, both"):
        ap.ScanOptions(prox="nearest")
    with pytest.raises(ParameterError, match="prox"):
        ap.ScanOptions(prox="both").settings(ap.paper_model())
    with pytest.raises(ParameterError, match="prox"):
        ap.SolverSettings(prox="both")


def test_a_scan_under_both_policies_writes_each_and_resumes(tmp_path):
    """``attnphase scan --prox both``: a complete scan per policy in its subdirectory, the gathered tables
    with a ``prox`` column (one thresholds row per policy, the global one first), and a rerun that reads
    every part back."""
    from typer.testing import CliRunner

    out = tmp_path / "both"
    command = ["scan", "--omega", "0.4", "--alphas", "1.0,1.6", "--prox", "both", "--no-stability"]
    command += ["--error-check", "0", "--out", str(out)]
    first = CliRunner().invoke(app, command)
    assert first.exit_code == 0, first.output
    assert {"global", "local", "branches.csv", "scan.png"} <= {p.name for p in out.iterdir()}
    branches = pd.read_csv(out / "branches.csv")
    assert set(branches["prox"]) == {"global", "local"}
    assert branches.groupby("prox").size()["local"] == len(pd.read_csv(out / "local" / "branches.csv"))
    thresholds = pd.read_csv(out / "thresholds.csv")
    assert thresholds["prox"].tolist() == ["global", "local"]
    again = CliRunner().invoke(app, command)
    assert again.exit_code == 0, again.output
    pd.testing.assert_frame_equal(pd.read_csv(out / "branches.csv"), branches)
