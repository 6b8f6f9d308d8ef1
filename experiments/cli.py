"""The ``attnphase`` command line: a thin layer over the public API.

Each command reads its options, builds the model (a shipped variant, :mod:`attnphase.replica.variants`,
by default the paper's) and calls
the function of the same name (:func:`attnphase.scan`, :func:`attnphase.simulate`, ...), which
computes, writes its tables, figure and ``run.json`` into ``--out`` and returns the result whose
summary is printed. Bad input is reported in one line with exit status 2.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer

from attnphase.experiments.cli_common import (
    Dimension,
    ModelName,
    ModelSettings,
    Out,
    Overwrite,
    PositionalTarget,
    SampleComplexities,
    ScanAlphas,
    TestSamples,
    Tolerance,
    model_values,
    user_errors,
    with_model,
    with_scan_options,
)
from attnphase.experiments.options import ScanOptions
from attnphase.experiments.parsing import (
    DEFAULT_ALPHAS,
    EXTENT,
    GRID_POINTS,
    UsageError,
    parse_grid,
)
from attnphase.replica.declaration import LAMBDA, OMEGA, SIGMA, AttentionModel
from attnphase.replica.variants import VARIANTS
from attnphase.saddle.quadrature.rules import GAUSS_HERMITE_ORDER
from attnphase.saddle.validation import ALPHA

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    help="Replica theory of a solvable model of dot-product attention: scans, thresholds, figures.",
)


@app.callback()
def _root() -> None:
    """Replica theory of a solvable model of dot-product attention (Cui et al., NeurIPS 2024)."""


@app.command()
@with_model
@with_scan_options
def scan(
    out: Out = Path("attnphase-scan"),
    *,
    model: AttentionModel,
    alphas: ScanAlphas = DEFAULT_ALPHAS,
    overwrite: Overwrite = False,
    options: ScanOptions,
) -> None:
    """Every fixed-point branch over alpha: positional, semantic, agnostic, mixed; alpha_c, alpha_l; tables, a figure.

    Writes OUT/branches.csv (one row per alpha and branch), OUT/thresholds.csv, OUT/transitions.csv,
    OUT/run.json (model, options and tuning, seeds, versions, timings) and OUT/scan.png, OUT/scan.pdf.
    Points are saved as they are computed; rerunning the same command resumes an interrupted scan.
    """
    from attnphase.experiments.scan import scan as run

    with user_errors():
        result = run(model, alphas, options, out=out, overwrite=overwrite, progress=None)
    typer.echo(f"{result.summary()}\ntables and figure in {out}/")


@app.command("phase-diagram")
@with_scan_options
def phase_diagram(
    out: Out = Path("attnphase-phase-diagram"),
    omegas: Annotated[
        str, typer.Option(help=f"Positionalities start:stop:step (stop included) or a list, each {OMEGA}.")
    ] = "0.1:0.5:0.1",
    sigmas: Annotated[
        str | None,
        typer.Option(help=f"Token standard deviations (a list or start:stop:step), each {SIGMA} (default 0.5)."),
    ] = None,
    lambdas: Annotated[
        str | None, typer.Option(help=f"Ridge strengths (a list or start:stop:step), each {LAMBDA} (default 0.01).")
    ] = None,
    model_name: ModelName = "paper",
    settings: ModelSettings = None,
    a_matrix: PositionalTarget = None,
    alphas: ScanAlphas = DEFAULT_ALPHAS,
    jobs: Annotated[int, typer.Option(help="Local worker processes, an integer in [1, 256].")] = 2,
    scheduler: Annotated[
        str | None, typer.Option(help="Address of a Dask scheduler to run on instead (needs attnphase[dask]).")
    ] = None,
    overwrite: Overwrite = False,
    *,
    options: ScanOptions,
) -> None:
    """A scan over alpha at every (omega, sigma, lambda): alpha_c and alpha_l against the parameters.

    Writes OUT/thresholds.csv (one row per parameter point: alpha_c, alpha_l, each with its status and
    bracket), OUT/branches.csv and OUT/transitions.csv (every scan's rows, with the parameters as
    columns), OUT/phase_diagram.png/.pdf, OUT/gap.png/.pdf, OUT/run.json, and each scan's own files in
    OUT/units/. Rerunning the same command resumes: finished scans are read back, an interrupted one
    is computed again.
    """
    from attnphase.experiments.phase_diagram import phase_diagram as run

    with user_errors():
        chosen, fixed = model_values(model_name, settings, a_matrix=a_matrix)
        grids = {
            chosen.parameter(parameter).name: parse_grid(text, name, allowed)
            for text, name, parameter, allowed in (
                (sigmas, "sigmas", "sigma", SIGMA),
                (lambdas, "lambdas", "lambda", LAMBDA),
                (omegas, "omegas", "omega", OMEGA),
            )
            if text is not None
        }
        twice = sorted(set(grids) & set(fixed))
        if twice:
            raise UsageError(f"{twice[0]} is given twice (as a grid and with --set)")
        models = [
            chosen.model({**fixed, **dict(zip(grids, point, strict=True))})
            for point in itertools.product(*grids.values())
        ]
        result = run(
            models, alphas, options, out=out, overwrite=overwrite, jobs=jobs, scheduler=scheduler, progress=None
        )
    typer.echo(f"{result.summary()}\ntables and figures in {out}/")


@app.command()
@with_model
def landscape(
    out: Out = Path("attnphase-landscape"),
    *,
    model: AttentionModel,
    alpha: Annotated[float, typer.Option(help=f"Sample complexity, {ALPHA}.")] = 1.25,
    points: Annotated[int, typer.Option(help=f"Grid nodes per axis, {GRID_POINTS}.")] = 11,
    extent: Annotated[
        str | None,
        typer.Option(
            help=f"Largest m and theta of the grid, two numbers each {EXTENT} (default: from the fixed points)."
        ),
    ] = None,
    order: Annotated[int, typer.Option(help=f"Gauss-Hermite points per dimension, {GAUSS_HERMITE_ORDER}.")] = 14,
    prox: Annotated[
        str, typer.Option(help="The fixed points' prox policy: global, local or both (the grid: the first).")
    ] = "global",
    overwrite: Overwrite = False,
) -> None:
    """The lowest training loss at fixed (m, theta) on a grid, and every fixed point at ALPHA with its stability.

    Writes OUT/landscape.csv (one row per grid node: the held overlaps, q, V, the multipliers, the
    training loss and its gradient, converged, status), OUT/fixed_points.csv (label, overlaps, training
    loss, stable, curvatures), OUT/landscape.png/.pdf and OUT/run.json. Rows are saved as they are
    computed; rerunning the same command resumes.
    """
    from attnphase.experiments.landscape import landscape as run

    with user_errors():
        bounds = None if extent is None else parse_grid(extent, "extent", EXTENT)
        result = run(
            model,
            alpha,
            points=points,
            extent=bounds,
            order=order,
            prox=prox,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}\ntables and figure in {out}/")


@app.command()
def models() -> None:
    """List the shipped models (--model NAME) with their parameters (--set name=value) and defaults."""
    for chosen in VARIANTS.values():
        typer.echo(f"{chosen.name}: {chosen.summary}")
        for parameter in chosen.parameters:
            default = parameter.default
            shown = ",".join(f"{x:g}" for row in default for x in row) if parameter.is_matrix else f"{default:g}"
            typer.echo(f"    {parameter.name} = {shown}  ({parameter.meaning})")


@app.command()
@with_model
def equations(
    *,
    model: AttentionModel,
    latex: Annotated[bool, typer.Option(help="Print LaTeX (align* environments) instead of plain text.")] = False,
) -> None:
    """Print the model's saddle-point system: symmetry reduction, fields, envelope, equations, free entropy."""
    from attnphase.replica.saddle_equations import derive

    document = derive(model).equations_document()
    typer.echo(document.latex() if latex else document.text())


