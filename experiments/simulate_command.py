"""``attnphase simulate``: finite-d training runs set against the replica theory (THEORY.md sec. 11)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import pandas as pd
import typer
from tqdm import tqdm

from experiments.cli_common import (
    USER_ERRORS,
    Dimension,
    Lambda,
    Omega,
    PositionalTarget,
    SampleComplexities,
    Sigma,
    TestSamples,
    Tolerance,
    UsageError,
    fail,
    parse_alphas,
    parse_matrix,
    versions,
)
from experiments.simulation import SimulationSettings, branch_overlaps, classify_basin, simulate_to
from experiments.simulation_figures import simulation_figure
from experiments.storage import write_json, write_table


def simulate(
    out: Annotated[Path, typer.Option(help="Output directory (created if needed).")] = Path("attnphase-simulate"),
    omega: Omega = 0.3,
    sigma: Sigma = 0.5,
    lam: Lambda = 0.01,
    a_matrix: PositionalTarget = "0.6,0.4,0.4,0.6",
    d: Dimension = 400,
    alphas: SampleComplexities = "0.4:2.4:0.4",
    seeds: Annotated[int, typer.Option(help="Independent runs per point (seeds 0 .. seeds-1).")] = 4,
    init: Annotated[str, typer.Option(help="Initialisations, comma-separated: positional, semantic, random.")] = (
        "positional,semantic"
    ),
    optimiser: Annotated[str, typer.Option(help="lbfgs, gd (full-batch gradient descent) or adam.")] = "lbfgs",
    lr: Annotated[float | None, typer.Option(help="Learning rate (default: gd 0.15, adam 0.01, lbfgs 1).")] = None,
    max_steps: Annotated[int, typer.Option(help="Largest number of optimiser steps per run.")] = 5000,
    tolerance: Tolerance = 1e-6,
    n_test: TestSamples = 10_000,
    theory: Annotated[
        Path | None, typer.Option(help="A scan's output directory; default: scan the simulated alphas into OUT/theory.")
    ] = None,
    overwrite: Annotated[bool, typer.Option(help="Discard previous simulations in OUT with other settings.")] = False,
) -> None:
    """Train the attention model at finite d from informed initialisations and compare with the theory.

    Writes OUT/simulations.csv (one row per run: alpha, seed, init, eps_t, eps_g, theta, m, q,
    gradient norm, steps, converged, and the basin the run ended in: positional, semantic or neither),
    OUT/simulate.png and .pdf (simulations over the theory's branches, and the training-loss gap
    semantic - positional) and OUT/run.json (settings, seeds, versions, timings). Blocks are saved as
    they finish; rerunning the same command resumes.
    """
    try:
        grid = parse_alphas(alphas)
        model, settings = SimulationSettings.of_paper_model(
            omega,
            sigma,
            lam,
            parse_matrix(a_matrix),
            d=d,
            alphas=tuple(float(a) for a in grid),
            seeds=seeds,
            inits=tuple(part.strip() for part in init.split(",")),
            optimiser=optimiser,
            lr=lr,
            max_steps=max_steps,
            tolerance=tolerance,
            n_test=n_test,
        )
        settings.validate()
        if theory is not None and not (theory / "branches.csv").exists():
            raise UsageError(f"theory must be a scan's output directory with branches.csv; got {theory}")
    except (*USER_ERRORS, UsageError, ValueError) as error:
        fail(error)

    started = time.perf_counter()
    blocks = len(settings.alphas) * len(settings.inits)
    try:
        with tqdm(total=blocks, desc="simulations", unit="block", file=sys.stderr, disable=None) as bar:
            frame = simulate_to(out, settings, overwrite=overwrite, progress=lambda _b: bar.update(1))
    except FileExistsError as error:
        fail(error)
    simulation_seconds = time.perf_counter() - started

    if theory is None:
        theory = out / "theory"
        _scan(theory, model, grid, {"omega": omega, "sigma": sigma, "lambda": lam, "A": a_matrix, "alphas": alphas})
    branches = pd.read_csv(theory / "branches.csv")
    frame = classify_basin(frame, branch_overlaps(branches, settings.alphas))
    write_table(out / "simulations.csv", frame)
    thresholds_file = theory / "thresholds.csv"
    thresholds = pd.read_csv(thresholds_file).iloc[0] if thresholds_file.exists() else None
    simulation_figure(frame, branches, thresholds, out / "simulate")
    write_json(
        out / "run.json",
        {
            "settings": settings.as_dict(),
            "status": "complete",
            "seeds": settings.seed_list,
            "theory": str(theory),
            "simulation_seconds": round(simulation_seconds, 2),
            "seconds": round(time.perf_counter() - started, 2),
            "versions": versions(),
        },
    )
    converged = frame["converged"].astype(bool)
    typer.echo(
        f"{len(frame)} runs ({int(converged.sum())} converged to gradient norm <= {settings.tolerance:g}); "
        f"tables and figure in {out}/"
    )


def _scan(out: Path, model, grid, options: dict[str, object]) -> None:
    """The theory's branches at the simulated alphas (``attnphase scan`` defaults), resumable in ``out``."""
    from experiments.scan_job import ScanJob
    from saddle.fixed_point import SolverSettings

    settings = SolverSettings()
    job = ScanJob(
        out, model, grid, settings, {**options, "quadrature": settings.quadrature.label, "seed": settings.prox.seed}
    )
    job.prepare(overwrite=True)
    started = time.perf_counter()
    job.run()
    job.finish(versions=versions(), seconds=time.perf_counter() - started)
