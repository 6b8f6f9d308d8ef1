"""Every bad input is refused before any computation, in one line naming the parameter and its range.

Property-based: random values outside each parameter's range (and of the wrong type) for the
declarations, the quadrature rules, the solver, simulation and histogram settings, and every numeric
option of every command. Explicit: each case of the probe that found tracebacks, memory errors and
silent nonsense. Nothing here starts a computation with valid input.
"""

from __future__ import annotations

import dataclasses
import math
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from functools import partial
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

import attnphase as ap
from attnphase.experiments import parsing
from attnphase.experiments.cli import app
from attnphase.experiments.histogram import HistogramSettings
from attnphase.experiments.options import ScanOptions
from attnphase.experiments.study import output_directory
from attnphase.experiments.training import SimulationSettings
from attnphase.replica import declaration
from attnphase.replica.declaration import Interval
from attnphase.saddle import validation
from attnphase.saddle.quadrature import rules as quadrature
from attnphase.saddle.quadrature.check import CHECK_LOG2_POINTS
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning

EXAMPLES = settings(max_examples=12, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
#: Fewer examples for a command (each one a whole, if short, command-line invocation).
COMMAND_EXAMPLES = settings(EXAMPLES, max_examples=6)
runner = CliRunner()


# --------------------------------------------------------------------------- strategies


def outside(interval: Interval) -> st.SearchStrategy[object]:
    """Numbers the range refuses: beyond either end by any margin (infinities included), NaN for a
    real range, integers beyond the ends for an integer range."""
    if interval.integer:
        return st.one_of(st.integers(max_value=int(interval.low) - 1), st.integers(min_value=int(interval.high) + 1))
    below = st.floats(max_value=interval.low, allow_nan=False)
    above = st.floats(min_value=interval.high, allow_nan=False)
    return st.one_of(below, above, st.just(math.nan)).filter(lambda x: x not in interval)


def wrong_type(interval: Interval) -> st.SearchStrategy[object]:
    """Values of a type the range refuses: text, ``None``, booleans, and non-integers for an integer range."""
    kinds = [st.text(max_size=6), st.none(), st.booleans(), st.just(object())]
    if interval.integer:
        kinds.append(st.floats())
    return st.one_of(kinds)


# --------------------------------------------------------------------------- the API


def _model(**change: object) -> ap.AttentionModel:
    base = ap.paper_model()
    parts = {name: getattr(base, name) for name in ("tokens", "positions", "teacher", "student", "regulariser")}
    return ap.AttentionModel(**{**parts, **change})


def _settings(kind: type, name: str, value: object) -> object:
    """``kind(**{name: value})``, validated if it has a ``validate`` step."""
    made = kind(**{name: value})
    return made.validate() if hasattr(made, "validate") else made


def _tuned(part: str, knob: str, value: object) -> Tuning:
    """The default tuning with the field ``knob`` of its ``part`` set to ``value``."""
    return Tuning().replaced(**{part: {knob: value}})


def _allowed(part: str, knob: str) -> Interval:
    """The range the tuning declares for the field ``knob`` of its ``part``."""
    (spec,) = [f for f in dataclasses.fields(getattr(Tuning(), part)) if f.name == knob]
    return spec.metadata["allowed"]


#: The numeric knobs of the prox and of the root search and acceptance (what ``ProxSettings`` and
#: ``SolverSettings`` held before the tuning did), as (part, field).
KNOBS = [("prox", "extra_directions"), ("prox", "gradient_tolerance"), ("prox", "max_iterations")]
KNOBS += [("roots", "tolerance"), ("roots", "max_evaluations"), ("roots", "damping")]
KNOBS += [("acceptance", "residual"), ("acceptance", "energy"), ("acceptance", "prox_weight"), ("acceptance", "kink")]


#: (builder of one value, the parameter named in the error, its range)
API_PARAMETERS: list[tuple[str, Callable[[object], object], str, Interval]] = [
    ("paper_model omega", lambda v: ap.paper_model(omega=v), "omega", declaration.OMEGA),
    ("paper_model sigma", lambda v: ap.paper_model(sigma=v), "sigma", declaration.SIGMA),
    ("isotropic sigma", lambda v: ap.GaussianTokens.isotropic(2, v), "sigma", declaration.SIGMA),
    ("isotropic L", lambda v: ap.GaussianTokens.isotropic(v, 0.5), "L", declaration.TOKENS),
    ("paper_model lambda", lambda v: ap.paper_model(lam=v), "lambda", declaration.LAMBDA),
    ("Ridge", lambda v: ap.Ridge(v), "lambda", declaration.LAMBDA),
    ("ElasticNet l1", lambda v: ap.ElasticNet(v), "lambda_1", declaration.LAMBDA),
    ("ElasticNet l2", lambda v: ap.ElasticNet(0.01, v), "lambda_2", declaration.LAMBDA),
    ("variances", lambda v: ap.GaussianTokens(variances=((v, 0.25),)), declaration.VARIANCES, declaration.VARIANCE),
    (
        "weights",
        lambda v: ap.GaussianTokens(variances=((0.25, 0.25), (0.5, 0.5)), weights=(v, 0.5)),
        "weights",
        declaration.WEIGHT,
    ),
    ("A", lambda v: ap.paper_model(A=((v, 0.4), (0.4, 0.6))), "A", declaration.TARGET_ENTRY),
    (
        "coefficients",
        lambda v: ap.PositionalEncodings(coefficients=((v,), (-1.0,))),
        "coefficients",
        declaration.COEFFICIENT,
    ),
    (
        "atoms",
        lambda v: ap.PositionalEncodings(coefficients=((1.0,), (-1.0,)), atoms=(v,)),
        "atoms",
        declaration.ATOM_INDEX,
    ),
    ("rank", lambda v: _model(rank=v), "rank", declaration.RANK),
    ("teacher_rank", lambda v: _model(teacher_rank=v), "teacher_rank", declaration.RANK),
    ("GaussHermite order", lambda v: ap.GaussHermite(v), "Gauss-Hermite order", quadrature.GAUSS_HERMITE_ORDER),
    ("GaussHermite prune", lambda v: ap.GaussHermite(12, prune=v), "prune", quadrature.PRUNE),
    ("Sobol points", lambda v: ap.ScrambledSobol(v), "Sobol order log2_points", quadrature.SOBOL_LOG2_POINTS),
    ("Sobol seed", lambda v: ap.ScrambledSobol(10, seed=v), "seed", validation.SEED),
    ("rule dimension", lambda v: ap.GaussHermite(4).nodes(v), "dimension", quadrature.INTEGRAL_DIMENSION),
    ("check_alpha", validation.check_alpha, "alpha", validation.ALPHA),
    ("parse_alphas", lambda v: parsing.parse_alphas([1.0, v]), "alphas", validation.ALPHA),
    ("parse_dims", lambda v: parsing.parse_dims([100, v]), "dims", parsing.DIMENSION),
    *[(f"tuning {p}.{n}", partial(_tuned, p, n), n, _allowed(p, n)) for p, n in KNOBS],
    ("SolverSettings seed", partial(_settings, SolverSettings, "seed"), "seed", validation.SEED),
    ("simulation d", partial(_settings, SimulationSettings, "d"), "d", parsing.DIMENSION),
    ("simulation alphas", lambda v: SimulationSettings(alphas=(1.0, v)).validate(), "alpha", validation.ALPHA),
    ("simulation seeds", partial(_settings, SimulationSettings, "seeds"), "seeds", parsing.SEED_COUNT),
    ("simulation seed list", lambda v: SimulationSettings(seeds=(0, v)).validate(), "seeds", validation.SEED),
    ("simulation lr", partial(_settings, SimulationSettings, "lr"), "lr", parsing.LEARNING_RATE),
    ("simulation max_steps", partial(_settings, SimulationSettings, "max_steps"), "max_steps", parsing.STEPS),
    ("simulation tolerance", partial(_settings, SimulationSettings, "tolerance"), "tolerance", parsing.TOLERANCE),
    ("simulation n_test", partial(_settings, SimulationSettings, "n_test"), "n_test", parsing.TEST_SAMPLES),
    *[(f"histogram {n}", partial(_settings, HistogramSettings, n), n, r) for n, r in parsing.HISTOGRAM_RANGES.items()],
]
API_IDS = [case[0] for case in API_PARAMETERS]
#: Parameters for which ``None`` is allowed (the optimiser's default learning rate; the prox's
#: default random start directions).
OPTIONAL = {"simulation lr", "tuning prox.extra_directions"}


@pytest.mark.slow
@pytest.mark.parametrize(("case", "build", "name", "interval"), API_PARAMETERS, ids=API_IDS)
@EXAMPLES
@given(data=st.data())
def test_values_outside_the_range_are_refused_naming_the_field(case, build, name, interval, data):
    value = data.draw(outside(interval), label=name)
    with pytest.raises(ValueError) as error:
        build(value)
    assert not isinstance(error.value, TypeError)
    assert str(error.value).startswith(f"{name} must be {interval}; got ")


@pytest.mark.parametrize(("case", "build", "name", "interval"), API_PARAMETERS, ids=API_IDS)
@EXAMPLES
@given(data=st.data())
def test_values_of_the_wrong_type_are_refused_naming_the_field(case, build, name, interval, data):
    value = data.draw(wrong_type(interval).filter(lambda v: not (case in OPTIONAL and v is None)), label=name)
    with pytest.raises(TypeError) as error:
        build(value)
    assert isinstance(error.value, ValueError)  # InputTypeError: the command line reports it as bad input
    assert str(error.value).startswith(f"{name} must be ")
    assert str(interval) in str(error.value)


@EXAMPLES
@given(value=st.one_of(st.integers(), st.floats(), st.just(10**400)))
def test_an_interval_check_agrees_with_its_membership(value):
    interval = Interval(-1.0, 2.0, low_open=True)
    if value in interval:
        assert interval.check(value, "x") == float(value)
    else:
        with pytest.raises(declaration.DeclarationError, match=r"^x must be in \(-1, 2\]; got "):
            interval.check(value, "x")


def test_ranges_are_stated_in_interval_notation():
    assert str(declaration.SIGMA) == "in [0.001, 1000]"
    assert str(parsing.LEARNING_RATE) == "in (0, 1]"
    assert str(validation.SEED) == "an integer in [0, 4294967295]"
    assert str(validation.ALPHA) == "in [1e-06, 10000]"


# --------------------------------------------------------------------------- the command line

MODEL_OPTIONS = [("--omega", declaration.OMEGA, "omega"), ("--sigma", declaration.SIGMA, "sigma")]
MODEL_OPTIONS += [("--lambda", declaration.LAMBDA, "lambda")]
NOT_ZERO = Interval(1, 1)  # marker: --threshold-order 0 means "the scan's rule"

#: (command, option, its range, the parameter the error line starts with)
CLI_OPTIONS: list[tuple[str, str, Interval, str]] = [
    *[("scan", option, interval, name) for option, interval, name in MODEL_OPTIONS],
    ("scan", "--alphas", validation.ALPHA, "alphas"),
    ("scan", "--order", quadrature.GAUSS_HERMITE_ORDER, "order"),
    ("scan", "--seed", validation.SEED, "seed"),
    ("scan", "--threshold-order", quadrature.GAUSS_HERMITE_ORDER, "threshold_order"),
    ("scan", "--error-check", CHECK_LOG2_POINTS, "error_check"),
    ("scan", "--prune", quadrature.PRUNE, "prune"),
    *[("equations", option, interval, name) for option, interval, name in MODEL_OPTIONS],
    *[("simulate", option, interval, name) for option, interval, name in MODEL_OPTIONS],
    ("simulate", "--d", parsing.DIMENSION, "d"),
    ("simulate", "--alphas", validation.ALPHA, "alphas"),
    ("simulate", "--seeds", parsing.SEED_COUNT, "seeds"),
    ("simulate", "--lr", parsing.LEARNING_RATE, "lr"),
    ("simulate", "--max-steps", parsing.STEPS, "max_steps"),
    ("simulate", "--tolerance", parsing.TOLERANCE, "tolerance"),
    ("simulate", "--n-test", parsing.TEST_SAMPLES, "n_test"),
    ("finite-size", "--sigma", declaration.SIGMA, "sigma"),
    ("finite-size", "--alpha", validation.ALPHA, "alpha"),
    ("finite-size", "--dims", parsing.DIMENSION, "dims"),
    ("finite-size", "--seeds", parsing.SEED_COUNT, "seeds"),
    ("finite-size", "--max-steps", parsing.STEPS, "max_steps"),
    ("finite-size", "--tolerance", parsing.TOLERANCE, "tolerance"),
    ("finite-size", "--n-test", parsing.TEST_SAMPLES, "n_test"),
    ("uninformed", "--lambda", declaration.LAMBDA, "lambda"),
    ("uninformed", "--d", parsing.DIMENSION, "d"),
    ("uninformed", "--alphas", validation.ALPHA, "alphas"),
    ("uninformed", "--seeds", parsing.SEED_COUNT, "seeds"),
    ("uninformed", "--lr", parsing.LEARNING_RATE, "lr"),
    ("uninformed", "--max-steps", parsing.STEPS, "max_steps"),
    ("uninformed", "--n-test", parsing.TEST_SAMPLES, "n_test"),
    ("histogram", "--seed", validation.SEED, "seed"),
    ("histogram", "--n-train", parsing.SEQUENCES, "n_train"),
    ("histogram", "--n-test", parsing.SEQUENCES, "n_test"),
    ("histogram", "--epochs", parsing.EPOCHS, "adam_epochs"),
    ("histogram", "--sgd-epochs", parsing.SGD_EPOCHS, "sgd_epochs"),
    ("histogram", "--batch-size", parsing.BATCH_SIZE, "batch_size"),
    ("histogram", "--adam-lr", parsing.LEARNING_RATE, "adam_lr"),
    ("histogram", "--sgd-lr", parsing.LEARNING_RATE, "sgd_lr"),
    ("histogram", "--noise", parsing.NOISE, "noise"),
]
CLI_IDS = [f"{command} {option}" for command, option, _, _ in CLI_OPTIONS]


def _text(value: object) -> str:
    """A number as a user types it (``nan``, ``inf``, ``-1e+300``, ``12``)."""
    return repr(float(value)) if isinstance(value, float) else str(value)


def _invoke(command: str, arguments: list[str], out: Path | None) -> tuple[int, list[str]]:
    """Run one command in-process; its exit code and the non-empty lines it printed."""
    where = [] if command == "equations" or out is None else ["--out", str(out)]
    result = runner.invoke(app, [command, *where, *arguments])
    assert "Traceback" not in result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(result.exception)
    return result.exit_code, [line for line in result.output.splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize(("command", "option", "interval", "name"), CLI_OPTIONS, ids=CLI_IDS)
@COMMAND_EXAMPLES
@given(data=st.data())
def test_every_numeric_option_refuses_bad_values_in_one_line(command, option, interval, name, data):
    off = option in ("--threshold-order", "--error-check")  # 0 means "the scan's rule" or "no check" there
    value = data.draw(outside(interval).filter(lambda v: not (off and v == 0)), label=option)
    text = _text(value) if option != "--dims" else f"{_text(value)},100"
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "out"
        code, lines = _invoke(command, [f"{option}={text}"], out)
        assert not out.exists()
    assert code == 2
    assert len(lines) == 1
    assert lines[0].startswith(f"error: {name} must be {interval}; got ")


def _plain(text: str) -> str:
    """Help text without the table's borders and line breaks."""
    return " ".join(re.sub(r"[│╭╮╰╯─]", " ", text).split())


@pytest.mark.parametrize("command", sorted({command for command, *_ in CLI_OPTIONS}))
def test_help_states_every_range(command):
    """The help strings of cli.py are written out; this keeps them equal to the ranges checked."""
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "250", "TERMINAL_WIDTH": "250"})
    assert result.exit_code == 0
    help_text = _plain(result.output)
    for _, option, interval, _ in (case for case in CLI_OPTIONS if case[0] == command):
        assert option in help_text
        assert str(interval) in help_text, (option, str(interval))


