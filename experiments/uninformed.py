"""Uninformed initialisation trained with Adam: which minimum does it find (paper App. E.4, Fig. 15)?

Every run starts from ``Q = 0.1 N(0, I_d)`` and takes up to 2500 full-batch Adam steps with learning
rate 0.01 (THEORY.md sec. 11), on the paper's instance (THEORY.md sec. 6). Its end point is put in
the positional minimum, the semantic minimum or neither by comparing the overlaps ``|m|`` and
``|theta|`` (THEORY.md sec. 2) with the theory's branches at the same alpha
(:func:`experiments.simulation.classify_basin`). The paper reports that both minima are reached
at small alpha and that for larger alpha the semantic one is found less often than the positional
one, with a considerable share of runs in neither.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Annotated

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import typer  # noqa: E402
from tqdm import tqdm  # noqa: E402

from experiments.cli_common import (
    USER_ERRORS,
    Dimension,
    Lambda,
    Omega,
    PositionalTarget,
    SampleComplexities,
    Sigma,
    TestSamples,  # noqa: E402
    UsageError,
    fail,
    parse_alphas,
    parse_matrix,
    versions,
)
from experiments.figures import (
    BRANCH_STYLE,  # noqa: E402
    save_figure,
)
from experiments.simulation import BASINS, SimulationSettings, branch_overlaps, classify_basin, simulate  # noqa: E402
from experiments.storage import write_json, write_table  # noqa: E402
from saddle.continuation import trace_branch  # noqa: E402
from saddle.fixed_point import POSITIONAL, SEMANTIC, SaddlePointSolver  # noqa: E402
from saddle.scan import make_solver  # noqa: E402

BASIN_COLOR = {
    "positional": BRANCH_STYLE["positional"]["color"],
    "semantic": BRANCH_STYLE["semantic"]["color"],
    "neither": "lightgray",
}
FRACTION_COLUMNS = ("alpha", "basin", "fraction", "count", "runs")


def theory_overlaps(solver: SaddlePointSolver, alphas: Sequence[float]) -> pd.DataFrame:
    """The positional and semantic branches continued over ``alphas`` (:func:`saddle.continuation.trace_branch`),
    reduced to the overlaps the classifier needs (columns of :func:`experiments.simulation.branch_overlaps`;
    NaN where a branch has ended)."""
    rows = [p.row() for branch in (POSITIONAL, SEMANTIC) for p in trace_branch(solver, branch, alphas).points]
    return branch_overlaps(pd.DataFrame(rows), alphas)


def uninformed_runs(
    settings: SimulationSettings, overlaps: pd.DataFrame, progress: Callable[[pd.DataFrame], None] | None = None
) -> pd.DataFrame:
    """One row per run (``simulate`` columns and ``basin``) from the random initialisation."""
    return classify_basin(simulate(settings, progress=progress), overlaps)


def basin_fractions(runs: pd.DataFrame) -> pd.DataFrame:
    """Share of the runs at each alpha that ended in each basin (every basin listed, also when empty)."""
    counts = runs.groupby(["alpha", "basin"]).size().unstack(fill_value=0).reindex(columns=list(BASINS), fill_value=0)
    total = counts.sum(axis=1)
    rows = [
        {"alpha": float(alpha), "basin": basin, "fraction": counts.loc[alpha, basin] / total[alpha]}
        | {"count": int(counts.loc[alpha, basin]), "runs": int(total[alpha])}
        for alpha in counts.index
        for basin in BASINS
    ]
    return pd.DataFrame(rows, columns=list(FRACTION_COLUMNS))


def uninformed_figure(fractions: pd.DataFrame, out_stem: Path) -> list[Path]:
    """Stacked bars: per alpha, the fraction of runs in the positional, semantic and neither basins."""
    table = fractions.pivot(index="alpha", columns="basin", values="fraction").reindex(columns=list(BASINS))
    alphas = table.index.to_numpy(float)
    width = 0.8 * (np.min(np.diff(alphas)) if alphas.size > 1 else 1.0)
    fig, ax = plt.subplots(figsize=(6.5, 4), constrained_layout=True)
    bottom = np.zeros(alphas.size)
    for basin in BASINS:
        ax.bar(alphas, table[basin], width, bottom=bottom, color=BASIN_COLOR[basin], label=basin, edgecolor="k")
        bottom += table[basin].to_numpy()
    runs = int(fractions.groupby("alpha")["runs"].first().iloc[0])
    ax.set_xlabel(r"$\alpha = n/d$")
    ax.set_ylabel("fraction of runs")
    ax.set_title(f"Adam from Q = 0.1 N(0, I): end basin ({runs} runs per alpha)")
    ax.set_ylim(0, 1)
    ax.legend(fontsize=8, loc="lower right")
    return save_figure(fig, out_stem)


def uninformed(
    out: Annotated[Path, typer.Option(help="Output directory (created if needed).")] = Path("attnphase-uninformed"),
    omega: Omega = 0.3,
    sigma: Sigma = 0.5,
    lam: Lambda = 0.01,
    a_matrix: PositionalTarget = "0.6,0.4,0.4,0.6",
    d: Dimension = 200,
    alphas: SampleComplexities = "0.5:2.5:0.5",
    seeds: Annotated[int, typer.Option(help="Independent runs per alpha (seeds 0 .. seeds-1).")] = 8,
    lr: Annotated[float, typer.Option(help="Adam learning rate.")] = 0.01,
    max_steps: Annotated[int, typer.Option(help="Adam steps per run.")] = 2500,
    n_test: TestSamples = 10_000,
) -> None:
    """Train from an uninformed start with Adam and count the runs ending in each of the theory's minima.

    Writes OUT/uninformed.csv (one row per run, with its basin: positional, semantic or neither),
    OUT/uninformed_fractions.csv (alpha, basin, fraction, count), OUT/uninformed.png and .pdf, and
    OUT/run.json (settings, seeds, the theory's overlaps, versions, timings).
    """
    try:
        model, settings = SimulationSettings.of_paper_model(
            omega,
            sigma,
            lam,
            parse_matrix(a_matrix),
            d=d,
            alphas=tuple(float(a) for a in parse_alphas(alphas)),
            seeds=seeds,
            inits=("random",),
            optimiser="adam",
            lr=lr,
            max_steps=max_steps,
            n_test=n_test,
        )
        settings.validate()
    except (*USER_ERRORS, UsageError, ValueError) as error:
        fail(error)

    started = time.perf_counter()
    overlaps = theory_overlaps(make_solver(model), settings.alphas)
    with tqdm(total=len(settings.alphas), desc="uninformed", unit="alpha", file=sys.stderr, disable=None) as bar:
        runs = uninformed_runs(settings, overlaps, progress=lambda _block: bar.update(1))
    fractions = basin_fractions(runs)
    write_table(out / "uninformed.csv", runs)
    write_table(out / "uninformed_fractions.csv", fractions)
    uninformed_figure(fractions, out / "uninformed")
    write_json(
        out / "run.json",
        {
            "settings": settings.as_dict(),
            "seeds": settings.seed_list,
            "theory_overlaps": overlaps.to_dict("records"),
            "seconds": round(time.perf_counter() - started, 2),
            "versions": versions(),
        },
    )
    shares = fractions.pivot(index="alpha", columns="basin", values="count")
    summary = "; ".join(
        f"alpha {a:g}: " + ", ".join(f"{b} {int(shares.loc[a, b])}" for b in BASINS) for a in shares.index
    )
    typer.echo(f"{len(runs)} runs ({summary}); files in {out}/")
