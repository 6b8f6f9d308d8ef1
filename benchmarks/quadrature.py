"""Quadrature accuracy at converged fixed points, and of the thresholds.

    python benchmarks/quadrature.py [--out benchmarks/results/quadrature.json]
    python benchmarks/quadrature.py --table     # the Markdown table of an existing result file
    python benchmarks/quadrature.py --reference # reference eps_t (quadrature_reference.json)
    python benchmarks/quadrature.py --along     # the kink correction along the branches

For each rule (tensor Gauss-Hermite of several orders, scrambled Sobol with several seeds)
the positional and semantic branches are solved at fixed alphas and alpha_c, alpha_l are
computed from a scan around them, each on the rule itself (no finer threshold rule). The
spread between rules is the measured quadrature error.

``--reference`` computes the reference eps_t at the same points with scrambled Sobol rules of
2^20 points and four independent seeds (reused from an earlier result file when present),
two ways: the fixed point solved on each Sobol rule
(continued from the default rule's fixed point with its Jacobian), and ``-Phi`` on each Sobol
rule at the default rule's fixed point (``SaddleMap.free_entropy``: Phi is stationary,
so this differs from the first by second order in the distance between the fixed points).
The mean over seeds of the first is the reference; its standard error is the reference's own
uncertainty.

``--along`` follows every branch of the default scan to a few alphas and compares the reported
eps_t, with and without the kink correction, with ``-Phi`` on scrambled Sobol 2^18 at the same
fixed point (quadrature_along.json).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
from results_file import write_results

from attnphase.baseline.linear import linear_baseline
from attnphase.replica.declaration import paper_model
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.geometry.branches import branches_of
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings

RULES = [
    GaussHermite(12),
    GaussHermite(16),
    GaussHermite(20),
    GaussHermite(24),
    GaussHermite(28),
    GaussHermite(32),
    GaussHermite(40),
    ScrambledSobol(17, 0),
    ScrambledSobol(17, 1),
    ScrambledSobol(18, 2),
]
POSITIONAL, SEMANTIC = (make_solver(paper_model()).branch(name) for name in ("positional", "semantic"))
POINTS = [(POSITIONAL, 1.25), (POSITIONAL, 2.0), (SEMANTIC, 1.25), (SEMANTIC, 2.0)]
THRESHOLD_ALPHAS = np.round(np.arange(1.1, 1.62, 0.08), 10)
REFERENCE_FILE = Path(__file__).parent / "results" / "quadrature_reference.json"
REFERENCE_SEEDS = (100, 101, 102, 103)
ALONG_FILE = Path(__file__).parent / "results" / "quadrature_along.json"
ALONG = {"positional": (0.3, 0.8, 1.25, 2.0), "semantic": (0.8, 1.0, 1.25, 1.5, 2.0), "agnostic": (0.5, 1.0, 2.0)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "quadrature.json")
    parser.add_argument("--table", action="store_true", help="print the table of OUT and exit")
    parser.add_argument("--reference", action="store_true", help="compute the reference eps_t (Sobol 2^20)")
    parser.add_argument("--along", action="store_true", help="the kink correction along the branches")
    args = parser.parse_args()
    if args.along:
        rows = correction_along_branches()
        write_results(rows, ALONG_FILE)
        print(along_table(rows))
        return
    if args.reference:
        reference = reference_train_loss(json.loads(REFERENCE_FILE.read_text()) if REFERENCE_FILE.exists() else [])
        write_results(reference, REFERENCE_FILE)
        print(reference_table(reference))
        return
    if args.table:
        print(markdown_table(json.loads(args.out.read_text())))
        if REFERENCE_FILE.exists():
            print()
            print(reference_table(json.loads(REFERENCE_FILE.read_text())))
        if ALONG_FILE.exists():
            print()
            print(along_table(json.loads(ALONG_FILE.read_text())))
        return
    model = paper_model()
    anchors = {}
    base = AnchorSearch(make_solver(model, SolverSettings(quadrature=GaussHermite(20))))
    for branch, alpha in POINTS:
        anchors[(branch.name, alpha)] = base(alpha, branch)
    results = []
    for rule in RULES:
        solver = make_solver(model, SolverSettings(quadrature=rule))
        started = time.perf_counter()
        row: dict[str, object] = {"rule": rule.label, "nodes": int(solver.problem.map.nodes.shape[1])}
        for branch, alpha in POINTS:
            point, _ = solver.solve(alpha, branch, initial=anchors[(branch.name, alpha)].values)
            key = f"{branch.name}_{alpha:g}"
            row[f"{key}_train_loss"] = point.train_loss
            row[f"{key}_line_correction"] = point.line_correction
            row[f"{key}_q"] = point["q"]
            row[f"{key}_V"] = point["V"]
            row[f"{key}_test_error"] = point.test_error
            row[f"{key}_converged"] = point.converged
        scanning = make_solver(model, SolverSettings(quadrature=rule, threshold_quadrature=None))
        scan = survey(scanning, THRESHOLD_ALPHAS, linear_baseline(solver.problem.compiled.system).test_error)
        row["alpha_c"] = scan.alpha_c.value
        row["alpha_l"] = scan.alpha_l.value
        row["seconds"] = round(time.perf_counter() - started, 1)
        results.append(row)
        print(json.dumps(row), flush=True)
    write_results(results, args.out)
    print(markdown_table(results))


def reference_train_loss(previous: list[dict[str, object]], log2_points: int = 20) -> list[dict[str, object]]:
    """Reference eps_t at ``POINTS`` (see the module docstring), with the default rule's error.

    The Sobol values of ``previous`` (an earlier result file) are reused when they were computed
    with the same rule and seeds; the default rule's values are always recomputed."""
    model = paper_model()
    default = make_solver(model, SolverSettings())
    rule = f"sobol-2^{log2_points}"
    seeds = list(REFERENCE_SEEDS)
    known = {(r["branch"], r["alpha"]): r for r in previous if r["rule"] == rule and r["seeds"] == seeds}
    rows = []
    search = AnchorSearch(default)
    for branch, alpha in POINTS:
        anchor = search(alpha, branch)
        point, jacobian = default.solve(alpha, branch, initial=anchor.values)
        if (branch.name, alpha) in known:
            old = known[(branch.name, alpha)]
            solved, stationary, converged = old["train_loss_solved"], old["train_loss_stationary"], old["converged"]
        else:
            solved, stationary, converged = [], [], []
            for seed in REFERENCE_SEEDS:
                started = time.perf_counter()
                fine = make_solver(model, SolverSettings(quadrature=ScrambledSobol(log2_points, seed)))
                stationary.append(-fine.problem.observables.free_entropy(point.values, point.conjugates, alpha))
                refined, _ = fine.solve(alpha, branch, initial=point.values, jacobian=jacobian)
                solved.append(refined.train_loss)
                converged.append(refined.converged)
                print(f"{branch.name} {alpha:g} seed {seed}: {time.perf_counter() - started:.0f} s", flush=True)
        mean = float(np.mean(solved))
        plain = point.train_loss - point.line_correction
        rows.append(
            {
                "branch": branch.name,
                "alpha": alpha,
                "rule": rule,
                "seeds": list(REFERENCE_SEEDS),
                "train_loss_solved": solved,
                "train_loss_stationary": stationary,
                "converged": converged,
                "reference": mean,
                "standard_error": float(np.std(solved, ddof=1) / np.sqrt(len(solved))),
                "stationary_minus_solved": float(np.mean(stationary) - mean),
                "default_rule": default.settings.quadrature.label,
                "default_train_loss": point.train_loss,
                "default_relative_error": (point.train_loss - mean) / mean,
                "plain_rule_train_loss": plain,
                "plain_rule_relative_error": (plain - mean) / mean,
            }
        )
    return rows


