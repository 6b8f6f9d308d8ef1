"""A phase diagram: one scan over alpha per parameter point, run in parallel, resumed unit by unit.

:func:`phase_diagram` takes a sequence of declarations (for the command line: the paper's model at
every combination of ``--omegas``, ``--sigmas``, ``--lambdas``) and runs one
:func:`~attnphase.experiments.scan.scan` per declaration: every branch over the alpha grid,
the changes of global minimum, ``alpha_c`` and ``alpha_l`` (THEORY.md sec. 5-7). Each scan is a
*unit* with its own directory ``OUT/units/NNN_<parameters>``; units run on local processes
(:mod:`joblib`) or on a Dask cluster, and the tables of every unit are gathered into
``thresholds.csv``, ``branches.csv`` and ``transitions.csv`` with the parameters as columns, and
drawn as ``phase_diagram.png/.pdf`` (the paper's Fig. 3 right) and ``gap.png/.pdf`` (Fig. 3
centre).

Resuming: a unit whose directory holds a complete scan of the same declaration and options is read
back, not recomputed; a unit that was interrupted is resumed as a single scan is (its finished
branches reused, the one cut part-way traced again from its start), so that a killed phase
diagram, rerun with the same command, ends with the same tables as one that was never
interrupted. At most one branch per worker is lost to a kill.
"""

from __future__ import annotations

import os
import tempfile
import time
import warnings
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

import joblib
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.figures import gap_figure, phase_diagram_figure
from attnphase.experiments.options import ProxOption, ScanOptions
from attnphase.experiments.parsing import DEFAULT_ALPHAS, parse_alphas
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.scan import scan, scan_identity, scan_options
from attnphase.experiments.storage import (
    CorruptResultsError,
    identity_differences,
    read_json,
    read_table,
)
from attnphase.experiments.study import StudyResult, logger, progress_bar, versions, with_package
from attnphase.replica.declaration import AttentionModel, InputTypeError, Interval
from attnphase.saddle.validation import ParameterError, check

#: The directory of the units inside a phase diagram's output directory.
UNITS = "units"
#: At most this many parameter points in one phase diagram.
MAX_UNITS = 10_000
#: Local worker processes.
JOBS = Interval(1, 256, integer=True)


@dataclass(frozen=True)
class UnitTables:
    """What a finished unit contributes: its scan's tables, as read back from its directory."""

    branches: pd.DataFrame
    thresholds: pd.DataFrame
    transitions: pd.DataFrame
    seconds: float


def unit_names(models: Sequence[AttentionModel]) -> list[str]:
    """One directory name per model: its position and the parameters that vary across ``models``
    (``003_omega=0.15``), so that a researcher finds a unit by its parameters."""
    parameters = [m.parameters() for m in models]
    varying = [k for k in parameters[0] if len({p.get(k) for p in parameters}) > 1]
    width = len(str(len(models) - 1))
    return [f"{i:0{width}d}" + "".join(f"_{k}={p[k]:.10g}" for k in varying) for i, p in enumerate(parameters)]


def run_unit(
    model: AttentionModel, alphas: Sequence[float], options: ScanOptions, directory: Path, threads: int
) -> UnitTables:
    """The tables of one scan in ``directory``: read back if it holds a complete scan of the same
    declaration and options, else computed by :func:`scan`, which resumes a partial one (reusing its
    finished branches exactly) and replaces one of other settings or one it cannot read.
    ``threads``: numba threads of this worker (0: leave numba's default)."""
    if threads:
        import numba

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
    identity = with_package(scan_identity(model, alphas, options))
    try:
        finished = _finished_unit(directory, identity)
    except CorruptResultsError as error:
        logger.warning("%s; the scan is computed again", error)
        finished = None
    if finished is None:
        scan(model, alphas, options, out=directory, overwrite=True, progress=False)
        finished = _finished_unit(directory, identity)
        assert finished is not None, f"{directory}: the scan did not finish"
    return finished


def _finished_unit(directory: Path, identity: dict[str, object]) -> UnitTables | None:
    """The tables of a complete scan of ``identity`` in ``directory``, or ``None`` if there is none
    (raises :class:`~attnphase.experiments.storage.CorruptResultsError` if a file cannot be read)."""
    record = read_json(directory / "run.json")
    if not _complete(record, identity):
        return None
    return UnitTables(
        branches=read_table(directory / "branches.csv"),
        thresholds=read_table(directory / "thresholds.csv"),
        transitions=read_table(directory / "transitions.csv"),
        seconds=float(record.get("seconds", float("nan"))),
    )


