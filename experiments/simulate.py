"""Finite-d training runs set against the replica theory (THEORY.md sec. 1, 11; paper Fig. 3).

:func:`simulate` is one call of the public API (``attnphase.simulate``) and the whole of
``attnphase simulate``: it trains the declared model at finite ``d`` from informed (or random)
initialisations (:mod:`attnphase.experiments.training`), classifies the basin each run ends in
against the theory's branches, and returns a :class:`SimulationResult`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.families import overlap_names
from attnphase.experiments.parsing import UsageError, parse_alphas, parse_names
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.scan import ScanResult, scan
from attnphase.experiments.simulation_figures import simulation_figure
from attnphase.experiments.storage import RUN_FILE, identity_differences, read_json, read_table
from attnphase.experiments.study import StudyResult, checked_model, progress_bar, versions
from attnphase.experiments.training import SimulationSettings, branch_overlaps, classify_basin, simulate_to
from attnphase.replica.declaration import AttentionModel

#: The grid of sample complexities simulated by default.
DEFAULT_SIMULATION_ALPHAS = "0.4:2.4:0.4"
#: Where a simulation's result keeps the scan it is compared with, inside its output directory.
THEORY_DIRECTORY = "theory"


@dataclass(frozen=True, eq=False)
class SimulationResult(StudyResult):
    """The outcome of :func:`simulate`.

    ``runs``: one row per run (``alpha, d, n, seed, init, optimiser, train_loss, test_error, theta,
    m, q, grad_norm, steps, converged, seconds, basin``), the table ``attnphase simulate`` writes
    as ``simulations.csv``; ``theory_branches``: the scan's ``branches`` table it is compared with;
    ``theory``: that scan's result when it is held (scanned here or given), saved under ``theory/``,
    else ``theory_source`` names the scan's directory.
    """

    settings: SimulationSettings
    runs: pd.DataFrame
    theory_branches: pd.DataFrame
    theory_thresholds: pd.Series | None
    theory: ScanResult | None
    theory_source: str
    simulation_seconds: float
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "simulate"
    table_names = ("simulations",)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"simulations": self.runs}

    @property
    def record(self) -> dict[str, object]:
        return {
            "settings": self.settings.as_dict(),
            "status": "complete",
            "seeds": self.settings.seed_list,
            "theory": self.theory_source,
            "simulation_seconds": round(self.simulation_seconds, 2),
            "seconds": round(self.seconds, 2),
            "versions": self.provenance,
        }

    def save(self, out: str | Path) -> list[Path]:
        """Write what ``attnphase simulate`` writes: the run table, figure and ``run.json`` into
        ``out``, and the theory's scan into ``out/theory`` when this result holds it."""
        paths = super().save(out)
        if self.theory is not None:
            paths += self.theory.save(Path(out) / THEORY_DIRECTORY)
        return paths

    def plot(self) -> Figure:
        """Test error, training loss and overlaps (mean and standard error over seeds) on the theory's
        branches, and the training-loss gap between the two minima."""
        return simulation_figure(self.runs, self.theory_branches, self.theory_thresholds, self.settings.model)

    def summary(self) -> str:
        """One line: how many runs, how many converged."""
        converged = int(self.runs["converged"].astype(bool).sum())
        return f"{len(self.runs)} runs ({converged} converged to gradient norm <= {self.settings.tolerance:g})"


def _theory_tables(
    theory: ScanResult | str | Path, model: AttentionModel
) -> tuple[pd.DataFrame, pd.Series | None, str]:
    """The ``branches`` table and the thresholds row of a scan result or of a scan's output
    directory (read strictly: :func:`~attnphase.experiments.storage.read_table`), and where the
    scan is kept."""
    if isinstance(theory, ScanResult):
        if theory.model != model:
            raise UsageError("theory must be a scan of the simulated model; it is a scan of another declaration")
        return theory.branches, theory.thresholds.iloc[0], THEORY_DIRECTORY
    directory = Path(theory)
    if not (directory / "branches.csv").exists():
        raise UsageError(f"theory must be a scan's output directory with branches.csv; got {directory}")
    record = read_json(directory / RUN_FILE) or {}
    if "model" not in record:
        raise UsageError(
            f"theory must be a scan's output directory whose {RUN_FILE} records its model; {directory} has none"
        )
    differences = identity_differences({"model": model.record()}, record)
    if differences:
        name, here, there = differences[0]
        raise UsageError(
            f"theory must be a scan of the simulated model; {directory} scans another ({name} is {there} there, "
            f"{here} here)"
        )
    branches = read_table(
        directory / "branches.csv",
        numbers=("alpha", *overlap_names(model), "train_loss", "test_error"),
        flags=("converged",),
        texts=("branch",),
    )
    thresholds_file = directory / "thresholds.csv"
    thresholds = read_table(thresholds_file).iloc[0] if thresholds_file.exists() else None
    return branches, thresholds, str(directory)


