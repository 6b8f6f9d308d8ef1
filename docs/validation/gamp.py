"""GAMP on training sets over d and seeds: checks (a), (b) and (d) of experiments/gamp_study.py.

    python docs/validation/gamp.py

For each setting (omega, alpha, start) and every d of :data:`DIMENSIONS` with :data:`SEEDS` seeds, GAMP
with the global rule and damping 0.3 from the start (``ap.gamp``): whether it converged, its steps, the
training-loss gradient at its end state (b), the overlaps' distance in (m, theta, q) to the state
evolution's fixed point from the same start (a), and the cosine of its Gram matrix with the L-BFGS
minimum from the same start on the same data (d). Per d, the mean and the largest of each over seeds;
every run, with GAMP's, the L-BFGS minimum's and the state evolution's overlaps, in ``gamp_runs.csv``
beside this file.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import attnphase as ap
from attnphase.experiments.gamp import GampTuning
from attnphase.experiments.gamp_study import GampSettings, run_gamp

OVERLAPS = ("m", "theta", "q")
DIMENSIONS = (100, 200, 400, 800)
SEEDS = (0, 1, 2)
#: (omega, alpha, start)
SETTINGS = ((0.3, 1.5, "semantic"), (0.4, 1.0, "positional"))


def one_run(omega: float, alpha: float, init: str, d: int, seed: int) -> dict[str, object]:
    settings = GampSettings(
        ap.paper_model(omega=omega),
        alpha=alpha,
        d=d,
        init=init,
        seed=seed,
        iterations=300,
        tuning=GampTuning(damping=0.3),
    )
    iterations, _, outcome = run_gamp(settings)
    last = iterations.groupby("source").tail(1).set_index("source")
    gamp = last.loc["gamp", list(OVERLAPS)].abs().to_numpy(dtype=float)
    theory = last.loc["state_evolution", list(OVERLAPS)].abs().to_numpy(dtype=float)
    return {
        "omega": omega,
        "alpha": alpha,
        "init": init,
        "d": d,
        "seed": seed,
        "converged": outcome["converged"],
        "steps": outcome["iterations"],
        "gradient_norm": outcome["gradient_norm"],
        "distance_to_state_evolution": float(np.linalg.norm(gamp - theory)),
        "state_evolution_step": float(last.loc["state_evolution", "step"]),
        "training_minimum_overlap": outcome["training_minimum_overlap"],
        **{f"gamp_{name}": value for name, value in zip(OVERLAPS, gamp, strict=True)},
        **{f"lbfgs_{name}": abs(outcome["training_minimum"][name]) for name in OVERLAPS},
        **{f"state_evolution_{name}": value for name, value in zip(OVERLAPS, theory, strict=True)},
    }


def main() -> None:
    started = time.perf_counter()
    rows = [one_run(*setting, d, seed) for setting in SETTINGS for d in DIMENSIONS for seed in SEEDS]
    table = pd.DataFrame(rows)
    table.to_csv(Path(__file__).with_name("gamp_runs.csv"), index=False)
    summary = table.groupby(["omega", "alpha", "init", "d"]).agg(
        converged=("converged", "sum"),
        steps=("steps", "mean"),
        gradient_max=("gradient_norm", "max"),
        distance_mean=("distance_to_state_evolution", "mean"),
        distance_max=("distance_to_state_evolution", "max"),
        overlap_min=("training_minimum_overlap", "min"),
        overlap_mean=("training_minimum_overlap", "mean"),
    )
    print(
        "| omega | alpha | start | d | converged | steps | max grad | distance to SE (mean, max) "
        "| Gram cosine (min, mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (omega, alpha, init, d), r in summary.iterrows():
        print(
            f"| {omega:g} | {alpha:g} | {init} | {d} | {r.converged}/{len(SEEDS)} | {r.steps:.0f} "
            f"| {r.gradient_max:.1e} | {r.distance_mean:.4f}, {r.distance_max:.4f} "
            f"| {r.overlap_min:.6f}, {r.overlap_mean:.6f} |",
            flush=True,
        )
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
