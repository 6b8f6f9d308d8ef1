"""The training-loss gap and the phase diagram over omega and alpha (paper Fig. 3 centre and right,
Fig. 9, Fig. 14).

One phase diagram over the omegas (``attnphase phase-diagram``: a scan per omega) and at every omega a
simulation from the positional and the semantic start (``attnphase simulate``, compared with that
omega's scan). The gap ``eps_t(high) - eps_t(low)`` between the declaration's critical pair of branches
(the paper's semantic - positional) is the theory's per scanned alpha and the runs' per seed on the
same training set (paired), as a mean with its seeds' standard deviation.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.colors import TwoSlopeNorm
from matplotlib.figure import Figure

from attnphase.experiments.figures import branch_gap, draw_phase_regions, of_policy
from attnphase.experiments.gallery.base import Drawn, FigureRequest, PaperFigure
from attnphase.experiments.gallery.over_alpha import quick_scan
from attnphase.experiments.phase_diagram import UNITS, PhaseDiagramResult, phase_diagram
from attnphase.experiments.simulate import simulate
from attnphase.experiments.simulation_figures import training_loss_gap
from attnphase.experiments.study import parameter_title
from attnphase.experiments.style import ERROR_BARS, SweepColours, gap_symbol, symbol
from attnphase.replica.declaration import AttentionModel
from attnphase.replica.variants import Value, Variant, variant


@dataclass(frozen=True)
class OmegaSize:
    """The grids of a figure over omega: the ``omegas``, the scans' ``alphas`` and options, the
    simulations' ``d``, ``sim_alphas`` and ``seeds``."""

    omegas: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4, 0.5)
    alphas: str = "0.1:2.5:0.08"
    scan_options: Mapping[str, object] = field(default_factory=dict)
    d: int = 400
    sim_alphas: str = "0.4:2.4:0.4"
    seeds: int = 4

    @classmethod
    def quick(cls, model: AttentionModel) -> OmegaSize:
        """The quick grids for ``model``: two omegas, the scans of :func:`quick_scan`, training at d = 60."""
        alphas, options = quick_scan(model)
        return cls((0.2, 0.4), alphas, options, d=60, sim_alphas="0.5:2.0:0.5", seeds=2)


#: The columns of a gap table.
GAP_COLUMNS = ("omega", "alpha", "gap", "gap_std", "runs")


def theory_gaps(diagram: PhaseDiagramResult) -> pd.DataFrame:
    """The theory's gap per omega and scanned alpha where both critical branches have a point (global
    policy; :func:`~attnphase.experiments.figures.branch_gap`), :data:`GAP_COLUMNS` with zero spread."""
    low, high = diagram.models[0].labels.critical
    frames = []
    for omega, group in of_policy(diagram.branches, "global").groupby("omega"):
        gap = branch_gap(group[group["converged"].astype(bool)], low, high)
        if gap is not None:
            frames.append(pd.DataFrame({"omega": omega, "alpha": gap.index, "gap": gap.to_numpy()}))
    table = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["omega", "alpha", "gap"])
    return table.assign(gap_std=0.0, runs=0)[list(GAP_COLUMNS)]


@dataclass(frozen=True)
class OmegaStudies:
    """A figure's phase diagram, the theory's gaps read from it (:func:`theory_gaps`) and its runs' gaps."""

    diagram: PhaseDiagramResult
    gaps: pd.DataFrame
    theory_gap: pd.DataFrame

    @classmethod
    def of(cls, diagram: PhaseDiagramResult, gaps: pd.DataFrame) -> OmegaStudies:
        """The studies of ``diagram`` and the runs' ``gaps``, with the theory's gaps computed once."""
        return cls(diagram, gaps, theory_gaps(diagram))

    def tables(self) -> dict[str, pd.DataFrame]:
        """The phase diagram's thresholds, the theory's gaps and the runs' gaps (:data:`GAP_COLUMNS`)."""
        return {"thresholds": self.diagram.thresholds, "theory_gap": self.theory_gap, "runs_gap": self.gaps}


