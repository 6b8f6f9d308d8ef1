"""Measurements behind statements of the validation pages (docs/validation/) that no test or other benchmark makes.

    python benchmarks/claims.py stability-rule   # curvatures of the default scan on coarser rules
    python benchmarks/claims.py prox-starts      # random prox starts on a three-token declaration
    python benchmarks/claims.py elastic-net      # the elastic net against proximal gradient descent

Each writes ``benchmarks/results/claims_<name>.json``:

- ``stability-rule``: every converged point of the default scan (omega = 0.3, 31 alphas, Gauss-Hermite
  20, its stability on the default rule) assessed again on Gauss-Hermite 10, 12 and 14: the largest
  differences of the curvatures in m and theta, and how many points change ``stable``.
- ``prox-starts``: at the fixed points of the three-token declaration of tests/conftest.py (omega 0.1
  and 0.3, alpha 0.8 and 2, every branch its anchor reaches, Gauss-Hermite 8), a full evaluation
  of the map with 0, 3, 12 and 48 random start directions: how far ``F`` and ``E[M*]`` move from the
  declared starts alone.
- ``elastic-net``: the semantic point at alpha = 2 against training at d = 400 (four seeds, proximal
  gradient descent, lr 0.5, gradient mapping below 1e-5) at four settings.
"""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import numpy as np
from results_file import write_results

import attnphase as ap
from attnphase.baseline.linear import linear_baseline
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.survey import make_solver, survey
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.tuning import Tuning

DEFAULT_ALPHAS = np.round(0.1 + 0.08 * np.arange(31), 10)
RESULTS = Path(__file__).parent / "results"


def stability_rule() -> dict[str, object]:
    model = ap.paper_model()
    solver = make_solver(model)
    scan = survey(solver, DEFAULT_ALPHAS, linear_baseline(solver.problem.compiled.system).test_error)
    points = [p for p in scan.points() if p.converged and p.stable is not None]
    results: dict[str, object] = {"points": len(points)}
    for order in (10, 12, 14):
        coarse = make_solver(model, SolverSettings(quadrature=GaussHermite(order)))
        pairs = [(assess(coarse.renewed(), p), p) for p in points]
        results[f"gauss-hermite-{order}"] = {
            f"max_abs_difference_{family}": max(abs(a.curvature[family] - p.curvature[family]) for a, p in pairs)
            for family in ("m", "theta")
        } | {"stable_changed": sum(a.stable != p.stable for a, p in pairs)}
    return results


def three_tokens(omega: float) -> ap.AttentionModel:
    return ap.AttentionModel(
        tokens=ap.GaussianTokens.isotropic(3, 0.5),
        positions=ap.PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=ap.MixedPositionalTeacher(omega=omega, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
        student=ap.DotProductAttention(),
        regulariser=ap.Ridge(0.01),
    )


def prox_starts() -> list[dict[str, object]]:
    rule = GaussHermite(8)
    rows = []
    for omega in (0.1, 0.3):
        model = three_tokens(omega)
        settings = SolverSettings(quadrature=rule, test_quadrature=rule)
        solvers = {
            n: make_solver(model, dataclasses.replace(settings, tuning=Tuning().replaced(prox={"extra_directions": n})))
            for n in (0, 3, 12, 48)
        }
        search = AnchorSearch(solvers[3])
        for alpha in (0.8, 2.0):
            for branch in solvers[3].branches:
                point = search(alpha, branch)
                if not (point.converged and point.branch == branch.name):
                    continue
                maps = {n: s.problem.map.evaluate(point.values, alpha) for n, s in solvers.items()}
                rows.append(
                    {"omega": omega, "alpha": alpha, "branch": branch.name}
                    | {
                        f"directions_{n}": {
                            "max_abs_change_of_F": float(np.abs(ev.updated - maps[0].updated).max()),
                            "change_of_mean_envelope": float(ev.mean_envelope - maps[0].mean_envelope),
                        }
                        for n, ev in maps.items()
                    }
                )
    return rows


def elastic_net() -> list[dict[str, object]]:
    from attnphase.experiments.training import SimulationSettings, simulate

    semantic = Branch("semantic", ("m",))
    settings = [
        (dict(), ap.ElasticNet(0.005, 0.01)),
        (dict(omega=0.2), ap.ElasticNet(0.005, 0.01)),
        (dict(sigma=0.7), ap.ElasticNet(0.01, 0.005)),
        (dict(A=((0.3, 0.7), (0.8, 0.2))), ap.ElasticNet(0.005, 0.01)),
    ]
    rows = []
    columns = ("q", "m", "theta", "train_loss", "test_error")
    for numbers, regulariser in settings:
        model = dataclasses.replace(ap.paper_model(**numbers), regulariser=regulariser)
        theory = AnchorSearch(make_solver(model))(2.0, semantic).row()
        training = SimulationSettings.of_model(
            model,
            d=400,
            alphas=(2.0,),
            seeds=4,
            inits=("semantic",),
            lr=0.5,
            tolerance=1e-5,
            max_steps=20_000,
            n_test=5000,
        )
        runs = simulate(training)
        rows.append(
            {
                "setting": {k: v for k, v in numbers.items()} | dataclasses.asdict(regulariser),
                "theory": {"branch": theory["branch"], "converged": bool(theory["converged"])}
                | {c: float(theory[c]) for c in columns},
                "runs_converged": bool(runs["converged"].all()),
                "runs_mean": {c: float(runs[c].mean()) for c in columns},
                "runs_sd": {c: float(runs[c].std(ddof=1)) for c in columns},
            }
        )
    return rows


MEASUREMENTS = {"stability-rule": stability_rule, "prox-starts": prox_starts, "elastic-net": elastic_net}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("measurement", choices=list(MEASUREMENTS))
    args = parser.parse_args()
    results = MEASUREMENTS[args.measurement]()
    print(write_results(results, RESULTS / f"claims_{args.measurement.replace('-', '_')}.json"), end="")


if __name__ == "__main__":
    main()
