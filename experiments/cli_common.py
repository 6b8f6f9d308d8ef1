"""What every ``attnphase`` command shares: the model and the scan options as generated option groups, the
training options, and errors.

A command declares ``model: AttentionModel`` or ``options: ScanOptions`` as a keyword-only parameter and
is decorated with :func:`with_model` or :func:`with_scan_options`: the decorator puts the group's options in
the parameter's place in the command's signature (what typer reads) and builds the value from them, so
each group is spelled once, here and in :class:`~attnphase.experiments.options.ScanOptions`."""

from __future__ import annotations

import dataclasses
import enum
import functools
import inspect
import typing
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer

from attnphase.experiments.options import ScanOptions, read_tuning
from attnphase.experiments.parsing import (
    DIMENSION,
    MAX_SIMULATION_BYTES,
    TEST_SAMPLES,
    TOLERANCE,
    UsageError,
    parse_matrix,
    parse_settings,
)
from attnphase.experiments.storage import DirectoryInUseError
from attnphase.replica.declaration import (
    LAMBDA,
    OMEGA,
    SIGMA,
    TARGET_ENTRY,
    AttentionModel,
    DeclarationError,
    InputTypeError,
)
from attnphase.replica.variants import VARIANTS, Value, Variant, variant
from attnphase.saddle.quadrature.rules import QuadratureError
from attnphase.saddle.validation import ALPHA, ParameterError

#: Errors that mean "bad input" (reported in one line, exit status 2).
USER_ERRORS = (DeclarationError, InputTypeError, ParameterError, QuadratureError, UsageError)


def _output_path(text: str | Path) -> Path | str:
    """``--out`` as a path, except that an empty value stays ``""``: ``Path("")`` would silently mean
    the working directory, and the study refuses ``""`` (:func:`attnphase.experiments.study.output_directory`,
    the one place that checks an output location)."""
    return Path(text) if str(text) else ""


Out = Annotated[
    Path,
    typer.Option(
        parser=_output_path,
        metavar="DIR",
        help="Output directory: created if needed; must not be empty, a file or below one, and must be writable.",
    ),
]

Overwrite = Annotated[
    bool,
    typer.Option(help="Discard a previous run in OUT with other settings or unreadable files, then start afresh."),
]

# the model: a shipped variant (attnphase.replica.variants) and its parameters; the paper's four
# numbers also as options of their own (ranges: attnphase.replica.declaration)
ModelName = Annotated[
    str, typer.Option("--model", help=f"A shipped model ({', '.join(VARIANTS)}; attnphase models lists them).")
]
ModelSettings = Annotated[
    list[str] | None,
    typer.Option(
        "--set",
        help="A parameter of the model as name=value (a matrix row-major, a11,a12,...), repeatable; "
        "attnphase models lists the names.",
    ),
]
Omega = Annotated[float | None, typer.Option(help=f"Positionality of the target, {OMEGA} (default 0.3).")]
Sigma = Annotated[float | None, typer.Option(help=f"Token standard deviation, {SIGMA} (default 0.5).")]
Lambda = Annotated[float | None, typer.Option("--lambda", help=f"Ridge strength, {LAMBDA} (default 0.01).")]
PositionalTarget = Annotated[
    str | None,
    typer.Option(
        "--A",
        help=f"Positional target A, row-major a11,a12,a21,a22: entries {TARGET_ENTRY}, rows summing to 1 "
        "(default 0.6,0.4,0.4,0.6).",
    ),
]

# the alphas of a scan, shared by scan and phase-diagram (their other options are generated from
# attnphase.experiments.options.ScanOptions)
ScanAlphas = Annotated[
    str, typer.Option(help=f"Sample complexities start:stop:step (stop included) or a list, each {ALPHA}.")
]

# training at finite d, as options shared by the simulation commands (ranges: attnphase.experiments.parsing)
Dimension = Annotated[
    int,
    typer.Option(
        help=f"Embedding dimension, {DIMENSION}, and the training data within {MAX_SIMULATION_BYTES / 2**30:g} GiB."
    ),
]
SampleComplexities = Annotated[
    str, typer.Option(help=f"Sample complexities n/d, start:stop:step (stop included) or a list, each {ALPHA}.")
]
TestSamples = Annotated[int, typer.Option(help=f"Fresh samples for the test error of each run, {TEST_SAMPLES}.")]
Tolerance = Annotated[
    float, typer.Option(help=f"A run has converged when its gradient norm is below this, {TOLERANCE}.")
]


