"""Theory against gradient descent over alpha at fixed parameters (paper Fig. 2, 8, 10-12).

Per slice (a parameter point: the model's values, or each omega of :attr:`OverAlpha.slices`) a scan
and a simulation from the positional and the semantic start (``attnphase scan``, ``attnphase
simulate``), drawn as three panels: the training loss of each branch, the overlaps' norms ``|m|`` and
``|theta|``, and the test error of the global minimum against the linear baseline; the training runs
as means with their seeds' standard deviation; ``alpha_c``, ``alpha_l`` and the branch ends marked.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import FAMILY_OF_INIT
from attnphase.experiments.gallery.base import Drawn, FigureRequest, PaperFigure
from attnphase.experiments.gallery.panels import (
    branch_ends,
    draw_runs,
    draw_theory,
    global_minimum_line,
    mark_ends,
    mark_thresholds,
    theory_points,
)
from attnphase.experiments.scan import ScanResult, scan
from attnphase.experiments.simulate import SimulationResult, simulate
from attnphase.experiments.simulation_figures import summarise
from attnphase.experiments.study import parameter_title
from attnphase.experiments.style import symbol
from attnphase.replica.declaration import AttentionModel
from attnphase.replica.variants import Value
from attnphase.saddle.prox.policy import ProxChoice

#: A scan's options in a quick figure: no stability, no error check, a coarse Gauss-Hermite rule (of
#: order 10 up to four Gaussian dimensions, 6 beyond, where a point costs 6^6 nodes before pruning).
QUICK_SCAN = {"error_check": 0, "stability": False, "threshold_order": 0}


def quick_scan(model: AttentionModel) -> tuple[str, dict[str, object]]:
    """The alphas and scan options of a quick figure for ``model``: seven alphas on the order-10 rule up
    to four Gaussian dimensions, four on the order-6 rule beyond (about a minute either way)."""
    if model.gaussian_dimension() <= 4:
        return "0.3:2.1:0.3", {**QUICK_SCAN, "order": 10}
    return "0.5:2.0:0.5", {**QUICK_SCAN, "order": 6}


@dataclass(frozen=True)
class AlphaSize:
    """The grids of a figure over alpha: the scan's ``alphas`` and options, the simulation's ``d``,
    ``sim_alphas``, ``seeds`` and ``inits``."""

    alphas: str = "0.1:2.5:0.08"
    scan_options: Mapping[str, object] = field(default_factory=dict)
    d: int = 400
    sim_alphas: str = "0.4:2.4:0.4"
    seeds: int = 4
    inits: tuple[str, ...] = ("positional", "semantic")

    @classmethod
    def quick(cls, model: AttentionModel) -> AlphaSize:
        """The quick grids for ``model`` (:func:`quick_scan`; training at d = 100, two seeds)."""
        alphas, options = quick_scan(model)
        return cls(alphas, options, d=100, sim_alphas="0.5:2.0:0.5", seeds=2)


#: The panels: the column drawn and its title.
PANELS = (("train_loss", "training loss"), ("|m|", "overlaps"), ("test_error", "test error"))


@dataclass(frozen=True)
class Slice:
    """One parameter point of the figure: its scans (one per prox policy, the global one first) and its
    simulation, and their tables."""

    scans: tuple[ScanResult, ...]
    simulation: SimulationResult

    @property
    def scan(self) -> ScanResult:
        """The scan the thresholds and the global minimum are read from (the global policy's if run)."""
        return self.scans[0]

    def tables(self) -> dict[str, pd.DataFrame]:
        """The theory's points and branch ends under every policy (their ``prox`` column), the primary
        scan's thresholds and the runs' summary, each with the model's scalar parameters as its last
        columns."""
        model = self.scan.model
        frames = {
            "theory": pd.concat([theory_points(s) for s in self.scans], ignore_index=True),
            "ends": pd.concat(
                [branch_ends(s).assign(prox=s.options.prox.value) for s in self.scans], ignore_index=True
            ),
            "thresholds": self.scan.thresholds,
            "runs": summarise(self.simulation.runs, model),
        }
        parameters = {k: v for k, v in model.parameters().items() if not isinstance(v, tuple)}
        return {
            stem: frame.drop(columns=[c for c in parameters if c in frame]).assign(**parameters)
            for stem, frame in frames.items()
        }


class OverAlpha(PaperFigure):
    """Theory against gradient descent over alpha (module docstring), one column per slice."""

    table_names = ("theory", "ends", "thresholds", "runs")
    draws_local_policy = True

    def slices(self, request: FigureRequest) -> tuple[Mapping[str, Value], ...]:
        """The parameter values of each column: one column at the request's values."""
        return ({},)

    def size(self, request: FigureRequest) -> AlphaSize:
        """The grids: :meth:`AlphaSize.quick` or the full ones (the studies' defaults)."""
        return AlphaSize.quick(request.model()) if request.quick else AlphaSize()

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        names = []
        for values in self.slices(request):
            names += [self._scan_part(values, policy) for policy in request.prox.policies]
            names.append(f"simulate{self._suffix(values)}")
        return tuple(names)

    @staticmethod
    def _suffix(values: Mapping[str, Value]) -> str:
        return "".join(f"_{k}={v:g}" for k, v in values.items())

    def _scan_part(self, values: Mapping[str, Value], policy: ProxChoice) -> str:
        """The subdirectory of a slice's scan under ``policy`` (``scan``, ``scan_local``)."""
        return f"scan{self._suffix(values)}{'' if policy is ProxChoice.GLOBAL else '_' + policy.value}"

    def run_slice(self, request: FigureRequest, values: Mapping[str, Value]) -> Slice:
        """The scans (one per policy of the request) and the simulation of one slice, each in its own
        subdirectory; the runs are classified against the first scan."""
        size, model = self.size(request), request.model(**values)
        scans = tuple(
            scan(
                model,
                size.alphas,
                out=request.part(self._scan_part(values, policy)),
                prox=policy.value,
                **size.scan_options,
                **request.study_options(),
            )
            for policy in request.prox.policies
        )
        theory, suffix = scans[0], self._suffix(values)
        runs = simulate(
            model,
            d=size.d,
            alphas=size.sim_alphas,
            seeds=size.seeds,
            init=size.inits,
            theory=theory,
            out=request.part(f"simulate{suffix}"),
            **request.study_options(),
        )
        return Slice(scans, runs)

    def build(self, request: FigureRequest) -> Drawn:
        slices = [self.run_slice(request, values) for values in self.slices(request)]
        parts = [s.tables() for s in slices]
        tables = {stem: pd.concat([p[stem] for p in parts], ignore_index=True) for stem in self.table_names}
        drawn = list(zip(slices, parts, strict=True))
        return Drawn(tables, lambda: self.draw(drawn, asdict(self.size(request)), request.variant.name))

    def draw(
        self, slices: list[tuple[Slice, dict[str, pd.DataFrame]]], size: Mapping[str, object], model_name: str
    ) -> Figure:
        """Three panels per slice, each drawn from its tables (:meth:`Slice.tables`): one row of them for
        one slice, one column per slice otherwise; the title names the model (``model_name``), its
        parameters and the training runs."""
        columns = len(slices)
        shape = (1, 3) if columns == 1 else (3, columns)
        fig = Figure(figsize=(12, 3.8) if columns == 1 else (3.6 * columns, 9), layout="constrained")
        axes = fig.subplots(*shape, squeeze=False)
        parameters = [one.scan.model.parameters() for one, _ in slices]
        varying = {k for k in parameters[0] if len({p[k] for p in parameters}) > 1}
        for k, (one, tables) in enumerate(slices):
            named = {name: parameters[k][name] for name in varying}
            self.draw_slice(axes[0] if columns == 1 else axes[:, k], one, tables, named)
        runs = f"GD at $d$ = {size['d']}, mean $\\pm$ s.d. over {size['seeds']} seeds"
        title = parameter_title({k: v for k, v in parameters[0].items() if k not in varying})
        fig.suptitle(f"{model_name} model{', ' if title else ''}{title}; {runs}", fontsize=10)
        return fig

    @staticmethod
    def draw_slice(panels, one: Slice, tables: Mapping[str, pd.DataFrame], named: Mapping[str, float]) -> None:
        """The three panels of one slice from its ``tables`` (module docstring), the first titled by the
        parameters ``named`` (those that differ between the slices) if any."""
        points, runs, ends = tables["theory"], tables["runs"], tables["ends"]
        thresholds = tables["thresholds"].iloc[0]
        ax_train, ax_overlap, ax_test = panels
        draw_theory(ax_train, points, "train_loss")
        draw_runs(ax_train, runs, "train_loss")
        mark_ends(ax_train, ends, points, "train_loss")
        for family, line in (("m", "-"), ("theta", "--")):
            column, aimed = f"|{family}|", [i for i, f in FAMILY_OF_INIT.items() if f == family]
            if column in points:
                label = f" {symbol(column)}"
                draw_theory(ax_overlap, points, column, skip=one.scan.model.labels.none, linestyle=line, suffix=label)
                draw_runs(ax_overlap, runs[runs["init"].isin(aimed)], column, suffix=label)
        global_minimum_line(ax_test, points, "test_error")
        draw_runs(ax_test, runs, "test_error")
        ax_test.axhline(float(thresholds["baseline_test_error"]), color="tab:green", label="linear baseline")
        for ax, (column, name) in zip(panels, PANELS, strict=True):
            mark_thresholds(ax, thresholds)
            ylabel = symbol(column) if column != "|m|" else "overlap norm"
            ax.set(xlabel=symbol("alpha"), ylabel=ylabel, title=name)
            ax.legend(fontsize=6)
        if named:
            panels[0].set_title(f"{parameter_title(named)}: {PANELS[0][1]}", fontsize=9)
