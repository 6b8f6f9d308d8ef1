"""Gradient descent approaching the theory as d grows at fixed alpha (paper Fig. 3 left, Fig. 7).

One finite-size study (``attnphase finite-size``): L-BFGS from the positional and the semantic start at
every d, against the value of the branch each start aims at. The figure's table is the study's
``finite_size`` table (per d, start and quantity: the runs' mean, the theory's value, their distance)
with the runs' standard deviation over seeds beside it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import with_family_norms
from attnphase.experiments.finite_size import FiniteSizeResult, finite_size
from attnphase.experiments.gallery.base import Drawn, FigureRequest, PaperFigure
from attnphase.experiments.gallery.panels import INIT_MARKERS
from attnphase.experiments.study import parameter_title
from attnphase.experiments.style import ERROR_BARS, family_colour, symbol


@dataclass(frozen=True)
class SizeGrid:
    """The finite-size study's ``alpha``, ``dims`` and ``seeds``."""

    alpha: float = 1.5
    dims: tuple[int, ...] = (100, 200, 400, 800, 1600)
    seeds: int = 4


FULL = SizeGrid()
QUICK = SizeGrid(dims=(40, 80, 160), seeds=2)


def with_spread(study: FiniteSizeResult) -> pd.DataFrame:
    """The study's ``finite_size`` table with ``sim_std``, the runs' standard deviation over seeds of each
    quantity (the overlaps as family norms, as the study's means are)."""
    runs = with_family_norms(study.runs, study.settings.model)
    spread = []
    for row in study.gaps.itertuples():
        chosen = runs[(runs["d"] == row.d) & (runs["init"] == row.init)]
        column = f"|{row.quantity}|" if f"|{row.quantity}|" in chosen else row.quantity
        spread.append(float(chosen[column].std()))
    return study.gaps.assign(sim_std=spread)


class FiniteD(PaperFigure):
    """The finite-size study (module docstring), one panel per quantity of :attr:`quantities`."""

    table_names = ("finite_size",)
    #: The quantities drawn, one panel each.
    quantities: tuple[tuple[str, ...], ...] = ()

    def size(self, request: FigureRequest) -> SizeGrid:
        """The grid: :data:`QUICK` or :data:`FULL`."""
        return QUICK if request.quick else FULL

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        return ("finite_size",)

    def build(self, request: FigureRequest) -> Drawn:
        size = self.size(request)
        study = finite_size(
            request.model(),
            alpha=size.alpha,
            dims=size.dims,
            seeds=size.seeds,
            out=request.part("finite_size"),
            **request.study_options(),
        )
        table = with_spread(study)
        return Drawn({"finite_size": table}, lambda: self.draw(table, study, size))

    def draw(self, table: pd.DataFrame, study: FiniteSizeResult, size: SizeGrid) -> Figure:
        """Per panel, each start's mean over seeds with its standard deviation against d (log scale), and
        the theory's value as a dashed line in the same colour."""
        fig = Figure(figsize=(4.5 * len(self.quantities), 3.8), layout="constrained")
        axes = fig.subplots(1, len(self.quantities), squeeze=False)[0]
        for ax, quantities in zip(axes, self.quantities, strict=True):
            for (init, quantity), group in table[table["quantity"].isin(quantities)].groupby(["init", "quantity"]):
                colour = family_colour(init)
                label = f"GD, {init} start" + (f", {symbol(quantity)}" if len(quantities) > 1 else "")
                ax.errorbar(
                    group["d"],
                    group["sim_mean"],
                    group["sim_std"],
                    color=colour,
                    marker=INIT_MARKERS.get(init, "."),
                    label=label,
                    **ERROR_BARS,
                )
                ax.axhline(
                    float(group["theory"].iloc[0]),
                    color=colour,
                    linestyle="--",
                    linewidth=1.0,
                    label=f"theory, {init} branch",
                )
            names = [symbol(f"|{q}|") if q in ("m", "theta") else symbol(q) for q in quantities]
            ax.set(xscale="log", xlabel=symbol("d"), ylabel=", ".join(names))
            ax.set_xticks(size.dims, [str(d) for d in size.dims])
            ax.minorticks_off()
            ax.legend(fontsize=7)
        parameters = parameter_title(study.settings.model.parameters())
        runs = f"GD, mean $\\pm$ s.d. over {size.seeds} seeds"
        fig.suptitle(f"{parameters}, {symbol('alpha')} = {size.alpha:g}\n{runs}", fontsize=10)
        return fig


class Fig3Left(FiniteD):
    name = "fig3-left"
    description = "the overlaps of GD from each start against d at alpha 1.5, approaching their branches"
    quantities = (("m", "theta"),)


class Fig7(FiniteD):
    name = "fig7"
    description = "training loss and test error of GD from each start against d at alpha 1.5, and the theory's"
    quantities = (("train_loss",), ("test_error",))
