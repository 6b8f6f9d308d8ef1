"""The ``attnphase`` command line."""

from __future__ import annotations

import math
import platform
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from tqdm import tqdm

from replica.declaration import DeclarationError, paper_model
from saddle.fixed_point import STANDARD_BRANCHES, ProxSettings, SolverSettings
from saddle.quadrature import QuadratureError, make_rule
from saddle.validation import ParameterError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Replica theory of a solvable model of dot-product attention: scans, thresholds, figures.",
)

USER_ERRORS = (DeclarationError, ParameterError, QuadratureError)

# the paper's model, as options shared by every command
Omega = Annotated[float, typer.Option(help="Positionality of the target, in [0, 1].")]
Sigma = Annotated[float, typer.Option(help="Token standard deviation, > 0.")]
Lambda = Annotated[float, typer.Option("--lambda", help="Ridge strength, >= 0.")]
PositionalTarget = Annotated[str, typer.Option("--A", help="Positional target A, row-major a11,a12,a21,a22.")]


@app.callback()
def _root() -> None:
    """Replica theory of a solvable model of dot-product attention (Cui et al., NeurIPS 2024)."""


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


def _fail(error: Exception) -> None:
    typer.echo(f"error: {error}", err=True)
    raise typer.Exit(code=2)


def _versions() -> dict[str, str]:
    packages = ("attnphase", "numpy", "scipy", "sympy", "numba", "pandas", "matplotlib")
    versions = {"python": platform.python_version()}
    for name in packages:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


@app.command()
def scan(
    out: Annotated[Path, typer.Option(help="Output directory (created if needed).")] = Path("attnphase-scan"),
    omega: Omega = 0.3,
    sigma: Sigma = 0.5,
    lam: Lambda = 0.01,
    a_matrix: PositionalTarget = "0.6,0.4,0.4,0.6",
    alphas: Annotated[
        str, typer.Option(help="Sample complexities start:stop:step (stop included) or a list.")
    ] = "0.1:2.5:0.08",
    quadrature: Annotated[str, typer.Option(help="gauss-hermite or sobol.")] = "gauss-hermite",
    order: Annotated[int, typer.Option(help="Gauss-Hermite points per dimension, or log2 of the Sobol points.")] = 16,
    seed: Annotated[int, typer.Option(help="Seed of the Sobol scrambling and of the extra prox starts.")] = 0,
    conjugate_form: Annotated[str, typer.Option(help="score (integration by parts) or envelope.")] = "score",
    overwrite: Annotated[bool, typer.Option(help="Discard a previous scan in OUT with other settings.")] = False,
) -> None:
    """Positional, semantic and agnostic branches over alpha; alpha_c, alpha_l; tables and a figure.

    Writes OUT/branches.csv (one row per alpha and branch), OUT/thresholds.csv, OUT/run.json
    (settings, seeds, versions, timings) and OUT/scan.png, OUT/scan.pdf. Points are saved as
    they are computed; rerunning the same command resumes an interrupted scan.
    """
    from experiments.scan_job import ScanJob

    try:
        model = paper_model(omega=omega, sigma=sigma, lam=lam, positional=parse_matrix(a_matrix))
        grid = parse_alphas(alphas)
        settings = SolverSettings(
            quadrature=make_rule(quadrature, order, seed),
            conjugate_form=conjugate_form,
            prox=ProxSettings(seed=seed),
        )
    except (*USER_ERRORS, UsageError, ValueError) as error:
        _fail(error)
    job = ScanJob(
        out,
        model,
        grid,
        settings,
        {
            "omega": omega,
            "sigma": sigma,
            "lambda": lam,
            "A": a_matrix,
            "alphas": alphas,
            "quadrature": quadrature,
            "order": order,
            "seed": seed,
            "conjugate_form": conjugate_form,
        },
    )
    try:
        job.prepare(overwrite=overwrite)
    except FileExistsError as error:
        _fail(error)
    started = time.perf_counter()
    with tqdm(
        total=len(grid) * len(STANDARD_BRANCHES), desc="fixed points", unit="pt", file=sys.stderr, disable=None
    ) as bar:
        bar.update(job.completed())
        summary = job.run(on_point=lambda _p: bar.update(1))
    elapsed = time.perf_counter() - started
    job.finish(versions=_versions(), seconds=elapsed)
    typer.echo(summary)


@app.command()
def equations(
    omega: Omega = 0.3,
    sigma: Sigma = 0.5,
    lam: Lambda = 0.01,
    a_matrix: PositionalTarget = "0.6,0.4,0.4,0.6",
    latex: Annotated[bool, typer.Option(help="Print LaTeX instead of plain text.")] = False,
) -> None:
    """Print the derived saddle-point equations and the symmetry reduction of the paper's model."""
    from replica.saddle_equations import derive
    from replica.saddle_equations import latex as to_latex

    try:
        model = paper_model(omega=omega, sigma=sigma, lam=lam, positional=parse_matrix(a_matrix))
    except (*USER_ERRORS, UsageError) as error:
        _fail(error)
    system = derive(model)
    show = to_latex if latex else str
    typer.echo("# per-token order parameters in terms of the reduced ones")
    for name, expr in system.per_token.items():
        typer.echo(f"{name} = {show(expr)}")
    typer.echo("# saddle-point equations (E_dX = E[dM/dX at the prox], THEORY.md sec. 4)")
    for eq in system.equations():
        typer.echo(f"{show(eq.lhs)} = {show(eq.rhs)}")
    typer.echo("# free entropy (Psi_out = -E[min_z M])")
    typer.echo(show(system.free_entropy))
    typer.echo("# constants")
    for symbol, value in system.constant_values().items():
        typer.echo(f"{symbol} = {value:g}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
