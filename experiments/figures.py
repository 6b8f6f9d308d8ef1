"""Figures of a scan (paper Fig. 2 and Fig. 3 centre) and of a phase diagram (Fig. 3 right and centre).

Figures are built as :class:`matplotlib.figure.Figure` objects without pyplot, so that drawing
neither selects a backend nor leaves figures open: they display in Jupyter and are saved by
:func:`attnphase.experiments.study.save_figure`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import norm_columns, with_family_norms
from attnphase.experiments.study import parameter_title
from attnphase.experiments.style import SweepColours, gap_symbol, symbol
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.points.fixed_point import read_flag

BRANCH_STYLE = {
    "positional": {"color": "tab:orange", "marker": "s"},
    "semantic": {"color": "tab:blue", "marker": "o"},
    "agnostic": {"color": "tab:gray", "marker": "^"},
    "mixed": {"color": "tab:purple", "marker": "D"},
}
#: Colours of branch labels no style names, in order of first appearance.
OTHER_COLOURS = ("tab:green", "tab:red", "tab:brown", "tab:pink", "tab:olive", "tab:cyan")


def branch_marker(branch: str) -> str:
    """The marker of a branch label: the named style's, else a dot."""
    return str(BRANCH_STYLE.get(branch, {"marker": "."})["marker"])


