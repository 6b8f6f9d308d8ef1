"""Uninformed initialisation trained with Adam: which minimum does it find (paper App. E.4, Fig. 15)?

Every run starts from ``Q = 0.1 N(0, I_d)`` and takes up to 2500 full-batch Adam steps with learning
rate 0.01 (THEORY.md sec. 11), on any declaration with both overlap families (the paper's instance by
default, THEORY.md sec. 6). Its end point is put in the minimum where ``m`` alone is non-zero (the
paper's positional one), the one where ``theta`` alone is (semantic) or neither, by comparing the
family norms ``|m|`` and ``|theta|`` (THEORY.md sec. 2) with the theory's branches at the same alpha
(:func:`experiments.training.classify_basin`); the basins carry the declaration's labels. The paper
reports that both minima are reached at small alpha and that for larger alpha the semantic one is
found less often than the positional one, with a considerable share of runs in neither.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import basins, family_labels
from attnphase.experiments.figures import branch_colours
from attnphase.experiments.parsing import parse_alphas
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.study import StudyResult, checked_model, progress_bar, versions
from attnphase.experiments.training import (
    SimulationSettings,
    branch_overlaps,
    classify_basin,
    require_both_families,
    simulate_to,
)
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.tracer import trace_branch

FRACTION_COLUMNS = ("alpha", "basin", "fraction", "count", "runs")


def theory_overlaps(solver: SaddlePointSolver, alphas: Sequence[float]) -> pd.DataFrame:
    """The branches on which one overlap family alone is non-zero (the paper's positional and semantic)
    continued over ``alphas`` (:func:`saddle.search.tracer.trace_branch`), reduced to the overlaps the
    classifier needs (columns of :func:`experiments.training.branch_overlaps`; NaN where a branch has
    ended)."""
    model = solver.problem.model
    branches = [solver.branch(label) for label in family_labels(model).values()]
    rows = [p.row() for branch in branches for p in trace_branch(solver, branch, alphas).points]
    return branch_overlaps(pd.DataFrame(rows), alphas, model)


def basin_fractions(runs: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """Share of the runs at each alpha that ended in each of the basins ``names`` (every one listed, also
    when empty)."""
    counts = runs.groupby(["alpha", "basin"]).size().unstack(fill_value=0).reindex(columns=list(names), fill_value=0)
    total = counts.sum(axis=1)
    rows = [
        {"alpha": float(alpha), "basin": basin, "fraction": counts.loc[alpha, basin] / total[alpha]}
        | {"count": int(counts.loc[alpha, basin]), "runs": int(total[alpha])}
        for alpha in counts.index
        for basin in names
    ]
    return pd.DataFrame(rows, columns=list(FRACTION_COLUMNS))


def uninformed_figure(fractions: pd.DataFrame) -> Figure:
    """Stacked bars: per alpha, the fraction of runs in each basin (the declaration's, then neither)."""
    names = list(dict.fromkeys(fractions["basin"]))
    table = fractions.pivot(index="alpha", columns="basin", values="fraction").reindex(columns=names)
    alphas = table.index.to_numpy(float)
    width = 0.8 * (np.min(np.diff(alphas)) if alphas.size > 1 else 1.0)
    fig = Figure(figsize=(6.5, 4), layout="constrained")
    ax = fig.subplots()
    bottom = np.zeros(alphas.size)
    colours = branch_colours([basin for basin in names if basin != "neither"]) | {"neither": "lightgray"}
    for basin in names:
        ax.bar(alphas, table[basin], width, bottom=bottom, color=colours[basin], label=basin, edgecolor="k")
        bottom += table[basin].to_numpy()
    runs = int(fractions.groupby("alpha")["runs"].first().iloc[0])
    ax.set_xlabel(r"$\alpha = n/d$")
    ax.set_ylabel("fraction of runs")
    ax.set_title(rf"Adam from $Q = 0.1\,\mathcal{{N}}(0, I)$: end basin ({runs} runs per $\alpha$)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="lower right")
    return fig


@dataclass(frozen=True, eq=False)
class UninformedResult(StudyResult):
    """The outcome of :func:`uninformed`: ``runs`` (one row per run with its ``basin``),
    ``fractions`` (``FRACTION_COLUMNS``) and the theory's ``overlaps`` the runs were classified by."""

    settings: SimulationSettings
    overlaps: pd.DataFrame
    runs: pd.DataFrame
    fractions: pd.DataFrame
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "uninformed"
    table_names = ("uninformed", "uninformed_fractions")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"uninformed": self.runs, "uninformed_fractions": self.fractions}

    @property
    def record(self) -> dict[str, object]:
        return {
            "settings": self.settings.as_dict(),
            "status": "complete",
            "seeds": self.settings.seed_list,
            "theory_overlaps": self.overlaps.to_dict("records"),
            "seconds": round(self.seconds, 2),
            "versions": self.provenance,
        }

    def plot(self) -> Figure:
        """Per alpha, the fraction of runs in each basin."""
        return uninformed_figure(self.fractions)

    def summary(self) -> str:
        """One line: the count of runs in each basin per alpha."""
        shares = self.fractions.pivot(index="alpha", columns="basin", values="count")
        names = list(dict.fromkeys(self.fractions["basin"]))  # the declaration's basins, then neither
        counts = "; ".join(
            f"alpha {a:g}: " + ", ".join(f"{b} {int(shares.loc[a, b])}" for b in names) for a in shares.index
        )
        return f"{len(self.runs)} runs ({counts})"


def uninformed(
    model: AttentionModel,
    *,
    d: int = 200,
    alphas: str | Sequence[float] = "0.5:2.5:0.5",
    seeds: int = 8,
    lr: float = 0.01,
    max_steps: int = 2500,
    n_test: int = 10_000,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> UninformedResult:
    """Train from ``Q = 0.1 N(0, I)`` with Adam and count the runs ending in each of the theory's
    minima (paper App. E.4; the basin rule of :func:`attnphase.experiments.training.classify_basin`).

    ``seeds`` runs per alpha of ``alphas`` at dimension ``d``, Adam with learning rate ``lr`` for
    ``max_steps`` steps, test error on ``n_test`` samples. With ``out``, the directory is held for the
    whole call (another run into it is refused at once), runs are written to ``uninformed.csv`` alpha
    by alpha, a rerun with the same settings (compared by value) resumes from them, and the result is
    saved there; other settings or unreadable files are refused unless ``overwrite``, which first
    removes every file of the old run (:func:`~attnphase.experiments.training.simulate_to`).
    """
    model = checked_model(model)
    require_both_families(model, "uninformed")
    settings = SimulationSettings.of_model(
        model,
        d=d,
        alphas=tuple(float(a) for a in parse_alphas(alphas)),
        seeds=seeds,
        inits=("random",),
        optimiser="adam",
        lr=lr,
        max_steps=max_steps,
        n_test=n_test,
    ).validate()
    with RunContext(out, {"settings": settings.as_dict()}, UninformedResult.outputs(), overwrite) as run:
        started = time.perf_counter()
        overlaps = theory_overlaps(make_solver(model), settings.alphas)
        with progress_bar(len(settings.alphas), "uninformed", "alpha", progress) as bar:
            trained = simulate_to(run, settings, progress=lambda _block: bar.update(1), table="uninformed.csv")
        runs = classify_basin(trained, overlaps, model)
        fractions = basin_fractions(runs, basins(model))
        result = UninformedResult(settings, overlaps, runs, fractions, time.perf_counter() - started)
        run.save(result)
    return result
