"""Finite-size scaling: how fast the simulations approach the replica theory as d grows (paper App. E.1).

At fixed ``alpha`` (default 1.5) and ``omega`` (default 0.3; THEORY.md sec. 11 lists these as the
authors' finite-size runs), each informed initialisation is trained with L-BFGS at several ``d``
(``n = round(alpha d)`` samples, THEORY.md sec. 6) and its averages over seeds are set against the
theory's branch that initialisation leads to (THEORY.md sec. 5): positional init against the
branch on which ``m`` alone is non-zero (the paper's positional branch; ``eps_t``, ``eps_g``, ``|m|``),
semantic init against the one on which ``theta`` alone is (the semantic branch; ``eps_t``, ``eps_g``,
``|theta|``). For a declaration with several entries in a family (ranks, directions, clusters) the
overlap is the family's norm (:func:`~attnphase.experiments.training.family_norms`). The gap
``|mean_sim - theory|`` is fitted by a power law::

    gap(d) ~= C d^(-rate),    log gap = log C - rate log d    (ordinary least squares),

with the standard error of the slope from the residuals (``n - 2`` degrees of freedom). The
theory is a ``d -> infinity`` limit, so the gap has a bias part and a part ``~ se`` from the seeds;
once the bias falls below the seeds' standard error the gap stops shrinking.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import FAMILY_OF_INIT, family_labels, family_norms
from attnphase.experiments.parsing import parse_alphas, parse_dims
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.simulation_figures import INIT_STYLE
from attnphase.experiments.study import StudyResult, checked_model, progress_bar, versions
from attnphase.experiments.training import SimulationSettings, require_both_families, simulate_to
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.solver import SaddlePointSolver

#: The informed initialisations, each named as the branch it starts on in the paper (THEORY.md sec. 6).
INFORMED_INITS = ("positional", "semantic")
#: What each initialisation is compared on: the losses and the norm of the family it aims at.
QUANTITIES = {init: ("train_loss", "test_error", family) for init, family in FAMILY_OF_INIT.items()}
LABELS = {"train_loss": r"$\epsilon_t$", "test_error": r"$\epsilon_g$", "overlap": r"$|m|$ or $|\theta|$"}
GAP_COLUMNS = ("d", "init", "quantity", "sim_mean", "sim_se", "runs", "theory", "gap")
FIT_COLUMNS = ("init", "quantity", "rate", "rate_se", "C", "points")


def theory_values(solver: SaddlePointSolver, alpha: float) -> dict[str, dict[str, float]]:
    """Per initialisation, the ``d -> infinity`` values of its quantities on the branch where the family it
    aims at alone is non-zero (the overlaps as family norms, ``|m|`` and ``|theta|``), each found by the
    seeded search and, where that lands elsewhere, the rays from the branches it contains
    (:meth:`~attnphase.saddle.search.anchors.AnchorSearch.with_rays`)."""
    model = solver.problem.model
    labels = family_labels(model)
    search = AnchorSearch.with_rays(solver)
    values = {}
    for init, family in FAMILY_OF_INIT.items():
        point = search(alpha, solver.branch(labels[family]))
        if not point.converged or point.branch != labels[family]:
            found = f"found the {point.branch} branch" if point.converged else f"did not converge ({point.status})"
            raise ValueError(f"the {labels[family]} branch has no fixed point at alpha = {alpha:g}: the search {found}")
        norms = family_norms(pd.DataFrame([point.row()]), model)
        values[init] = {"train_loss": point.train_loss, "test_error": point.test_error}
        values[init] |= {name: float(norms[name][0]) for name in FAMILY_OF_INIT.values()}
    return values


def gap_table(runs: pd.DataFrame, theory: dict[str, dict[str, float]], model: AttentionModel) -> pd.DataFrame:
    """Mean and standard error over seeds per ``(d, init, quantity)`` against the theory (columns
    ``GAP_COLUMNS``); the overlaps as family norms."""
    rows = []
    for (d, init), group in runs.groupby(["d", "init"]):
        norms = family_norms(group, model)
        for quantity in QUANTITIES[init]:
            values = pd.Series(norms[quantity]) if quantity in norms else group[quantity]
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


def finite_size_figure(gaps: pd.DataFrame, fits: pd.DataFrame) -> Figure:
    """Three log-log panels (``eps_t``, ``eps_g``, the branch's overlap): gap against d per init with
    the seeds' standard error as error bars (cut at the lower axis limit) and the fitted ``C d^(-rate)``."""
    fig = Figure(figsize=(13, 4), layout="constrained")
    axes = fig.subplots(1, 3)
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
    return fig


@dataclass(frozen=True, eq=False)
class FiniteSizeResult(StudyResult):
    """The outcome of :func:`finite_size`: ``runs`` (one row per run), ``gaps`` (``GAP_COLUMNS``),
    ``fits`` (``FIT_COLUMNS``) and the ``d -> infinity`` values ``theory`` they are measured against."""

    settings: SimulationSettings
    dims: list[int]
    theory: dict[str, dict[str, float]]
    runs: pd.DataFrame
    gaps: pd.DataFrame
    fits: pd.DataFrame
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "finite_size"
    table_names = ("finite_size_runs", "finite_size", "finite_size_fit")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"finite_size_runs": self.runs, "finite_size": self.gaps, "finite_size_fit": self.fits}

    @property
    def record(self) -> dict[str, object]:
        return {
            **finite_size_identity(self.settings, self.dims),
            "status": "complete",
            "seeds": self.settings.seed_list,
            "theory": self.theory,
            "seconds": round(self.seconds, 2),
            "versions": self.provenance,
        }

    def plot(self) -> Figure:
        """Gap against d per initialisation and quantity, log-log, with the fitted power laws."""
        return finite_size_figure(self.gaps, self.fits)

    def summary(self) -> str:
        """One line: runs, how many converged, the fitted rates."""
        rates = ", ".join(f"{r.init} {r.quantity} {r.rate:.2f}±{r.rate_se:.2f}" for r in self.fits.itertuples())
        return f"{len(self.runs)} runs, {int(self.runs['converged'].sum())} converged; rates: {rates}"


