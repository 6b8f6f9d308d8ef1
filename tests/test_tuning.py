"""Every numerical knob is one recorded Tuning: checked on construction, written to run.json, read back
the same, and a run resumes only under the tuning it was made with."""

from __future__ import annotations

import dataclasses
import json

import pytest

import attnphase as ap
from attnphase.experiments.options import ScanOptions, read_tuning
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import RootMethod, Tuning, knob_table
from attnphase.saddle.validation import ParameterError


def _leaves(record: dict, prefix: str = "") -> dict[str, object]:
    leaves = {}
    for key, value in record.items():
        if isinstance(value, dict):
            leaves |= _leaves(value, f"{prefix}{key}.")
        else:
            leaves[prefix + key] = value
    return leaves


def test_a_tuning_reads_back_from_its_record_through_json_and_differs_from_a_changed_one():
    changed = Tuning().replaced(prox={"max_iterations": 80}, roots={"method": "broyden"})
    text = json.dumps(changed.record())
    assert Tuning.from_record(json.loads(text)) == changed
    assert changed.roots.method is RootMethod.BROYDEN
    assert changed != Tuning() and changed.prox.max_iterations == 80


def test_the_knob_table_lists_every_leaf_of_the_record_once_with_what_it_trades():
    rows = knob_table()
    assert [r["knob"] for r in rows] == list(_leaves(Tuning().record()))
    assert all(r["trades"] for r in rows)


@pytest.mark.parametrize(
    ("part", "values", "named"),
    [
        ("prox", {"max_iterations": 0}, "max_iterations"),
        ("stability", {"hessian_step": -1.0}, "hessian_step"),
        ("anchors", {"seeds": (0.9, 1.5)}, "seeds"),
        ("roots", {"method": "bisection"}, "method"),
    ],
)
def test_a_knob_outside_its_range_is_refused_naming_it(part, values, named):
    with pytest.raises(ParameterError, match=named):
        Tuning().replaced(**{part: values})


def test_a_record_with_an_unknown_knob_is_refused_naming_it():
    record = Tuning().record()
    record["prox"]["max_iteration"] = 3
    with pytest.raises(ValueError, match="max_iteration"):
        Tuning.from_record(record)


def test_the_settings_carry_the_tuning_and_the_default_rule_follows_the_gaussian_dimension():
    untied, paper = ap.variant("untied").model(), ap.paper_model()
    assert untied.gaussian_dimension() == 6 and paper.gaussian_dimension() == 4
    six = ScanOptions().settings(untied)
    assert (six.quadrature.order, six.quadrature.prune, six.threshold_quadrature) == (8, 1e-6, None)
    four = ScanOptions().settings(paper)
    assert (four.quadrature.order, four.quadrature.prune, four.threshold_quadrature.order) == (20, 1e-8, 32)
    tuned = dataclasses.replace(ScanOptions(), tuning=Tuning().replaced(prox={"max_iterations": 70}))
    assert tuned.settings(paper).tuning.prox.max_iterations == 70
    assert SolverSettings().tuning == Tuning()


@pytest.mark.slow
def test_run_json_records_the_tuning_and_a_resume_under_another_tuning_is_refused(tmp_path):
    options = ScanOptions(order=6, threshold_order=0, stability=False, error_check=0)
    first = ap.scan(ap.paper_model(), [1.5], options, out=tmp_path, progress=False)
    record = json.loads((tmp_path / "run.json").read_text())
    assert Tuning.from_record(record["options"]["tuning"]) == Tuning()
    assert record["package"]["attnphase"] == ap.__version__
    assert read_tuning(tmp_path / "run.json") == Tuning()
    other = dataclasses.replace(options, tuning=Tuning().replaced(prox={"max_iterations": 61}))
    with pytest.raises(FileExistsError, match="tuning.prox.max_iterations"):
        ap.scan(ap.paper_model(), [1.5], other, out=tmp_path, progress=False)
    again = ap.scan(ap.paper_model(), [1.5], other, out=tmp_path, overwrite=True, progress=False)
    assert json.loads((tmp_path / "run.json").read_text())["options"]["tuning"]["prox"]["max_iterations"] == 61
    assert len(again.branches) == len(first.branches)