def _complete(record: dict[str, object] | None, identity: dict[str, object]) -> bool:
    """Whether ``record`` (a unit's ``run.json``) is a finished scan of ``identity``."""
    return record is not None and record.get("status") == "complete" and not identity_differences(identity, record)


@dataclass(frozen=True, eq=False)
class PhaseDiagramResult(StudyResult):
    """The outcome of :func:`phase_diagram`: one row per parameter point in ``thresholds`` (the
    model's parameters, ``alpha_c`` and ``alpha_l`` each with its status and bracket), every point of
    every branch in ``branches`` and every change of global minimum in ``transitions`` (both with
    the parameters as leading columns)."""

    models: tuple[AttentionModel, ...]
    alphas: tuple[float, ...]
    options: ScanOptions
    units: tuple[UnitTables, ...]
    seconds: float
    provenance: dict[str, str]

    figure_name = "phase_diagram"
    more_figure_names = ("gap",)
    table_names = ("thresholds", "branches", "transitions")

    @classmethod
    def outputs(cls) -> tuple[str, ...]:
        return (*super().outputs(), UNITS)

    def _gathered(self, name: str) -> pd.DataFrame:
        frames = []
        for unit_name, model, unit in zip(self.names, self.models, self.units, strict=True):
            table = getattr(unit, name)
            parameters = model.parameters()
            frame = table.drop(columns=[c for c in parameters if c in table.columns])
            frame.insert(0, "unit", unit_name)
            for position, (key, value) in enumerate(parameters.items()):
                frame.insert(position + 1, key, value)
            frames.append(frame)
        return pd.concat(frames, ignore_index=True)

    @property
    def names(self) -> list[str]:
        """The units' directory names (:func:`unit_names`)."""
        return unit_names(self.models)

    @property
    def thresholds(self) -> pd.DataFrame:
        """One row per unit (and prox policy, with ``prox="both"``): ``unit``, the model's parameters, then
        the scan's ``thresholds`` columns."""
        return self._gathered("thresholds")

    @property
    def branches(self) -> pd.DataFrame:
        """Every row of every unit's ``branches`` table, after ``unit`` and the model's parameters."""
        return self._gathered("branches")

    @property
    def transitions(self) -> pd.DataFrame:
        """Every change of global minimum of every unit, after ``unit`` and the model's parameters."""
        return self._gathered("transitions")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"thresholds": self.thresholds, "branches": self.branches, "transitions": self.transitions}

    @property
    def record(self) -> dict[str, object]:
        return {
            **(phase_diagram_identity(self.models, self.alphas, self.options)),
            "status": "complete",
            "seconds": round(self.seconds, 2),
            "unit_seconds": {name: unit.seconds for name, unit in zip(self.names, self.units, strict=True)},
            "versions": self.provenance,
            "seeds": {"prox": self.options.seed, "quadrature": self.options.seed, "error_check": self.options.seed},
        }

    def plot(self) -> Figure:
        """alpha_c and alpha_l against the swept parameter, regions shaded by the global minimum's
        branch, and where each branch exists (:func:`~attnphase.experiments.figures.phase_diagram_figure`)."""
        return phase_diagram_figure(self.thresholds, self.branches)

    def more_figures(self) -> dict[str, Figure]:
        """``gap``: the training-loss gap between the declaration's critical pair of branches against
        alpha, one curve per parameter point (:func:`~attnphase.experiments.figures.gap_figure`)."""
        low, high = self.models[0].labels.critical
        return {"gap": gap_figure(self.branches, low, high)}

    def summary(self) -> str:
        """One line per parameter point: its varying parameters, alpha_c and alpha_l with their status."""
        lines = []
        for row in self.thresholds.to_dict("records"):
            policy = f" ({row['prox']} prox)" if self.options.prox is ProxOption.BOTH else ""
            lines.append(
                f"{row['unit']}{policy}: alpha_c = {row['alpha_c']:.6f} ({row['alpha_c_status']}), "
                f"alpha_l = {row['alpha_l']:.6f} ({row['alpha_l_status']})"
            )
        return "\n".join(lines)


def phase_diagram_identity(
    models: Sequence[AttentionModel], alphas: Sequence[float], options: ScanOptions
) -> dict[str, object]:
    """What makes two phase diagrams the same computation (compared by value when resuming, with the
    package version the run context adds): the models, the alphas and the options, resolved for them."""
    return {
        "models": [m.record() for m in models],
        "alphas": [float(a) for a in alphas],
        "options": options.record(models[0]),
    }


