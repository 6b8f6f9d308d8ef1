"""Finite-size scaling: how fast the simulations approach the replica theory as d grows (paper App. E.1).

At fixed ``alpha`` (default 1.5) and ``omega`` (default 0.3; THEORY.md sec. 11 lists these as the
authors' finite-size runs), each informed initialisation is trained with L-BFGS at several ``d``
(``n = round(alpha d)`` samples, THEORY.md sec. 6) and its averages over seeds are set against the
theory's branch that initialisation leads to (THEORY.md sec. 5): positional init against the
positional branch (``eps_t``, ``eps_g``, ``|m|``), semantic init against the semantic branch
(``eps_t``, ``eps_g``, ``theta``). The gap ``|mean_sim - theory|`` is fitted by a power law

    gap(d) ~= C d^(-rate),    log gap = log C - rate log d    (ordinary least squares),

with the standard error of the slope from the residuals (``n - 2`` degrees of freedom). The
theory is a ``d -> infinity`` limit, so the gap has a bias part and a part ``~ se`` from the seeds;
once the bias falls below the seeds' standard error the gap stops shrinking.
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
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
    Lambda,
    Omega,
    PositionalTarget,
    Sigma,
    TestSamples,
    Tolerance,  # noqa: E402
    UsageError,
    fail,
    parse_matrix,
    versions,
)
from experiments.figures import save_figure
from experiments.simulation import SimulationSettings, simulate  # noqa: E402
from experiments.simulation_figures import INIT_STYLE  # noqa: E402
from experiments.storage import write_json, write_table  # noqa: E402
from saddle.fixed_point import POSITIONAL, SEMANTIC, SaddlePointSolver  # noqa: E402
from saddle.scan import make_solver  # noqa: E402

BRANCH_OF_INIT = {"positional": POSITIONAL, "semantic": SEMANTIC}
QUANTITIES = {"positional": ("train_loss", "test_error", "m"), "semantic": ("train_loss", "test_error", "theta")}
LABELS = {"train_loss": r"$\epsilon_t$", "test_error": r"$\epsilon_g$", "overlap": r"$|m|$ or $\theta$"}
GAP_COLUMNS = ("d", "init", "quantity", "sim_mean", "sim_se", "runs", "theory", "gap")
FIT_COLUMNS = ("init", "quantity", "rate", "rate_se", "C", "points")


def theory_values(solver: SaddlePointSolver, alpha: float) -> dict[str, dict[str, float]]:
    """Per initialisation, the ``d -> infinity`` values of its quantities on its branch (``|m|`` for ``m``)."""
    values = {}
    for init, branch in BRANCH_OF_INIT.items():
        point = solver.anchor(alpha, branch)
        if not point.converged:
            raise ValueError(f"the {branch.name} branch did not converge at alpha = {alpha:g}")
        values[init] = {
            "train_loss": point.train_loss,
            "test_error": point.test_error,
            "m": abs(point["m"]),
            "theta": point["theta"],
        }
    return values


def finite_size_runs(
    base: SimulationSettings, dims: Sequence[int], progress: Callable[[pd.DataFrame], None] | None = None
) -> pd.DataFrame:
    """One row per run (``simulate`` columns) for every ``d`` in ``dims``, informed inits, same seeds at every d."""
    frames = [simulate(replace(base, d=int(d)), progress=progress) for d in dims]
    return pd.concat(frames, ignore_index=True)


def gap_table(runs: pd.DataFrame, theory: dict[str, dict[str, float]]) -> pd.DataFrame:
    """Mean and standard error over seeds per ``(d, init, quantity)`` against the theory (columns ``GAP_COLUMNS``)."""
    rows = []
    for (d, init), group in runs.groupby(["d", "init"]):
        for quantity in QUANTITIES[init]:
            values = group[quantity].abs() if quantity == "m" else group[quantity]
            mean = float(values.mean())
            se = float(values.std(ddof=1) / math.sqrt(len(values))) if len(values) > 1 else float("nan")
            expected = theory[init][quantity]
            rows.append(
                {
                    "d": int(d),
                    "init": init,
                    "quantity": quantity,
                    "sim_mean": mean,
                    "sim_se": se,
                    "runs": len(values),
                    "theory": expected,
                    "gap": abs(mean - expected),
                }
            )
    return pd.DataFrame(rows, columns=list(GAP_COLUMNS))


def fit_power_law(d: Sequence[float], gap: Sequence[float]) -> tuple[float, float, float]:
    """Least squares of ``log gap = log C - rate log d``: ``(rate, rate_se, C)``.

    ``rate_se = sqrt(s^2 / sum (log d - mean log d)^2)`` with ``s^2`` the residual variance over
    ``n - 2`` degrees of freedom; NaN with fewer than two points (``rate_se`` NaN with two).
    Points with ``gap <= 0`` have no logarithm and are left out.
    """
    d, gap = np.asarray(d, dtype=float), np.asarray(gap, dtype=float)
    keep = (gap > 0) & (d > 0)
    x, y = np.log(d[keep]), np.log(gap[keep])
    if x.size < 2:
        return float("nan"), float("nan"), float("nan")
    centred = x - x.mean()
    slope = float(centred @ (y - y.mean()) / (centred @ centred))
    intercept = float(y.mean() - slope * x.mean())
    if x.size > 2:
        residual = y - intercept - slope * x
        rate_se = math.sqrt(float(residual @ residual) / (x.size - 2) / float(centred @ centred))
    else:
        rate_se = float("nan")
    return -slope, rate_se, math.exp(intercept)


def fit_table(gaps: pd.DataFrame) -> pd.DataFrame:
    """The power-law fit of every ``(init, quantity)`` (columns ``FIT_COLUMNS``)."""
    rows = []
    for (init, quantity), group in gaps.groupby(["init", "quantity"], sort=False):
        rate, rate_se, c = fit_power_law(group["d"], group["gap"])
        rows.append(
            {"init": init, "quantity": quantity, "rate": rate, "rate_se": rate_se, "C": c, "points": int(len(group))}
        )
    return pd.DataFrame(rows, columns=list(FIT_COLUMNS))


def finite_size_figure(gaps: pd.DataFrame, fits: pd.DataFrame, out_stem: Path) -> list[Path]:
    """Three log-log panels (``eps_t``, ``eps_g``, the branch's overlap): gap against d per init with
    the seeds' standard error as error bars (cut at the lower axis limit) and the fitted ``C d^(-rate)``."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4), constrained_layout=True)
    panel = {"train_loss": 0, "test_error": 1, "m": 2, "theta": 2}
    for (init, quantity), group in gaps.groupby(["init", "quantity"], sort=False):
        ax = axes[panel[quantity]]
        style = INIT_STYLE[init]
        group = group.sort_values("d")
        lower = np.minimum(group["sim_se"].fillna(0), 0.999 * group["gap"])
        ax.errorbar(
            group["d"],
            group["gap"],
            yerr=[lower, group["sim_se"].fillna(0)],
            ls="none",
            capsize=3,
            label=f"{init} init",
            **style,
        )
        fit = fits[(fits["init"] == init) & (fits["quantity"] == quantity)].iloc[0]
        if np.isfinite(fit["rate"]):
            grid = np.geomspace(group["d"].min(), group["d"].max(), 50)
            ax.plot(
                grid,
                fit["C"] * grid ** (-fit["rate"]),
                color=style["color"],
                label=f"fit: rate {fit['rate']:.2f} ± {fit['rate_se']:.2f}",
            )
    for index, (ax, quantity) in enumerate(zip(axes, ("train_loss", "test_error", "overlap"), strict=True)):
        ax.set_xscale("log")
        ax.set_yscale("log")
        shown = gaps.loc[gaps["quantity"].map(panel) == index, "gap"]
        if (shown > 0).any():
            ax.set_ylim(bottom=0.3 * shown[shown > 0].min())
        ax.set_xlabel("d")
        ax.set_ylabel(f"|simulation - theory| of {LABELS[quantity]}")
        ax.legend(fontsize=8)
    return save_figure(fig, out_stem)


def parse_dims(text: str) -> list[int]:
    """Comma-separated distinct integers ``>= 2``, at least two of them (a power law needs two points)."""
    try:
        dims = [int(part) for part in text.split(",")]
    except ValueError:
        raise UsageError(f"dims must be comma-separated integers; got {text!r}") from None
    if len(dims) < 2 or len(set(dims)) != len(dims) or min(dims) < 2:
        raise UsageError(f"dims must be at least two distinct integers >= 2; got {text!r}")
    return sorted(dims)


def finite_size(
    out: Annotated[Path, typer.Option(help="Output directory (created if needed).")] = Path("attnphase-finite-size"),
    omega: Omega = 0.3,
    sigma: Sigma = 0.5,
    lam: Lambda = 0.01,
    a_matrix: PositionalTarget = "0.6,0.4,0.4,0.6",
    alpha: Annotated[float, typer.Option(help="Sample complexity n/d held fixed.")] = 1.5,
    dims: Annotated[str, typer.Option(help="Embedding dimensions, comma-separated.")] = "100,200,400,800,1600",
    seeds: Annotated[int, typer.Option(help="Independent runs per d and init (seeds 0 .. seeds-1).")] = 4,
    max_steps: Annotated[int, typer.Option(help="Largest number of L-BFGS iterations per run.")] = 5000,
    tolerance: Tolerance = 1e-6,
    n_test: TestSamples = 10_000,
) -> None:
    """Gap between finite-d simulations (L-BFGS, informed inits) and the theory as d grows, with power-law fits.

    Writes OUT/finite_size_runs.csv (one row per run), OUT/finite_size.csv (d, init, quantity,
    sim_mean, sim_se, theory, gap), OUT/finite_size_fit.csv (init, quantity, rate, rate_se, C),
    OUT/finite_size.png and .pdf, and OUT/run.json (settings, seeds, versions, timings).
    """
    try:
        grid = parse_dims(dims)
        model, base = SimulationSettings.of_paper_model(
            omega,
            sigma,
            lam,
            parse_matrix(a_matrix),
            d=grid[0],
            alphas=(float(alpha),),
            seeds=seeds,
            inits=tuple(BRANCH_OF_INIT),
            optimiser="lbfgs",
            max_steps=max_steps,
            tolerance=tolerance,
            n_test=n_test,
        )
        for d in grid:
            replace(base, d=d).validate()
    except (*USER_ERRORS, UsageError, ValueError) as error:
        fail(error)

    started = time.perf_counter()
    theory = theory_values(make_solver(model), float(alpha))
    with tqdm(
        total=len(grid) * len(BRANCH_OF_INIT), desc="finite size", unit="block", file=sys.stderr, disable=None
    ) as bar:
        runs = finite_size_runs(base, grid, progress=lambda _block: bar.update(1))
    gaps = gap_table(runs, theory)
    fits = fit_table(gaps)
    write_table(out / "finite_size_runs.csv", runs)
    write_table(out / "finite_size.csv", gaps)
    write_table(out / "finite_size_fit.csv", fits)
    finite_size_figure(gaps, fits, out / "finite_size")
    write_json(
        out / "run.json",
        {
            "settings": {**base.as_dict(), "dims": grid},
            "seeds": base.seed_list,
            "theory": theory,
            "seconds": round(time.perf_counter() - started, 2),
            "versions": versions(),
        },
    )
    summary = ", ".join(f"{r.init} {r.quantity} {r.rate:.2f}±{r.rate_se:.2f}" for r in fits.itertuples())
    typer.echo(f"{len(runs)} runs, {int(runs['converged'].sum())} converged; rates: {summary}; files in {out}/")
