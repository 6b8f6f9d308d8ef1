"""Regenerate ``docs/validation/variants.csv`` and ``variants.png``: the replica theory of each shipped
variant against finite-d training of the same declaration, at three alphas and two d.

Run from the repository root: ``python docs/validation/variants.py [NAME ...]`` (default: every
variant below). Each variant's table is written as soon as it is done (``variants_<name>.csv``) and a
finished one is read back on a rerun; ``variants.csv`` gathers every finished variant, whichever were
named. Seeds 0-3 at every d.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.agreement import agreement, classified, compare
from attnphase.experiments.storage import write_table
from attnphase.replica.variants import variant
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.settings import SolverSettings

HERE = Path(__file__).parent
ALPHAS = (0.8, 1.5, 2.2)
DIMS = (200, 400)
#: Training per variant: L-BFGS for the smooth objectives, proximal gradient descent with an l1 term.
PROXIMAL = {"optimiser": "gd", "lr": 0.5, "tolerance": 1e-5, "max_steps": 20_000}
SMOOTH = {"optimiser": "lbfgs"}
#: name -> (training, quadrature order, the most free overlap families of a branch searched): Gauss-Hermite
#: 20 in four Gaussian dimensions, 8 in six (L3, untied, rank2: 120 896 nodes before the fold); every
#: branch but L3's mixed one, whose search takes over half an hour per alpha.
VARIANTS = {
    "spectrum": (SMOOTH, 20, None),
    "elastic-net": (PROXIMAL, 20, None),
    "l1": (PROXIMAL, 20, None),
    "mixture": (SMOOTH, 20, None),
    "L3": (SMOOTH, 8, 1),
    "untied": (SMOOTH, 8, None),
    "rank2": (SMOOTH, 8, None),
}


def run(name: str) -> pd.DataFrame:
    """The agreement table of variant ``name``, saved: its runs and fixed points are read back if a
    previous call saved them (the comparison is made again, with the current classification and
    compared quantities), else computed and saved."""
    training, order, most_free = VARIANTS[name]
    model = variant(name).model()
    runs_path, theory_path = HERE / f"variants_{name}_runs.csv", HERE / f"variants_{name}_theory.csv"
    if runs_path.exists() and theory_path.exists():
        runs, points = pd.read_csv(runs_path), pd.read_csv(theory_path)
        previous = pd.read_csv(HERE / f"variants_{name}.csv")
        seconds = previous["seconds"].iloc[0] if len(previous) else float("nan")  # an empty table kept no time
        runs = classified(runs, points, model)
        table = compare(runs, points, model).assign(model=name, order=order, seconds=seconds)
        write_table(HERE / f"variants_{name}.csv", table)
        write_table(runs_path, runs)
        return table
    rule = GaussHermite(order)
    solver = make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule))
    started = time.perf_counter()
    table, runs, points = agreement(
        model, solver, ALPHAS, DIMS, most_free, seeds=4, inits=("positional", "semantic"), n_test=5000, **training
    )
    table = table.assign(model=name, order=order, seconds=round(time.perf_counter() - started, 1))
    write_table(HERE / f"variants_{name}.csv", table)
    write_table(runs_path, runs)
    write_table(theory_path, points)
    return table


def figure(table: pd.DataFrame) -> Figure:
    """Per variant, the gap to the theory over its allowance plus four standard errors, per quantity:
    a point inside [-1, 1] agrees."""
    names = list(dict.fromkeys(table["model"]))
    fig = Figure(figsize=(3.2 * len(names), 3.6), layout="constrained")
    axes = fig.subplots(1, len(names), sharey=True, squeeze=False)[0]
    for ax, name in zip(axes, names, strict=True):
        rows = table[table["model"] == name]
        quantities = list(dict.fromkeys(rows["quantity"]))
        for k, quantity in enumerate(quantities):
            styles = zip(sorted(set(rows["d"])), "os^", ("tab:blue", "tab:orange", "tab:green"), strict=False)
            for d, marker, color in styles:
                part = rows[(rows["quantity"] == quantity) & (rows["d"] == d)]
                scaled = part["gap"] / (4 * part["se"] + part["allowance"])
                ax.plot(
                    [k + 0.15 * (d == max(rows["d"]))] * len(part),
                    scaled,
                    marker,
                    color=color,
                    ms=4,
                    label=f"d = {d}" if k == 0 else None,
                )
        ax.axhspan(-1, 1, color="0.92")
        ax.set_xticks(range(len(quantities)), quantities, rotation=45, fontsize=7)
        ax.set_title(name)
    axes[0].set_ylabel("gap / (4 s.e. + allowance)")
    axes[0].legend(fontsize=7)
    fig.suptitle("theory against training, every variant (alphas 0.8, 1.5, 2.2; points in the band agree)")
    return fig


def main(names: list[str]) -> None:
    """Run the variants ``names`` (default: every one), then gather every finished variant's table."""
    for name in names or list(VARIANTS):
        run(name)
    finished = [HERE / f"variants_{name}.csv" for name in VARIANTS if (HERE / f"variants_{name}.csv").exists()]
    table = pd.concat([pd.read_csv(path) for path in finished], ignore_index=True)
    write_table(HERE / "variants.csv", table)
    fig = figure(table)
    for suffix in ("png", "pdf"):
        fig.savefig(HERE / f"variants.{suffix}", dpi=150)
    print(table.groupby("model")["agrees"].agg(["sum", "size"]))


if __name__ == "__main__":
    main(sys.argv[1:])
