"""Speed benchmarks: one fixed point, the default scan and the phase diagrams, measured in one run.

    python benchmarks/run.py [--out benchmarks/results/latest.json] [--keep DIR]

Targets (2-core CPU): the default ``attnphase scan`` (four branches, 31 alphas, default quadrature)
under 10 s in process once compiled (``scan_seconds``) and under 30 s as a fresh ``attnphase scan``
process on a fresh machine, derivation and compilation included (``cli_scan_fresh_seconds``: an
empty kernel cache; ``cli_scan_seconds``: the cache warm); ``attnphase phase-diagram --omegas
0:1:0.05`` at its defaults under 120 s (``phase_diagram_21_seconds``, two jobs). Also measured: a
three-omega diagram on a coarser rule and grid (``phase_diagram_seconds``), one fixed point cold
(``anchor_semantic_alpha2_seconds``) and as a continuation step from its neighbour
(``fixed_point_seconds``, with its evaluations), one quick evaluation of the map against the
number of quadrature nodes (``evaluation_seconds_by_order``), assessing one fixed point's stability
(``stability_seconds``, :func:`attnphase.saddle.stability.hessian.assess`), the default scan's time with the
stability of every point over its time without (``stability_overhead``), one quadrature error check
(``error_check_seconds``, :meth:`SaddleMap.train_loss_check`) and the scan's time with the checks over
its time without (``error_check_overhead``, both without stability), the work the scan's points need whatever searches
found them, redone on a fresh solver (``scan_point_work_seconds``: every point verified with every prox
start, corrected for kinks, checked for its quadrature error and assessed for stability; its share of
the scan, ``scan_point_work_share``), and the time of a scan of
the positional and semantic branches without the prox's warm start over the time with it
(``warm_start_speedup``). The JSON records the machine, its load, the settings and every timing.
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from results_file import write_results

from attnphase.baseline.linear import linear_baseline
from attnphase.experiments.phase_diagram import phase_diagram
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.compilation.compiled import compile_system
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess

DEFAULT_ALPHAS = np.round(0.1 + 0.08 * np.arange(31), 10)
TARGET_SCAN_SECONDS = 10.0
TARGET_CLI_SCAN_SECONDS = 30.0
TARGET_PHASE_DIAGRAM_SECONDS = 120.0
PHASE_DIAGRAM_OMEGAS = (0.2, 0.3, 0.4)
PHASE_DIAGRAM_OPTIONS = {"alphas": "0.5:2.0:0.25", "order": 12, "threshold_order": 0, "jobs": 2}
FULL_PHASE_DIAGRAM_COMMAND = ("phase-diagram", "--omegas", "0:1:0.05", "--jobs", "2")
TIMED_ORDERS = (8, 12, 16, 20, 28, 36)


def timed(function):
    start = time.perf_counter()
    value = function()
    return value, time.perf_counter() - start


def point_work_seconds(model, settings: SolverSettings, points) -> float:
    """Seconds of the work every reported point needs whatever search found it, redone on a fresh solver
    (no memory of full proxes) for ``points``: its verification with every prox start, kink correction,
    quadrature error check and test error (:meth:`SaddlePointSolver.observe`), then its stability
    (:func:`assess`, on a renewed copy that shares the verification's full prox, as the scan's does)."""
    solver = make_solver(model, settings)
    branches = {b.name: b for b in solver.branches}
    start = time.perf_counter()
    for p in points:
        assess(solver.renewed(), solver.observe(p.values, p.alpha, branches[p.branch]))
    return time.perf_counter() - start


def warm_start_speedup(model, settings: SolverSettings) -> dict[str, float]:
    """Seconds of tracing the positional and semantic branches over alpha in [1, 2] without and with
    the warm start of the prox (fresh solvers), and their ratio."""
    alphas = np.round(1.0 + 0.1 * np.arange(11), 10)
    seconds = {}
    for warm in (False, True):
        solver = make_solver(model, replace(settings, tuning=settings.tuning.replaced(prox={"warm_start": warm})))
        _, seconds[warm] = timed(
            lambda s=solver: [trace_branch(s, s.branch(n), alphas) for n in ("positional", "semantic")]
        )
    return {
        "trace_seconds_without_warm_start": seconds[False],
        "trace_seconds_with_warm_start": seconds[True],
        "warm_start_speedup": seconds[False] / seconds[True],
    }


def command_seconds(*arguments: str, cache: str | None = None, keep: Path | None = None) -> float:
    """Seconds of ``attnphase ARGUMENTS --out DIR`` as a fresh process, ``DIR`` temporary unless
    ``keep`` names it; with ``cache``, on that (empty) kernel cache directory instead of the user's."""
    environment = dict(os.environ) if cache is None else {**os.environ, "ATTNPHASE_CACHE_DIR": cache}
    with tempfile.TemporaryDirectory() as scratch:
        out = str(keep or scratch)
        command = [sys.executable, "-m", "attnphase", *arguments, "--out", out, *(["--overwrite"] if keep else [])]
        _, seconds = timed(lambda: subprocess.run(command, check=True, capture_output=True, env=environment))
    return seconds


