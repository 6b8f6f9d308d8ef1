"""The agreement table of theory and training: each basin's runs against the fixed point of that
label at that alpha, within four standard errors plus the finite-size allowance."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from attnphase.experiments import landscape
from attnphase.experiments.agreement import compare, compared_quantities, theory_points
from attnphase.replica.variants import variant
from attnphase.saddle.geometry.gauge import rotated

PAPER = variant("paper").model()
POINTS = pd.DataFrame(
    {
        "alpha": [1.0, 1.0],
        "branch": ["positional", "semantic"],
        "train_loss": [0.004, 0.005],
        "test_error": [0.003, 0.002],
        "m": [0.25, 0.0],
        "theta": [0.0, 0.15],
        "q": [0.06, 0.1],
    }
)


def _runs(basin: str, m: list[float], theta: list[float], loss: list[float], d: int = 400) -> pd.DataFrame:
    n = len(m)
    return pd.DataFrame(
        {
            "alpha": [1.0] * n,
            "d": [d] * n,
            "init": [basin] * n,
            "basin": [basin] * n,
            "converged": [True] * n,
            "train_loss": loss,
            "test_error": [0.003] * n,
            "m": m,
            "theta": theta,
            "q": [0.06] * n,
        }
    )


def test_the_paper_s_compared_quantities():
    assert list(compared_quantities(PAPER)) == ["train_loss", "test_error", "|m|", "|theta|", "q"]


def test_runs_agree_within_four_standard_errors_plus_the_allowance():
    runs = _runs("positional", [0.26, -0.25, 0.24, -0.25], [0.01, -0.01, 0.0, 0.0], [0.0041, 0.0040, 0.0039, 0.0040])
    table = compare(runs, POINTS, PAPER).set_index("quantity")
    assert table.loc["|m|", "mean"] == pytest.approx(0.25)  # norms: Q and -Q are one minimum
    assert table.loc["|m|", "allowance"] == pytest.approx(2 / math.sqrt(400))
    assert table.loc["train_loss", "allowance"] == pytest.approx(0.05 * 0.004)
    assert table.loc["q", "allowance"] == pytest.approx(0.15 * 0.06)
    assert table["agrees"].all() and (table["theory"].loc[["|m|", "q"]] == [0.25, 0.06]).all()


def test_a_gap_beyond_the_bound_disagrees_and_runs_in_no_basin_are_left_out():
    far = _runs("positional", [0.25] * 4, [0.0] * 4, [0.0050, 0.0051, 0.0050, 0.0051])  # 25 % above the theory
    nowhere = _runs("neither", [0.1] * 2, [0.1] * 2, [0.004] * 2)
    table = compare(pd.concat([far, nowhere], ignore_index=True), POINTS, PAPER).set_index("quantity")
    assert set(table["basin"]) == {"positional"}
    assert not table.loc["train_loss", "agrees"] and table.loc["test_error", "agrees"]


def test_a_lone_run_is_held_to_the_seed_spread_of_the_other_groups():
    """One run in a basin has no spread of its own: it gets the pooled within-group spread of the groups
    with several runs at its alpha and d, so that a run 25 % off the theory disagrees (with an infinite
    standard error it would agree whatever it measured)."""
    many = _runs("positional", [0.25] * 4, [0.0] * 4, [0.0040, 0.0041, 0.0039, 0.0040])
    lone = _runs("semantic", [0.0], [0.15], [0.00625])
    table = compare(pd.concat([many, lone], ignore_index=True), POINTS, PAPER).set_index(["basin", "quantity"])
    pooled = float(np.std([0.0040, 0.0041, 0.0039, 0.0040], ddof=1))
    assert table.loc[("semantic", "train_loss"), "se"] == pytest.approx(pooled)
    assert not table.loc[("semantic", "train_loss"), "agrees"]
    close = compare(pd.concat([many, _runs("semantic", [0.0], [0.15], [0.0051])]), POINTS, PAPER)
    assert close.set_index(["basin", "quantity"]).loc[("semantic", "train_loss"), "agrees"]


def test_a_rank_two_run_is_compared_by_invariants_of_the_rotations_whichever_rotation_it_found():
    model = variant("rank2").model()
    entries = model.reduced_parameters().entries
    names = [e.name for e in entries]
    point = dict.fromkeys(names, 0.0) | {"q_1_1": 0.086, "q_2_2": 0.032, "theta_1": 0.13, "V_1_1": 17.7, "V_2_2": 37.6}
    values = np.array([point[n] for n in names])
    angles = (0.0, 0.4, 1.1, 2.5)
    copies = [rotated(values, entries, np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])) for a in angles]
    runs = pd.DataFrame([dict(zip(names, c, strict=True)) for c in copies]).assign(
        alpha=2.0, d=400, init="semantic", basin="semantic", converged=True, train_loss=0.0032, test_error=0.01
    )
    points = pd.DataFrame([point | {"alpha": 2.0, "branch": "semantic", "train_loss": 0.0032, "test_error": 0.01}])
    assert runs["q_1_1"].std() > 0.01  # the rotations move the diagonal of q ...
    table = compare(runs, points, model).set_index("quantity")
    assert list(table.index) == ["train_loss", "test_error", "|m|", "|theta|", "q_eig_1", "q_eig_2"]
    assert table["gap"].abs().max() < 1e-12 and table["agrees"].all()  # ... not what is compared
    assert table.loc[["q_eig_1", "q_eig_2"], "theory"].tolist() == pytest.approx([0.086, 0.032])


def test_the_theory_can_leave_out_the_branches_with_several_free_families(paper_solver, monkeypatch):
    """``most_free=1`` searches the branches with at most one free overlap family (no mixed point), and
    the points are not assessed for stability (their basins, not their stability, are compared)."""
    searched = []

    class Found:
        """The anchor search with rays, each search recorded and landing on its branch."""

        @staticmethod
        def with_rays(solver, subspace_points):
            def found(alpha, branch):
                searched.append(branch.name)
                row = {"alpha": alpha, "branch": branch.name}
                return SimpleNamespace(converged=True, branch=branch.name, row=lambda: row)

            return found

    monkeypatch.setattr(landscape, "AnchorSearch", Found)
    monkeypatch.setattr(landscape, "assess", lambda solver, point: pytest.fail("assessed"))
    points = theory_points(paper_solver, [1.5], most_free=1)
    assert sorted(searched) == ["agnostic", "positional", "semantic"] and points["branch"].tolist() == searched
    theory_points(paper_solver, [1.5])
    assert sorted(searched[3:]) == ["agnostic", "mixed", "positional", "semantic"]
