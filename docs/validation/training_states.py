"""Finite-d training states that no fixed point describes: L-BFGS from the positional start converges where
the theory has no positional point, above the theory's lowest training loss at the run's own overlaps.

    python docs/validation/training_states.py [NAME ...]     # default: every setting below

For each setting: the lowest training loss at fixed (m, theta) along theta = 0 (``ap.landscape`` on
Gauss-Hermite 12, what ``attnphase landscape --axes m,theta --points 6 --extent M,0.1 --order 12`` computes),
then L-BFGS from the positional start (``ap.simulate``, three seeds per d), each run's overlaps and training
loss against that landscape at its |m|.
"""

from __future__ import annotations

import sys

import numpy as np

import attnphase as ap

OTHER_A = ((0.3, 0.7), (0.8, 0.2))
#: name -> (model keywords, alpha, extent of m, dimensions)
SETTINGS = {
    "sigma0.7": ({"sigma": 0.7}, 1.0, 0.25, (200, 400, 800, 1600)),
    "lambda0.001": ({"lam": 0.001}, 1.5, 0.25, (200, 400, 800, 1600)),
    "omega0.2": ({"omega": 0.2}, 2.0, 0.3, (200, 800, 1600)),
    "omega0.15-otherA": ({"omega": 0.15, "A": OTHER_A}, 1.0, 0.15, (200, 400, 800)),
}


def run(name: str) -> None:
    keywords, alpha, extent, dims = SETTINGS[name]
    model = ap.paper_model(**keywords)
    view = ap.landscape(model, alpha, axes=("m", "theta"), points=6, extent=(extent, 0.1), order=12, progress=False)
    line = view.grid[np.isclose(view.grid["theta"], 0.0)].sort_values("m")
    print(f"## {name}: {keywords}, alpha {alpha:g}\n")
    print(
        "fixed points: " + ", ".join(f"{r.branch} (eps_t {r.train_loss:.6f})" for r in view.fixed_points.itertuples())
    )
    print(
        "theta = 0: " + ", ".join(f"m {r.m:.3f}: {r.train_loss:.6f} (d/dm {r.grad_m:+.1e})" for r in line.itertuples())
    )
    theory = ap.scan(model, alphas=[alpha], order=12, stability=False, progress=False)
    print("| d | seed | converged | steps | m | theta | q | eps_t | lowest eps_t at its m, theta = 0 |")
    print("|---|---|---|---|---|---|---|---|---|")
    for d in dims:
        runs = ap.simulate(model, d=d, alphas=[alpha], seeds=3, init="positional", theory=theory, progress=False).runs
        floors = []
        for r in runs.itertuples():
            floor = np.interp(abs(r.m), line["m"], line["train_loss"]) if abs(r.m) <= extent else float("nan")
            floors.append(floor)
            print(
                f"| {d} | {r.seed} | {r.converged} | {r.steps} | {r.m:.3f} | {r.theta:.3f} | {r.q:.3f} "
                f"| {r.train_loss:.5f} | {floor:.5f} |",
                flush=True,
            )
        gap = runs["train_loss"].to_numpy() - np.array(floors)
        print(
            f"| {d} | mean | | | {runs['m'].abs().mean():.3f} | | | {runs['train_loss'].mean():.5f} "
            f"| {np.mean(floors):.5f} (gap {gap.mean():+.5f}, s.e. {gap.std(ddof=1) / np.sqrt(len(gap)):.5f}) |"
        )
    print()


if __name__ == "__main__":
    for name in sys.argv[1:] or list(SETTINGS):
        run(name)
