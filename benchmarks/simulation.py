"""Speed of the finite-d simulations at the authors' size d = 1000 (THEORY.md sec. 11).

    python benchmarks/simulation.py [--out benchmarks/results/simulation.json]

Measures one block (alpha = 1.5, 4 seeds, positional and semantic initialisations) with full-batch
GD (lr 0.15, up to 5000 steps, as the authors) and with L-BFGS, then the whole curve
(10 alphas x 4 seeds x 2 initialisations) with L-BFGS; the GD time of the curve is extrapolated
from the block, in proportion to the number of samples (a GD step costs O(n d)).
Target (2-core CPU): the curve under 30 minutes. The JSON records the machine, the settings and
every timing, and how far apart the two optimisers' minima are.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from results_file import write_results

from attnphase.experiments.training import SimulationSettings, simulate

CURVE_ALPHAS = tuple(np.round(0.25 * np.arange(1, 11), 10).tolist())
BLOCK_ALPHA = 1.5
TARGET_CURVE_SECONDS = 1800.0


def timed(settings: SimulationSettings):
    start = time.perf_counter()
    frame = simulate(settings)
    return frame, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent / "results" / "simulation.json")
    parser.add_argument("--d", type=int, default=1000)
    parser.add_argument("--seeds", type=int, default=4)
    args = parser.parse_args()
    base = SimulationSettings(d=args.d, alphas=(BLOCK_ALPHA,), seeds=args.seeds, n_test=50_000)
    results: dict[str, object] = {
        "machine": {
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
        "d": args.d,
        "seeds": base.seed_list,
        "n_test": base.n_test,
    }
    block = {}
    for optimiser in ("gd", "lbfgs"):
        settings = replace(base, optimiser=optimiser)
        frame, seconds = timed(settings)
        block[optimiser] = frame
        results[f"block_{optimiser}"] = {
            "alpha": BLOCK_ALPHA,
            "settings": settings.as_dict(),
            "seconds": round(seconds, 2),
            "steps_mean": float(frame["steps"].mean()),
            "converged": int(frame["converged"].sum()),
            "runs": len(frame),
            "grad_norm_max": float(frame["grad_norm"].max()),
        }
        print(optimiser, json.dumps(results[f"block_{optimiser}"]["seconds"]), flush=True)
    key = ["init", "seed"]
    gd, lbfgs = (block[o].set_index(key).sort_index() for o in ("gd", "lbfgs"))
    results["gd_minus_lbfgs_max_abs"] = {
        column: float((gd[column] - lbfgs[column]).abs().max()) for column in ("train_loss", "test_error", "theta", "m")
    }
    sample_ratio = sum(CURVE_ALPHAS) / BLOCK_ALPHA
    results["curve_alphas"] = list(CURVE_ALPHAS)
    results["curve_gd_seconds_extrapolated"] = round(results["block_gd"]["seconds"] * sample_ratio, 1)
    curve, seconds = timed(replace(base, alphas=CURVE_ALPHAS, optimiser="lbfgs"))
    results["curve_lbfgs_seconds"] = round(seconds, 2)
    results["curve_lbfgs_converged"] = int(curve["converged"].sum())
    results["curve_lbfgs_runs"] = len(curve)
    results["curve_target_seconds"] = TARGET_CURVE_SECONDS
    results["curve_lbfgs_within_target"] = seconds <= TARGET_CURVE_SECONDS
    print(write_results(results, args.out), end="")


if __name__ == "__main__":
    main()
