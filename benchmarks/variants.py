"""The cost of each shipped variant: derivation and compilation, and a 20-point scan.

    python benchmarks/variants.py [NAME ...] [--out benchmarks/results/variants.json]

Target (2-core CPU): a 20-point scan of each variant (alphas 0.2 to 2.5, every branch, with stability)
within 3 minutes at its stated accuracy, the paper's model no slower than in ``benchmarks/run.py``.
Four-Gaussian-dimension variants (``L (r + t) = 4``: paper, elastic-net, l1, spectrum, and mixture with
its four label configurations) are scanned on the default rule (Gauss-Hermite 20); the six-dimension
ones (untied, rank2, L3) on Gauss-Hermite 8 with nodes below ``1e-6`` of the largest weight dropped
(62208 nodes, against 120896 at the default ``1e-8``; docs/validation/quadrature.md, "Pruning and six
dimensions"), and only their first fixed point is timed when ``--quick`` is given. Derivation and
compilation are timed in a fresh process with an empty kernel cache (``prepare_seconds``), then the scan in that process
(``scan_seconds``), with the largest relative bound on the quadrature error of a converged point's eps_t
(``error_bound``: ``FixedPoint.train_loss_error_bound / train_loss``, from the points' error checks).
Results are merged into the results file per variant, each with the machine it was measured on
(its kernel build and load change the times by a third and more between days), so variants can be
measured one at a time.
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

from results_file import write_results

#: (Gauss-Hermite order, prune) per variant.
RULES = {name: (20, 1e-8) for name in ("paper", "elastic-net", "l1", "spectrum", "mixture")}
RULES |= {name: (8, 1e-6) for name in ("untied", "rank2", "L3")}
ALPHAS = "0.2:2.5:0.121"  # 20 points
TARGET_SCAN_SECONDS = 180.0

CHILD = """
import json, sys, time
from attnphase.replica.variants import variant
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.experiments.scan import scan
name, order, prune, alphas, quick = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5] == "1"
model = variant(name).model()
rule = GaussHermite(order, prune)
start = time.perf_counter()
solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
prepared = time.perf_counter() - start
result = {"prepare_seconds": round(prepared, 2), "order": order, "prune": prune}
start = time.perf_counter()
if quick:
    point = AnchorSearch(solver)(2.0, solver.branches[-1])
    result |= {
        "first_point_seconds": round(time.perf_counter() - start, 2),
        "first_point": point.branch,
        "error_bound": point.train_loss_error_bound / point.train_loss,
    }
else:
    scanned = scan(model, alphas, order=order, prune=prune, threshold_order=0, progress=False)
    result |= {
        "scan_seconds": round(time.perf_counter() - start, 2),
        "points": int(len(scanned.branches)),
        "converged": int(scanned.branches["converged"].sum()),
        "alpha_c": scanned.thresholds["alpha_c"].iloc[0],
        "error_bound": max(p.train_loss_error_bound / p.train_loss for p in scanned.points if p.converged),
    }
print(json.dumps(result))
"""


def measure(name: str, quick: bool) -> dict[str, object]:
    """Derive, compile and scan ``name`` in a fresh process with an empty kernel cache."""
    with tempfile.TemporaryDirectory() as cache:
        environment = os.environ | {"ATTNPHASE_CACHE_DIR": cache, "NUMBA_CACHE_DIR": cache}
        output = subprocess.run(
            [sys.executable, "-c", CHILD, name, *map(str, RULES[name]), ALPHAS, "1" if quick else "0"],
            check=True,
            stdout=subprocess.PIPE,  # the child's stderr (warnings, a traceback) reaches the console
            text=True,
            env=environment,
        ).stdout
    result = json.loads(output.strip().splitlines()[-1])
    if "scan_seconds" in result:
        result["within_target"] = result["scan_seconds"] <= TARGET_SCAN_SECONDS
    return result


def machine() -> dict[str, object]:
    """The machine a measurement is made on: its cores, platform (with the kernel build) and Python."""
    return {"cpus": os.cpu_count(), "platform": platform.platform(), "python": sys.version.split()[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(RULES))
    parser.add_argument("--quick", action="store_true", help="time the first fixed point only")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "variants.json")
    args = parser.parse_args()
    results = json.loads(args.out.read_text()) if args.out.exists() else {"variants": {}}
    for name in args.names:
        started = time.perf_counter()
        measured = measure(name, args.quick)
        measured["load_at_start"] = os.getloadavg()[0]
        measured["wall_seconds"] = round(time.perf_counter() - started, 2)
        measured["machine"] = machine()
        results["variants"][name] = measured
        results.pop("machine", None)  # each variant's own, above: the variants are measured one at a time
        results["alphas"] = ALPHAS
        print(name, measured, flush=True)
        write_results(results, args.out)


if __name__ == "__main__":
    main()