def correction_along_branches(seed: int = 1) -> list[dict[str, object]]:
    """Reported eps_t, with and without the kink correction, against Sobol 2^18 along branches."""
    model = paper_model()
    default = make_solver(model, SolverSettings())
    sobol = make_solver(model, SolverSettings(quadrature=ScrambledSobol(18, seed)))
    rows = []
    for branch in branches_of(derive(model)):
        if branch.name not in ALONG:
            continue
        for point in trace_branch(default, branch, ALONG[branch.name]).converged():
            independent = -sobol.problem.observables.free_entropy(point.values, point.conjugates, point.alpha)
            plain = point.train_loss - point.line_correction
            rows.append(
                {
                    "branch": branch.name,
                    "alpha": point.alpha,
                    "train_loss": point.train_loss,
                    "plain_rule_train_loss": plain,
                    "sobol_2^18": independent,
                    "relative_error": (point.train_loss - independent) / independent,
                    "plain_rule_relative_error": (plain - independent) / independent,
                }
            )
            print(json.dumps(rows[-1]), flush=True)
    return rows


def along_table(rows: list[dict[str, object]]) -> str:
    lines = ["| branch | alpha | eps_t - Sobol 2^18 (relative) | without the correction |", "| --- " * 4 + "|"]
    for row in rows:
        lines.append(
            f"| {row['branch']} | {row['alpha']:g} | {row['relative_error']:+.1e} | "
            f"{row['plain_rule_relative_error']:+.1e} |"
        )
    return "\n".join(lines)


def reference_table(rows: list[dict[str, object]]) -> str:
    """The reference eps_t and the default rule's relative error against it, with and without
    the kink correction (docs/validation/quadrature.md)."""
    lines = [
        "| branch | alpha | reference eps_t | standard error | stationary - solved | default | error | "
        "without correction | error |",
        "| --- " * 9 + "|",
    ]
    for row in rows:
        lines.append(
            f"| {row['branch']} | {row['alpha']:g} | {row['reference']:.9f} | {row['standard_error']:.1e} | "
            f"{row['stationary_minus_solved']:+.1e} | {row['default_train_loss']:.9f} | "
            f"{row['default_relative_error']:+.1e} | {row['plain_rule_train_loss']:.9f} | "
            f"{row['plain_rule_relative_error']:+.1e} |"
        )
    return "\n".join(lines)


def markdown_table(results: list[dict[str, object]]) -> str:
    """eps_t at the four points, alpha_c and alpha_l for every rule, and the largest relative
    error of eps_t against the reference when it has been computed (docs/validation/quadrature.md)."""
    keys = [f"{branch.name}_{alpha:g}_train_loss" for branch, alpha in POINTS]
    heads = [f"eps_t {branch.name[:3]} {alpha:g}" for branch, alpha in POINTS]
    reference = json.loads(REFERENCE_FILE.read_text()) if REFERENCE_FILE.exists() else None
    lines = [
        "| rule | nodes | " + " | ".join(heads) + " | max error | alpha_c | alpha_l | seconds |",
        "| --- " * (len(heads) + 6) + "|",
    ]
    for row in results:
        cells = [f"{row[k]:.9f}" for k in keys]
        if reference is None:
            error = "-"
        else:
            pairs = zip([row[k] for k in keys], reference, strict=True)
            error = f"{max(abs(value - r['reference']) / r['reference'] for value, r in pairs):.1e}"
        cells += [error, f"{row['alpha_c']:.5f}", f"{row['alpha_l']:.5f}", f"{row['seconds']}"]
        lines.append(f"| {row['rule']} | {row['nodes']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