class OverOmega(PaperFigure):
    """The studies over omega (module docstring), drawn as the panels :attr:`panels` side by side."""

    table_names = ("thresholds", "theory_gap", "runs_gap")
    #: How each panel is drawn from the studies: ``panel(ax, fig, studies)``.
    panels: tuple[Callable[[Axes, Figure, OmegaStudies], None], ...] = ()

    def size(self, request: FigureRequest) -> OmegaSize:
        """The grids: :meth:`OmegaSize.quick` or the full ones (five omegas, the studies' defaults)."""
        return OmegaSize.quick(request.model()) if request.quick else OmegaSize()

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        return ("phase_diagram", *(f"simulate_omega={omega:g}" for omega in self.size(request).omegas))

    def studies(self, request: FigureRequest) -> OmegaStudies:
        """The phase diagram over the omegas and a simulation at each, compared with that omega's scan."""
        size = self.size(request)
        models = [request.model(omega=omega) for omega in size.omegas]
        diagram = phase_diagram(
            models, size.alphas, out=request.part("phase_diagram"), **size.scan_options, **request.study_options()
        )
        gaps = []
        for omega, model, unit in zip(size.omegas, models, diagram.names, strict=True):
            runs = simulate(
                model,
                d=size.d,
                alphas=size.sim_alphas,
                seeds=size.seeds,
                theory=request.part("phase_diagram") / UNITS / unit,
                out=request.part(f"simulate_omega={omega:g}"),
                **request.study_options(),
            )
            gaps.append(training_loss_gap(runs.runs, model).assign(omega=omega)[list(GAP_COLUMNS)])
        return OmegaStudies.of(diagram, pd.concat(gaps, ignore_index=True))

    def build(self, request: FigureRequest) -> Drawn:
        studies = self.studies(request)
        size = self.size(request)
        return Drawn(studies.tables(), lambda: self.draw(studies, size, request.variant.name))

    def draw(self, studies: OmegaStudies, size: OmegaSize, model_name: str) -> Figure:
        """The figure of ``studies``: :attr:`panels` side by side, titled by the model's name and its
        fixed parameters."""
        panels = self.panels
        fig = Figure(figsize=(6.5 * len(panels), 4.5), layout="constrained")
        for ax, panel in zip(fig.subplots(1, len(panels), squeeze=False)[0], panels, strict=True):
            panel(ax, fig, studies)
        fixed = {k: v for k, v in studies.diagram.models[0].parameters().items() if k != "omega"}
        runs = f"GD at $d$ = {size.d}, mean $\\pm$ s.d. over {size.seeds} seeds"
        fig.suptitle(f"{model_name} model, {parameter_title(fixed)}\n{runs}", fontsize=10)
        return fig


def draw_gaps(ax: Axes, fig: Figure, studies: OmegaStudies) -> None:
    """The gap against alpha per omega: the theory's as lines, the runs' as points with error bars, each
    omega in its colour along the sequential map, with a colour bar."""
    tables, labels = studies.tables(), studies.diagram.models[0].labels.critical
    theory, runs = tables["theory_gap"], tables["runs_gap"]
    colours = SweepColours("omega", tables["thresholds"]["omega"])
    for omega, group in theory.groupby("omega"):
        ax.plot(group["alpha"], group["gap"], color=colours(omega))
    for omega, group in runs.groupby("omega"):
        ax.errorbar(group["alpha"], group["gap"], group["gap_std"], color=colours(omega), marker="o", **ERROR_BARS)
    if len(theory):
        ax.plot([], [], color="k", label="theory")
    else:
        note = f"no theory gap: the {labels[1]} and {labels[0]} branches never coexist on the grid"
        ax.text(0.98, 0.97, note, transform=ax.transAxes, ha="right", va="top", fontsize=8, color="0.3")
    ax.errorbar([], [], [], color="k", marker="o", label="GD, paired seeds", **ERROR_BARS)
    ax.axhline(0.0, color="gray", linewidth=0.6)
    ax.set(xlabel=symbol("alpha"), ylabel=gap_symbol(*labels), title="training-loss gap")
    ax.legend(fontsize=7)
    colours.bar(fig, ax)


