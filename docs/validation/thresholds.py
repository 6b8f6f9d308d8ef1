"""alpha_c and alpha_l against omega with the other positional target, and two thresholds that need care:
alpha_l at a change of global minimum that is not alpha_c, and alpha_c inside the grid step where a branch begins.

    python docs/validation/thresholds.py [omega] [change] [inside]     # default: all three

``omega``: with A = (0.3, 0.7; 0.8, 0.2), one scan per omega in 0.1, ..., 0.5 on Gauss-Hermite 12 over alpha
0.1:2.5:0.1, alpha_l solved on Gauss-Hermite 32, without stability (which changes no threshold): the
thresholds of ``attnphase phase-diagram --omegas 0.1:0.5:0.1 --alphas 0.1:2.5:0.1 --order 12 --A 0.3,0.7,0.8,0.2``.
``change``: the lasso at omega = 0.1, lambda_1 = 0.001 (``attnphase scan --model l1 --set lambda_1=0.001
--set omega=0.1 --alphas 0.1:2.5:0.2 --order 12``). ``inside``: the paper's model at omega = 0.1, sigma = 0.3,
lambda = 0.001 with A = (0.3, 0.7; 0.8, 0.2), over 0.2:2.4:0.2 and over 0.4:0.7:0.02.
"""

from __future__ import annotations

import sys

from scan_tables import thresholds

import attnphase as ap

TARGETS = {"standard A": ((0.6, 0.4), (0.4, 0.6)), "other A": ((0.3, 0.7), (0.8, 0.2))}


def _cell(row, name: str) -> str:  # noqa: ANN001 - a row of ScanResult.thresholds
    return f"{row[name]:.4f}" if row[f"{name}_status"] == "found" else str(row[f"{name}_status"])


def omega() -> None:
    a = TARGETS["other A"]
    print("| omega | alpha_c | alpha_l | branches with converged points |")
    print("|---|---|---|---|")
    for w in (0.1, 0.2, 0.3, 0.4, 0.5):
        scan = ap.scan(ap.paper_model(omega=w, A=a), alphas="0.1:2.5:0.1", order=12, stability=False, progress=False)
        row = scan.thresholds.iloc[0]
        found = sorted(set(scan.branches[scan.branches["converged"].astype(bool)]["branch"]))
        print(f"| {w:g} | {_cell(row, 'alpha_c')} | {_cell(row, 'alpha_l')} | {', '.join(found)} |", flush=True)


def change() -> None:
    model = ap.variant("l1").model({"lambda_1": 0.001, "omega": 0.1})
    scan = ap.scan(model, alphas="0.1:2.5:0.2", order=12, progress=False)
    print("\n## lasso, omega 0.1, lambda_1 0.001\n")
    print(thresholds(scan))
    converged = scan.branches[scan.branches["converged"].astype(bool)]
    print(f"branches with converged points: {sorted(set(converged['branch']))}")
    print(f"baseline test error {scan.baseline.test_error:.5f}")


def inside() -> None:
    model = ap.paper_model(omega=0.1, A=TARGETS["other A"], sigma=0.3, lam=0.001)
    print("\n## omega 0.1, sigma 0.3, lambda 0.001, other A\n")
    for alphas in ("0.2:2.4:0.2", "0.4:0.7:0.02"):
        scan = ap.scan(model, alphas=alphas, order=12, stability=False, progress=False)
        print(f"alphas {alphas}:")
        print(thresholds(scan))


if __name__ == "__main__":
    parts = {"omega": omega, "change": change, "inside": inside}
    for name in sys.argv[1:] or list(parts):
        parts[name]()
