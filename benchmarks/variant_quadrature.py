"""The quadrature error of a variant's reported training loss, at its fixed points.

    python benchmarks/variant_quadrature.py NAME [BRANCH:ALPHA ...] [--axes] [--out FILE]

(``FILE``: ``benchmarks/results/variant_quadrature.json`` by default.)

At each ``BRANCH:ALPHA`` (default ``semantic:1.5 positional:1.0``) the fixed point of the shipped variant
``NAME`` is found on the default rule (Gauss-Hermite 20 with the kink correction) and its eps_t set
against ``-Phi`` at the same point on finer rules: Gauss-Hermite 32 and 40, and scrambled Sobol 2^16
with four independent seeds (mean and standard error). ``Phi`` is stationary at a fixed point, so
these differ from the eps_t of fixed points solved on the finer rules by second order only
(``SaddleMap.free_entropy``). The relative gap to the Sobol mean is the measured error of the
default rule. With ``--axes`` each record also holds the uncorrected eps_t of the default rule and the
kink correction (``saddle.quadrature.kinks``, times alpha) computed along each node axis in turn; the
reported eps_t corrects along the first axis only. Results are merged into the results file per
variant and point.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from results_file import write_results

from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.kinks import LineCorrection
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings

SOBOL_SEEDS = 4
SOBOL_LOG2 = 16


def axis_corrections(model, branch: str, alpha: float) -> dict[str, object]:
    """The default rule's eps_t without the kink correction, and the correction (times alpha) along each
    node axis, at the fixed point of ``branch`` at ``alpha``."""
    solver = make_solver(model, SolverSettings(line_correction=False))
    problem = solver.problem
    point = AnchorSearch(solver)(alpha, solver.branch(branch))
    z, value, _ = problem.engine(point.values, Effort.FULL)[:3]
    kernel_point = problem.geometry.kernel_point(point.values)

    def prox(nodes, starts):
        return problem.engine.from_starts(nodes, kernel_point, starts)[:2]

    nodes, weights, dimension = problem.map.nodes, problem.map.weights, problem.compiled.dimension
    corrections = [
        alpha * LineCorrection(nodes, weights, 20, axis=axis, gaussian=dimension)(z, value, prox)
        for axis in range(dimension)
    ]
    return {
        "uncorrected": -problem.observables.free_entropy(point.values, point.conjugates, alpha),
        "axis_corrections": corrections,
    }


def measure(name: str, points: list[tuple[str, float]], axes: bool = False) -> list[dict[str, object]]:
    """One record per ``(branch, alpha)``: the default rule's eps_t and ``-Phi`` on the finer rules."""
    model = variant(name).model()
    default = make_solver(model)
    records = []
    for branch, alpha in points:
        started = time.perf_counter()
        alone = default.renewed()  # each point as if found alone: no warm starts from the points before
        point = AnchorSearch(alone)(alpha, alone.branch(branch))
        record: dict[str, object] = {
            "branch": branch,
            "alpha": alpha,
            "found": point.branch,
            "converged": point.converged,
            "gauss-hermite-20": point.train_loss,
        }
        for order in (32, 40):
            rule = GaussHermite(order)
            solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
            record[rule.label] = -solver.problem.observables.free_entropy(point.values, point.conjugates, alpha)
        sobol = []
        for seed in range(SOBOL_SEEDS):
            rule = ScrambledSobol(SOBOL_LOG2, seed)
            solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
            sobol.append(-solver.problem.observables.free_entropy(point.values, point.conjugates, alpha))
        record["sobol_mean"] = float(np.mean(sobol))
        record["sobol_se"] = float(np.std(sobol, ddof=1) / np.sqrt(SOBOL_SEEDS))
        record["relative_error"] = abs(point.train_loss - record["sobol_mean"]) / record["sobol_mean"]
        if axes:
            record |= axis_corrections(model, branch, alpha)
        record["seconds"] = round(time.perf_counter() - started, 1)
        records.append(record)
    return records


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name")
    parser.add_argument("points", nargs="*", default=["semantic:1.5", "positional:1.0"])
    parser.add_argument("--axes", action="store_true", help="the kink correction along each node axis too")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "variant_quadrature.json")
    args = parser.parse_args()
    points = [(text.split(":")[0], float(text.split(":")[1])) for text in args.points]
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    measured = measure(args.name, points, args.axes)
    print(json.dumps(measured, indent=2))
    fresh = {(r["branch"], r["alpha"]) for r in measured}
    kept = [r for r in results.get(args.name, []) if (r["branch"], r["alpha"]) not in fresh]
    results[args.name] = kept + measured
    write_results(results, args.out)


if __name__ == "__main__":
    main()
