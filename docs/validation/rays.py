"""Two branches that only rays find: a semantic minimum past the family's bound at the ray's start, and a
positional branch born from the second sheet of a folded agnostic branch.

    python docs/validation/rays.py

1. The paper's model at omega = 0.5, sigma = 1, lambda = 0.1, A = (0.3, 0.7; 0.8, 0.2)
   (``attnphase scan --omega 0.5 --A 0.3,0.7,0.8,0.2 --sigma 1.0 --lambda 0.1 --order 12
   --alphas 0.2:2.4:0.2``), then L-BFGS at d = 300 from both informed starts, three seeds, at alpha 1.4
   and 2.4 (``attnphase simulate`` with the same model options and ``--alphas 1.4,2.4 --d 300 --seeds 3``).
2. The elastic net at omega = 0.15 with the same A (``attnphase scan --model elastic-net --set omega=0.15
   --A 0.3,0.7,0.8,0.2 --order 12 --alphas 0.3:2.4:0.3``).
"""

from __future__ import annotations

import numpy as np
from scan_tables import branch_table, thresholds

import attnphase as ap

OTHER_A = ((0.3, 0.7), (0.8, 0.2))


def falling_ray() -> None:
    model = ap.paper_model(omega=0.5, A=OTHER_A, sigma=1.0, lam=0.1)
    scan = ap.scan(model, alphas="0.2:2.4:0.2", order=12, progress=False)
    print("## omega 0.5, sigma 1, lambda 0.1, other A\n")
    print(branch_table(scan))
    print(thresholds(scan))
    rows = scan.branches[scan.branches["converged"].astype(bool)]
    semantic = rows[rows["branch"] == "semantic"]
    print(f"semantic theta {semantic['theta'].min():.3f} to {semantic['theta'].max():.3f}")
    for branch in ("semantic", "agnostic"):
        at = rows[(rows["branch"] == branch) & np.isclose(rows["alpha"], 2.4)]
        print(f"{branch} at 2.4: eps_t = {at['train_loss'].iloc[0]:.4f}")
    runs = ap.simulate(model, d=300, alphas=[1.4, 2.4], seeds=3, theory=scan, progress=False).runs
    print(
        f"\ntraining: {int(runs['converged'].sum())} of {len(runs)} runs converged; basins {sorted(set(runs['basin']))}"
    )
    for alpha, group in runs.groupby("alpha"):
        point = semantic[np.isclose(semantic["alpha"], alpha)].iloc[0]
        print(
            f"alpha {alpha:g}: eps_t {group['train_loss'].mean():.5f} (theory {point['train_loss']:.5f}), "
            f"eps_g {group['test_error'].mean():.5f} ({point['test_error']:.5f}), "
            f"|theta| {group['theta'].abs().mean():.3f} ({abs(point['theta']):.3f})"
        )


def second_sheet() -> None:
    model = ap.variant("elastic-net").model({"omega": 0.15, "A": OTHER_A})
    scan = ap.scan(model, alphas="0.3:2.4:0.3", order=12, progress=False)
    print("\n## elastic net, omega 0.15, other A\n")
    print(branch_table(scan))
    print(thresholds(scan))
    rows = scan.branches[scan.branches["converged"].astype(bool)]
    for row in rows[rows["branch"] == "positional"].itertuples():
        print(f"positional alpha {row.alpha:g}: m = {row.m:.4f}, eps_t = {row.train_loss:.6f}, stable = {row.stable}")
    for row in rows[(rows["branch"] == "agnostic")].itertuples():
        print(f"agnostic sheet {row.sheet} alpha {row.alpha:g}: q = {row.q:.4f}, curvature_m = {row.curvature_m:.4f}")


if __name__ == "__main__":
    falling_ray()
    second_sheet()
