"""Every row of the default scan at several settings of the paper's model, with its time: the record
two versions of the solver are compared by (docs/validation/cost.md, "The default scan at twelve settings").

    python benchmarks/scan_rows.py [NAME ...] [--jobs 2] [--out benchmarks/results/scan_rows.json]
    python benchmarks/scan_rows.py --compare BEFORE.json AFTER.json

Each setting is scanned (default rule, the 31 alphas of ``attnphase scan``, every branch with its
stability) in a fresh process on one thread, ``--jobs`` at a time, as the phase diagram's workers
run. The results file holds, per setting, the scan's seconds, alpha_c and alpha_l with their notes,
every branch's ends, and every row (branch, sheet, alpha, order parameters, eps_t, convergence,
stability). ``--compare`` prints, per setting in both files, the seconds, the rows only one file has,
the largest change of the order parameters and the relative change of eps_t over rows converged in
both, the rows whose convergence or stability changed, and the thresholds and ends that differ.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
from results_file import write_results

#: The settings (keyword arguments of ``paper_model``) of docs/validation/cost.md's comparisons.
SETTINGS: dict[str, dict[str, object]] = {
    "omega0.1": {"omega": 0.1},
    "omega0.2": {"omega": 0.2},
    "omega0.25": {"omega": 0.25},
    "omega0.3": {"omega": 0.3},
    "omega0.4": {"omega": 0.4},
    "omega0.5": {"omega": 0.5},
    "otherA-omega0.3": {"omega": 0.3, "A": [[0.3, 0.7], [0.8, 0.2]]},
    "otherA-omega0.15": {"omega": 0.15, "A": [[0.3, 0.7], [0.8, 0.2]]},
    "sigma0.3": {"sigma": 0.3},
    "sigma1.0": {"sigma": 1.0},
    "lambda0.001": {"lam": 0.001},
    "lambda0.1": {"lam": 0.1},
}

CHILD = """
import json, sys, time
import numpy as np
from attnphase.baseline.linear import linear_baseline
from attnphase.replica.declaration import paper_model
from attnphase.saddle.phases.survey import make_solver, survey
alphas = np.round(0.1 + 0.08 * np.arange(31), 10)
solver = make_solver(paper_model(**json.loads(sys.argv[1])))
reference = linear_baseline(solver.problem.compiled.system).test_error
survey(solver.renewed(), alphas[:2], reference, stability=False)  # the kernels compiled and warm
start = time.perf_counter()
scan = survey(solver.renewed(), alphas, reference)
seconds = time.perf_counter() - start
rows = [
    {"branch": p.branch, "sheet": p.sheet, "alpha": p.alpha, "values": p.values.tolist(),
     "train_loss": p.train_loss, "converged": p.converged, "stable": p.stable}
    for p in scan.points()
]
thresholds = {t.name: {"value": t.value, "note": t.note} for t in (scan.alpha_c, scan.alpha_l)}
ends = {name: [[e.kind, e.alpha, e.at, e.sheet] for e in trace.ends] for name, trace in scan.traces.items()}
print(json.dumps({"seconds": round(seconds, 2), "thresholds": thresholds, "ends": ends, "rows": rows}))
"""


def measure(name: str) -> dict[str, object]:
    """Scan the setting ``name`` in a fresh process on one thread."""
    environment = os.environ | {"NUMBA_NUM_THREADS": "1"}
    output = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(SETTINGS[name])],
        check=True,
        stdout=subprocess.PIPE,  # the child's stderr (warnings, a traceback) reaches the console
        text=True,
        env=environment,
    ).stdout
    return json.loads(output.strip().splitlines()[-1])


def compare(before: dict[str, dict], after: dict[str, dict]) -> list[str]:
    """One paragraph per setting in both results (module docstring)."""
    lines = []
    for name in [n for n in before if n in after]:
        old, new = before[name], after[name]
        rows_old = {(r["branch"], r["sheet"], r["alpha"]): r for r in old["rows"]}
        rows_new = {(r["branch"], r["sheet"], r["alpha"]): r for r in new["rows"]}
        shared = [k for k in rows_old if k in rows_new]
        both = [k for k in shared if rows_old[k]["converged"] and rows_new[k]["converged"]]
        moved = max(
            (np.abs(np.subtract(rows_old[k]["values"], rows_new[k]["values"])).max() for k in both), default=0.0
        )
        loss = max(
            (abs(rows_old[k]["train_loss"] - rows_new[k]["train_loss"]) / abs(rows_old[k]["train_loss"]) for k in both),
            default=0.0,
        )
        changed = [
            k
            for k in shared
            if (rows_old[k]["converged"], rows_old[k]["stable"]) != (rows_new[k]["converged"], rows_new[k]["stable"])
        ]
        lines.append(
            f"{name}: {old['seconds']} s -> {new['seconds']} s; {len(rows_old)} and {len(rows_new)} rows, "
            f"only before {sorted(set(rows_old) - set(rows_new))}, only after {sorted(set(rows_new) - set(rows_old))}; "
            f"converged in both: values by {moved:.1e}, eps_t by {loss:.1e} relative; "
            f"convergence or stability changed at {changed}"
        )
        for threshold, value in old["thresholds"].items():
            other = new["thresholds"][threshold]
            same = value["note"] == other["note"] and (
                value["value"] == other["value"] or np.isnan(value["value"]) and np.isnan(other["value"])
            )
            if not same:
                lines.append(f"  {threshold}: {value} -> {other}")
        if old["ends"] != new["ends"]:
            lines.append(f"  ends: {old['ends']} -> {new['ends']}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", default=list(SETTINGS), help=f"settings among {', '.join(SETTINGS)}")
    parser.add_argument("--jobs", type=int, default=2, help="scans at a time")
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "scan_rows.json")
    parser.add_argument("--compare", type=Path, nargs=2, metavar=("BEFORE", "AFTER"))
    args = parser.parse_args()
    if args.compare:
        before, after = (json.loads(path.read_text())["settings"] for path in args.compare)
        print("\n".join(compare(before, after)))
        return
    unknown = sorted(set(args.names) - set(SETTINGS))
    if unknown:
        parser.error(f"unknown settings {unknown}: choose among {', '.join(SETTINGS)}")
    results = {"settings": {}}
    with ThreadPoolExecutor(args.jobs) as pool:
        for name, measured in zip(args.names, pool.map(measure, args.names), strict=True):
            results["settings"][name] = measured
            print(name, measured["seconds"], "s", flush=True)
    write_results(results, args.out)


if __name__ == "__main__":
    main()
