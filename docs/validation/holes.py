"""The three grid alphas where a continuation step fails inside a branch of the paper's model: the row
each now has, and the reason the trace records where it bridged one.

    python docs/validation/holes.py

Each is scanned (default rule, no stability) on the short grid of ``tests/test_holes.py``, which checks
that no grid alpha inside a branch's range is left without a row and that the changes of the global
minimum make no island. Printed per alpha: converged or not, the status (the checks a flagged point
failed), the order parameters and the gap's reason.
"""

from __future__ import annotations

import numpy as np

import attnphase as ap

HOLES = (
    (0.25, "0.66:1.38:0.08", "positional", 0.9),
    (0.15, "1.14:1.86:0.08", "positional", 1.38),
    (0.45, "1.7:2.5:0.08", "agnostic", 2.1),
)


def main() -> None:
    for omega, alphas, branch, alpha in HOLES:
        result = ap.scan(ap.paper_model(omega=omega), alphas, ap.ScanOptions(stability=False), progress=False)
        rows = result.branches[(result.branches["branch"] == branch) & (result.branches["sheet"] == 0)]
        (row,) = rows[np.isclose(rows["alpha"], alpha)].itertuples()
        gaps = {g.alpha: g.reason for g in result.solution.traces[branch].gaps}
        print(
            f"omega {omega:g}, {branch}, alpha {alpha:g}: converged {bool(row.converged)}, status {row.status!r}, "
            f"m {row.m:.4f}, q {row.q:.4f}, theta {row.theta:.4f}; gap: {gaps.get(alpha, 'none')}"
        )
    transitions = ap.scan(ap.paper_model(omega=0.25), "0.66:1.38:0.08", ap.ScanOptions(stability=False), progress=False)
    print(transitions.transitions.to_string(index=False))


if __name__ == "__main__":
    main()
