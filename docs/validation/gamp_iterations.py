"""GAMP against its state evolution iteration by iteration: check (a) of experiments/gamp_study.py.

    python docs/validation/gamp_iterations.py

Undamped GAMP (damping 1, the algorithm whose state evolution the saddle-point map is, THEORY.md
sec. 10) on the training set of each seed, from the positional start scaled to ``m = START_M`` at every
d (so that the map's path is the same at every d), beside the map iterated from the same overlaps,
for :data:`STEPS` steps at every d of :data:`DIMENSIONS`. The setting is the paper's
model at lambda = 0.1, omega = 0.3, alpha = 1.5, where both converge undamped; at lambda = 0.01 both
leave the domain at the first step (``V < 0``), together. Per d and overlap, the largest distance over
the steps between the mean over :data:`SEEDS` of GAMP's iterates and the map's, and the largest spread
of GAMP's over seeds (:func:`following`); every iterate in ``gamp_iterations.csv`` beside this file.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pandas as pd

import attnphase as ap
from attnphase.experiments.gamp import GampTuning
from attnphase.experiments.gamp_study import GampSettings, run_gamp

OVERLAPS = ("m", "q", "theta", "V")
DIMENSIONS = (500, 1000, 2000, 4000)
SEEDS = (0, 1, 2)
STEPS = 20
OMEGA, ALPHA, LAMBDA, START, START_M = 0.3, 1.5, 0.1, "positional", 0.05


def iterates(d: int, seed: int) -> pd.DataFrame:
    """GAMP's and the map's iterates side by side (one row per step) for one training set."""
    settings = GampSettings(
        ap.paper_model(omega=OMEGA, lam=LAMBDA),
        alpha=ALPHA,
        d=d,
        init=START,
        seed=seed,
        iterations=STEPS,
        tolerance=1e-30,
        start_scale=START_M * d**0.5,
        tuning=GampTuning(damping=1.0),
    )
    table, _, _ = run_gamp(settings)
    by_source = table.set_index(["source", "iteration"])[list(OVERLAPS)]
    paired = by_source.loc["gamp"].join(by_source.loc["state_evolution"], suffixes=("_gamp", "_map"))
    return paired.reset_index().assign(d=d, seed=seed)


def following(runs: pd.DataFrame) -> pd.DataFrame:
    """Per d and overlap, the largest distance over the steps between the mean over seeds of GAMP's
    iterate and the map's (``bias``), and the largest standard deviation of GAMP's over seeds
    (``spread``); signs aligned (the problem is symmetric under ``Q -> -Q``)."""
    sizes = runs.assign(**{f"{n}_{s}": runs[f"{n}_{s}"].abs() for n in OVERLAPS for s in ("gamp", "map")})
    steps = sizes.groupby(["d", "iteration"])
    columns = {}
    for name in OVERLAPS:
        columns[f"{name}_bias"] = (steps[f"{name}_gamp"].mean() - steps[f"{name}_map"].mean()).abs()
        columns[f"{name}_spread"] = steps[f"{name}_gamp"].std()
    return pd.DataFrame(columns).groupby("d").max()


def main() -> None:
    started = time.perf_counter()
    runs = pd.concat([iterates(d, seed) for d in DIMENSIONS for seed in SEEDS], ignore_index=True)
    runs.to_csv(Path(__file__).with_name("gamp_iterations.csv"), index=False)
    per_d = following(runs)
    print("| d | " + " | ".join(f"{name}: bias, spread" for name in OVERLAPS) + " |")
    print("|---|" + "---|" * len(OVERLAPS))
    for d, row in per_d.iterrows():
        cells = [f"{row[f'{name}_bias']:.4f}, {row[f'{name}_spread']:.4f}" for name in OVERLAPS]
        print(f"| {d} | " + " | ".join(cells) + " |", flush=True)
    final = runs[runs.iteration == STEPS].groupby("d")[["m_gamp", "m_map"]].agg(lambda v: np.mean(np.abs(v)))
    print("\nm at the last step (mean over seeds):\n" + final.to_string())
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