def branch_colours(labels: Iterable[str]) -> dict[str, str]:
    """A colour per distinct branch label: the named style's, else the next unused of
    :data:`OTHER_COLOURS`, in order of first appearance (so every panel draws a label alike)."""
    distinct = list(dict.fromkeys(labels))
    others = iter(OTHER_COLOURS * (1 + len(distinct) // len(OTHER_COLOURS)))
    return {b: str(BRANCH_STYLE[b]["color"]) if b in BRANCH_STYLE else next(others) for b in distinct}


def styled_order(labels: Iterable[str]) -> list[str]:
    """The distinct branch labels in :data:`BRANCH_STYLE`'s order, then the others in order of first
    appearance (so every panel lists its branches alike)."""
    distinct = list(dict.fromkeys(labels))
    return [b for b in BRANCH_STYLE if b in distinct] + [b for b in distinct if b not in BRANCH_STYLE]


def _mark_thresholds(ax, thresholds: pd.Series) -> None:
    for name, style in (("alpha_c", "--"), ("alpha_l", ":")):
        value = thresholds.get(name)
        if value is not None and pd.notna(value):
            ax.axvline(value, color="k", linestyle=style, linewidth=0.9, label=rf"$\alpha_{name[-1]}$ = {value:.4f}")


#: Line styles of the overlap families' norms, in the declaration's order of its families.
FAMILY_LINES = ("-", "--", ":", "-.")


def branch_sheets(
    table: pd.DataFrame,
) -> Iterator[tuple[str, pd.DataFrame, Callable[[str], str | None], dict[str, object]]]:
    """Each branch's points per sheet, sorted by alpha, with how their lines are drawn: ``(branch,
    points, label, style)``, where ``label(text)`` is ``text`` on the first sheet and ``None`` beyond,
    and ``style`` draws a sheet past a fold thin (the same branch, turned back)."""
    sheets = table["sheet"] if "sheet" in table else pd.Series(0, index=table.index)
    for (branch, sheet), group in table.groupby([table["branch"], sheets], sort=False):

        def label(text: str, first: bool = not sheet) -> str | None:
            return text if first else None

        yield branch, group.sort_values("alpha"), label, {"linewidth": 0.8} if sheet else {}


def branch_gap(branches: pd.DataFrame, low: str, high: str) -> pd.Series | None:
    """``eps_t(high) - eps_t(low)`` per alpha, each branch's lowest training loss at that alpha (over its
    sheets), where both have a point; ``None`` if either branch has none."""
    pivot = branches.pivot_table(index="alpha", columns="branch", values="train_loss", aggfunc="min")
    return (pivot[high] - pivot[low]).dropna() if {low, high} <= set(pivot.columns) else None


def gap_label(low: str, high: str) -> str:
    """The axis label of :func:`branch_gap`."""
    return rf"$\epsilon_t$({high}) $-$ $\epsilon_t$({low})"


#: How a point's replica symmetry is marked: ``rs_stable`` False (the replicon above one or infinite) and
#: None where it was assessed but not resolved (THEORY.md sec. 12).
REPLICA_MARKS = (
    (False, {"marker": "x", "color": "0.25", "label": "RS unstable (replicon)"}),
    (None, {"marker": "o", "markerfacecolor": "none", "color": "0.55", "label": "RS unresolved"}),
)


def _replica_flags(points: pd.DataFrame) -> pd.Series:
    """``rs_stable`` as True / False / None per row (None also where the column is absent or the point
    was not assessed: no ``replicon_smooth``)."""
    if "rs_stable" not in points:
        return pd.Series(True, index=points.index)
    assessed = np.isfinite(points["replicon_smooth"].astype(float))
    return points["rs_stable"].map(read_flag).where(assessed, True)


def mark_replica_symmetry(ax, points: pd.DataFrame, x: str, y: str) -> None:
    """Markers (:data:`REPLICA_MARKS`) over the points of ``points`` that are not replica-symmetric
    stable, at columns ``x``, ``y``."""
    flags = _replica_flags(points)
    for value, style in REPLICA_MARKS:
        chosen = points[flags.map(lambda f, v=value: f is v)]
        if len(chosen):
            ax.plot(chosen[x], chosen[y], linestyle="none", markersize=4, **style)


#: How the stretches of a parameter sweep's global minima that are not replica-symmetric stable are drawn.
REPLICA_BARS = (
    (False, {"color": "0.15", "alpha": 0.55, "label": "RS unstable (replicon)"}),
    (None, {"color": "0.7", "alpha": 0.9, "label": "RS unresolved"}),
)


def grid_stretches(values: np.ndarray, chosen: np.ndarray) -> list[tuple[float, float]]:
    """The runs of consecutive ``chosen`` entries of the sorted grid ``values``, each widened by half the
    grid's step on both sides (one point is a bar of one step)."""
    half = 0.5 * float(np.median(np.diff(values))) if values.size > 1 else 0.0
    edges = np.flatnonzero(np.diff(np.concatenate([[0], chosen.astype(int), [0]])))
    starts, stops = edges[::2], edges[1::2]
    return [(values[start] - half, values[stop - 1] + half) for start, stop in zip(starts, stops, strict=True)]


def mark_replica_stretches(ax, points: pd.DataFrame, x: str, y: str) -> None:
    """At every value of ``x``, a vertical bar (:data:`REPLICA_BARS`) over each stretch of ``y`` whose
    points are not replica-symmetric stable: a region on a phase diagram, where a marker per grid
    point would hide the map under it."""
    flags = _replica_flags(points)
    for value, style in REPLICA_BARS:
        label = style["label"]
        for at, column in points.assign(flag=flags).groupby(x):
            column = column.sort_values(y)
            chosen = column["flag"].map(lambda f, v=value: f is v).to_numpy(bool)
            for bottom, top in grid_stretches(column[y].to_numpy(float), chosen):
                ax.plot([at, at], [bottom, top], linewidth=3, solid_capstyle="butt", **(style | {"label": label}))
                label = None


#: How a local-policy branch is drawn beside the global one (THEORY.md sec. 12).
LOCAL_STYLE = {"marker": "+", "markersize": 4, "alpha": 0.7}


def _unlabelled(text: str) -> None:
    """No legend label (a line the legend names once for all its kind)."""
    return None


def of_policy(table: pd.DataFrame, prox: str) -> pd.DataFrame:
    """The rows of ``table`` computed under the prox policy ``prox`` (a table without a ``prox`` column is
    the global policy's)."""
    policies = table["prox"] if "prox" in table else pd.Series("global", index=table.index)
    return table[policies == prox]


def primary_policy(table: pd.DataFrame) -> pd.DataFrame:
    """The rows of the global policy, or of the local one in a table without global rows: those the
    global minimum and the thresholds are read from."""
    global_rows = of_policy(table, "global")
    return global_rows if len(global_rows) or "prox" not in table else table


def scan_figure(branches: pd.DataFrame, thresholds: pd.Series, model: AttentionModel) -> Figure:
    """Four panels: the norm of each overlap family on the branches where it is non-zero (the paper's
    ``|m|`` and ``|theta|``), the training loss per branch, the test error of the global minimum
    against the linear baseline, and the training-loss gap between the declaration's critical pair of
    branches (THEORY.md sec. 5, 6; the paper's semantic - positional); points that are not
    replica-symmetric stable are marked on the training losses and the global minimum
    (:func:`mark_replica_symmetry`); ``branches`` and ``thresholds`` are the tables of a scan of
    ``model``. Where ``branches`` holds the local policy's points too (a ``prox`` column), its branches
    are drawn in the same colours with :data:`LOCAL_STYLE` on the first two panels; the last two are the
    global policy's."""
    every = with_family_norms(branches[branches["converged"].astype(bool)], model)
    ok = primary_policy(every)
    norms = list(norm_columns(model))
    fig = Figure(figsize=(10, 7.5), layout="constrained")
    axes = fig.subplots(2, 2)
    ax_overlap, ax_train, ax_test, ax_gap = axes.ravel()
    colours = branch_colours(every["branch"])
    local = of_policy(every, "local") if len(ok) != len(every) else every.iloc[:0]
    for points, style in ((ok, {}), (local, LOCAL_STYLE)):
        for branch, group, named, extra in branch_sheets(points):
            colour, extra = colours[branch], {**extra, **style}
            named = _unlabelled if style else named  # one legend entry for every local branch (below)
            for column, line in zip(norms, FAMILY_LINES, strict=False):
                if not group[column].any():
                    continue  # a family the branch holds at zero
                label = named(f"{column} ({branch})")
                ax_overlap.plot(group["alpha"], group[column], color=colour, linestyle=line, label=label, **extra)
            ax_train.plot(group["alpha"], group["train_loss"], color=colour, label=named(branch), **extra)
    if len(local):
        for ax in (ax_overlap, ax_train):
            ax.plot([], [], color="0.3", label="local prox (same colours)", **LOCAL_STYLE)
    ax_overlap.set(xlabel=r"$\alpha$", ylabel="overlap", title="summary statistics")
    mark_replica_symmetry(ax_train, ok, "alpha", "train_loss")
    ax_train.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_t$", title="training loss of each branch")

    best = ok.loc[ok.groupby("alpha")["train_loss"].idxmin()].sort_values("alpha")
    for branch, group in best.groupby("branch", sort=False):
        ax_test.plot(
            group["alpha"],
            group["test_error"],
            linestyle="none",
            markersize=4,
            label=f"global minimum ({branch})",
            color=colours[branch],
            marker=branch_marker(branch),
        )
    mark_replica_symmetry(ax_test, best, "alpha", "test_error")
    ax_test.axhline(thresholds["baseline_test_error"], color="tab:green", label="linear baseline")
    ax_test.set(xlabel=r"$\alpha$", ylabel=r"$\epsilon_g$", title="test error")

    low, high = model.labels.critical
    gap = branch_gap(ok, low, high)
    if gap is not None:
        ax_gap.plot(gap.index, gap.values, color="k")
        ax_gap.axhline(0.0, color="gray", linewidth=0.6)
    ax_gap.set(xlabel=r"$\alpha$", ylabel=gap_label(low, high), title="training-loss gap")

    for ax in axes.ravel():
        _mark_thresholds(ax, thresholds)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    fig.suptitle(parameter_title(thresholds))
    return fig


def _swept(table: pd.DataFrame, first_result: str) -> tuple[list[str], list[str]]:
    """The parameter columns of a phase diagram's table (those between ``unit`` and the table's
    ``first_result`` column) and, of those, the ones whose value varies across units."""
    columns = list(table.columns)
    parameters = columns[columns.index("unit") + 1 : columns.index(first_result)]
    return parameters, [p for p in parameters if table[p].nunique() > 1]


def _parameters(thresholds: pd.DataFrame) -> tuple[str, list[str]]:
    """The swept parameter (the first whose value varies across units, else the first) and the
    other varying parameters, which make one panel per combination."""
    parameters, varying = _swept(thresholds, "alpha_c")
    axis = varying[0] if varying else parameters[0]
    return axis, varying[1:]


def _panels(thresholds: pd.DataFrame, others: list[str]) -> list[tuple[str, pd.DataFrame]]:
    if not others:
        return [("", thresholds)]
    return [
        (
            ", ".join(f"{k} = {v:g}" for k, v in zip(others, key if isinstance(key, tuple) else (key,), strict=True)),
            group,
        )
        for key, group in thresholds.groupby(others, sort=True)
    ]


def global_minima(branches: pd.DataFrame) -> pd.DataFrame:
    """The converged point of lowest training loss at every unit and alpha (THEORY.md sec. 5), where no
    flagged point there has a lower one (:func:`~attnphase.saddle.phases.minimum.global_minimum`)."""
    finite = branches[np.isfinite(branches["train_loss"].astype(float))]
    lowest = finite.loc[finite.groupby(["unit", "alpha"])["train_loss"].idxmin()]
    return lowest[lowest["converged"].astype(bool)]


def _families_around(thresholds: pd.DataFrame, best: pd.DataFrame) -> pd.DataFrame:
    """Per unit, the global minimum's branch at the lowest and at the highest scanned alpha (``below``,
    ``above``) and the boundary between them: ``alpha_c``, or the top of the range where none is found."""
    ends = best.sort_values("alpha").groupby("unit")["branch"].agg(["first", "last"])
    table = thresholds.set_index("unit").join(ends, how="inner")
    top = best["alpha"].max()
    boundary = table["alpha_c"].astype(float).where(table["alpha_c"].notna(), top)
    above = table["last"].where(table["alpha_c"].notna(), table["first"])
    return table.assign(below=table["first"], above=above, boundary=boundary)


def draw_phase_regions(ax, thresholds: pd.DataFrame, branches: pd.DataFrame, axis: str, shade: bool = True) -> None:
    """The phase diagram on ``ax`` against the swept parameter ``axis``: the regions where each branch is
    the global minimum (shaded if ``shade``), bounded by ``alpha_c`` interpolated linearly between the
    grid's values; ``alpha_c`` and ``alpha_l``; where each branch ends inside the scanned range (dashed, in
    its colour, ``^`` where it begins and ``v`` where it ends going up in alpha); the global minima
    that are not replica-symmetric stable marked as bars (:func:`mark_replica_stretches`); the legend
    below the axes. ``thresholds`` and ``branches``: a phase diagram's tables of one policy (one row
    per unit)."""
    best = global_minima(branches)
    colours = branch_colours(branches["branch"])
    around = _families_around(thresholds, best).sort_values(axis)
    x, low, high = around[axis].to_numpy(float), branches["alpha"].min(), branches["alpha"].max()
    if shade:
        for name in dict.fromkeys([*around["below"], *around["above"]]):
            style = {"color": colours[name], "alpha": 0.25, "linewidth": 0, "interpolate": True}
            ax.fill_between(
                x, low, around["boundary"], where=around["below"] == name, label=f"global minimum: {name}", **style
            )
            ax.fill_between(x, around["boundary"], high, where=around["above"] == name, **style)
    ok = branches[branches["converged"].astype(bool)]
    for branch in styled_order(ok["branch"]):
        group = ok[ok["branch"] == branch]
        edges = group.groupby("unit")["alpha"].agg(["min", "max"]).join(around[[axis]], how="inner").sort_values(axis)
        label = f"edge of the {branch} branch"
        for edge, limit, marker in (("min", low, "^"), ("max", high, "v")):
            inside = edges[edge].where(~np.isclose(edges[edge], limit))
            if inside.notna().any():
                style = {
                    "color": colours[branch],
                    "linestyle": "--",
                    "linewidth": 1.0,
                    "marker": marker,
                    "markersize": 4,
                }
                ax.plot(edges[axis], inside, label=label, **style)
                label = None
    x_of = around[axis]
    mark_replica_stretches(ax, best.assign(**{axis: best["unit"].map(x_of)}).dropna(subset=[axis]), axis, "alpha")
    ax.plot(x, around["alpha_c"], color="k", marker="o", markersize=3, label=r"$\alpha_c$")
    ax.plot(x, around["alpha_l"], color="k", linestyle=":", marker="x", markersize=3, label=r"$\alpha_l$")
    ax.set(xlabel=symbol(axis), ylabel=symbol("alpha"), ylim=(low, high))
    outside_legend(ax)


def outside_legend(ax) -> None:
    """The legend of ``ax`` below it, in three columns, so that it hides nothing of a map."""
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=3, frameon=False)


def phase_diagram_figure(thresholds: pd.DataFrame, branches: pd.DataFrame) -> Figure:
    """The phase diagram (paper Fig. 3 right, :func:`draw_phase_regions`) against the swept parameter,
    one panel per combination of the other swept parameters; the local policy's alpha_c beside the
    global one's where the tables hold both. ``thresholds`` and ``branches`` are a phase diagram's
    tables (with their ``unit`` column)."""
    global_rows = of_policy(thresholds, "global")
    local = of_policy(thresholds, "local") if len(global_rows) else thresholds.iloc[:0]
    thresholds, branches = primary_policy(thresholds), primary_policy(branches)
    axis, others = _parameters(thresholds)
    panels = _panels(thresholds, others)
    fig = Figure(figsize=(5.5 * len(panels), 4.5), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, panel) in zip(axes, panels, strict=True):
        units = panel["unit"].tolist()
        draw_phase_regions(ax, panel, branches[branches["unit"].isin(units)], axis)
        if len(local):
            on_panel = local[local["unit"].isin(units)].sort_values(axis)
            ax.plot(on_panel[axis], on_panel["alpha_c"], color="0.4", label=r"$\alpha_c$ (local prox)", **LOCAL_STYLE)
            outside_legend(ax)
        if title:
            ax.set_title(f"phase diagram, {title}")
    return fig


def gap_figure(branches: pd.DataFrame, low: str, high: str) -> Figure:
    """The training-loss gap ``eps_t(high) - eps_t(low)`` against alpha, one curve per unit (paper Fig. 3
    centre; ``low, high``: the declaration's critical pair), coloured along a sequential map by the first
    swept parameter with a colour bar (the others, if any, in the legend), on the global policy's
    branches where ``branches`` holds both."""
    fig = Figure(figsize=(6.5, 4.5), layout="constrained")
    ax = fig.add_subplot()
    branches = primary_policy(branches)
    ok = branches[branches["converged"].astype(bool)]
    _, varying = _swept(branches, "alpha")
    swept = varying[0] if varying else "unit"
    colours = SweepColours(swept, ok[swept]) if varying else None
    for _, group in ok.groupby("unit", sort=True):
        gap = branch_gap(group, low, high)
        if gap is not None:
            first = group.iloc[0]
            label = ", ".join(f"{symbol(p)} = {first[p]:g}" for p in varying[1:]) or None
            colour = colours(first[swept]) if colours else None
            ax.plot(gap.index, gap.values, color=colour, label=label)
    ax.axhline(0.0, color="gray", linewidth=0.6)
    ax.set(xlabel=symbol("alpha"), ylabel=gap_symbol(low, high), title="training-loss gap (theory)")
    if colours:
        colours.bar(fig, ax)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    return fig
