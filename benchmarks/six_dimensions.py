"""The two levers of a six-dimension scan, measured: the rule's prune and where the random prox starts run.

    python benchmarks/six_dimensions.py prune NAME [BRANCH:ALPHA ...]
    python benchmarks/six_dimensions.py starts NAME [--alphas 0.2:2.5:0.121]

(results merged into ``benchmarks/results/six_dimensions.json`` per measurement and variant).

``prune``: at each fixed point of the shipped variant ``NAME`` (anchored on Gauss-Hermite 8 at the default
prune; default ``positional:1.0 semantic:1.5 agnostic:2.0``), ``-Phi`` at the same point on Gauss-Hermite 8
with each prune of :data:`PRUNES` and on Gauss-Hermite 10, relative to the mean of four scramblings of
2^16 Sobol points (with its standard error). ``Phi`` is stationary at a fixed point, so these are the
rules' errors in eps_t (docs/validation/quadrature.md, "Pruning and six dimensions").

``starts``: a scan of ``NAME`` on Gauss-Hermite 8 at prune 1e-6 in which every full prox
(:meth:`ProxEngine._remembered`, the declared starts and the first random direction everywhere, the
other directions where those disagree) is also computed with every start at every node: the number of
proxes, of those where a node's ``M*`` differs, the largest difference, and whether the declared starts
alone (deciding where every random start runs) would have missed a lower minimum
(docs/validation/quadrature.md, "Pruning and six dimensions").
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from results_file import write_results

from attnphase.experiments.scan import scan
from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.engine import ProxEngine
from attnphase.saddle.prox.policy import declared_start_count
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings

PRUNES = (1e-8, 1e-7, 1e-6, 1e-5)
SOBOL_SEEDS = 4
SOBOL_LOG2 = 16
RESULTS = Path(__file__).parent / "results" / "six_dimensions.json"


def _solver(model, rule):
    return make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))


def prune(name: str, points: list[tuple[str, float]]) -> list[dict[str, object]]:
    """Per point: the relative error of ``-Phi`` on each rule against the Sobol mean."""
    model = variant(name).model()
    anchored = _solver(model, GaussHermite(8))
    rules = {f"gauss-hermite-8-prune{p:g}": GaussHermite(8, p) for p in PRUNES} | {"gauss-hermite-10": GaussHermite(10)}
    maps = {label: _solver(model, rule).problem.observables for label, rule in rules.items()}
    sobol_maps = [_solver(model, ScrambledSobol(SOBOL_LOG2, seed)).problem.observables for seed in range(SOBOL_SEEDS)]
    records = []
    for branch, alpha in points:
        point = AnchorSearch(anchored.renewed())(alpha, anchored.branch(branch))
        sobol = [-m.free_entropy(point.values, point.conjugates, alpha) for m in sobol_maps]
        mean = float(np.mean(sobol))
        record: dict[str, object] = {"branch": branch, "alpha": alpha, "found": point.branch}
        record["converged"] = point.converged
        for label, rule_map in maps.items():
            eps = -rule_map.free_entropy(point.values, point.conjugates, alpha)
            record[label] = (eps - mean) / mean
        record["sobol_relative_se"] = float(np.std(sobol, ddof=1) / np.sqrt(SOBOL_SEEDS)) / mean
        records.append(record)
        print(json.dumps(record), flush=True)
    return records


def starts(name: str, alphas: str) -> dict[str, object]:
    """Every full prox of a scan of ``name`` against the prox with every start at every node."""
    found = {"proxes": 0, "differing": 0, "largest_difference": 0.0, "declared_alone_differing": 0}
    remembered = ProxEngine._remembered

    def compared(self, nodes, params, all_starts, tolerance):
        fresh = self.memory.get((params.tobytes(), self.kernel.consts.tobytes())) is None
        result = remembered(self, nodes, params, all_starts, tolerance)
        directions = len(self.policy.directions)
        if fresh and directions:
            every = self.kernel.minimise(nodes, params, all_starts, tolerance)[1]
            declared = np.ascontiguousarray(all_starts[: declared_start_count(len(all_starts), directions)])
            _, values, _, minima = self.kernel.minimise(nodes, params, declared, tolerance)
            skipped = np.isfinite(minima[:, 0, :]).sum(axis=0) == 1  # no random start there, were they to decide
            difference = result[1] - every
            found["proxes"] += 1
            found["differing"] += int(np.any(difference > 1e-12))
            found["largest_difference"] = max(found["largest_difference"], float(difference.max()))
            found["declared_alone_differing"] += int(np.any(skipped & (values > every + 1e-12)))
        return result

    ProxEngine._remembered = compared
    try:
        started = time.perf_counter()
        scan(variant(name).model(), alphas, order=8, prune=1e-6, threshold_order=0, progress=False)
    finally:
        ProxEngine._remembered = remembered
    found["seconds"] = round(time.perf_counter() - started, 1)
    print(json.dumps(found), flush=True)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("measurement", choices=("prune", "starts"))
    parser.add_argument("name")
    parser.add_argument("points", nargs="*", default=["positional:1.0", "semantic:1.5", "agnostic:2.0"])
    parser.add_argument("--alphas", default="0.2:2.5:0.121")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {}
    if args.measurement == "prune":
        measured: object = prune(args.name, [(p.split(":")[0], float(p.split(":")[1])) for p in args.points])
    else:
        measured = starts(args.name, args.alphas)
    results.setdefault(args.measurement, {})[args.name] = measured
    write_results(results, args.out)


if __name__ == "__main__":
    main()
