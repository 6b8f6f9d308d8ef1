"""What every ``attnphase`` command shares: the paper's model and training as options, and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from attnphase.experiments.parsing import UsageError
from attnphase.replica.declaration import DeclarationError
from attnphase.saddle.quadrature import QuadratureError
from attnphase.saddle.validation import ParameterError

#: Errors that mean "bad input" (reported in one line, exit status 2).
USER_ERRORS = (DeclarationError, ParameterError, QuadratureError, UsageError)

Out = Annotated[Path, typer.Option(help="Output directory (created if needed).")]

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
TestSamples = Annotated[int, typer.Option(help="Fresh samples for the test error of each run.")]
Tolerance = Annotated[float, typer.Option(help="A run has converged when its gradient norm is below this.")]


def fail(error: Exception) -> NoReturn:
    """Report a user error in one line and exit with status 2."""
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(code=2)
