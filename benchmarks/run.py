"""Speed benchmarks: one fixed point and the default scan, measured in one run.

    python benchmarks/run.py [--out benchmarks/results/latest.json]

Targets (2-core CPU): the default ``attnphase scan`` (three branches, 31 alphas each, default
quadrature) under 60 s, measured in process once compiled (``scan_seconds``) and end to end
as a fresh ``attnphase scan`` process, derivation and compilation included
(``cli_scan_seconds``). The JSON records the machine, its load, the settings and every timing.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from attnphase.baseline.linear import linear_baseline
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.compiled import compile_system
from attnphase.saddle.fixed_point import SolverSettings
from attnphase.saddle.scan import make_solver, run_scan

DEFAULT_ALPHAS = np.round(0.1 + 0.08 * np.arange(31), 10)
TARGET_SCAN_SECONDS = 60.0


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "latest.json")
    args = parser.parse_args()
    model = paper_model()
    settings = SolverSettings()
    results: dict[str, object] = {
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "load_average_at_start": os.getloadavg(),
        "quadrature": settings.quadrature.label,
    }
    system, results["derive_seconds"] = timed(lambda: derive(model))
    _, results["compile_seconds"] = timed(lambda: compile_system(system))
    solver = make_solver(model, settings)
    _, results["jit_warmup_seconds"] = timed(lambda: solver.evaluate(solver.generic_guess(), 1.0))
    semantic = solver.branch("semantic")
    anchor, results["anchor_semantic_alpha2_seconds"] = timed(lambda: solver.anchor(2.0, semantic))
    point, seconds = timed(lambda: solver.solve(2.1, semantic, initial=anchor.values)[0])
    results["fixed_point_seconds"] = seconds
    results["fixed_point_evaluations"] = point.iterations
    _, results["evaluation_seconds"] = timed(lambda: solver.evaluate(point.values, 2.1, thorough=False))
    reference_error = linear_baseline(solver.compiled.system).test_error
    scan, seconds = timed(lambda: run_scan(make_solver(model, settings), DEFAULT_ALPHAS, reference_error))
    results["scan_seconds"] = seconds
    results["scan_points"] = len(scan.points())
    results["scan_target_seconds"] = TARGET_SCAN_SECONDS
    results["scan_within_target"] = seconds <= TARGET_SCAN_SECONDS
    results["alpha_c"] = scan.alpha_c.value
    results["alpha_l"] = scan.alpha_l.value
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, "-m", "attnphase", "scan", "--out", out]
        _, results["cli_scan_seconds"] = timed(lambda: subprocess.run(command, check=True, capture_output=True))
    results["cli_scan_within_target"] = results["cli_scan_seconds"] <= TARGET_SCAN_SECONDS
    results["load_average_at_end"] = os.getloadavg()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