def draw_phase_map(ax: Axes, fig: Figure, studies: OmegaStudies) -> None:
    """The runs' gap over (omega, alpha) as a diverging colour map centred on zero (with its colour bar),
    under the theory's phase regions, alpha_c and alpha_l (:func:`draw_phase_regions`)."""
    gaps = studies.gaps.pivot(index="alpha", columns="omega", values="gap")
    if gaps.size:
        omegas, alphas = gaps.columns.to_numpy(float), gaps.index.to_numpy(float)
        limit = float(np.nanmax(np.abs(gaps.to_numpy()))) or 1.0
        mesh = ax.pcolormesh(
            omegas, alphas, gaps.to_numpy(), shading="nearest", cmap="RdBu_r", norm=TwoSlopeNorm(0.0, -limit, limit)
        )
        low, high = studies.diagram.models[0].labels.critical
        fig.colorbar(mesh, ax=ax, label=f"GD: {gap_symbol(low, high)}")
    draw_phase_regions(ax, studies.diagram.thresholds, studies.diagram.branches, "omega", shade=False)


class Fig3Centre(OverOmega):
    name = "fig3-centre"
    description = "the training-loss gap semantic - positional over alpha for several omegas, theory and GD"
    panels = (draw_gaps,)


class Fig3Right(OverOmega):
    name = "fig3-right"
    description = "the phase diagram: alpha_c and alpha_l over omega on the colour map of GD's training-loss gap"
    panels = (draw_phase_map,)


class Fig9(OverOmega):
    name = "fig9"
    description = "the other positional target A = [[0.3, 0.7], [0.8, 0.2]] (App. E.2): fig3-centre and fig3-right"
    defaults = {"A": ((0.3, 0.7), (0.8, 0.2))}
    panels = (draw_gaps, draw_phase_map)


class Fig14(OverOmega):
    name = "fig14"
    description = "the phase diagrams of the variants: fig3-right for correlated tokens, rank 2 and untied weights"
    #: The shipped models drawn side by side; the request's values are set on each that has them.
    variants = ("paper", "mixture", "rank2", "untied")

    def requests(self, request: FigureRequest) -> list[FigureRequest]:
        """One request per variant of :attr:`variants`, each in its own subdirectory."""
        chosen = [variant(name) for name in self.variants]
        return [
            replace(request, variant=v, values=self._values_of(v, request), directory=request.part(v.name))
            for v in chosen
        ]

    @staticmethod
    def _values_of(chosen: Variant, request: FigureRequest) -> dict[str, Value]:
        names = {p.name for p in chosen.parameters}
        return {k: v for k, v in request.values.items() if k in names}

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        return self.variants

    def build(self, request: FigureRequest) -> Drawn:
        studies = [self.studies(one) for one in self.requests(request)]
        named = [(name, s.tables()) for name, s in zip(self.variants, studies, strict=True)]
        tables = {
            stem: pd.concat([t[stem].assign(model=name) for name, t in named], ignore_index=True)
            for stem in self.table_names
        }
        return Drawn(tables, lambda: self.draw_each(studies, self.size(request)))

    def draw_each(self, studies: list[OmegaStudies], size: OmegaSize) -> Figure:
        """:func:`draw_phase_map` per variant, titled by its name, two to a row."""
        rows = (len(studies) + 1) // 2
        fig = Figure(figsize=(12, 4.5 * rows), layout="constrained")
        axes = fig.subplots(rows, 2, squeeze=False).ravel()
        for ax, name, one in zip(axes, self.variants, studies, strict=False):
            draw_phase_map(ax, fig, one)
            ax.set_title(f"phase diagram: {name}")
        for ax in axes[len(studies) :]:
            ax.set_visible(False)
        fig.suptitle(f"GD at $d$ = {size.d}, mean over {size.seeds} seeds", fontsize=10)
        return fig
