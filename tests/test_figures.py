"""The figures name what the declaration names: the overlap panel draws each overlap family's norm, the
training-loss gap is taken between the declaration's critical pair of branches, and a panel with
nothing labelled draws no legend (THEORY.md sec. 6)."""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from attnphase.experiments.figures import grid_stretches, scan_figure, styled_order
from attnphase.experiments.simulation_figures import simulation_figure, training_loss_gap
from attnphase.replica.declaration import BranchLabels, paper_model

#: The paper's model with its branches named otherwise, and alpha_c read from "content" to "position".
RENAMED = replace(
    paper_model(),
    labels=BranchLabels(
        meanings=(("m", "position"), ("theta", "content")),
        none="blind",
        several="both",
        critical=("content", "position"),
    ),
)


def _branches() -> pd.DataFrame:
    """Two branches of RENAMED at three alphas, with signed overlaps (the figures draw their norms)."""
    alphas = [1.0, 1.5, 2.0]
    return pd.DataFrame(
        {
            "alpha": alphas * 2,
            "branch": ["position"] * 3 + ["content"] * 3,
            "converged": [True] * 6,
            "train_loss": [0.0020, 0.0030, 0.0040, 0.0025, 0.0030, 0.0035],
            "test_error": [0.0034, 0.0034, 0.0035, 0.0030, 0.0020, 0.0014],
            "q": [0.05] * 6,
            "V": [10.0] * 6,
            "m": [-0.20, -0.22, -0.24, 0.0, 0.0, 0.0],
            "theta": [0.0, 0.0, 0.0, 0.10, -0.12, 0.14],
        }
    )


def _thresholds() -> pd.Series:
    return pd.Series({"alpha_c": 1.5, "alpha_l": np.nan, "baseline_test_error": 0.003})


def test_the_scan_figure_draws_the_gap_between_the_declared_critical_branches():
    fig = scan_figure(_branches(), _thresholds(), RENAMED)
    gap_axis = fig.axes[3]
    (gap,) = [line for line in gap_axis.get_lines() if len(line.get_xdata()) > 2]  # the horizontal zero line has two
    # eps_t(position) - eps_t(content), as critical = (content, position) says
    assert np.allclose(gap.get_ydata(), [0.0020 - 0.0025, 0.0, 0.0040 - 0.0035])
    assert "position" in gap_axis.get_ylabel() and "content" in gap_axis.get_ylabel()


def test_the_scan_figure_draws_the_norm_of_each_overlap_family():
    fig = scan_figure(_branches(), _thresholds(), RENAMED)
    lines = {line.get_label(): line for line in fig.axes[0].get_lines()}
    assert {"|m| (position)", "|theta| (content)"} <= set(lines)
    assert np.allclose(lines["|m| (position)"].get_ydata(), [0.20, 0.22, 0.24])
    assert np.allclose(lines["|theta| (content)"].get_ydata(), [0.10, 0.12, 0.14])
    assert "|theta| (position)" not in lines and "|m| (content)" not in lines  # held at zero there


def _runs() -> pd.DataFrame:
    """Two seeds started on each informed start, at one alpha."""
    return pd.DataFrame(
        {
            "alpha": [1.5] * 4,
            "d": [200] * 4,
            "init": ["positional", "positional", "semantic", "semantic"],
            "seed": [0, 1, 0, 1],
            "train_loss": [0.0031, 0.0033, 0.0028, 0.0029],
            "test_error": [0.0034, 0.0035, 0.0021, 0.0022],
            "q": [0.05] * 4,
            "V": [10.0] * 4,
            "m": [0.21, 0.22, 0.01, -0.01],
            "theta": [0.01, 0.0, 0.11, 0.12],
        }
    )


@pytest.mark.parametrize(
    ("model", "sign"),
    [(paper_model(), 1.0), (RENAMED, -1.0)],  # semantic - positional; position - content
)
def test_the_simulated_gap_pairs_the_starts_of_the_critical_branches(model, sign):
    gap = training_loss_gap(_runs(), model)
    assert len(gap) == 1 and gap["runs"].iloc[0] == 2
    paired = sign * np.array([0.0028 - 0.0031, 0.0029 - 0.0033])
    assert gap["gap"].iloc[0] == pytest.approx(paired.mean())
    assert gap["gap_std"].iloc[0] == pytest.approx(paired.std(ddof=1))  # the seeds' spread, not the mean's


def test_unstable_stretches_are_the_runs_of_the_grid_widened_by_half_a_step():
    """A phase diagram marks each run of consecutive unstable grid points as one bar, a lone point as a
    bar one step long, so that the bars tile the grid's cells."""
    alphas = np.array([0.1, 0.2, 0.3, 0.4, 0.5, 0.6])
    chosen = np.array([True, True, False, False, True, False])
    np.testing.assert_allclose(grid_stretches(alphas, chosen), [(0.05, 0.25), (0.45, 0.55)])
    assert grid_stretches(alphas, np.zeros(6, bool)) == []


def test_a_simulation_figure_without_a_gap_to_draw_warns_of_nothing():
    """Runs from one start only and no theory pair: the gap panel is empty and gets no legend."""
    runs = _runs()[lambda frame: frame["init"] == "positional"]
    branches = _branches().iloc[:3]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = simulation_figure(runs, branches, None, RENAMED)
    assert fig.axes[3].get_legend() is None


def test_the_simulation_figure_draws_a_branch_past_its_fold_apart_and_gaps_its_lowest_sheet():
    """A second sheet of the position branch at alpha = 2 (a higher training loss, past a fold): its own
    unlabelled line, and the theory gap takes each branch's lowest sheet, as the scan figure does."""
    branches = _branches().assign(sheet=0)
    folded = branches.iloc[[2]].assign(sheet=1, train_loss=0.0050, m=-0.3)
    fig = simulation_figure(_runs(), pd.concat([branches, folded]), _thresholds(), RENAMED)
    lines = {tuple(line.get_ydata()): line.get_label() for line in fig.axes[1].get_lines()}
    assert lines[(0.0020, 0.0030, 0.0040)] == "theory (position)"  # the first sheet, not joined to the second
    assert lines[(0.0050,)].startswith("_")  # the second sheet: unlabelled
    (theory_gap,) = [line for line in fig.axes[3].get_lines() if line.get_label() == "theory"]
    assert np.allclose(theory_gap.get_ydata(), [0.0020 - 0.0025, 0.0, 0.0040 - 0.0035])


def test_every_panel_draws_a_branch_in_one_colour_its_own_even_when_no_style_names_it():
    """RENAMED's labels (position, content) have no named style: each still gets one colour of its own,
    the same in every panel of the scan figure and of the simulation figure."""
    scan = scan_figure(_branches(), _thresholds(), RENAMED)
    simulation = simulation_figure(_runs(), _branches(), _thresholds(), RENAMED)
    for fig, panels in ((scan, (0, 1, 2)), (simulation, (0, 1, 2))):
        colours: dict[str, set[str]] = {}
        for k in panels:
            for line in fig.axes[k].get_lines():
                for branch in ("position", "content"):
                    if f"({branch})" in line.get_label():
                        colours.setdefault(branch, set()).add(line.get_color())
        assert all(len(c) == 1 for c in colours.values()), colours
        assert colours["position"] != colours["content"]


def test_every_panel_lists_its_branches_in_one_order_the_named_ones_first():
    assert styled_order(["mixed", "twisted", "semantic", "positional", "mixed"]) == [
        "positional",
        "semantic",
        "mixed",
        "twisted",
    ]
