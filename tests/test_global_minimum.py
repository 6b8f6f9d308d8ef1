"""The global minimum at an alpha is the converged point of lowest training loss, and is not known where a
flagged point there has a lower one: an alpha a branch could not be solved at is no change of minimum."""

from __future__ import annotations

from dataclasses import replace

import pandas as pd
from test_branch_tracer import point

from attnphase.experiments.figures import global_minima
from attnphase.saddle.phases.minimum import global_minimum, transitions
from attnphase.saddle.search.trace import BranchTrace


def _trace(label, losses, flagged=()):
    points = [replace(point(a, label, converged=a not in flagged), train_loss=loss) for a, loss in losses.items()]
    return BranchTrace(label, tuple(points))


def test_an_alpha_where_a_flagged_point_is_lower_has_no_known_minimum_and_no_change_of_minimum():
    positional = _trace("positional", {0.8: 1.0, 0.9: 1.0, 1.0: 1.0}, flagged={0.9})
    semantic = _trace("semantic", {0.8: 2.0, 0.9: 2.0, 1.0: 2.0})
    best = global_minimum([positional, semantic])
    assert sorted(best) == [0.8, 1.0] and {p.branch for p in best.values()} == {"positional"}
    assert transitions([positional, semantic]) == ()
    higher = _trace("positional", {0.8: 1.0, 0.9: 3.0, 1.0: 1.0}, flagged={0.9})
    assert global_minimum([higher, semantic])[0.9].branch == "semantic"  # the flagged point is above it


def test_the_figures_read_the_global_minimum_from_a_table_by_the_same_rule():
    rows = [
        {"unit": "u", "alpha": 0.9, "branch": "positional", "train_loss": 1.0, "converged": False},
        {"unit": "u", "alpha": 0.9, "branch": "semantic", "train_loss": 2.0, "converged": True},
        {"unit": "u", "alpha": 1.0, "branch": "positional", "train_loss": 1.0, "converged": True},
        {"unit": "u", "alpha": 1.0, "branch": "semantic", "train_loss": 2.0, "converged": True},
    ]
    best = global_minima(pd.DataFrame(rows))
    assert best["alpha"].tolist() == [1.0] and best["branch"].tolist() == ["positional"]