def finite_size(
    model: AttentionModel,
    *,
    alpha: float = 1.5,
    dims: str | Sequence[int] = (100, 200, 400, 800, 1600),
    seeds: int = 4,
    max_steps: int = 5000,
    tolerance: float = 1e-6,
    n_test: int = 10_000,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> FiniteSizeResult:
    """Gap between finite-d simulations and the theory as ``d`` grows, with power-law fits (paper App. E.1).

    At fixed ``alpha``, both informed initialisations are trained with L-BFGS at every ``d`` in
    ``dims`` (``seeds`` runs each, up to ``max_steps`` iterations, gradient norm ``tolerance``, test
    error on ``n_test`` samples) and set against their branch's values at ``alpha``; the gap is fitted
    by ``C d^-rate`` (module docstring). With ``out``, the directory is held for the whole call
    (another run into it is refused at once), runs are written to ``finite_size_runs.csv`` block by
    block, a rerun with the same settings (compared by value) resumes from them, and the result is
    saved there; other settings or unreadable files are refused unless ``overwrite``, which first
    removes every file of the old run (:func:`~attnphase.experiments.training.simulate_to`).
    """
    model = checked_model(model)
    require_both_families(model, "finite-size")
    grid = parse_dims(dims)
    (alpha,) = parse_alphas([alpha], name="alpha")
    base = SimulationSettings.of_model(
        model,
        d=grid[0],
        alphas=(float(alpha),),
        seeds=seeds,
        inits=tuple(INFORMED_INITS),
        optimiser="lbfgs",
        max_steps=max_steps,
        tolerance=tolerance,
        n_test=n_test,
    )
    every = [replace(base, d=d).validate() for d in grid]
    with RunContext(out, finite_size_identity(base, grid), FiniteSizeResult.outputs(), overwrite) as run:
        started = time.perf_counter()
        theory = theory_values(make_solver(model), float(alpha))
        with progress_bar(len(grid) * len(INFORMED_INITS), "finite size", "block", progress) as bar:
            runs = simulate_to(run, every, progress=lambda _block: bar.update(1), table="finite_size_runs.csv")
        gaps = gap_table(runs, theory, model)
        result = FiniteSizeResult(base, grid, theory, runs, gaps, fit_table(gaps), time.perf_counter() - started)
        run.save(result)
    return result


def finite_size_identity(base: SimulationSettings, dims: Sequence[int]) -> dict[str, object]:
    """What makes two finite-size studies the same computation (compared by value when resuming)."""
    return {"settings": {**base.as_dict(), "dims": [int(d) for d in dims]}}