def evaluation_seconds_by_order(model, point) -> dict[str, dict[str, float]]:
    """One quick evaluation of the map at ``point`` on Gauss-Hermite rules of :data:`TIMED_ORDERS`
    (after a first, compiling one): seconds and nodes after pruning."""
    timings = {}
    for order in TIMED_ORDERS:
        solver = make_solver(model, SolverSettings(quadrature=GaussHermite(order)))
        solver.problem.map.evaluate(point.values, point.alpha, Effort.QUICK)
        _, seconds = timed(lambda s=solver: s.problem.map.evaluate(point.values, point.alpha, Effort.QUICK))
        timings[str(order)] = {"nodes": int(GaussHermite(order).size(4)), "seconds": seconds}
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "latest.json")
    parser.add_argument("--keep", type=Path, help="directory to keep the 21-omega phase diagram's output in")
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
    _, results["jit_warmup_seconds"] = timed(lambda: solver.problem.map.evaluate(generic_guess(solver), 1.0))
    semantic = solver.branch("semantic")
    anchor, results["anchor_semantic_alpha2_seconds"] = timed(lambda: AnchorSearch(solver)(2.0, semantic))
    point, seconds = timed(lambda: solver.solve(2.1, semantic, initial=anchor.values)[0])
    results["fixed_point_seconds"] = seconds
    results["fixed_point_evaluations"] = point.iterations
    _, results["evaluation_seconds"] = timed(lambda: solver.problem.map.evaluate(point.values, 2.1, Effort.QUICK))
    results["evaluation_seconds_by_order"] = evaluation_seconds_by_order(model, point)
    _, results["stability_seconds"] = timed(lambda: assess(solver, point))
    observables = solver.problem.observables
    _, results["error_check_seconds"] = timed(lambda: observables.train_loss_check(point.values, point.conjugates, 2.1))
    reference_error = linear_baseline(solver.problem.compiled.system).test_error
    scan, seconds = timed(lambda: survey(make_solver(model, settings), DEFAULT_ALPHAS, reference_error))
    results["scan_seconds"] = seconds
    results["scan_points"] = len(scan.points())
    results["scan_target_seconds"] = TARGET_SCAN_SECONDS
    results["scan_within_target"] = seconds <= TARGET_SCAN_SECONDS
    results["alpha_c"] = scan.alpha_c.value
    results["alpha_l"] = scan.alpha_l.value
    results["scan_point_work_seconds"] = point_work_seconds(model, settings, scan.points())
    results["scan_point_work_share"] = results["scan_point_work_seconds"] / results["scan_seconds"]
    _, seconds = timed(lambda: survey(make_solver(model, settings), DEFAULT_ALPHAS, reference_error, stability=False))
    results["scan_without_stability_seconds"] = seconds
    results["stability_overhead"] = results["scan_seconds"] / seconds
    unchecked = make_solver(model, replace(settings, error_check=None))
    _, seconds = timed(lambda: survey(unchecked, DEFAULT_ALPHAS, reference_error, stability=False))
    results["scan_without_stability_and_error_check_seconds"] = seconds
    results["error_check_overhead"] = results["scan_without_stability_seconds"] / seconds
    results["cli_scan_seconds"] = command_seconds("scan")
    with tempfile.TemporaryDirectory() as cache:
        results["cli_scan_fresh_seconds"] = command_seconds("scan", cache=cache)
    results["cli_scan_target_seconds"] = TARGET_CLI_SCAN_SECONDS
    results["cli_scan_within_target"] = results["cli_scan_fresh_seconds"] <= TARGET_CLI_SCAN_SECONDS
    results.update(warm_start_speedup(model, settings))
    models = [paper_model(omega=w) for w in PHASE_DIAGRAM_OMEGAS]
    diagram, seconds = timed(lambda: phase_diagram(models, **PHASE_DIAGRAM_OPTIONS, progress=False))
    results["phase_diagram"] = {"omegas": PHASE_DIAGRAM_OMEGAS, **PHASE_DIAGRAM_OPTIONS}
    results["phase_diagram_seconds"] = seconds
    results["phase_diagram_alpha_c"] = diagram.thresholds["alpha_c"].tolist()
    results["phase_diagram_21_command"] = " ".join(["attnphase", *FULL_PHASE_DIAGRAM_COMMAND])
    results["phase_diagram_21_seconds"] = command_seconds(*FULL_PHASE_DIAGRAM_COMMAND, keep=args.keep)
    results["phase_diagram_target_seconds"] = TARGET_PHASE_DIAGRAM_SECONDS
    results["phase_diagram_within_target"] = results["phase_diagram_21_seconds"] <= TARGET_PHASE_DIAGRAM_SECONDS
    results["load_average_at_end"] = os.getloadavg()
    print(write_results(results, args.out), end="")


if __name__ == "__main__":
    main()
