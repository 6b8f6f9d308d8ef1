"""Where converged L-BFGS ends, against every fixed point the replica-symmetric theory reports, at the
three settings where the two are known to disagree.

    python docs/validation/end_states.py [NAME ...]      # default: every setting below

For each setting (omega, alpha, start): the converged fixed points of every branch on the default rule
(the anchor search with rays, each with its Hessian stability and replica symmetry, as ``ap.landscape``
finds them), then
L-BFGS from the start (``ap.simulate``) at d = 400 to 3200 with five seeds, each run's nearest fixed
point in (m, theta, q). The runs at one d that share a nearest point are described by it where their
mean distance to it is within ``2 s / sqrt(k) + 1 / sqrt(d)`` (``s`` the standard deviation of the
distance over those ``k`` runs, ``1 / sqrt(d)`` the finite-size scale of an overlap). At d = 400 and
seed 0, GAMP's state at the L-BFGS minimum (``ap.gamp --trained``): whether consistent input variances
exist, the share of samples whose field is its envelope's global minimiser, the kurtosis and variance
of each coordinate of the samples' cavity fields ``omega`` (3 and ``q`` for the theory's Gaussian
fields), and each order parameter
(the run's teacher-normalised overlaps and GAMP's ``V``) beside the value the theory's map (global
prox) gives it there: the two agree at a fixed point of the theory's equations.

Writes ``end_states_runs.csv``, ``end_states_fixed_points.csv`` and ``end_states.csv`` beside this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import attnphase as ap
from attnphase.experiments.gamp_study import (
    GampSettings,
    ProxRule,
    consistent_state,
    field_envelopes,
    gamp_on_training_set,
    sample_classes,
    start_and_minimum,
    theory_parameters,
)
from attnphase.experiments.landscape import fixed_points_at
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort

HERE = Path(__file__).parent
OVERLAPS = ("m", "theta", "q")
DIMENSIONS = (400, 800, 1600, 3200)
SEEDS = 5
GAMP_D = 400
#: name -> (omega, alpha, start)
SETTINGS = {
    "omega0.2-positional": (0.2, 2.0, "positional"),
    "omega0.1-positional": (0.1, 1.5, "positional"),
    "omega0.5-semantic": (0.5, 0.9, "semantic"),
}


def fixed_points(model: ap.AttentionModel, alpha: float) -> pd.DataFrame:
    """Every converged fixed point the anchor search finds at ``alpha``, one row per branch."""
    found = fixed_points_at(make_solver(model), alpha)
    return pd.DataFrame(
        [
            {"branch": p.branch, **{k: p[k] for k in OVERLAPS}, "train_loss": p.train_loss, "stable": p.stable}
            | {"rs_stable": p.rs_stable, "jump_ratio": p.jump_ratio}
            for p in found
        ]
    )


def runs(model: ap.AttentionModel, alpha: float, init: str) -> pd.DataFrame:
    """Converged-or-not L-BFGS end states at every d of :data:`DIMENSIONS`, :data:`SEEDS` seeds each."""
    tables = [ap.simulate(model, d=d, alphas=[alpha], seeds=SEEDS, init=init, progress=False).runs for d in DIMENSIONS]
    table = pd.concat(tables, ignore_index=True)
    table["m"], table["theta"] = table["m"].abs(), table["theta"].abs()  # the theory's sign convention
    return table


def with_nearest(table: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """``table`` with each run's nearest fixed point (``nearest``) and its distance in (m, theta, q)."""
    if points.empty:
        return table.assign(nearest="none", distance=np.nan)
    targets = points[list(OVERLAPS)].abs().to_numpy()
    distances = np.linalg.norm(table[list(OVERLAPS)].to_numpy()[:, None, :] - targets[None], axis=2)
    best = distances.argmin(axis=1)
    return table.assign(nearest=points["branch"].to_numpy()[best], distance=distances[np.arange(len(table)), best])


def described(group: pd.DataFrame, points: pd.DataFrame) -> dict[str, object]:
    """For the runs at one d that share a nearest fixed point: their mean distance to it against the
    allowance ``2 s / sqrt(k) + 1 / sqrt(d)`` (``s`` the seeds' standard deviation of the distance, ``k``
    runs), and the training-loss gap."""
    d, count = int(group["d"].iloc[0]), len(group)
    spread = group["distance"].std(ddof=1) if count > 1 else 0.0
    allowance = 2 * spread / np.sqrt(count) + 1 / np.sqrt(d)
    point = points[points["branch"] == group["nearest"].iloc[0]]
    gap = group["train_loss"].mean() - point["train_loss"].iloc[0] if len(point) else np.nan
    mean_distance = group["distance"].mean()
    return {
        "distance": mean_distance,
        "allowance": allowance,
        "described": bool(mean_distance <= allowance),
        "eps_t_gap": gap,
    }


