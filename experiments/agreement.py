"""The replica theory of a declaration against finite-d training of the same declaration.

:func:`agreement` trains a model at several ``d`` (:mod:`attnphase.experiments.training`), puts
every run in the basin of one of the theory's fixed points (:func:`~attnphase.experiments.training.classify_basin`)
and sets the seed mean of each measured quantity against that fixed point: the training loss
``eps_t``, the test error ``eps_g`` (THEORY.md sec. 5), the overlap norms ``|m|``, ``|theta|`` and the
student's second moments (:func:`second_moments`): the diagonal of ``q`` (sec. 2; invariant under
``Q -> -Q``, which leaves the model unchanged), or its eigenvalues where the declaration has continuous
rotations of the student's columns. Every compared quantity is invariant under the symmetries of the
training loss, so a run is compared with a fixed point whichever of its equivalent copies it found.

A quantity agrees when ``|mean - theory| <= 4 s.e. + allowance``, the allowance a finite-size
margin: 5 % of the theory value for ``eps_t`` and ``eps_g`` and ``2/sqrt(d)`` for the overlap norms
(the bounds of ``tests/test_simulation.py``, measured there for the paper's model), 15 % for the
entries of ``q`` (a second moment of the weights, biased by up to 9 % at d = 200 and 400 in
``docs/validation/variants.csv``), and for their eigenvalues. The table holds every ``d``, so the
gap can be read shrinking with ``d``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from attnphase.experiments.families import norm_columns, with_family_norms
from attnphase.experiments.landscape import fixed_points_at
from attnphase.experiments.training import SimulationSettings, branch_overlaps, classify_basin, simulate
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.search.solver import SaddlePointSolver

COLUMNS = (
    "alpha",
    "d",
    "init",
    "basin",
    "quantity",
    "runs",
    "converged_runs",
    "mean",
    "se",
    "theory",
    "gap",
    "allowance",
    "agrees",
)
#: Relative finite-size allowance of the losses and of ``q``; the overlaps' is ``OVERLAP_ALLOWANCE / sqrt(d)``.
LOSS_ALLOWANCE = 0.05
SECOND_MOMENT_ALLOWANCE = 0.15
OVERLAP_ALLOWANCE = 2.0
STANDARD_ERRORS = 4.0


def theory_points(solver: SaddlePointSolver, alphas: Sequence[float], most_free: int | None = None) -> pd.DataFrame:
    """The converged fixed points the anchor search finds at each alpha (one per label,
    :func:`~attnphase.experiments.landscape.fixed_points_at`), as rows of a ``branches`` table: the
    minima a run can be classified into (:func:`~attnphase.experiments.training.classify_basin`). With
    ``most_free``, only on the branches with at most that many free overlap families (``1``: no mixed
    branch, whose search is the costliest: over half an hour per alpha for three tokens at
    Gauss-Hermite 8). Their stability is not assessed: a run is compared with the point whose basin it
    ended in."""
    points = (fixed_points_at(solver, float(alpha), most_free=most_free, stability=False) for alpha in alphas)
    rows = [point.row() for found in points for point in found]
    return pd.DataFrame(rows)


def second_moments(table: pd.DataFrame, model: AttentionModel) -> dict[str, np.ndarray]:
    """Per row of ``table`` (runs or fixed points, with a column per entry of ``q``), the student's
    compared second moments: the diagonal entries of each ``q`` by name, or, where the declaration has
    continuous rotations of the student's columns (:meth:`AttentionModel.rotations`: ``q -> R^T q R``
    moves the diagonal along a continuum of equally good minima), the eigenvalues of each ``q``, largest
    first, as ``q_eig_1``, ``q_eig_2``, ... (``q_eig_1_class_2`` for the second covariance class)."""
    entries = model.reduced_parameters().of_family("q")
    if not model.rotations():
        return {e.name: table[e.name].to_numpy(float) for e in entries if e.entry[0] == e.entry[1]}
    groups = sorted({e.group for e in entries})
    moments = {}
    for group in groups:
        own = [e for e in entries if e.group == group]
        size = 1 + max(e.entry[1] for e in own)
        matrices = np.zeros((len(table), size, size))
        for e in own:
            matrices[:, e.entry[0], e.entry[1]] = matrices[:, e.entry[1], e.entry[0]] = table[e.name].to_numpy(float)
        eigenvalues = np.linalg.eigvalsh(matrices)[:, ::-1]
        suffix = f"_class_{group + 1}" if len(groups) > 1 else ""
        moments.update({f"q_eig_{k + 1}{suffix}": eigenvalues[:, k] for k in range(size)})
    return moments


def compared_quantities(model: AttentionModel) -> tuple[str, ...]:
    """The columns compared: the losses, the overlap norms ``|family|`` (:func:`norm_columns`) and the
    student's second moments (:func:`second_moments`)."""
    names = list(second_moments(pd.DataFrame(columns=[e.name for e in model.reduced_parameters().entries]), model))
    return ("train_loss", "test_error", *norm_columns(model), *names)


