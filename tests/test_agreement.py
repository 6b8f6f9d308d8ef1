"""The agreement table of theory and training: each basin's runs against the fixed point of that
label at that alpha, within four standard errors plus the finite-size allowance."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from attnphase.experiments.agreement import compare, compared_quantities
from attnphase.replica.variants import variant

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