# --------------------------------------------------------------------------- the probe's cases

TINY_SCAN = ["--alphas", "2.0", "--order", "6", "--threshold-order", "0", "--no-stability"]
TINY_SIMULATION = ["--d", "20", "--alphas", "1.0", "--seeds", "1", "--max-steps", "5", "--n-test", "100"]
TINY_FINITE_SIZE = ["--dims", "10,20", "--seeds", "2", "--max-steps", "5", "--n-test", "100"]
TINY_UNINFORMED = ["--d", "10", "--alphas", "1.0", "--seeds", "1", "--max-steps", "5", "--n-test", "100"]
TINY_HISTOGRAM = ["--n-train", "64", "--n-test", "32", "--epochs", "1", "--sgd-epochs", "0"]

PROBE_OPTIONS = [
    ("scan", ["--alphas", "2,inf", "--order", "6"], "alphas must be in [1e-06, 10000]; got inf"),
    ("scan", ["--alphas", "1e300", "--order", "6"], "alphas must be in [1e-06, 10000]; got 1e+300"),
    ("scan", ["--alphas", "1e-11", "--order", "6"], "alphas must be in [1e-06, 10000]; got 1e-11"),
    ("scan", ["--alphas", "1:inf:1", "--order", "6"], "alphas must be in [1e-06, 10000]; got inf"),
    ("scan", ["--alphas", "0.5:1e6:1e-6", "--order", "6"], "alphas must be in [1e-06, 10000]; got 1000000.0"),
    ("scan", ["--alphas", "0.5:1000:1e-6", "--order", "6"], "alphas must have at most 2000 values"),
    ("scan", ["--order", "1000", "--alphas", "2.0"], "order must be an integer in [2, 64]; got 1000"),
    ("scan", ["--threshold-order", "1000", *TINY_SCAN[:4]], "threshold_order must be an integer in [2, 64]; got 1000"),
    ("scan", ["--seed", "-1", *TINY_SCAN], "seed must be an integer in [0, 4294967295]; got -1"),
    ("scan", ["--sigma", "1e300", *TINY_SCAN], "sigma must be in [0.001, 1000]; got 1e+300"),
    ("scan", ["--sigma", "inf", *TINY_SCAN], "sigma must be in [0.001, 1000]; got inf"),
    ("scan", ["--lambda", "inf", *TINY_SCAN], "lambda must be in [0, 1000]; got inf"),
    ("equations", ["--sigma", "1e300"], "sigma must be in [0.001, 1000]; got 1e+300"),
    ("equations", ["--sigma", "inf"], "sigma must be in [0.001, 1000]; got inf"),
    ("equations", ["--lambda", "inf"], "lambda must be in [0, 1000]; got inf"),
    ("simulate", ["--d", "1000000000000", *TINY_SIMULATION[2:]], "d must be an integer in [2, 100000]"),
    ("simulate", ["--d", "90000", "--alphas", "2.0"], "d = 90000 with 4 seeds and n = 180000 samples needs"),
    ("simulate", ["--alphas", "1:inf:1", "--d", "20"], "alphas must be in [1e-06, 10000]; got inf"),
    ("simulate", ["--lr", "1e300", "--optimiser", "gd", *TINY_SIMULATION], "lr must be in (0, 1]; got 1e+300"),
    ("finite-size", ["--alpha", "1e300", *TINY_FINITE_SIZE], "alpha must be in [1e-06, 10000]; got 1e+300"),
    ("histogram", ["--adam-lr", "1e300", *TINY_HISTOGRAM], "adam_lr must be in (0, 1]; got 1e+300"),
]


