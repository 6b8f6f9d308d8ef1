"""The paper's figures (``attnphase figure``): every figure's tables are its studies' numbers, its image is
written, and every label renders as mathematics."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.mathtext import MathTextParser
from matplotlib.text import Text
from typer.testing import CliRunner

import attnphase as ap
from attnphase.experiments.cli import app
from attnphase.experiments.families import overlap_names
from attnphase.experiments.gallery import FIGURES, listing
from attnphase.experiments.style import symbol

PAPER_NUMBERS = (
    "fig1", "fig2", "fig3-left", "fig3-centre", "fig3-right", "fig7", "fig8", "fig9",
    "fig10", "fig11", "fig12", "fig14", "fig15",
)  # fmt: skip
#: Words that name a symbol and must be drawn as one (inside $...$).
SYMBOL_WORDS = re.compile(r"\b(alpha|omega|theta|sigma|lambda|epsilon|eps_t|eps_g|train_loss|test_error)\b")


def _texts(fig) -> list[str]:
    return [t.get_text() for t in fig.findobj(Text) if t.get_text()]


def assert_labels_are_mathematics(fig) -> None:
    """Every text of ``fig`` parses as mathtext where it has ``$``, and no symbol is spelled as a word."""
    parser = MathTextParser("path")
    for text in _texts(fig):
        if text.count("$") >= 2:
            parser.parse(text)
        outside = re.sub(r"\$[^$]*\$", "", text)
        assert not SYMBOL_WORDS.search(outside), text


def _figure(name: str, out: Path, **options):
    result = ap.figure(name, quick=True, out=out, **options)
    for suffix in ("png", "pdf"):
        assert (out / f"{name}.{suffix}").stat().st_size > 1000
    for stem, table in result.tables.items():
        written = pd.read_csv(out / f"{stem}.csv")
        assert list(written.columns) == [str(c) for c in table.columns] and len(written) == len(table)
    assert_labels_are_mathematics(result.plot())
    return result


def _same(figure_values, study_values) -> None:
    np.testing.assert_allclose(np.asarray(figure_values, float), np.asarray(study_values, float), rtol=1e-12)


def test_the_figures_are_the_papers_by_number_each_listed_with_what_it_shows():
    assert tuple(FIGURES) == PAPER_NUMBERS
    lines = listing().splitlines()
    assert [line.split()[0] for line in lines] == list(PAPER_NUMBERS)
    assert all(len(line.split(maxsplit=1)[1]) > 20 for line in lines)


def test_the_command_lists_the_figures_and_names_a_wrong_one():
    runner = CliRunner()
    listed = runner.invoke(app, ["figure", "--list"])
    assert listed.exit_code == 0 and "fig3-right" in listed.output
    wrong = runner.invoke(app, ["figure", "fig4"])
    assert wrong.exit_code == 2 and "fig4" in wrong.output and "fig3-left" in wrong.output


def test_a_symbol_is_mathematics_for_every_column_name():
    parser = MathTextParser("path")
    for name in ("alpha", "train_loss", "|theta|", "m_1", "theta_2", "lambda_1", "d"):
        label = symbol(name)
        assert label.startswith("$") and label.endswith("$")
        parser.parse(label)


def test_the_histogram_figure_is_the_studys_table(tmp_path):
    """fig1: the figure's table is the histogram study's, in its subdirectory."""
    result = _figure("fig1", tmp_path)
    study = pd.read_csv(tmp_path / "histogram" / "histogram.csv")
    pd.testing.assert_frame_equal(pd.read_csv(tmp_path / "histogram.csv"), study)
    assert len(result.tables["histogram"]) == len(study)


def _check_over_alpha(out: Path, suffixes: list[str], variant: str = "paper") -> None:
    """The theory rows are the scans' converged rows (with the overlaps of ``variant``), the thresholds
    the scans', and the runs' means the simulations' means per (alpha, init)."""
    theory, thresholds, runs = (pd.read_csv(out / f"{s}.csv") for s in ("theory", "thresholds", "runs"))
    scans = pd.concat([pd.read_csv(out / f"scan{s}" / "branches.csv") for s in suffixes], ignore_index=True)
    converged = scans[scans["converged"].astype(bool)]
    assert len(theory) == len(converged)
    for column in ("alpha", "train_loss", "test_error", *overlap_names(ap.variant(variant).model())):
        _same(theory[column], converged[column])
    scan_thresholds = pd.concat([pd.read_csv(out / f"scan{s}" / "thresholds.csv") for s in suffixes])
    _same(thresholds["alpha_c"].fillna(-1), scan_thresholds["alpha_c"].fillna(-1))
    _same(thresholds["alpha_l"].fillna(-1), scan_thresholds["alpha_l"].fillna(-1))
    assert runs["runs"].sum() == sum(len(pd.read_csv(out / f"simulate{s}" / "simulations.csv")) for s in suffixes)
    for suffix in suffixes:
        simulated = pd.read_csv(out / f"simulate{suffix}" / "simulations.csv")
        here = runs[runs["omega"] == float(suffix.split("=")[1])] if suffix else runs
        for (alpha, init), group in simulated.groupby(["alpha", "init"]):
            row = here[(here["alpha"] == alpha) & (here["init"] == init)]
            _same(row["train_loss"], [group["train_loss"].mean()])
            _same(row["train_loss_std"], [group["train_loss"].std()])
            _same(row["test_error"], [group["test_error"].mean()])