@app.command()
@with_model
def simulate(
    out: Out = Path("attnphase-simulate"),
    *,
    model: AttentionModel,
    d: Dimension = 400,
    alphas: SampleComplexities = "0.4:2.4:0.4",
    seeds: Annotated[
        int, typer.Option(help="Independent runs per point (seeds 0 .. seeds-1), an integer in [1, 1000].")
    ] = 4,
    init: Annotated[str, typer.Option(help="Initialisations, comma-separated: positional, semantic, random.")] = (
        "positional,semantic"
    ),
    optimiser: Annotated[str, typer.Option(help="lbfgs, gd (full-batch gradient descent) or adam.")] = "lbfgs",
    lr: Annotated[
        float | None, typer.Option(help="Learning rate, in (0, 1] (default: gd 0.15, adam 0.01, lbfgs 1).")
    ] = None,
    max_steps: Annotated[
        int, typer.Option(help="Largest number of optimiser steps per run, an integer in [1, 1000000].")
    ] = 5000,
    tolerance: Tolerance = 1e-6,
    n_test: TestSamples = 10_000,
    theory: Annotated[
        Path | None, typer.Option(help="A scan's output directory; default: scan the simulated alphas into OUT/theory.")
    ] = None,
    overwrite: Overwrite = False,
) -> None:
    """Train the attention model at finite d from informed initialisations and compare with the theory.

    Writes OUT/simulations.csv (one row per run: alpha, seed, init, eps_t, eps_g, theta, m, q,
    gradient norm, steps, converged, and the basin the run ended in: positional, semantic, mixed or neither),
    OUT/simulate.png and .pdf (simulations over the theory's branches, and the training-loss gap
    semantic - positional) and OUT/run.json (settings, seeds, versions, timings). Blocks are saved as
    they finish; rerunning the same command resumes.
    """
    from attnphase.experiments.simulate import simulate as run

    with user_errors():
        result = run(
            model,
            d=d,
            alphas=alphas,
            seeds=seeds,
            init=init,
            optimiser=optimiser,
            lr=lr,
            max_steps=max_steps,
            tolerance=tolerance,
            n_test=n_test,
            theory=theory,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}; tables and figure in {out}/")