@pytest.mark.parametrize(
    ("command", "arguments", "message"), PROBE_OPTIONS, ids=[f"{c[0]} {' '.join(c[1][:2])}" for c in PROBE_OPTIONS]
)
def test_probe_cases_are_one_line_before_any_computation(tmp_path, command, arguments, message):
    out = tmp_path / "out"
    code, lines = _invoke(command, arguments, out)
    assert code == 2
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}")
    assert not out.exists()


TINY = {"scan": TINY_SCAN, "simulate": TINY_SIMULATION, "finite-size": TINY_FINITE_SIZE}
TINY |= {"uninformed": TINY_UNINFORMED, "histogram": TINY_HISTOGRAM}


def _writable(directory: Path) -> bool:
    """Whether a file can be created in ``directory`` (tried, not read from permission bits)."""
    try:
        descriptor, name = tempfile.mkstemp(dir=directory)
    except OSError:
        return False
    os.close(descriptor)
    os.unlink(name)
    return True


@contextmanager
def read_only_directory(parent: Path) -> Iterator[Path]:
    """A directory nobody can write into: mode 0o500, and immutable (``chattr +i``) for root, whom
    permission bits do not stop; the test is skipped where it stays writable."""
    locked = parent / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    immutable = False
    if _writable(locked) and os.geteuid() == 0 and shutil.which("chattr"):
        immutable = subprocess.run(["chattr", "+i", str(locked)], capture_output=True, check=False).returncode == 0
    try:
        if _writable(locked):
            pytest.skip("a read-only directory cannot be made here (root, and chattr +i unavailable)")
        yield locked
    finally:
        if immutable:
            subprocess.run(["chattr", "-i", str(locked)], capture_output=True, check=False)
        locked.chmod(0o700)