@pytest.mark.slow
def test_fig2_is_the_scans_and_the_simulations_numbers(tmp_path):
    _figure("fig2", tmp_path)
    _check_over_alpha(tmp_path, [""])


def test_only_the_figures_over_alpha_draw_the_local_policy():
    with pytest.raises(ValueError, match="prox: fig3-right draws the global policy only"):
        ap.figure("fig3-right", quick=True, prox="local")
    with pytest.raises(ValueError, match="prox: 'nearest' is not one of"):
        ap.figure("fig2", quick=True, prox="nearest")


@pytest.mark.slow
def test_fig2_draws_both_policies_branches_from_a_scan_under_each(tmp_path):
    """With prox both, the theory table holds each policy's converged points, as its own scan has them."""
    result = _figure("fig2", tmp_path, prox="both", values={"omega": 0.2})
    theory = result.tables["theory"]
    assert set(theory["prox"]) == {"global", "local"}
    for policy, directory in (("global", "scan"), ("local", "scan_local")):
        scan = pd.read_csv(tmp_path / directory / "branches.csv")
        converged = scan[scan["converged"].astype(bool)]
        _same(theory.loc[theory["prox"] == policy, "train_loss"], converged["train_loss"])


@pytest.mark.slow
def test_fig8_draws_one_column_per_omega_from_its_own_studies(tmp_path):
    result = _figure("fig8", tmp_path)
    _check_over_alpha(tmp_path, ["_omega=0.2", "_omega=0.4"])
    assert sorted(result.tables["thresholds"]["omega"]) == [0.2, 0.4]


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig10", "fig11", "fig12"])
def test_the_variant_figures_are_their_variants_scans_and_simulations(name, tmp_path):
    """fig10-12 for the mixture, rank-2 and untied variants: the same figure as fig2 for another declaration."""
    _figure(name, tmp_path)
    _check_over_alpha(tmp_path, [""], FIGURES[name].variant)