@contextmanager
def _dask_backend(scheduler: str | None) -> Iterator[None]:
    """Run joblib's tasks on the Dask cluster at ``scheduler`` (nothing to do if ``None``)."""
    if scheduler is None:
        yield
        return
    try:
        from dask.distributed import Client
    except ImportError:  # pragma: no cover - the optional extra is missing
        raise ParameterError("scheduler needs the optional extra: pip install 'attnphase[dask]'") from None
    with Client(scheduler) as client, joblib.parallel_config(backend="dask"):
        logger.info("running on the Dask cluster at %s (%s)", scheduler, client.dashboard_link)
        yield


def phase_diagram(
    models: Sequence[AttentionModel],
    alphas: str | Sequence[float] = DEFAULT_ALPHAS,
    options: ScanOptions | None = None,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    jobs: int = 1,
    scheduler: str | None = None,
    progress: bool | None = True,
    **option_values: object,
) -> PhaseDiagramResult:
    """Scan every declaration of ``models`` over ``alphas`` (``options`` and ``option_values`` as in
    :func:`~attnphase.experiments.scan.scan`) and gather the thresholds, branches and changes of global
    minimum into one phase diagram (module docstring). With ``prox="both"`` each unit is a scan under each
    policy, every table has its ``prox`` column and the figures' regions and alpha_c are the global
    policy's, the local policy's alpha_c drawn beside it.

    ``jobs``: local worker processes (each with ``cpu_count // jobs`` numba threads; ``1`` runs in this
    process); ``scheduler``: the address of a Dask scheduler (``tcp://host:8786``) to run the units on
    instead, with numba's default threads on each worker; its workers must see ``out`` on a shared file
    system. ``out``: the output directory (a temporary one if ``None``), held for the whole run; a rerun
    with the same models and options resumes unit by unit, other settings are refused unless
    ``overwrite``.
    """
    models = _checked_models(models)
    grid = parse_alphas(alphas)
    options = scan_options(options, option_values)
    jobs = int(check(jobs, "jobs", JOBS))
    temporary = tempfile.TemporaryDirectory(prefix="attnphase-phase-diagram-") if out is None else nullcontext()
    with temporary as scratch:
        identity = phase_diagram_identity(models, grid, options)
        outputs = PhaseDiagramResult.outputs()
        with RunContext(out if out is not None else scratch, identity, outputs, overwrite) as run:
            run.resume()
            units_directory = run.directory / UNITS
            units_directory.mkdir(exist_ok=True)
            names = unit_names(models)
            # local workers share this machine's cores; a cluster's workers keep their own default
            threads = max(1, (os.cpu_count() or 1) // jobs) if jobs > 1 and scheduler is None else 0
            started = time.perf_counter()
            tasks = (
                joblib.delayed(run_unit)(model, grid.tolist(), options, units_directory / name, threads)
                for model, name in zip(models, names, strict=True)
            )
            units: list[UnitTables] = []
            with (
                _dask_backend(scheduler),
                progress_bar(len(models), "parameter points", "scan", progress) as bar,
                warnings.catch_warnings(),
            ):
                # loky replaces a worker whose memory grew by 300 MB over its tasks (the derived
                # equations of every declaration it has scanned are cached) and says so; the units
                # it had been given are run by the new worker, so nothing is lost
                warnings.filterwarnings("ignore", "A worker stopped while some jobs were given", UserWarning)
                parallel = joblib.Parallel(n_jobs=jobs, return_as="generator")
                for unit in parallel(tasks):
                    units.append(unit)
                    bar.update(1)
            result = PhaseDiagramResult(
                tuple(models), tuple(grid.tolist()), options, tuple(units), time.perf_counter() - started, versions()
            )
            run.save(result)
    return result


def _checked_models(models: Sequence[AttentionModel]) -> list[AttentionModel]:
    if isinstance(models, AttentionModel) or not isinstance(models, Sequence):
        raise InputTypeError(f"models must be a sequence of AttentionModel declarations; got {models!r}")
    models = list(models)
    if not models or not all(isinstance(m, AttentionModel) for m in models):
        raise InputTypeError("models must be a non-empty sequence of AttentionModel declarations")
    if len(models) > MAX_UNITS:
        raise ParameterError(f"models must hold at most {MAX_UNITS} declarations; got {len(models)}")
    if len({m.structure() for m in models}) > 1:
        raise ParameterError("models must share one structure (they may differ only in their numbers)")
    return models
