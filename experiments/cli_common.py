"""What every ``attnphase`` command shares: the paper's model and training as options, and errors."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, NoReturn

import typer

from attnphase.experiments.parsing import DIMENSION, MAX_SIMULATION_BYTES, TEST_SAMPLES, TOLERANCE, UsageError
from attnphase.replica.declaration import LAMBDA, OMEGA, SIGMA, TARGET_ENTRY, DeclarationError, InputTypeError
from attnphase.replica.variants import VARIANTS
from attnphase.saddle.quadrature import PRUNE, QuadratureError
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

# the options of a scan (attnphase.experiments.scan_study.scan), shared by scan and phase-diagram
ScanAlphas = Annotated[
    str, typer.Option(help=f"Sample complexities start:stop:step (stop included) or a list, each {ALPHA}.")
]
Quadrature = Annotated[str, typer.Option(help="gauss-hermite or sobol.")]
Order = Annotated[
    int,
    typer.Option(
        help="Gauss-Hermite points per dimension, an integer in [2, 64], or log2 of the Sobol points, "
        "an integer in [4, 24]."
    ),
]
Seed = Annotated[
    int, typer.Option(help="Seed of the Sobol scrambling and of the extra prox starts, an integer in [0, 4294967295].")
]
ErrorCheck = Annotated[
    int,
    typer.Option(
        help="log2 of the points of each of four scrambled Sobol rules on which every converged point's "
        "training loss is evaluated again for its quadrature error, an integer in [4, 20] (0: none)."
    ),
]
Prune = Annotated[
    float,
    typer.Option(
        help=f"Relative weight below which a Gauss-Hermite node is dropped, a number {PRUNE} "
        "(in six Gaussian dimensions, 1e-6 with --order 8 halves the nodes at the same accuracy)."
    ),
]
ConjugateForm = Annotated[str, typer.Option(help="score (integration by parts) or envelope.")]
ThresholdOrder = Annotated[
    int,
    typer.Option(
        help="Gauss-Hermite order on which the root of alpha_l is solved, an integer in [2, 64] (0: the scan's rule)."
    ),
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


Stability = Annotated[
    bool,
    typer.Option(
        "--stability/--no-stability",
        help="Assess every fixed point: curvature of the training loss per overlap family, minimum or saddle.",
    ),
]