def fail(error: Exception) -> NoReturn:
    """Report a user error in one line and exit with status 2."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(code=2)


@contextmanager
def user_errors() -> Iterator[None]:
    """Report a bad option value, an output directory holding another run or files that cannot be
    read back (:class:`~attnphase.experiments.storage.CorruptResultsError`, a ``ValueError``), or a
    directory another run holds, in one line, exit 2."""
    try:
        yield
    except (*USER_ERRORS, ValueError, FileExistsError, DirectoryInUseError) as error:
        fail(error)


# ---------------------------------------------------------------- generated option groups


def expanded(
    command: Callable[..., Any], name: str, group: list[inspect.Parameter], build: Callable[[dict[str, Any]], Any]
) -> Callable[..., Any]:
    """``command`` as a typer command whose parameter ``name`` is replaced by the options ``group``: the
    wrapper takes those options' values, builds the parameter's value with ``build`` (bad input reported
    in one line) and calls ``command`` with it."""
    signature = inspect.signature(command)
    hints = typing.get_type_hints(command, include_extras=True)
    own = [
        p.replace(annotation=hints[key], kind=inspect.Parameter.KEYWORD_ONLY) for key, p in signature.parameters.items()
    ]
    position = next(i for i, p in enumerate(own) if p.name == name)
    parameters = [*own[:position], *group, *own[position + 1 :]]
    names = [p.name for p in group]

    @functools.wraps(command)
    def wrapper(**values: Any) -> Any:
        chosen = {key: values.pop(key) for key in names}
        with user_errors():
            built = build(chosen)
        return command(**values, **{name: built})

    del wrapper.__wrapped__  # typer reads the signature below, not the command's
    wrapper.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


# the model: a shipped variant (attnphase.replica.variants) and its parameters, the paper's four numbers also
# as options of their own (:func:`model_values`)
MODEL_OPTIONS = [
    inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
    for name, default, annotation in (
        ("model_name", "paper", ModelName),
        ("settings", None, ModelSettings),
        ("omega", None, Omega),
        ("sigma", None, Sigma),
        ("lam", None, Lambda),
        ("a_matrix", None, PositionalTarget),
    )
]

#: The parameter each of the paper-shaped options sets.
OPTION_PARAMETERS = {"omega": "omega", "sigma": "sigma", "lam": "lambda", "a_matrix": "A"}


def model_values(
    model_name: str, settings: list[str] | None, **options: float | str | None
) -> tuple[Variant, dict[str, Value]]:
    """The shipped model ``model_name`` and the parameter values of its ``--set`` items and of the
    paper-shaped options given (each parameter set once; an option the model lacks is refused, naming the
    model's parameters)."""
    chosen = variant(model_name)
    values = parse_settings(settings or [], chosen)
    for option, value in options.items():
        if value is None:
            continue
        parameter = chosen.parameter(OPTION_PARAMETERS[option])
        if parameter.name in values:
            raise UsageError(f"{parameter.name} is given twice (as an option and with --set)")
        values[parameter.name] = parse_matrix(value, parameter.name) if parameter.is_matrix else value
    return chosen, values


def _model(values: dict[str, Any]) -> AttentionModel:
    chosen, parameters = model_values(**values)
    return chosen.model(parameters)


def with_model(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command``'s ``model`` parameter as the model options (:data:`MODEL_OPTIONS`)."""
    return expanded(command, "model", MODEL_OPTIONS, _model)


#: The command-line option that reads a tuning (:func:`~attnphase.experiments.options.read_tuning`).
TUNING_HELP = "A JSON file holding a Tuning (or a run.json whose options hold one): every numerical knob."


def scan_option_parameters() -> list[inspect.Parameter]:
    """One option per field of :class:`ScanOptions`, with the field's help (the tuning as ``--tuning FILE``)."""
    parameters = []
    hints = typing.get_type_hints(ScanOptions)
    for spec in dataclasses.fields(ScanOptions):
        if spec.name == "tuning":
            annotation: Any = Annotated[Path | None, typer.Option("--tuning", help=TUNING_HELP, metavar="FILE")]
            default = None
        else:
            default, kind = spec.default, hints[spec.name]
            if isinstance(default, enum.Enum):
                kind, default = str, default.value
            flags = [spec.metadata["flag"]] if spec.metadata.get("flag") else []
            annotation = Annotated[kind, typer.Option(*flags, help=spec.metadata["help"])]
        parameters.append(
            inspect.Parameter(spec.name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation)
        )
    return parameters


def _scan_options(values: dict[str, Any]) -> ScanOptions:
    tuning = values.pop("tuning")
    return ScanOptions(**values, **({} if tuning is None else {"tuning": read_tuning(tuning)}))


def with_scan_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command``'s ``options`` parameter as one option per field of :class:`ScanOptions`."""
    return expanded(command, "options", scan_option_parameters(), _scan_options)
