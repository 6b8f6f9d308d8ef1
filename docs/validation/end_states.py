"""Where converged L-BFGS ends, against every fixed point the replica-symmetric theory reports, at the
three settings where the two are known to disagree.

    python docs/validation/end_states.py [NAME ...]      # default: every setting below

For each setting (omega, alpha, start): the converged fixed points of every branch on the default rule
under each prox policy (the anchor search with rays, each with its Hessian stability and replica
symmetry, as ``ap.landscape --prox both`` finds them), then
L-BFGS from the start (``ap.simulate``) at d = 400 to 3200 with five seeds, each run's nearest fixed
point in (m, theta, q) and whether it describes them (:mod:`attnphase.experiments.end_states`: within
the seeds' spread plus ``1 / sqrt(d)``). At d = 400 and
seed 0, GAMP's state at the L-BFGS minimum (``ap.gamp --trained``): whether consistent input variances
exist, the share of samples whose field is its envelope's global minimiser, the kurtosis and variance
of each coordinate of the samples' cavity fields ``omega`` (3 and ``q`` for the theory's Gaussian
fields), and each order parameter
(the run's teacher-normalised overlaps and GAMP's ``V``) beside the value the theory's map gives it
there under each policy: the two agree at a fixed point of the theory's equations. The share of samples
at which the descent from the cavity mean (the local policy) reaches the global minimiser is reported
beside the share at which the field is the global minimiser.

Writes ``end_states_runs.csv``, ``end_states_fixed_points.csv`` and ``end_states.csv`` beside this file.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import stats

import attnphase as ap
from attnphase.experiments.end_states import OVERLAPS, described, fixed_points_of_each_policy, with_nearest
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
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort, ProxChoice
from attnphase.saddle.settings import SolverSettings

HERE = Path(__file__).parent
DIMENSIONS = (400, 800, 1600, 3200)
SEEDS = 5
GAMP_D = 400
#: name -> (omega, alpha, start)
SETTINGS = {
    "omega0.2-positional": (0.2, 2.0, "positional"),
    "omega0.1-positional": (0.1, 1.5, "positional"),
    "omega0.5-semantic": (0.5, 0.9, "semantic"),
}


def runs(model: ap.AttentionModel, alpha: float, init: str) -> pd.DataFrame:
    """Converged-or-not L-BFGS end states at every d of :data:`DIMENSIONS`, :data:`SEEDS` seeds each."""
    tables = [ap.simulate(model, d=d, alphas=[alpha], seeds=SEEDS, init=init, progress=False).runs for d in DIMENSIONS]
    return pd.concat(tables, ignore_index=True)


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
    mapped = {}
    for prox in ProxChoice:
        problem = make_solver(model, SolverSettings(prox=prox)).problem
        names = problem.compiled.names
        values = np.array([overlaps[name] for name in names])
        updated = problem.map.evaluate(values, alpha, Effort.FULL).updated
        prefix = "map" if prox is ProxChoice.GLOBAL else "map_local"
        mapped |= {f"{prefix}_{name}": value for name, value in zip(names, updated, strict=True)}
    cavity = field_envelopes(gamp, state)[0].omega.numpy()
    classes = sample_classes(gamp, state)
    return {
        "gamp_consistent": True,
        "gamp_at_global": float(classes["at_global"].mean()),
        "gamp_descent_at_global": float(classes["descent_at_global"].mean()),
        "cavity_kurtosis": " ".join(f"{k:.2f}" for k in stats.kurtosis(cavity, axis=0, fisher=False)),
        "cavity_variance": " ".join(f"{v:.4f}" for v in cavity.var(axis=0, ddof=1)),
        **{f"gamp_{name}": overlaps[name] for name in names},
        **mapped,
    }


def study(name: str) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    omega, alpha, init = SETTINGS[name]
    model = ap.paper_model(omega=omega)
    points = fixed_points_of_each_policy(model, alpha).assign(setting=name)
    table = with_nearest(runs(model, alpha, init), points).assign(setting=name)
    summary = described(table, points).assign(setting=name, **gamp_at_minimum(model, alpha, init))
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
    columns = ["setting", "point", *OVERLAPS, "train_loss", "stable", "rs_stable", "jump_ratio", "prox_disagreement"]
    print(markdown(points, columns) + "\n")
    columns = ["setting", "d", "nearest", "runs", "m_mean", "theta_mean", "q_mean", "train_loss_mean", "grad_norm_max"]
    print(markdown(summaries, [*columns, "distance", "allowance", "described", "eps_t_gap"]) + "\n")
    gamp = summaries.drop_duplicates("setting")
    pairs = [f"{kind}_{name}" for name in (*OVERLAPS, "V") for kind in ("gamp", "map", "map_local")]
    columns = ["setting", "gamp_consistent", "gamp_at_global", "gamp_descent_at_global", "cavity_kurtosis"]
    print(markdown(gamp, [*columns, "cavity_variance"]))
    print(markdown(gamp, ["setting", *pairs]))


if __name__ == "__main__":
    main(sys.argv[1:] or list(SETTINGS))
