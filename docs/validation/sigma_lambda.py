"""Away from the default sigma and lambda (omega = 0.3): which branches exist where, the changes of the
global minimum and the thresholds; and a weak ridge with the other target.

    python docs/validation/sigma_lambda.py [grid [all | SIGMA,LAMBDA ...]] [weak]     # default: grid (four rows), weak

``grid``: one scan per (sigma, lambda) on Gauss-Hermite 12 over the default grid 0.1:2.5:0.08 without
stability (alpha_l on Gauss-Hermite 32): the scans of ``attnphase phase-diagram --omegas 0.3 --sigmas ...
--lambdas ... --order 12 --no-stability``. Each cell: converged points / rows, and the alphas they cover;
"W = 0" counts the agnostic points where the student vanishes (q < 1e-8). By default four representative
rows (``SUBSET``, about 9 minutes); ``grid all`` gives the ten rows of ``SETTINGS`` (about 28 minutes), and
``grid 0.7,0.01`` one row.
``weak``: omega = 0.45, sigma = 0.6, lambda = 0.005, A = (0.3, 0.7; 0.8, 0.2) (``attnphase scan --omega 0.45
--sigma 0.6 --lambda 0.005 --A 0.3,0.7,0.8,0.2 --alphas 0.3:2.4:0.3 --no-stability``).
"""

from __future__ import annotations

import sys
import time

from scan_tables import thresholds

import attnphase as ap

SETTINGS = ((0.3, 0.001), (0.3, 0.01), (0.3, 0.1), (0.5, 0.001), (0.5, 0.01), (0.5, 0.1), (0.7, 0.01), (0.7, 0.1))
SETTINGS += ((1.0, 0.01), (1.0, 0.1))
SUBSET = ((0.3, 0.01), (0.5, 0.001), (0.7, 0.1), (1.0, 0.1))
BRANCHES = ("positional", "semantic", "mixed", "agnostic")


def _cell(rows) -> str:  # noqa: ANN001 - the rows of one branch
    ok = rows[rows["converged"].astype(bool)]
    if not len(rows):
        return "none"
    cell = f"{len(ok)}/{len(rows)}, {ok['alpha'].min():.2f}-{ok['alpha'].max():.2f}" if len(ok) else f"0/{len(rows)}"
    vanishing = int((ok["q"] < 1e-8).sum())
    return cell + (f", W = 0 at {vanishing}" if vanishing else "")


def grid(settings: tuple[tuple[float, float], ...] = SUBSET) -> None:
    print("| sigma, lambda | " + " | ".join(BRANCHES) + " | alpha_c | alpha_l | changes of the global minimum |")
    print("|---" * (len(BRANCHES) + 4) + "|")
    for sigma, lam in settings:
        started = time.perf_counter()
        scan = ap.scan(ap.paper_model(sigma=sigma, lam=lam), order=12, stability=False, progress=False)
        rows = scan.branches
        t = scan.thresholds.iloc[0]
        values = [
            f"{t[n]:.4f}" if t[f"{n}_status"] == "found" else str(t[f"{n}_status"]) for n in ("alpha_c", "alpha_l")
        ]
        changes = ", ".join(
            f"{c.before} -> {c.after} ({c.below:.2f}, {c.above:.2f})" for c in scan.transitions.itertuples()
        )
        cells = [_cell(rows[rows["branch"] == b]) for b in BRANCHES]
        print(f"| {sigma:g}, {lam:g} | " + " | ".join(cells + values) + f" | {changes or 'none'} |", flush=True)
        print(f"<!-- {time.perf_counter() - started:.0f} s; {t['alpha_l_note']} -->", flush=True)


def weak() -> None:
    model = ap.paper_model(omega=0.45, sigma=0.6, lam=0.005, A=((0.3, 0.7), (0.8, 0.2)))
    scan = ap.scan(model, alphas="0.3:2.4:0.3", stability=False, progress=False)
    rows = scan.branches
    print("\n## omega 0.45, sigma 0.6, lambda 0.005, other A\n")
    ok = rows[rows["converged"].astype(bool)]
    print(f"{len(ok)} converged points of {len(rows)}")
    for branch, part in ok.groupby("branch"):
        print(f"{branch}: alpha {part['alpha'].min():g} to {part['alpha'].max():g} ({len(part)} points)")
    print(thresholds(scan))
    bound = (ok["train_loss_error"] + 2 * ok["train_loss_check_se"]) / ok["train_loss"]
    print(f"largest error bound of eps_t: {bound.max():.1e} relative")


def main(arguments: list[str]) -> None:
    parts = arguments or ["grid", "weak"]
    if "grid" in parts:
        chosen = [a for a in parts[parts.index("grid") + 1 :] if a != "weak"]
        if chosen == ["all"]:
            grid(SETTINGS)
        else:
            grid(tuple(tuple(float(v) for v in a.split(",")) for a in chosen) or SUBSET)
    if "weak" in parts:
        weak()


if __name__ == "__main__":
    main(sys.argv[1:])
