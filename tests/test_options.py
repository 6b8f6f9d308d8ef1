"""One options object for the API, the command line and the phase diagram: every scan option is a field of
ScanOptions, every command that scans offers exactly those fields, and bad input is refused at the door."""

from __future__ import annotations

import dataclasses

import pytest
import typer.main

import attnphase as ap
from attnphase.experiments.cli import app
from attnphase.experiments.options import Quadrature, ScanOptions
from attnphase.replica.declaration import InputTypeError
from attnphase.saddle.equations.forms import ConjugateForm
from attnphase.saddle.validation import ParameterError


def _options_of(command_name: str) -> set[str]:
    command = typer.main.get_command(app).commands[command_name]
    return {p.name for p in command.params}


@pytest.mark.parametrize("command", ["scan", "phase-diagram"])
def test_every_scan_option_is_an_option_of_the_commands_that_scan(command):
    fields = {f.name for f in dataclasses.fields(ScanOptions)}
    assert fields <= _options_of(command)


def test_the_options_hold_values_not_strings():
    options = ScanOptions(quadrature="sobol", conjugate_form="envelope")
    assert options.quadrature is Quadrature.SOBOL and options.conjugate_form is ConjugateForm.ENVELOPE


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"order": 1}, "order"),
        ({"quadrature": "sobol", "order": 30}, "order"),
        ({"prune": 1.5}, "prune"),
        ({"threshold_order": 1}, "threshold_order"),
        ({"error_check": 2}, "error_check"),
        ({"conjugate_form": "scores"}, "conjugate_form"),
        ({"quadrature": "simpson"}, "quadrature"),
        ({"seed": -1}, "seed"),
    ],
)
def test_a_bad_option_is_refused_in_one_line_naming_it(values, named):
    with pytest.raises(ParameterError, match=named):
        ScanOptions(**values)


def test_the_api_checks_its_arguments_at_the_door():
    with pytest.raises(InputTypeError, match="AttentionModel.*variant"):
        ap.scan("paper", alphas=[1.5])
    with pytest.raises(InputTypeError, match="ordr"):
        ap.scan(ap.paper_model(), alphas=[1.5], ordr=12)
    with pytest.raises(InputTypeError, match="ScanOptions"):
        ap.scan(ap.paper_model(), [1.5], {"order": 12})
    with pytest.raises(InputTypeError, match="AttentionModel"):
        ap.fixed_point("paper", 1.5)


def test_an_option_given_by_name_overrides_the_options_object():
    recorded = ScanOptions(order=12).record(ap.paper_model())
    assert recorded["order"] == 12 and recorded["prune"] == 1e-8 and recorded["threshold_order"] == 32
    assert ScanOptions(order=12, prune=1e-6).record(ap.variant("untied").model())["threshold_order"] == 0
