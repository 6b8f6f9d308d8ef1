"""Simulations against the replica theory (paper Fig. 3 left and centre).

Simulated points are the mean over seeds with error bars of one standard deviation over seeds (the
shared style, :mod:`attnphase.experiments.style`); lines are the theory's branches (THEORY.md sec. 6)
read from a scan's ``branches.csv``.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import FAMILY_OF_INIT, family_labels, norm_columns, with_family_norms
from attnphase.experiments.figures import FAMILY_LINES, branch_colours, branch_gap, branch_sheets, gap_label
from attnphase.experiments.style import symbol
from attnphase.replica.declaration import AttentionModel

INIT_STYLE = {
    "positional": {"color": "tab:orange", "marker": "s"},
    "semantic": {"color": "tab:blue", "marker": "o"},
    "random": {"color": "tab:purple", "marker": "D"},
}


def summarise(simulations: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """Mean and standard deviation over seeds (``<column>_std``) of ``train_loss``, ``test_error`` and
    the overlap norms (their signs follow the push of the initialisation, the theory's are arbitrary),
    per ``(alpha, init)``, with the number of runs."""
    measures = ["train_loss", "test_error", *norm_columns(model)]
    grouped = with_family_norms(simulations, model).groupby(["alpha", "init"])[measures]
    mean, spread = grouped.mean(), grouped.std()
    return mean.join(spread.add_suffix("_std")).join(grouped.size().rename("runs")).reset_index()


def training_loss_gap(simulations: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """``eps_t(high) - eps_t(low)`` for the declaration's critical pair of branches ``(low, high)``, from
    the runs started on each (the informed start aimed at the family whose branch it is: the paper's
    semantic - positional init), paired per seed (same data): mean and standard deviation over seeds
    per alpha (``gap``, ``gap_std``, ``runs``); empty if the runs do not start on both."""
    label_of_family = family_labels(model)
    init_of = {label_of_family.get(family): init for init, family in FAMILY_OF_INIT.items()}
    low, high = (init_of.get(label) for label in model.labels.critical)
    pivot = simulations.pivot_table(index=["alpha", "seed"], columns="init", values="train_loss")
    if low is None or high is None or not {low, high} <= set(pivot.columns):
        return pd.DataFrame(columns=["alpha", "gap", "gap_std", "runs"])
    gap = (pivot[high] - pivot[low]).dropna().groupby(level="alpha")
    return pd.DataFrame({"gap": gap.mean(), "gap_std": gap.std(), "runs": gap.size()}).reset_index()


def _lone_point(points: pd.DataFrame | pd.Series) -> dict[str, object]:
    """A wide bar marker for a theory curve of one point (a line through one point is not drawn)."""
    return {"marker": "_", "markersize": 16, "markeredgewidth": 2} if len(points) == 1 else {}


def simulation_figure(
    simulations: pd.DataFrame, branches: pd.DataFrame, thresholds: pd.Series | None, model: AttentionModel
) -> Figure:
    """Four panels: test error, training loss, the overlap norms (``|m|`` solid, ``|theta|`` dashed for
    the paper's model), and the training-loss gap semantic - positional init against the theory's gap
    between the branches of ``model.labels.critical``; theory lines per branch, simulations as points
    with error bars."""
    summary = summarise(simulations, model)
    overlaps = norm_columns(model)
    theory = with_family_norms(branches[branches["converged"].astype(bool)].sort_values("alpha"), model)
    fig = Figure(figsize=(10, 7.5), layout="constrained")
    axes = fig.subplots(2, 2)
    ax_test, ax_train, ax_overlap, ax_gap = axes.ravel()
    colours = branch_colours(theory["branch"])
    for branch, group, named, sheet_style in branch_sheets(theory):
        color = colours[branch]
        extra = _lone_point(group) | sheet_style
        ax_test.plot(group["alpha"], group["test_error"], color=color, label=named(f"theory ({branch})"), **extra)
        ax_train.plot(group["alpha"], group["train_loss"], color=color, label=named(f"theory ({branch})"), **extra)
        if branch != model.labels.none:
            for column, style in zip(overlaps, FAMILY_LINES, strict=False):
                ax_overlap.plot(
                    group["alpha"],
                    group[column],
                    color=color,
                    linestyle=style,
                    label=named(f"{symbol(column)} theory ({branch})"),
                    **extra,
                )
    for init, group in summary.groupby("init", sort=False):
        style = INIT_STYLE.get(init, {"color": "k", "marker": "."})
        bars = {"linestyle": "none", "markersize": 4, "capsize": 2, "color": style["color"]}
        ax_test.errorbar(group["alpha"], group["test_error"], group["test_error_std"], marker=style["marker"], **bars)
        ax_train.errorbar(group["alpha"], group["train_loss"], group["train_loss_std"], marker=style["marker"], **bars)
        for k, column in enumerate(overlaps):
            ax_overlap.errorbar(
                group["alpha"],
                group[column],
                group[f"{column}_std"],
                marker=style["marker"],
                mfc=None if k == 0 else "none",
                label=f"{symbol(column)} ({init} init)",
                **bars,
            )
        ax_test.plot([], [], marker=style["marker"], color=style["color"], linestyle="none", label=f"{init} init")
        ax_train.plot([], [], marker=style["marker"], color=style["color"], linestyle="none", label=f"{init} init")

    low, high = model.labels.critical
    gap = branch_gap(theory, low, high)
    if gap is not None:
        ax_gap.plot(gap.index, gap.values, color="k", label="theory", **_lone_point(gap))
    simulated_gap = training_loss_gap(simulations, model)
    if not simulated_gap.empty:
        ax_gap.errorbar(
            simulated_gap["alpha"],
            simulated_gap["gap"],
            simulated_gap["gap_std"],
            linestyle="none",
            marker="o",
            markersize=4,
            capsize=2,
            color="tab:red",
            label="simulation (paired seeds)",
        )
    ax_gap.axhline(0.0, color="gray", linewidth=0.6)

    d = ", ".join(str(v) for v in np.unique(simulations["d"]))
    ax_test.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_g$", title="test error")
    ax_train.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_t$", title="training loss")
    ax_overlap.set(xlabel=r"$\alpha$", ylabel="overlap", title="summary statistics " + ", ".join(map(symbol, overlaps)))
    ax_gap.set(xlabel=r"$\alpha$", ylabel=gap_label(low, high), title="training-loss gap")
    alpha_c = None if thresholds is None else thresholds.get("alpha_c")
    for ax in axes.ravel():
        if alpha_c is not None and pd.notna(alpha_c):
            ax.axvline(alpha_c, color="k", linestyle="--", linewidth=0.9, label=rf"$\alpha_c$ = {alpha_c:.3f}")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6)
    fig.suptitle(f"simulations at $d$ = {d} (mean $\\pm$ s.d. over seeds) against the replica theory")
    return fig