def _outputs(out: str | Path | None, theory: ScanResult | str | Path | None) -> tuple[str, ...]:
    """What a simulation writes into ``out`` besides ``run.json``: its table, its figure and the theory's
    scan (unless the theory is read from that very place)."""
    names = SimulationResult.outputs()
    if out is None:
        return names
    own = Path(out) / THEORY_DIRECTORY
    given = isinstance(theory, str | Path) and Path(theory).resolve() == own.resolve()
    return names if given else (*names, THEORY_DIRECTORY)


def simulate(
    model: AttentionModel,
    *,
    d: int = 400,
    alphas: str | Sequence[float] = DEFAULT_SIMULATION_ALPHAS,
    seeds: int | Sequence[int] = 4,
    init: str | Sequence[str] = ("positional", "semantic"),
    optimiser: str = "lbfgs",
    lr: float | None = None,
    max_steps: int = 5000,
    tolerance: float = 1e-6,
    n_test: int = 10_000,
    theory: ScanResult | str | Path | None = None,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> SimulationResult:
    """Train ``model`` at embedding dimension ``d`` and compare with the replica theory (THEORY.md sec. 11).

    Full-batch ERM in float64 (sec. 1) on ``n = round(alpha d)`` samples for every alpha in
    ``alphas`` (a sequence, or ``start:stop:step`` / ``a,b,c``), ``seeds`` runs each (a count or a
    list of seeds), from every initialisation in ``init`` (``positional``: ``Q`` along ``p_1``,
    ``semantic``: ``Q = Q*``, ``random``), with ``optimiser`` ``lbfgs``, ``gd`` or ``adam`` (``lr``
    ``None``: GD 0.15, Adam 0.01, L-BFGS 1) until the gradient norm is below ``tolerance`` or after
    ``max_steps`` steps; the test error on ``n_test`` fresh samples. ``theory``: a
    :class:`~attnphase.experiments.scan.ScanResult`, a scan's output directory, or ``None`` to
    scan the simulated alphas (saved into ``out/theory``). With ``out``, the directory is held for
    the whole call (another run into it is refused at once), blocks are written as they finish, a
    rerun with the same settings (compared by value) resumes, and the result is saved there; other
    settings or unreadable files are refused unless ``overwrite``, which first removes every file of
    the old run (:func:`~attnphase.experiments.training.simulate_to`).
    The simulator builds data, teacher, student and regulariser from ``model`` itself
    (:class:`~attnphase.experiments.finite_model.FiniteModel`).
    """
    model = checked_model(model)
    settings = SimulationSettings.of_model(
        model,
        d=d,
        alphas=tuple(float(a) for a in parse_alphas(alphas)),
        seeds=seeds if isinstance(seeds, int) else tuple(seeds),
        inits=parse_names(init),
        optimiser=optimiser,
        lr=lr,
        max_steps=max_steps,
        tolerance=tolerance,
        n_test=n_test,
    ).validate()
    tables = None if theory is None else _theory_tables(theory, model)  # a bad directory fails before training
    identity = {"settings": settings.as_dict()}
    with RunContext(out, identity, _outputs(out, theory), overwrite) as run:
        started = time.perf_counter()
        with progress_bar(len(settings.alphas) * len(settings.inits), "simulations", "block", progress) as bar:
            runs = simulate_to(run, settings, progress=lambda _block: bar.update(1))
        simulation_seconds = time.perf_counter() - started
        if theory is None:
            theory = scan(model, settings.alphas, progress=progress)
            tables = _theory_tables(theory, model)
        branches, thresholds, source = tables
        runs = classify_basin(runs, branch_overlaps(branches, settings.alphas, model), model)
        held = theory if isinstance(theory, ScanResult) else None
        result = SimulationResult(
            settings, runs, branches, thresholds, held, source, simulation_seconds, time.perf_counter() - started
        )
        run.save(result)
    return result
