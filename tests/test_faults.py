"""Faults and bad input get one clear answer: a damaged kernel cache is rebuilt, a figure of a degenerate
grid is drawn, a point whose quadrature error is large is flagged, and a theory of another model is
refused."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

import attnphase as ap
from attnphase.experiments.landscape import landscape_figure
from attnphase.experiments.options import ScanOptions
from attnphase.experiments.parsing import UsageError
from attnphase.saddle.points.checks import Check

COMPILE = """
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stdout)
from attnphase.replica.declaration import paper_model
from attnphase.saddle.phases.survey import make_solver
solver = make_solver(paper_model())
print("compiled", solver.problem.compiled.prox is not None)
"""


@pytest.mark.slow
def test_a_damaged_kernel_module_in_the_cache_is_generated_again(tmp_path):
    environment = os.environ | {"ATTNPHASE_CACHE_DIR": str(tmp_path), "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def compile_once() -> str:
        done = subprocess.run(
            [sys.executable, "-c", COMPILE], env=environment, capture_output=True, text=True, timeout=900
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    assert "compiled True" in compile_once()
    (module,) = tmp_path.glob("kernels_*.py")
    text = module.read_text()
    module.write_text(text[: len(text) // 2])  # cut in half, as a full disk or a killed write leaves it
    again = compile_once()
    assert "compiled True" in again and "generated again" in again
    assert module.read_text() == text


def test_a_landscape_whose_converged_nodes_make_no_grid_is_drawn_with_its_fixed_points():
    grid = pd.DataFrame({"m": [0.0, 0.1, 0.2], "theta": [0.0, 0.0, 0.0], "train_loss": [1.0, 0.9, 0.8]})
    grid["converged"] = True
    fixed = pd.DataFrame({"branch": ["agnostic"], "m": [0.0], "theta": [0.0], "train_loss": [1.0], "stable": [True]})
    figure = landscape_figure(grid, fixed, ("m", "theta"), 1e-6)
    assert len(figure.axes) == 1  # no colour bar: no contours


@pytest.mark.slow
def test_a_point_whose_estimated_quadrature_error_is_large_against_its_value_is_flagged():
    model = ap.paper_model()
    crude = ap.fixed_point(model, 1.5, "semantic", ScanOptions(order=12, prune=0.9))
    assert not crude.converged and Check.QUADRATURE in {f.check for f in crude.failures}
    assert crude.train_loss_error_bound > 0.05 * crude.train_loss
    fine = ap.fixed_point(model, 1.5, "semantic", ScanOptions(order=12))
    assert fine.converged and fine.train_loss_error_bound < 0.01 * fine.train_loss


@pytest.mark.slow
def test_a_theory_of_another_model_is_refused_before_any_training(tmp_path):
    options = ScanOptions(order=6, threshold_order=0, stability=False, error_check=0)
    ap.scan(ap.paper_model(omega=0.3), [1.5], options, out=tmp_path / "theory", progress=False)
    with pytest.raises(UsageError, match="omega"):
        ap.simulate(ap.paper_model(omega=0.6), d=20, alphas=[1.5], seeds=1, theory=tmp_path / "theory")
    assert not (tmp_path / "simulations.csv").exists()
    result = ap.simulate(ap.paper_model(omega=0.3), d=20, alphas=[1.5], seeds=1, theory=tmp_path / "theory")
    assert np.isfinite(result.runs["train_loss"]).all()


def test_a_theory_directory_that_records_no_model_is_refused(tmp_path):
    theory = tmp_path / "theory"
    theory.mkdir()
    (theory / "branches.csv").write_text("alpha,branch\n1.5,semantic\n")
    with pytest.raises(UsageError, match="run.json records its model"):
        ap.simulate(ap.paper_model(), d=20, alphas=[1.5], seeds=1, theory=theory, progress=False)
