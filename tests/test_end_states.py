"""Where converged L-BFGS ends against the fixed points of either prox policy (THEORY.md sec. 11, 12), at
the settings where training and the branches disagree, away from the default; the full table over
d = 400 to 3200 is ``docs/validation/end_states.py``."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

import attnphase as ap
from attnphase.experiments.end_states import allowance, described, fixed_points_of_each_policy, with_nearest


def _end_states(omega: float, alpha: float, init: str, d: int, seeds: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    model = ap.paper_model(omega=omega)
    points = fixed_points_of_each_policy(model, alpha)
    runs = ap.simulate(model, d=d, alphas=[alpha], seeds=seeds, init=init, progress=False).runs
    assert runs["converged"].all() and runs["grad_norm"].max() < 1e-6
    return with_nearest(runs, points), points


def test_the_allowance_is_the_seed_spread_plus_the_finite_size_scale():
    assert allowance([0.1], 400) == pytest.approx(0.05)
    assert allowance([0.1, 0.3], 100) == pytest.approx(2 * np.std([0.1, 0.3], ddof=1) / np.sqrt(2) + 0.1)


@pytest.mark.slow
def test_from_the_semantic_start_below_the_semantic_branch_training_ends_on_the_positional_point():
    """At omega 0.5, alpha 0.9 (below where the semantic branch exists), most L-BFGS runs from the
    semantic start at d = 800 end on the positional fixed point of both policies, within the seeds'
    spread plus 1 / sqrt(d)."""
    runs, points = _end_states(0.5, 0.9, "semantic", 800, 5)
    assert "semantic" not in set(points["branch"])
    assert {"positional", "positional (local)"} <= set(points["point"])
    table = described(runs, points).set_index("nearest")
    on_positional = table.loc[table.index.str.startswith("positional")]
    assert on_positional["runs"].sum() >= 3 and on_positional["described"].all()


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "alpha"), [(0.2, 2.0), (0.1, 1.5)])
def test_beyond_the_positional_branch_training_ends_where_no_fixed_point_is(omega, alpha):
    """From the positional start where neither policy has a positional point (beyond the branch's end),
    every converged run at d = 400 keeps m of 0.1 to 0.3, far outside the allowance of every fixed point of
    either policy, and the nearest of them breaks replica symmetry: the replica-symmetric theory, under
    either policy, does not describe this minimum (docs/validation/end_states.md)."""
    runs, points = _end_states(omega, alpha, "positional", 400, 3)
    assert not points["branch"].isin(["positional", "mixed"]).any()
    assert (runs["m"].abs() > 0.1).all()
    table = described(runs, points)
    assert not table["described"].any()
    assert (table["distance"] > table["allowance"] + 0.05).all()
    nearest = points[points["point"].isin(table["nearest"])]
    assert (nearest["rs_stable"] == False).all()  # noqa: E712
