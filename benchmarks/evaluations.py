"""Where a scan's work goes: evaluations of the saddle-point map per branch, rule and kind.

    python benchmarks/evaluations.py [--out benchmarks/results/evaluations.json]

Counts are independent of the machine's load, unlike timings, so they compare code versions run
on a shared machine. Every evaluation of ``F`` (:meth:`SaddleMap.evaluate`) is counted
by the Gauss-Hermite order of the solver making it (the scan's rule and the coarser rules its
anchors and rays are searched on) and by kind (``quick``: the two ``+-omega`` prox starts and the
warm start, inside root searches; ``thorough``: every prox start, to verify a point; ``jacobian``: a
pass over the nodes integrating the map's Jacobian at an evaluation's prox), with its
process CPU time (numba on one thread, so the CPU time is the work done). Two measurements:

- ``scan``: every branch of the paper's model at omega = 0.35 over alpha = 0.5, 0.75, ..., 2.5 on
  Gauss-Hermite 12, without stability (the tutorial's scan), per trace;
- ``ray``: the ray from the agnostic point at omega = 0.3, alpha = 0.6 along theta
  (:func:`attnphase.saddle.switching.along_ray`), which meets no semantic point (the semantic
  branch starts near alpha = 0.74), on the default rule.
"""

from __future__ import annotations

import argparse
import os
import time
from collections import Counter
from pathlib import Path

import numba
import numpy as np
from results_file import write_results

from attnphase.replica.declaration import paper_model
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.saddle_map import SaddleMap
from attnphase.saddle.scan import make_solver, run_scan
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.switching import along_ray

SCAN_ALPHAS = np.round(0.5 + 0.25 * np.arange(9), 10)


class EvaluationCounter:
    """Counts and CPU seconds of :meth:`SaddleMap.evaluate` by rule order and kind, and of the
    passes that integrate the map's Jacobian (:meth:`SaddleMap.expectation_jacobian`)."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self._evaluate = SaddleMap.evaluate
        self._jacobian = SaddleMap.expectation_jacobian

    def _counted(self, key: str, function, *args):
        start = time.process_time()
        try:
            return function(*args)
        finally:
            self.counts[key] += 1
            self.seconds[key] += time.process_time() - start

    def __enter__(self) -> EvaluationCounter:
        counter = self

        def evaluate(saddle_map, params, alpha, thorough=True):
            key = f"order {saddle_map.settings.quadrature.order}, {'thorough' if thorough else 'quick'}"
            return counter._counted(key, counter._evaluate, saddle_map, params, alpha, thorough)

        def expectation_jacobian(saddle_map, ev):
            key = f"order {saddle_map.settings.quadrature.order}, jacobian"
            return counter._counted(key, counter._jacobian, saddle_map, ev)

        SaddleMap.evaluate = evaluate
        SaddleMap.expectation_jacobian = expectation_jacobian
        return self

    def __exit__(self, *_exc) -> None:
        SaddleMap.evaluate = self._evaluate
        SaddleMap.expectation_jacobian = self._jacobian

    def snapshot(self) -> dict[str, object]:
        """The counts and CPU seconds so far, and their totals."""
        return {
            "evaluations": dict(sorted(self.counts.items())),
            "cpu_seconds": {k: round(v, 2) for k, v in sorted(self.seconds.items())},
            "total_evaluations": sum(self.counts.values()),
            "total_cpu_seconds": round(sum(self.seconds.values()), 2),
        }

    def reset(self) -> None:
        self.counts.clear()
        self.seconds.clear()


def scan_evaluations(counter: EvaluationCounter) -> dict[str, object]:
    """The tutorial's scan, per branch trace (module docstring)."""
    settings = SolverSettings(quadrature=GaussHermite(12), test_quadrature=GaussHermite(12), threshold_quadrature=None)
    solver = make_solver(paper_model(omega=0.35), settings)
    solver.map.evaluate(solver.generic_guess(), 1.0)  # compile outside the count
    counter.reset()
    traces: dict[str, object] = {}

    def on_trace(trace) -> None:
        traces[trace.branch] = counter.snapshot()
        counter.reset()

    start = time.perf_counter()
    scan = run_scan(solver, SCAN_ALPHAS, reference_error=0.5, on_trace=on_trace, stability=False)
    return {
        "omega": 0.35,
        "alphas": SCAN_ALPHAS.tolist(),
        "quadrature": settings.quadrature.label,
        "wall_seconds": time.perf_counter() - start,
        "points": len(scan.points()),
        "converged": sum(p.converged for p in scan.points()),
        "alpha_c": scan.alpha_c.value,
        "traces": traces,
    }


def ray_evaluations(counter: EvaluationCounter) -> dict[str, object]:
    """The ray that meets nothing (module docstring)."""
    solver = make_solver(paper_model(omega=0.3), SolverSettings())
    agnostic = solver.anchor(0.6, solver.branch("agnostic"))
    counter.reset()
    start = time.perf_counter()
    met = along_ray(solver, agnostic, "theta", solver.branch("semantic"))
    return {
        "omega": 0.3,
        "alpha": 0.6,
        "from": agnostic.branch,
        "family": "theta",
        "met": None if met is None else met.branch,
        "wall_seconds": time.perf_counter() - start,
        **counter.snapshot(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "evaluations.json")
    args = parser.parse_args()
    numba.set_num_threads(1)
    with EvaluationCounter() as counter:
        results = {"numba_threads": numba.get_num_threads(), "load_average_at_start": os.getloadavg()}
        results["ray"] = ray_evaluations(counter)
        results["scan"] = scan_evaluations(counter)
        results["load_average_at_end"] = os.getloadavg()
    print(write_results(results, args.out), end="")


if __name__ == "__main__":
    main()
