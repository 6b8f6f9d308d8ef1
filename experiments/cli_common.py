"""What every ``attnphase`` command shares: the paper's model as options, parsing, errors, versions."""

from __future__ import annotations

import math
import platform
from importlib import metadata
from typing import Annotated, NoReturn

import numpy as np
import typer

from replica.declaration import DeclarationError
from saddle.quadrature import QuadratureError
from saddle.validation import ParameterError

USER_ERRORS = (DeclarationError, ParameterError, QuadratureError)

# the paper's model, as options shared by every command
Omega = Annotated[float, typer.Option(help="Positionality of the target, in [0, 1].")]
Sigma = Annotated[float, typer.Option(help="Token standard deviation, > 0.")]
Lambda = Annotated[float, typer.Option("--lambda", help="Ridge strength, >= 0.")]
PositionalTarget = Annotated[str, typer.Option("--A", help="Positional target A, row-major a11,a12,a21,a22.")]

# training at finite d, as options shared by the simulation commands
Dimension = Annotated[int, typer.Option(help="Embedding dimension.")]
SampleComplexities = Annotated[
    str, typer.Option(help="Sample complexities n/d, start:stop:step (stop included) or a list.")
]
Seeds = Annotated[int, typer.Option(help="Independent runs per point (seeds 0 .. seeds-1).")]
TestSamples = Annotated[int, typer.Option(help="Fresh samples for the test error of each run.")]
Tolerance = Annotated[float, typer.Option(help="A run has converged when its gradient norm is below this.")]


class UsageError(ValueError):
    """A command-line value cannot be parsed."""


def parse_alphas(text: str) -> np.ndarray:
    """``start:stop:step`` (stop included) or a comma-separated list of alphas."""
    try:
        if ":" in text:
            start, stop, step = (float(x) for x in text.split(":"))
            if not step > 0:
                raise ParameterError(f"alphas step must be > 0; got {step:g}")
            if stop < start:
                raise ParameterError(f"alphas stop must be >= start; got {start:g}:{stop:g}")
            count = int(math.floor((stop - start) / step + 1e-9)) + 1
            values = start + step * np.arange(count)
        else:
            values = np.array([float(x) for x in text.split(",")])
    except ValueError as error:
        if isinstance(error, ParameterError):
            raise
        raise UsageError(f"alphas must be start:stop:step or a comma-separated list; got {text!r}") from None
    if not np.all(values > 0):
        raise ParameterError(f"alpha must be > 0; got alphas {text!r}")
    if values.size > 2000:
        raise ParameterError(f"alphas must have at most 2000 values; got {values.size}")
    return np.round(values, 10)


def parse_matrix(text: str) -> tuple[tuple[float, ...], ...]:
    """``a11,a12,a21,a22`` (row-major, a square number of entries)."""
    try:
        entries = [float(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"A must be comma-separated numbers a11,a12,a21,a22; got {text!r}") from None
    size = int(round(math.sqrt(len(entries))))
    if size * size != len(entries):
        raise DeclarationError(f"A must be a square matrix given row-major; got {len(entries)} entries")
    return tuple(tuple(entries[i * size : (i + 1) * size]) for i in range(size))


def fail(error: Exception) -> NoReturn:
    """Report a user error in one line and exit with status 2."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(code=2)


def versions() -> dict[str, str]:
    """Versions of Python and of the packages a result depends on (written next to results)."""
    packages = ("attnphase", "numpy", "scipy", "sympy", "numba", "pandas", "matplotlib", "torch")
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