def _values(table: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """The compared quantities of every row of ``table`` (runs or fixed points)."""
    return with_family_norms(table, model).assign(**second_moments(table, model))[list(compared_quantities(model))]


def compare(runs: pd.DataFrame, points: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """The agreement table (``COLUMNS``) of classified ``runs`` (a ``basin`` column) with the theory's
    ``points``: one row per ``(alpha, d, init, basin, quantity)`` whose basin is a fixed point found at
    that alpha; runs in no basin (``neither``) are left out. The standard error of a group of one run is
    the seed-to-seed spread of the quantity within the other groups (:func:`pooled_spread`), so that a
    lone run is held to the spread its seeds have elsewhere, not to an infinite one."""
    measured = pd.concat([runs[["alpha", "d", "init", "basin", "converged"]], _values(runs, model)], axis=1)
    theory = pd.concat([points[["alpha", "branch"]], _values(points, model)], axis=1)
    theory = theory.assign(alpha=theory["alpha"].round(10))
    rows = []
    spread = pooled_spread(measured, compared_quantities(model))
    for (alpha, d, init, basin), group in measured.groupby(["alpha", "d", "init", "basin"], sort=True):
        match = theory[(theory["alpha"] == round(float(alpha), 10)) & (theory["branch"] == basin)]
        if match.empty:
            continue
        for quantity in compared_quantities(model):
            values = group[quantity].to_numpy(float)
            target = float(match[quantity].iloc[0])
            se = (
                float(np.std(values, ddof=1) / math.sqrt(len(values)))
                if len(values) > 1
                else spread(alpha, d, quantity)
            )
            allowance = _allowance(quantity, target, int(d))
            gap = float(values.mean()) - target
            rows.append(
                {
                    "alpha": float(alpha),
                    "d": int(d),
                    "init": init,
                    "basin": basin,
                    "quantity": quantity,
                    "runs": len(values),
                    "converged_runs": int(group["converged"].astype(bool).sum()),
                    "mean": float(values.mean()),
                    "se": se,
                    "theory": target,
                    "gap": gap,
                    "allowance": allowance,
                    "agrees": bool(abs(gap) <= STANDARD_ERRORS * se + allowance),
                }
            )
    return pd.DataFrame(rows, columns=list(COLUMNS))


def pooled_spread(measured: pd.DataFrame, quantities: Sequence[str]) -> Callable[[float, int, str], float]:
    """``spread(alpha, d, quantity)``: the pooled within-group standard deviation of ``quantity`` over the
    groups ``(alpha, d, init, basin)`` of ``measured`` with two runs or more, ``sqrt(sum (n_g - 1) s_g^2 /
    sum (n_g - 1))``, at that alpha and d, else at that d over every alpha, else 0 (the allowance alone)."""
    keys = ["alpha", "d", "init", "basin"]
    groups = measured.groupby(keys)[list(quantities)]
    sizes = groups.size()
    sums = (groups.var(ddof=1).mul(sizes - 1, axis=0))[sizes > 1]
    freedom = (sizes - 1)[sizes > 1]

    def spread(alpha: float, d: int, quantity: str) -> float:
        for where in (
            (sums.index.get_level_values("alpha") == alpha) & (sums.index.get_level_values("d") == d),
            sums.index.get_level_values("d") == d,
        ):
            if where.any():
                return float(math.sqrt(sums[quantity][where].sum() / freedom[where].sum()))
        return 0.0

    return spread


def _allowance(quantity: str, target: float, d: int) -> float:
    """The finite-size allowance of ``quantity`` at theory value ``target`` and dimension ``d``."""
    if quantity in ("train_loss", "test_error"):
        return LOSS_ALLOWANCE * abs(target)
    if quantity.startswith("|"):
        return OVERLAP_ALLOWANCE / math.sqrt(d)
    return SECOND_MOMENT_ALLOWANCE * abs(target)


def agreement(
    model: AttentionModel,
    solver: SaddlePointSolver,
    alphas: Sequence[float],
    dims: Sequence[int],
    most_free: int | None = None,
    **training: object,
) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """Theory against training for ``model`` at ``alphas`` and every ``d`` in ``dims`` (``training``:
    the other :class:`~attnphase.experiments.training.SimulationSettings`; ``most_free``: as in
    :func:`theory_points`). Returns the agreement table (:func:`compare`), the classified runs and the
    theory's fixed points."""
    points = theory_points(solver, alphas, most_free)
    frames = []
    for d in dims:
        settings = SimulationSettings.of_model(model, d=int(d), alphas=tuple(float(a) for a in alphas), **training)
        frames.append(simulate(settings.validate()))
    runs = classified(pd.concat(frames, ignore_index=True), points, model)
    return compare(runs, points, model), runs, points


def classified(runs: pd.DataFrame, points: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """``runs`` with the basin of the theory's ``points`` each ended in
    (:func:`~attnphase.experiments.training.classify_basin`), one alpha at a time: a branch found at
    two alphas is not assumed to exist between them."""
    alphas = sorted(set(runs["alpha"].round(10)))
    overlaps = pd.concat(
        [branch_overlaps(points[np.isclose(points["alpha"], a)], [float(a)], model) for a in alphas],
        ignore_index=True,
    )
    return classify_basin(runs.drop(columns="basin", errors="ignore"), overlaps, model)