def _location(kind: str, root: Path, stack: list) -> tuple[str, str]:
    """An output location of ``kind`` below ``root`` and the start of the error it must give."""
    file = root / "file.txt"
    file.write_text("kept\n")
    if kind == "empty":
        return "", "out must name a directory"
    if kind == "file":
        return str(file), f"out must be a directory; got '{file}', which is a file"
    if kind == "under a file":
        return str(file / "out"), "out must be a directory that can be created and written"
    locked = stack.enter_context(read_only_directory(root))
    return str(locked / "out"), "out must be a directory that can be created and written"


@pytest.mark.parametrize(
    ("command", "kind"),
    [
        ("scan", "empty"),
        ("scan", "under a file"),
        ("scan", "read-only"),
        ("scan", "file"),
        ("finite-size", "file"),
        ("uninformed", "file"),
        ("simulate", "file"),
        ("histogram", "empty"),
        ("uninformed", "read-only"),
    ],
)
def test_a_bad_output_location_fails_at_once_leaving_nothing(tmp_path, monkeypatch, command, kind):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)  # --out "" must not write into the working directory
    with ExitStack() as stack:
        out, message = _location(kind, tmp_path, stack)
        before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
        result = runner.invoke(app, [command, "--out", out, *TINY[command]])
        after = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    assert result.exit_code == 2
    lines = [line for line in result.output.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {message}")
    assert before == after
    assert (tmp_path / "file.txt").read_text() == "kept\n"


def test_output_directory_checks_and_creates(tmp_path):
    created = output_directory(tmp_path / "a" / "b")
    assert created.is_dir() and not list(created.iterdir())
    for bad in ("", "   "):
        with pytest.raises(ValueError, match="^out must name a directory"):
            output_directory(bad)
    with pytest.raises(TypeError, match="^out must be a directory path; got None"):
        output_directory(None)


def test_output_directory_refuses_a_read_only_location(tmp_path):
    with read_only_directory(tmp_path) as locked, pytest.raises(ValueError, match="can be created and written"):
        output_directory(locked / "x" / "y")
    assert not (locked / "x").exists()


# --------------------------------------------------------------------------- the API's probe cases

nan, inf = math.nan, math.inf


def _scan_settings(**options):
    """The solver settings a scan of the paper's model runs with under ``options``."""
    return ScanOptions(**options).settings(ap.paper_model())


API_PROBE = [
    (lambda: ap.GaussianTokens.isotropic(2, 1e300), ValueError, "sigma must be in [0.001, 1000]; got 1e+300"),
    (lambda: ap.GaussianTokens.isotropic(2, "0.5"), TypeError, "sigma must be in [0.001, 1000]; got '0.5'"),
    (lambda: ap.GaussianTokens.isotropic(2, None), TypeError, "sigma must be"),
    (lambda: ap.paper_model(omega="0.3"), TypeError, "omega must be in [0, 1]; got '0.3'"),
    (lambda: ap.paper_model(lam=None), TypeError, "lambda must be in [0, 1000]; got None"),
    (lambda: ap.paper_model(A="0.6,0.4,0.4,0.6"), TypeError, "A must be a sequence of rows of numbers"),
    (lambda: ap.GaussianTokens(variances=((inf, inf),)), ValueError, "sigma^2 (variances) must be in [1e-06, 1000000]"),
    (lambda: ap.GaussianTokens(((-1.0, 1.0),)), ValueError, "sigma^2 (variances) must be"),
    (lambda: ap.Ridge(inf), ValueError, "lambda must be in [0, 1000]; got inf"),
    (lambda: ap.PositionalEncodings(coefficients=((nan,), (-1.0,))), ValueError, "coefficients must be"),
    (lambda: ap.PositionalEncodings(coefficients=((inf,), (-1.0,))), ValueError, "coefficients must be"),
    (lambda: _model(rank=1.5), TypeError, "rank must be an integer in [1, 4]; got 1.5"),
    (lambda: _model(tokens=None), TypeError, "tokens must be a GaussianTokens or GaussianMixtureTokens; got None"),
    (lambda: ap.GaussHermite(1000), ValueError, "Gauss-Hermite order must be an integer in [2, 64]; got 1000"),
    (lambda: ap.ScrambledSobol(seed=-1), ValueError, "seed must be an integer in [0, 4294967295]; got -1"),
    (lambda: _tuned("roots", "tolerance", -1), ValueError, "tolerance must be in (0, 0.001]; got -1"),
    (lambda: _tuned("roots", "tolerance", nan), ValueError, "tolerance must be in (0, 0.001]; got nan"),
    (lambda: SolverSettings(quadrature=20), TypeError, "quadrature must be a GaussHermite or ScrambledSobol rule"),
    (lambda: _tuned("roots", "method", "secant"), ValueError, "method must be one of newton, broyden, hybr, damped"),
    (lambda: SolverSettings(seed=-1), ValueError, "seed must be an integer in [0, 4294967295]; got -1"),
    (lambda: _tuned("prox", "max_iterations", 0), ValueError, "max_iterations must be an integer in [1, 10000]; got 0"),
    (
        lambda: _tuned("prox", "gradient_tolerance", nan),
        ValueError,
        "gradient_tolerance must be in (0, 0.001]; got nan",
    ),
    (lambda: _scan_settings(threshold_order=1000), ValueError, "threshold_order must be an integer in [2, 64]"),
    (lambda: _scan_settings(error_check=30), ValueError, "error_check must be an integer in [4, 20]; got 30"),
    (lambda: _scan_settings(prune=1.5), ValueError, "prune must be in [0, 1); got 1.5"),
    (
        lambda: _scan_settings(quadrature="sobol", order=12, threshold_order=0, prune=-1),
        ValueError,
        "prune must be in [0, 1); got -1",
    ),
    (lambda: ap.QuadratureCheck(3), ValueError, "check log2_points must be an integer in [4, 20]; got 3"),
    (lambda: ap.QuadratureCheck(scramblings=1), ValueError, "check scramblings must be an integer in [2, 64]; got 1"),
    (lambda: SolverSettings(error_check=12), TypeError, "error_check must be a QuadratureCheck or None; got 12"),
]


@pytest.mark.parametrize(("build", "kind", "message"), API_PROBE, ids=[case[2][:40] for case in API_PROBE])
def test_probe_api_cases_name_the_field(build, kind, message):
    with pytest.raises(kind) as error:
        build()
    assert str(error.value).startswith(message)
    assert isinstance(error.value, ValueError)


def test_components_check_themselves_at_construction():
    """A component is refused on its own, not only inside an AttentionModel."""
    with pytest.raises(declaration.DeclarationError, match=r"^sigma\^2 \(variances\)"):
        ap.GaussianTokens(((-1.0, 1.0),))
    with pytest.raises(declaration.DeclarationError, match="^A must be row-stochastic"):
        ap.MixedPositionalTeacher(omega=0.3, positional=((0.5, 0.4), (0.4, 0.6)))


def test_a_as_an_array_is_converted():
    model = ap.paper_model(A=np.array([[0.6, 0.4], [0.4, 0.6]]))
    assert model == ap.paper_model()
    assert model.teacher.positional == ((0.6, 0.4), (0.4, 0.6))
    assert all(type(x) is float for row in model.teacher.positional for x in row)
    hash(model.structure())
    assert ap.paper_model(omega=np.float64(0.3)).record() == ap.paper_model().record()


def test_a_rule_too_large_for_memory_is_refused_while_it_grows(monkeypatch):
    """The tensor rule stops growing at the limit; a Sobol rule is refused from its size alone."""
    monkeypatch.setattr(quadrature, "MAX_NODES", 5_000)
    with pytest.raises(quadrature.QuadratureError) as error:
        ap.GaussHermite(13).nodes(4)  # 28 561 nodes, 12 081 after pruning
    assert "gauss-hermite-13 in 4 dimensions keeps more than 5e+03 nodes after pruning" in str(error.value)
    with pytest.raises(quadrature.QuadratureError, match=r"sobol-2\^13-seed0 in 2 dimensions has 8.19e\+03 nodes"):
        ap.ScrambledSobol(13).nodes(2)
    monkeypatch.undo()
    assert ap.ScrambledSobol(quadrature.SOBOL_LOG2_POINTS.high).size(4) <= quadrature.MAX_NODES


def test_the_rule_keeps_its_nodes_and_weights():
    """The memory-lean construction of the tensor rule gives the nodes of the full grid, pruned."""
    points, weights = ap.GaussHermite(6, prune=0.0).nodes(3)
    x, w = np.polynomial.hermite_e.hermegauss(6)
    grid = np.stack(np.meshgrid(x, x, x, indexing="ij")).reshape(3, -1)
    np.testing.assert_array_equal(points, grid)
    np.testing.assert_allclose(weights, np.einsum("i,j,k->ijk", w, w, w).ravel() / w.sum() ** 3, rtol=1e-13)


def test_a_simulation_too_large_for_memory_is_refused():
    """``seeds x n x L x d`` float64 numbers: 4 x 80 000 x 2 x 40 000 x 8 bytes = 191 GiB."""
    with pytest.raises(ValueError, match=r"^d = 40000 with 4 seeds and n = 80000 samples needs 191 GiB"):
        SimulationSettings(d=40_000, alphas=(2.0,), seeds=4).validate()
    SimulationSettings(d=1600, alphas=(1.5,), seeds=4).validate()  # the finite-size study's largest
