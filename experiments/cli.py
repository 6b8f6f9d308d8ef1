"""The ``attnphase`` command line."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from experiments.cli_common import (
    USER_ERRORS,
    Lambda,
    Omega,
    PositionalTarget,
    Sigma,
    UsageError,
    fail,
    parse_alphas,
    parse_matrix,
    versions,
)
from experiments.finite_size import finite_size
from experiments.histogram_command import histogram
from experiments.simulate_command import simulate
from experiments.uninformed import uninformed
from replica.declaration import paper_model
from saddle.fixed_point import STANDARD_BRANCHES, ProxSettings, SolverSettings
from saddle.quadrature import GaussHermite, make_rule

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Replica theory of a solvable model of dot-product attention: scans, thresholds, figures.",
)


@app.callback()
def _root() -> None:
    """Replica theory of a solvable model of dot-product attention (Cui et al., NeurIPS 2024)."""


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
    order: Annotated[int, typer.Option(help="Gauss-Hermite points per dimension, or log2 of the Sobol points.")] = 20,
    seed: Annotated[int, typer.Option(help="Seed of the Sobol scrambling and of the extra prox starts.")] = 0,
    conjugate_form: Annotated[str, typer.Option(help="score (integration by parts) or envelope.")] = "score",
    threshold_order: Annotated[
        int, typer.Option(help="Gauss-Hermite order on which the root of alpha_l is solved (0: the scan's rule).")
    ] = 32,
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
            threshold_quadrature=GaussHermite(threshold_order) if threshold_order else None,
        )
    except (*USER_ERRORS, UsageError, ValueError) as error:
        fail(error)
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
            "threshold_order": threshold_order,
        },
    )
    try:
        job.prepare(overwrite=overwrite)
    except FileExistsError as error:
        fail(error)
    started = time.perf_counter()
    with tqdm(
        total=len(grid) * len(STANDARD_BRANCHES), desc="fixed points", unit="pt", file=sys.stderr, disable=None
    ) as bar:
        bar.update(job.completed())
        summary = job.run(on_point=lambda _p: bar.update(1))
    elapsed = time.perf_counter() - started
    job.finish(versions=versions(), seconds=elapsed)
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
        fail(error)
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


app.command("simulate")(simulate)
app.command("finite-size")(finite_size)
app.command("uninformed")(uninformed)
app.command("histogram")(histogram)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
