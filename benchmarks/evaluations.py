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
  (:func:`attnphase.saddle.search.rays.along_ray`), which meets no semantic point (the semantic
  branch starts near alpha = 0.74), on the default rule.
"""

from __future__ import annotations

import argparse
import os
import time
import weakref
from collections import Counter
from pathlib import Path

import numba
import numpy as np
from results_file import write_results

from attnphase.replica.declaration import paper_model
from attnphase.saddle.equations.problem import Problem
from attnphase.saddle.equations.saddle_map import SaddleMap
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.search.rays import along_ray
from attnphase.saddle.settings import SolverSettings

SCAN_ALPHAS = np.round(0.5 + 0.25 * np.arange(9), 10)


class EvaluationCounter:
    """Counts and CPU seconds of :meth:`SaddleMap.evaluate` by rule order and kind, and of the
    passes that integrate the map's Jacobian (:meth:`SaddleMap.expectation_jacobian`). A map knows its
    nodes, not its rule: the order of each map's rule is noted where its problem makes it."""

    def __init__(self) -> None:
        self.counts: Counter[str] = Counter()
        self.seconds: Counter[str] = Counter()
        self._evaluate = SaddleMap.evaluate
        self._jacobian = SaddleMap.expectation_jacobian
        self._make_map = Problem._map
        self._orders: weakref.WeakKeyDictionary[SaddleMap, int] = weakref.WeakKeyDictionary()

    def _counted(self, key: str, function, *args):
        start = time.process_time()
        try:
            return function(*args)
        finally:
            self.counts[key] += 1
            self.seconds[key] += time.process_time() - start

    def __enter__(self) -> EvaluationCounter:
        counter = self

        def make_map(compiled, settings, *rest):
            made = counter._make_map(compiled, settings, *rest)
            counter._orders[made] = settings.quadrature.order
            return made

        def evaluate(saddle_map, params, alpha, effort=Effort.FULL, around=None):
            kind = "thorough" if effort is Effort.FULL else "quick"
            key = f"order {counter._orders[saddle_map]}, {kind}"
            return counter._counted(key, counter._evaluate, saddle_map, params, alpha, effort, around)

        def expectation_jacobian(saddle_map, ev):
            key = f"order {counter._orders[saddle_map]}, jacobian"
            return counter._counted(key, counter._jacobian, saddle_map, ev)

        Problem._map = staticmethod(make_map)
        SaddleMap.evaluate = evaluate
        SaddleMap.expectation_jacobian = expectation_jacobian
        return self

    def __exit__(self, *_exc) -> None:
        Problem._map = staticmethod(self._make_map)
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
    solver.problem.map.evaluate(generic_guess(solver), 1.0)  # compile outside the count
    counter.reset()
    traces: dict[str, object] = {}

    def on_trace(trace) -> None:
        traces[trace.branch] = counter.snapshot()
        counter.reset()

    start = time.perf_counter()
    scan = survey(solver, SCAN_ALPHAS, reference_error=0.5, on_trace=on_trace, stability=False)
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
    search = AnchorSearch(solver)
    agnostic = search(0.6, solver.branch("agnostic"))
    counter.reset()
    start = time.perf_counter()
    met = along_ray(search, agnostic, "theta", solver.branch("semantic"))
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
