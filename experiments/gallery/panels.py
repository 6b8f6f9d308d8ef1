"""The panels the paper's figures are made of, each from a study's tables, in the shared style
(:mod:`attnphase.experiments.style`): theory lines per branch, training runs as means with their seeds'
standard deviation, thresholds and branch ends marked."""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.axes import Axes

from attnphase.experiments.families import with_family_norms
from attnphase.experiments.figures import LOCAL_STYLE, branch_sheets, mark_replica_symmetry, of_policy
from attnphase.experiments.scan import ScanResult
from attnphase.experiments.style import ERROR_BARS, family_colour, symbol

#: The marker of each training start.
INIT_MARKERS = {"positional": "s", "semantic": "o", "random": "D"}
#: How a branch end is marked, by its kind (:class:`~attnphase.saddle.search.trace.EndKind`).
END_MARKERS = {"fold": ("|", "fold"), "merged": ("x", "merges"), "failed": ("1", "not continued")}
#: The columns of a branch-end table (:func:`branch_ends`).
END_COLUMNS = ("branch", "sheet", "direction", "kind", "alpha", "at", "detail")


def theory_points(scan: ScanResult) -> pd.DataFrame:
    """The scan's converged points (its ``branches`` rows) with the overlap families' norms ``|m|``,
    ``|theta|`` (:func:`~attnphase.experiments.families.with_family_norms`)."""
    branches = scan.branches
    return with_family_norms(branches[branches["converged"].astype(bool)], scan.model).reset_index(drop=True)


def branch_ends(scan: ScanResult) -> pd.DataFrame:
    """Where each branch of the scan could not be continued inside its alpha range: a fold, a merger
    into another branch, or a failed step (``run.json``'s ``branch_ends`` as a table, :data:`END_COLUMNS`)."""
    rows = [
        {"branch": name, "sheet": end.sheet, "direction": end.direction, "kind": str(end.kind.value)}
        | {"alpha": end.alpha, "at": end.at, "detail": end.detail}
        for name, trace in scan.solution.traces.items()
        for end in trace.ends
    ]
    return pd.DataFrame(rows, columns=list(END_COLUMNS))


def draw_theory(
    ax: Axes, points: pd.DataFrame, column: str, skip: str | None = None, linestyle: str = "-", suffix: str = ""
) -> None:
    """``column`` against alpha on every branch (each in its family's colour, one legend entry per
    branch followed by ``suffix``; local-policy branches in the same colours with ``+`` and one legend
    entry for all), but a branch where ``column`` is zero throughout or named ``skip``."""
    drawn_local = False
    for prox, style in (("global", {}), ("local", LOCAL_STYLE)):
        for branch, group, named, extra in branch_sheets(of_policy(points, prox)):
            if branch == skip or not np.any(group[column].to_numpy(float)):
                continue
            label = None if style else named(f"{branch}{suffix} (theory)")
            colour = family_colour(branch)
            ax.plot(group["alpha"], group[column], color=colour, linestyle=linestyle, label=label, **extra, **style)
            drawn_local = drawn_local or bool(style)
    if drawn_local and linestyle == "-":
        ax.plot([], [], color="0.3", label="local prox (same colours)", **LOCAL_STYLE)


def draw_runs(
    ax: Axes, summary: pd.DataFrame, column: str, x: str = "alpha", filled: bool = True, suffix: str = ""
) -> None:
    """The runs' mean of ``column`` with its seeds' standard deviation, one series per start (open
    markers unless ``filled``; ``suffix`` after each legend entry)."""
    for init, group in summary.groupby("init", sort=False):
        ax.errorbar(
            group[x],
            group[column],
            group[f"{column}_std"],
            color=family_colour(init),
            marker=INIT_MARKERS.get(init, "."),
            markerfacecolor=None if filled else "none",
            label=f"GD, {init} start{suffix}",
            **ERROR_BARS,
        )


def mark_ends(ax: Axes, ends: pd.DataFrame, points: pd.DataFrame, column: str) -> None:
    """A marker at the last point of every branch end in ``ends`` (:data:`END_MARKERS`, one legend entry
    per kind), at its value of ``column``."""
    named = set()
    for end in ends.itertuples():
        piece = points[(points["branch"] == end.branch) & np.isclose(points["alpha"], end.alpha)]
        if piece.empty or not np.any(points.loc[points["branch"] == end.branch, column].to_numpy(float)):
            continue
        marker, word = END_MARKERS.get(end.kind, ("*", end.kind))
        label = None if end.kind in named else f"branch end ({word})"
        named.add(end.kind)
        ax.plot(
            [end.alpha], [piece[column].iloc[0]], marker=marker, color="k", markersize=9, linestyle="none", label=label
        )


def mark_thresholds(ax: Axes, thresholds: pd.Series) -> None:
    """Vertical lines at ``alpha_c`` (dashed) and ``alpha_l`` (dotted) where found."""
    for name, line in (("alpha_c", "--"), ("alpha_l", ":")):
        value = thresholds.get(name)
        if value is not None and pd.notna(value):
            ax.axvline(float(value), color="k", linestyle=line, linewidth=0.9, label=f"{symbol(name)} = {value:.3f}")


def global_minimum_line(ax: Axes, points: pd.DataFrame, column: str) -> pd.DataFrame:
    """``column`` of the global minimum (the lowest training loss at each alpha, global policy), in the
    colour of its branch, unstable replica symmetry marked; returns those rows."""
    primary = of_policy(points, "global")
    best = primary.loc[primary.groupby("alpha")["train_loss"].idxmin()].sort_values("alpha")
    ax.plot(best["alpha"], best[column], color="k", linewidth=2.5, alpha=0.2, label="global minimum (theory)")
    for branch, group in best.groupby("branch", sort=False):
        ax.plot(group["alpha"], group[column], color=family_colour(branch), marker=".", linestyle="none")
    mark_replica_symmetry(ax, best, "alpha", column)
    return best
