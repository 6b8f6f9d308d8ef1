"""Where training ends, against the fixed points of the replica-symmetric theory (THEORY.md sec. 11, 12).

The end states of converged L-BFGS runs (``ap.simulate``) are compared with every fixed point the
anchor search finds at the same alpha under each prox policy: each run's nearest fixed point in the
overlaps (m, theta, q), and, for the runs at one d that share it, whether their mean distance to it is
within the seeds' spread plus a finite-size allowance, ``2 s / sqrt(k) + 1 / sqrt(d)`` (``s`` the
standard deviation of the distance over the ``k`` runs, ``1 / sqrt(d)`` the finite-size scale of an
overlap). ``docs/validation/end_states.py`` writes the tables of the settings where the two disagree.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from attnphase.experiments.landscape import fixed_points_at
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import ProxChoice
from attnphase.saddle.settings import SolverSettings

#: The overlaps a run's end state is compared in.
OVERLAPS = ("m", "theta", "q")


def fixed_points_of_each_policy(model: AttentionModel, alpha: float, stability: bool = True) -> pd.DataFrame:
    """Every converged fixed point the anchor search finds at ``alpha`` under each prox policy, one row per
    branch and policy, with its Hessian stability and replica symmetry if ``stability``; ``point`` names
    both (``positional``, ``positional (local)``)."""
    rows = []
    for prox in ProxChoice:
        for p in fixed_points_at(make_solver(model, SolverSettings(prox=prox)), alpha, stability=stability):
            name = p.branch if prox is ProxChoice.GLOBAL else f"{p.branch} ({prox.value})"
            rows.append({"point": name, **p.row()})
    return pd.DataFrame(rows)


def with_nearest(runs: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """``runs`` (teacher-normalised overlaps, any sign) with each run's nearest fixed point of ``points``
    (``nearest``, its ``point`` name) and the distance to it in :data:`OVERLAPS` (the overlaps' absolute
    values: the loss is even in each family)."""
    if points.empty:
        return runs.assign(nearest="none", distance=np.nan)
    ends = runs[list(OVERLAPS)].abs().to_numpy()
    targets = points[list(OVERLAPS)].abs().to_numpy()
    distances = np.linalg.norm(ends[:, None, :] - targets[None], axis=2)
    best = distances.argmin(axis=1)
    return runs.assign(nearest=points["point"].to_numpy()[best], distance=distances[np.arange(len(runs)), best])


def allowance(distances: Sequence[float], d: int) -> float:
    """The seeds' spread plus the finite-size allowance, ``2 s / sqrt(k) + 1 / sqrt(d)``, of ``k`` runs'
    ``distances`` to one fixed point at dimension ``d``."""
    distances = np.asarray(distances, dtype=float)
    spread = distances.std(ddof=1) if len(distances) > 1 else 0.0
    return float(2 * spread / np.sqrt(len(distances)) + 1 / np.sqrt(d))


def described(runs: pd.DataFrame, points: pd.DataFrame) -> pd.DataFrame:
    """One row per d and nearest fixed point of the converged ``runs`` (:func:`with_nearest`): how many,
    their mean overlaps and training loss, the largest gradient norm, the mean distance against the
    :func:`allowance`, whether the point describes them (``described``) and their training-loss gap to it."""
    rows = []
    converged = runs[runs["converged"].astype(bool)]
    for (d, nearest), group in converged.groupby(["d", "nearest"]):
        point = points[points["point"] == nearest]
        gap = group["train_loss"].mean() - point["train_loss"].iloc[0] if len(point) else np.nan
        limit = allowance(group["distance"], int(d))
        rows.append(
            {"d": int(d), "nearest": nearest, "runs": len(group)}
            | group[list(OVERLAPS)].abs().mean().add_suffix("_mean").to_dict()
            | {"train_loss_mean": group["train_loss"].mean(), "grad_norm_max": group["grad_norm"].max()}
            | {"distance": group["distance"].mean(), "allowance": limit}
            | {"described": bool(group["distance"].mean() <= limit), "eps_t_gap": gap}
        )
    return pd.DataFrame(rows)