@app.command("finite-size")
@with_model
def finite_size(
    out: Out = Path("attnphase-finite-size"),
    *,
    model: AttentionModel,
    alpha: Annotated[float, typer.Option(help="Sample complexity n/d held fixed, in [1e-06, 10000].")] = 1.5,
    dims: Annotated[
        str, typer.Option(help="Embedding dimensions, comma-separated, at least two, each an integer in [2, 100000].")
    ] = "100,200,400,800,1600",
    seeds: Annotated[
        int, typer.Option(help="Independent runs per d and init (seeds 0 .. seeds-1), an integer in [1, 1000].")
    ] = 4,
    max_steps: Annotated[
        int, typer.Option(help="Largest number of L-BFGS iterations per run, an integer in [1, 1000000].")
    ] = 5000,
    tolerance: Tolerance = 1e-6,
    n_test: TestSamples = 10_000,
    overwrite: Overwrite = False,
) -> None:
    """Gap between finite-d simulations (L-BFGS, informed inits) and the theory as d grows, with power-law fits.

    Writes OUT/finite_size_runs.csv (one row per run), OUT/finite_size.csv (d, init, quantity,
    sim_mean, sim_se, theory, gap), OUT/finite_size_fit.csv (init, quantity, rate, rate_se, C),
    OUT/finite_size.png and .pdf, and OUT/run.json (settings, seeds, versions, timings). Runs are
    saved as each block finishes; rerunning the same command resumes.
    """
    from attnphase.experiments.finite_size import finite_size as run

    with user_errors():
        result = run(
            model,
            alpha=alpha,
            dims=dims,
            seeds=seeds,
            max_steps=max_steps,
            tolerance=tolerance,
            n_test=n_test,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}; files in {out}/")


@app.command()
@with_model
def uninformed(
    out: Out = Path("attnphase-uninformed"),
    *,
    model: AttentionModel,
    d: Dimension = 200,
    alphas: SampleComplexities = "0.5:2.5:0.5",
    seeds: Annotated[
        int, typer.Option(help="Independent runs per alpha (seeds 0 .. seeds-1), an integer in [1, 1000].")
    ] = 8,
    lr: Annotated[float, typer.Option(help="Adam learning rate, in (0, 1].")] = 0.01,
    max_steps: Annotated[int, typer.Option(help="Adam steps per run, an integer in [1, 1000000].")] = 2500,
    n_test: TestSamples = 10_000,
    overwrite: Overwrite = False,
) -> None:
    """Train from an uninformed start with Adam and count the runs ending in each of the theory's minima.

    Writes OUT/uninformed.csv (one row per run, with its basin: positional, semantic, mixed or neither),
    OUT/uninformed_fractions.csv (alpha, basin, fraction, count), OUT/uninformed.png and .pdf, and
    OUT/run.json (settings, seeds, the theory's overlaps, versions, timings). Runs are saved as each
    alpha finishes; rerunning the same command resumes.
    """
    from attnphase.experiments.uninformed import uninformed as run

    with user_errors():
        result = run(
            model,
            d=d,
            alphas=alphas,
            seeds=seeds,
            lr=lr,
            max_steps=max_steps,
            n_test=n_test,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}; files in {out}/")


