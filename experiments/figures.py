"""Figures of a scan (paper Fig. 2 and Fig. 3 centre).

Figures are built as :class:`matplotlib.figure.Figure` objects without pyplot, so that drawing
neither selects a backend nor leaves figures open: they display in Jupyter and are saved by
:func:`attnphase.experiments.study.save_figure`.
"""

from __future__ import annotations

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.study import parameter_title

BRANCH_STYLE = {
    "positional": {"color": "tab:orange", "marker": "s"},
    "semantic": {"color": "tab:blue", "marker": "o"},
    "agnostic": {"color": "tab:gray", "marker": "^"},
}


def _style(branch: str) -> dict[str, object]:
    return BRANCH_STYLE.get(branch, {"color": None, "marker": "."})


def _mark_thresholds(ax, thresholds: pd.Series) -> None:
    for name, style in (("alpha_c", "--"), ("alpha_l", ":")):
        value = thresholds.get(name)
        if value is not None and pd.notna(value):
            ax.axvline(value, color="k", linestyle=style, linewidth=0.9, label=rf"$\alpha_{name[-1]}$ = {value:.4f}")


def scan_figure(branches: pd.DataFrame, thresholds: pd.Series) -> Figure:
    """Four panels: overlaps, training loss per branch, test error of the global minimum
    against the linear baseline, and the training-loss gap semantic - positional (THEORY.md
    sec. 5, 6); ``branches`` and ``thresholds`` are the tables of a scan."""
    ok = branches[branches["converged"].astype(bool)]
    fig = Figure(figsize=(10, 7.5), layout="constrained")
    axes = fig.subplots(2, 2)
    ax_overlap, ax_train, ax_test, ax_gap = axes.ravel()
    for branch, group in ok.groupby("branch", sort=False):
        group = group.sort_values("alpha")
        style = _style(branch)
        if "theta" in group:
            ax_overlap.plot(group["alpha"], group["theta"].abs(), color=style["color"], label=rf"$\theta$ ({branch})")
        if "m" in group:
            ax_overlap.plot(
                group["alpha"], group["m"].abs(), color=style["color"], linestyle="--", label=f"$m$ ({branch})"
            )
        ax_train.plot(group["alpha"], group["train_loss"], color=style["color"], label=branch)
    ax_overlap.set(xlabel=r"$\alpha$", ylabel="overlap", title="summary statistics")
    ax_train.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_t$", title="training loss of each branch")

    best = ok.loc[ok.groupby("alpha")["train_loss"].idxmin()].sort_values("alpha")
    for branch, group in best.groupby("branch", sort=False):
        ax_test.plot(
            group["alpha"],
            group["test_error"],
            linestyle="none",
            markersize=4,
            label=f"global minimum ({branch})",
            **_style(branch),
        )
    ax_test.axhline(thresholds["baseline_test_error"], color="tab:green", label="linear baseline")
    ax_test.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_g$", title="test error")

    pivot = ok.pivot_table(index="alpha", columns="branch", values="train_loss")
    if {"semantic", "positional"} <= set(pivot.columns):
        gap = (pivot["semantic"] - pivot["positional"]).dropna()
        ax_gap.plot(gap.index, gap.values, color="k")
        ax_gap.axhline(0.0, color="gray", linewidth=0.6)
    ax_gap.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_t^{sem} - \epsilon_t^{pos}$", title="training-loss gap")

    for ax in axes.ravel():
        _mark_thresholds(ax, thresholds)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(parameter_title(thresholds))
    return fig
