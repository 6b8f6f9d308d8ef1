"""Where the ridge is strong against the signal, the student vanishes (W = 0): which branches exist,
where W = 0 is stable, and how a student with q > 0 shrinks to W = 0.

    python docs/validation/vanishing.py

Gauss-Hermite 12, alpha_l on the scan's own rule, with the stability of every point:
``attnphase scan --sigma S --lambda L --alphas 0.5:2.5:0.5 --order 12 --threshold-order 0`` at three
settings, then the agnostic point's q at sigma = 0.3, lambda = 0.005 (``--alphas 0.5:2.0:0.5``).
"""

from __future__ import annotations

import time

from scan_tables import branch_table, thresholds

import attnphase as ap

SETTINGS = ((0.3, 0.1), (0.3, 0.01), (0.5, 0.1))


def main() -> None:
    for sigma, lam in SETTINGS:
        started = time.perf_counter()
        result = ap.scan(
            ap.paper_model(sigma=sigma, lam=lam), alphas="0.5:2.5:0.5", order=12, threshold_order=0, progress=False
        )
        print(f"## sigma = {sigma:g}, lambda = {lam:g} ({time.perf_counter() - started:.0f} s)\n")
        print(branch_table(result))
        rows = result.branches
        agnostic = rows[(rows["branch"] == "agnostic") & rows["converged"].astype(bool)]
        vanishing = agnostic[agnostic["q"] < 1e-8]
        print(f"\nW = 0 (q < 1e-8) at alpha {', '.join(f'{a:g}' for a in vanishing['alpha'])}")
        for row in agnostic.itertuples():
            print(
                f"  agnostic alpha {row.alpha:g}: q = {row.q:.3g}, curvature_m = {row.curvature_m:.3g}, "
                f"curvature_theta = {row.curvature_theta:.3g}, stable = {row.stable}"
            )
        positional = rows[(rows["branch"] == "positional") & rows["converged"].astype(bool)]
        for row in positional.itertuples():
            print(f"  positional alpha {row.alpha:g}: m = {row.m:.3f}, stable = {row.stable}")
        print(thresholds(result))
        print()
    result = ap.scan(
        ap.paper_model(sigma=0.3, lam=0.005), alphas="0.5:2.0:0.5", order=12, threshold_order=0, progress=False
    )
    rows = result.branches
    print("## sigma = 0.3, lambda = 0.005: the agnostic point\n")
    for row in rows[rows["branch"] == "agnostic"].itertuples():
        print(f"alpha {row.alpha:g}: q = {row.q:.2g}, converged = {row.converged}")
    print(f"{int(rows['converged'].astype(bool).sum())} of {len(rows)} points converged")


if __name__ == "__main__":
    main()