def gamp_at_minimum(model: ap.AttentionModel, alpha: float, init: str) -> dict[str, object]:
    """At the L-BFGS minimum of seed 0 at :data:`GAMP_D`: whether consistent GAMP variances exist and, if
    they do, the share of samples at their envelope's global minimiser, the cavity fields' kurtosis and
    variance, and each order parameter of GAMP's state beside the theory map's value of it there."""
    settings = GampSettings(model, alpha=alpha, d=GAMP_D, init=init, trained=True, rule=ProxRule.FOLLOWED)
    gamp, data, simulation = gamp_on_training_set(settings)
    minimum = start_and_minimum(settings, data, simulation)[1]
    state, consistent = consistent_state(gamp, minimum)
    if not consistent:
        return {"gamp_consistent": False}
    overlaps = theory_parameters(simulation.finite, state, data.teachers[0])
    solver = make_solver(model)
    names = solver.problem.compiled.names
    values = np.array([overlaps[name] for name in names])
    updated = dict(zip(names, solver.problem.map.evaluate(values, alpha, Effort.FULL).updated, strict=True))
    cavity = field_envelopes(gamp, state)[0].omega.numpy()
    return {
        "gamp_consistent": True,
        "gamp_at_global": float(sample_classes(gamp, state)["at_global"].mean()),
        "cavity_kurtosis": " ".join(f"{k:.2f}" for k in stats.kurtosis(cavity, axis=0, fisher=False)),
        "cavity_variance": " ".join(f"{v:.4f}" for v in cavity.var(axis=0, ddof=1)),
        **{f"gamp_{name}": overlaps[name] for name in names},
        **{f"map_{name}": updated[name] for name in names},
    }


def study(name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    omega, alpha, init = SETTINGS[name]
    model = ap.paper_model(omega=omega)
    points = fixed_points(model, alpha).assign(setting=name)
    table = with_nearest(runs(model, alpha, init), points).assign(setting=name)
    converged = table[table["converged"]]
    rows = [
        {"setting": name, "d": d, "nearest": branch, "runs": len(group)}
        | group[list(OVERLAPS)].mean().add_suffix("_mean").to_dict()
        | {"train_loss_mean": group["train_loss"].mean(), "grad_norm_max": group["grad_norm"].max()}
        | described(group, points)
        for (d, branch), group in converged.groupby(["d", "nearest"])
    ]
    summary = pd.DataFrame(rows).assign(**gamp_at_minimum(model, alpha, init))
    return table, points, summary


def markdown(table: pd.DataFrame, columns: list[str]) -> str:
    def cell(value: object) -> str:
        return f"{value:.4g}" if isinstance(value, float) else str(value)

    columns = [c for c in columns if c in table]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table[columns].itertuples(index=False)]
    return "\n".join(lines)


def main(names: list[str]) -> None:
    results = [study(name) for name in names]
    tables, points, summaries = (pd.concat(part, ignore_index=True) for part in zip(*results, strict=True))
    tables.to_csv(HERE / "end_states_runs.csv", index=False)
    points.to_csv(HERE / "end_states_fixed_points.csv", index=False)
    summaries.to_csv(HERE / "end_states.csv", index=False)
    print(markdown(points, ["setting", "branch", *OVERLAPS, "train_loss", "stable", "rs_stable", "jump_ratio"]) + "\n")
    columns = ["setting", "d", "nearest", "runs", "m_mean", "theta_mean", "q_mean", "train_loss_mean", "grad_norm_max"]
    print(markdown(summaries, [*columns, "distance", "allowance", "described", "eps_t_gap"]) + "\n")
    gamp = summaries.drop_duplicates("setting")
    pairs = [c for name in (*OVERLAPS, "V") for c in (f"gamp_{name}", f"map_{name}") if c in gamp.columns]
    print(markdown(gamp, ["setting", "gamp_consistent", "gamp_at_global", "cavity_kurtosis", "cavity_variance"]))
    print(markdown(gamp, ["setting", *pairs]))


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETTINGS))