def _check_over_omega(out: Path, directory: Path) -> None:
    """The thresholds are the phase diagram's, the theory's gap its branches' difference, the runs' gap
    the paired difference of each simulation's runs."""
    thresholds = pd.read_csv(out / "thresholds.csv")
    diagram = pd.read_csv(directory / "phase_diagram" / "thresholds.csv")
    for column in ("omega", "alpha_c", "alpha_l"):
        _same(thresholds[column].fillna(-1), diagram[column].fillna(-1))
    branches = pd.read_csv(directory / "phase_diagram" / "branches.csv")
    theory = pd.read_csv(out / "theory_gap.csv")
    for row in theory.itertuples():
        here = branches[(branches["omega"] == row.omega) & np.isclose(branches["alpha"], row.alpha)]
        losses = here[here["converged"].astype(bool)].groupby("branch")["train_loss"].min()
        _same([row.gap], [losses["semantic"] - losses["positional"]])
    gaps = pd.read_csv(out / "runs_gap.csv")
    for omega, group in gaps.groupby("omega"):
        runs = pd.read_csv(directory / f"simulate_omega={omega:g}" / "simulations.csv")
        paired = runs.pivot_table(index=["alpha", "seed"], columns="init", values="train_loss")
        difference = (paired["semantic"] - paired["positional"]).groupby(level="alpha")
        _same(group.sort_values("alpha")["gap"], difference.mean().sort_index())


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig3-centre", "fig3-right", "fig9"])
def test_the_figures_over_omega_are_the_phase_diagrams_and_the_simulations_numbers(name, tmp_path):
    _figure(name, tmp_path)
    _check_over_omega(tmp_path, tmp_path)


@pytest.mark.slow
def test_fig9_is_drawn_for_the_other_positional_target(tmp_path):
    result = _figure("fig9", tmp_path)
    thresholds = result.tables["thresholds"]
    assert (thresholds["A_1_2"] == 0.7).all() and (thresholds["A_2_1"] == 0.8).all()


@pytest.mark.slow
def test_fig14_is_each_variants_phase_diagram(tmp_path):
    result = _figure("fig14", tmp_path)
    assert set(result.tables["thresholds"]["model"]) == {"paper", "mixture", "rank2", "untied"}
    for name in ("paper", "mixture"):
        table = {stem: t[t["model"] == name].drop(columns="model") for stem, t in result.tables.items()}
        for stem, frame in table.items():
            frame.to_csv(tmp_path / name / f"{stem}.csv", index=False)
        _check_over_omega(tmp_path / name, tmp_path / name)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fig3-left", "fig7"])
def test_the_finite_size_figures_are_the_finite_size_studys_numbers(name, tmp_path):
    """fig3-left and fig7: the means and the theory are the study's ``finite_size`` table; the spread is
    the standard deviation of its runs."""
    result = _figure(name, tmp_path)
    table = result.tables["finite_size"]
    study = pd.read_csv(tmp_path / "finite_size" / "finite_size.csv")
    for column in ("d", "sim_mean", "theory", "gap"):
        _same(table[column], study[column])
    runs = pd.read_csv(tmp_path / "finite_size" / "finite_size_runs.csv")
    error = table[table["quantity"] == "test_error"]
    for row in error.itertuples():
        chosen = runs[(runs["d"] == row.d) & (runs["init"] == row.init)]
        _same([row.sim_std], [chosen["test_error"].std()])


@pytest.mark.slow
def test_fig15_is_the_uninformed_studys_fractions(tmp_path):
    result = _figure("fig15", tmp_path)
    study = pd.read_csv(tmp_path / "uninformed" / "uninformed_fractions.csv")
    _same(result.tables["uninformed_fractions"]["fraction"], study["fraction"])


@pytest.mark.slow
def test_a_figure_resumes_its_studies_and_refuses_other_settings(tmp_path):
    """A second call into the same directory reads its studies back (the same tables); the same directory
    with another model is refused, naming what differs."""
    first = ap.figure("fig3-left", quick=True, out=tmp_path)
    again = ap.figure("fig3-left", quick=True, out=tmp_path)
    pd.testing.assert_frame_equal(first.tables["finite_size"], again.tables["finite_size"])
    with pytest.raises(FileExistsError, match="values"):
        ap.figure("fig3-left", values={"omega": 0.4}, quick=True, out=tmp_path)
