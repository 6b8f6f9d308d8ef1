"""Plain-text summaries of a scan, shared by the scripts of this folder (not a script itself).

``branch_table(result)`` gives one line per branch and sheet: the alphas it has converged points at,
where it is stable, where a curvature changes sign (linear interpolation between neighbouring
converged points), and how its pieces end; ``thresholds(result)`` the two thresholds and the changes of
the global minimum.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _ranges(alphas: list[float], grid: np.ndarray) -> str:
    """``alphas`` (a subset of ``grid``) as runs of consecutive grid values: ``0.1-0.74, 0.9``."""
    if not alphas:
        return "nowhere"
    index = sorted(int(np.argmin(abs(grid - a))) for a in alphas)
    runs, start = [], index[0]
    for previous, current in zip(index, index[1:] + [None], strict=True):
        if current != previous + 1:
            runs.append(f"{grid[start]:g}" if start == previous else f"{grid[start]:g}-{grid[previous]:g}")
            start = current
    return ", ".join(runs)


def sign_changes(rows: pd.DataFrame, column: str) -> list[float]:
    """Where ``column`` changes sign between neighbouring rows (sorted by alpha), by linear interpolation."""
    rows = rows[np.isfinite(rows[column])].sort_values("alpha")
    a, c = rows["alpha"].to_numpy(), rows[column].to_numpy()
    return [a[k] - c[k] * (a[k + 1] - a[k]) / (c[k + 1] - c[k]) for k in range(len(c) - 1) if c[k] * c[k + 1] < 0]


def branch_table(result) -> str:  # noqa: ANN001 - an attnphase ScanResult
    table = result.branches
    grid = np.asarray(result.alphas, dtype=float)
    curvatures = [c for c in table.columns if c.startswith("curvature_")]
    lines = [
        "| branch | sheet | converged / rows | alphas | stable at | curvature sign changes |",
        "|---|---|---|---|---|---|",
    ]
    for (branch, sheet), rows in table.groupby(["branch", "sheet"], sort=True):
        ok = rows[rows["converged"].astype(bool)]
        stable = ok[ok["stable"] == True]  # noqa: E712 - the column holds True, False or None
        changes = [f"{c.removeprefix('curvature_')} at {x:.3f}" for c in curvatures for x in sign_changes(ok, c)]
        lines.append(
            f"| {branch} | {sheet} | {len(ok)} / {len(rows)} | {_ranges(list(ok['alpha']), grid)} "
            f"| {_ranges(list(stable['alpha']), grid)} | {', '.join(changes) or 'none'} |"
        )
    ends = [end.describe(name) for name, trace in sorted(result.solution.traces.items()) for end in trace.ends]
    return "\n".join(lines + ["", "ends:"] + [f"- {e}" for e in ends])


def thresholds(result) -> str:  # noqa: ANN001 - an attnphase ScanResult
    row = result.thresholds.iloc[0]
    lines = [
        f"alpha_c = {row['alpha_c']:.6g} ({row['alpha_c_status']}; {row['alpha_c_note']})",
        f"alpha_l = {row['alpha_l']:.6g} ({row['alpha_l_status']}; {row['alpha_l_note']})",
    ]
    changes = [f"{t.before} -> {t.after} in ({t.below:g}, {t.above:g})" for t in result.transitions.itertuples()]
    lines.append("global minimum changes: " + (", ".join(changes) or "none"))
    return "\n".join(lines)