@app.command()
def histogram(
    out: Out = Path("attnphase-histogram"),
    seed: Annotated[
        int,
        typer.Option(
            help="Seed of the data, the initialisation, the shuffling and the noise, an integer in [0, 4294967295]."
        ),
    ] = 0,
    n_train: Annotated[int, typer.Option(help="Number of training sequences, an integer in [1, 1000000].")] = 20_000,
    n_test: Annotated[int, typer.Option(help="Number of test sequences, an integer in [1, 1000000].")] = 5_000,
    epochs: Annotated[int, typer.Option(help="Epochs of frozen training with Adam, an integer in [1, 10000].")] = 20,
    sgd_epochs: Annotated[
        int, typer.Option(help="Epochs of unfrozen training with SGD, an integer in [0, 10000].")
    ] = 5,
    batch_size: Annotated[int, typer.Option(help="Minibatch size of both stages, an integer in [1, 1000000].")] = 32,
    adam_lr: Annotated[float, typer.Option(help="Initial Adam learning rate (cosine decay), in (0, 1].")] = 5e-4,
    sgd_lr: Annotated[float, typer.Option(help="SGD learning rate after unfreezing, in (0, 1].")] = 1e-3,
    noise: Annotated[
        float, typer.Option(help="Standard deviation of the noise added at unfreezing, in [0, 1].")
    ] = 1e-3,
    threads: Annotated[int, typer.Option(help="Torch CPU threads, >= 1.")] = 1,
    overwrite: Overwrite = False,
) -> None:
    """Train the positional and the semantic solution of the histogram task, frozen then unfrozen.

    Sequences of 10 tokens from 15 symbols; the target of each token is its number of
    occurrences. The attention's query and key see only the positional (resp. token) half of
    the representation during Adam training; then every weight is unfrozen, perturbed by
    Gaussian noise and trained further with SGD. Writes OUT/histogram.csv (losses, accuracies
    and relative weight changes per solution and stage), OUT/attention.png and .pdf (attention
    maps of example sequences) and OUT/run.json (settings, versions, seconds).
    """
    from attnphase.experiments.histogram import histogram as run

    with user_errors():
        result = run(
            seed=seed,
            n_train=n_train,
            n_test=n_test,
            epochs=epochs,
            sgd_epochs=sgd_epochs,
            batch_size=batch_size,
            adam_lr=adam_lr,
            sgd_lr=sgd_lr,
            noise=noise,
            threads=threads,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(result.table.to_string(index=False, float_format=lambda value: f"{value:.4g}"))
    typer.echo(f"wrote {out}/histogram.csv, attention.png, attention.pdf, run.json ({result.seconds:.0f} s)")


#: What a command interrupted by Ctrl-C prints on standard error, and its exit status (128 + SIGINT).
INTERRUPTED = "interrupted; rerun the same command to resume"
INTERRUPTED_STATUS = 130

P = ParamSpec("P")
R = TypeVar("R")


def _caused_by_interrupt(error: BaseException) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt`` or has one in its chain of causes and contexts
    (numba's compiled code turns an interrupt during a kernel into a ``SystemError``)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        if isinstance(current, KeyboardInterrupt):
            return True
        seen.add(id(current))
        pending += [current.__cause__, current.__context__]
    return False


def reporting_interrupts(command: Callable[P, R]) -> Callable[P, R]:
    """``command`` reporting an interrupt (Ctrl-C) in one line, :data:`INTERRUPTED`, with exit
    status 130 instead of a traceback. Whatever the command wrote stays (files are written
    atomically, the output directory's lock dies with the run), so rerunning it resumes."""

    @functools.wraps(command)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return command(*args, **kwargs)
        except (KeyboardInterrupt, SystemError) as error:
            if not _caused_by_interrupt(error):
                raise
            typer.echo(INTERRUPTED, err=True)
            raise typer.Exit(code=INTERRUPTED_STATUS) from None

    return run


@app.command()
@with_model
def gamp(
    out: Out = Path("attnphase-gamp"),
    *,
    model: AttentionModel,
    alpha: Annotated[float, typer.Option(help="Sample complexity n/d.")] = 1.5,
    d: Dimension = 500,
    init: Annotated[str, typer.Option(help="Initial weights: positional, semantic or random.")] = "semantic",
    trained: Annotated[
        bool, typer.Option(help="Start at the L-BFGS minimum the initial weights lead to (consistent variances).")
    ] = False,
    prox: Annotated[
        str,
        typer.Option(
            help="Each sample's stationary point: global (the theory's global policy), local (descent from the "
            "cavity mean, the theory's local policy) or followed (from the last step's)."
        ),
    ] = "global",
    seed: Annotated[int, typer.Option(help="Seed of the training set and the random starts.")] = 0,
    iterations: Annotated[int, typer.Option(help="At most this many GAMP steps.")] = 200,
    tolerance: Annotated[float, typer.Option(help="Stop once the relative step of Q is below this.")] = 1e-7,
    damping: Annotated[float, typer.Option(help="Fraction of each update taken, in (0, 1].")] = 0.2,
    state_evolution: Annotated[
        bool, typer.Option(help="Iterate the saddle-point map beside GAMP from the same overlaps.")
    ] = True,
    overwrite: Overwrite = False,
) -> None:
    """GAMP on one training set (paper App. B.2) beside its state evolution, and per sample whether its field
    is the global minimiser of its envelope.

    Writes OUT/gamp_iterations.csv (per iteration and source: overlaps, V, step, eps_t, gradient norm),
    OUT/gamp_samples.csv (per sample at the end state: envelope at GAMP's point and at the global
    minimiser, their gap, at_global), OUT/gamp.png and .pdf, and OUT/run.json (settings, outcome, versions).
    """
    from attnphase.experiments.gamp_study import gamp as run

    with user_errors():
        result = run(
            model,
            alpha,
            d=d,
            init=init,
            trained=trained,
            prox=prox,
            seed=seed,
            iterations=iterations,
            tolerance=tolerance,
            damping=damping,
            state_evolution=state_evolution,
            out=out,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}; files in {out}/")


@app.command()
def figure(
    name: Annotated[
        str | None, typer.Argument(help="The figure: fig1, fig2, fig3-left, ... (--list names them).")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="Output directory (default: attnphase-figure-NAME).")] = None,
    quick: Annotated[bool, typer.Option(help="The reduced version: coarse grids, small d, about a minute.")] = False,
    list_figures: Annotated[
        bool, typer.Option("--list", help="Name every figure with what it shows, and stop.")
    ] = False,
    model_name: Annotated[
        str | None,
        typer.Option("--model", help="A shipped model (attnphase models lists them; default: the figure's)."),
    ] = None,
    settings: ModelSettings = None,
    studies: Annotated[
        Path | None,
        typer.Option(help="Run the studies in this directory instead of OUT (to share them between figures)."),
    ] = None,
    prox: Annotated[
        str,
        typer.Option(
            help="The prox policies of the scans of a figure over alpha: global, local or both (local branches "
            "drawn with +); the other figures draw the global policy."
        ),
    ] = "global",
    overwrite: Overwrite = False,
) -> None:
    """One figure of the paper, computed by the package's studies and drawn from their tables.

    Writes OUT/NAME.png and .pdf, the figure's tables as OUT/TABLE.csv, OUT/run.json, and each study's own
    files in a subdirectory of OUT (scan/, simulate/, phase_diagram/, ...); rerunning the same command
    resumes every study where it stopped.
    """
    from attnphase.experiments.gallery import FIGURES, listing
    from attnphase.experiments.gallery import figure as draw
    from attnphase.experiments.gallery.registry import paper_figure

    if list_figures:
        typer.echo(listing())
        return
    with user_errors():
        if name is None:
            raise UsageError(f"name: give a figure ({', '.join(FIGURES)}) or --list")
        chosen, values = model_values(model_name or paper_figure(name).variant, settings)
        target = out or Path(f"attnphase-figure-{name}")
        result = draw(
            name,
            chosen,
            values,
            quick=quick,
            out=target,
            studies=studies,
            prox=prox,
            overwrite=overwrite,
            progress=None,
        )
    typer.echo(f"{result.summary()}; files in {target}/")


# the one place where every command, registered above, learns to report an interrupt
for _command in app.registered_commands:
    _command.callback = reporting_interrupts(_command.callback)


def main() -> None:
    """Entry point of the ``attnphase`` command (every command reports Ctrl-C in one line, exit 130)."""
    app()


if __name__ == "__main__":
    main()
