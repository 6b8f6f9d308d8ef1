"""What every study shares: its result (tables, a figure, a record), saving it, provenance, progress.

A study (a scan over alpha, simulations, finite-size scaling, uninformed starts, the histogram
task) returns a :class:`StudyResult`: tidy pandas tables, a matplotlib figure drawn on demand
(:meth:`StudyResult.plot`) and a JSON-ready record of its settings, seeds, package versions and
timings. :meth:`StudyResult.save` writes exactly what the corresponding command writes: one CSV per
table, the figure as PNG and PDF, and ``run.json``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import platform
import shutil
import subprocess
import tempfile
import warnings
from abc import ABC, abstractmethod
from collections.abc import Mapping
from importlib import metadata
from os import PathLike
from pathlib import Path
from typing import ClassVar

import pandas as pd
from matplotlib.figure import Figure
from tqdm import TqdmWarning, tqdm

from attnphase.experiments.storage import atomic_file, write_json, write_table
from attnphase.experiments.style import symbol
from attnphase.replica.declaration import AttentionModel, InputTypeError

logger = logging.getLogger("attnphase")

#: The packages a result depends on, recorded next to it.
RECORDED_PACKAGES = ("attnphase", "numpy", "scipy", "sympy", "numba", "pandas", "matplotlib", "torch")


def versions() -> dict[str, str]:
    """Versions of Python and of :data:`RECORDED_PACKAGES`, and the git commit of the package's source
    where it runs from a checkout (written next to every result)."""
    found = {"python": platform.python_version()}
    for name in RECORDED_PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "not installed"
    commit = source_commit()
    if commit is not None:
        found["commit"] = commit
    return found


def with_package(identity: Mapping[str, object]) -> dict[str, object]:
    """``identity`` with the package's version: what every ``run.json`` holds and a resume compares."""
    return {**identity, "package": {"attnphase": package_version()}}


def package_version() -> str:
    """The installed version of attnphase (part of every run's identity)."""
    try:
        return metadata.version("attnphase")
    except metadata.PackageNotFoundError:  # pragma: no cover - a source tree that is not installed
        return "unknown"


@functools.cache
def source_commit() -> str | None:
    """The git commit of the checkout the package runs from, with ``+dirty`` where tracked files differ
    from it; ``None`` outside a git checkout (an installed wheel) or without git."""
    source = Path(__file__).resolve().parents[1]
    git = shutil.which("git")
    if git is None or not (source / ".git").exists():
        return None
    try:
        # the package's own checkout and a fixed command: no outside input
        head = subprocess.run(  # noqa: S603
            [git, "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
        changes = subprocess.run(  # noqa: S603
            [git, "-C", str(source), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("+dirty" if changes else "")


def checked_model(model: object) -> AttentionModel:
    """``model`` if it is a declaration, else one line saying what was given (a shipped model is
    ``attnphase.variant(name).model()``)."""
    if not isinstance(model, AttentionModel):
        hint = " (a shipped model by name: attnphase.variant(name).model())" if isinstance(model, str) else ""
        raise InputTypeError(f"model must be an AttentionModel declaration{hint}; got {model!r}")
    return model


def progress_bar(total: int, description: str, unit: str, progress: bool | None) -> tqdm:
    """A progress bar on standard error that works in a terminal and in Jupyter (``tqdm.auto``).

    ``progress``: ``True`` shows it, ``False`` hides it, ``None`` shows it only when standard error
    is a terminal (the command line's choice).
    """
    disable = None if progress is None else not progress
    with warnings.catch_warnings():
        # in Jupyter without ipywidgets tqdm.auto warns and falls back to text bars, which work there
        warnings.simplefilter("ignore", TqdmWarning)
        from tqdm.auto import tqdm as auto_tqdm
    return auto_tqdm(total=total, desc=description, unit=unit, disable=disable, leave=False)


def output_directory(out: str | Path) -> Path:
    """``out`` as a directory that exists and can be written, checked before any computation: every
    study calls this first, so a bad location fails at once with one message naming ``out``.

    ``out`` must be a non-empty path (``""`` would mean the working directory), must not be a file nor
    lie below one, and must be creatable and writable (tested by creating and removing a temporary
    file in it, so that read-only locations are found whatever the user's privileges). Directories
    created here are removed again when the location turns out unusable, leaving nothing behind.
    """
    if not isinstance(out, str | PathLike):
        raise InputTypeError(f"out must be a directory path; got {out!r}")
    if str(out).strip() == "":
        raise ValueError(f"out must name a directory (the working directory is written only as '.'); got {str(out)!r}")
    path = Path(out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"out must be a directory; got {str(out)!r}, which is a file")
    created = [p for p in (path, *path.parents) if not p.exists()]
    try:
        path.mkdir(parents=True, exist_ok=True)
        descriptor, probe = tempfile.mkstemp(dir=path, prefix=".attnphase-write-test-")
        os.close(descriptor)
        os.unlink(probe)
    except OSError as error:
        for directory in created:  # deepest first: only the empty directories made here
            with contextlib.suppress(OSError):
                directory.rmdir()
        reason = error.strerror or type(error).__name__
        message = f"out must be a directory that can be created and written; got {str(out)!r} ({reason})"
        raise ValueError(message) from None
    return path


class StudyResult(ABC):
    """Tables, a figure and a record of one study.

    Subclasses name their tables (``tables``: file stem -> DataFrame, written as ``<stem>.csv``),
    their figure (``figure_name``: written as ``<figure_name>.png`` and ``.pdf``) and draw it in
    :meth:`plot`.
    """

    figure_name: ClassVar[str] = "figure"
    figure_dpi: ClassVar[int] = 150
    #: The stems of :attr:`tables`, known before the study runs (to find or remove its files).
    table_names: ClassVar[tuple[str, ...]] = ()
    #: The stems of :meth:`more_figures`, likewise.
    more_figure_names: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def outputs(cls) -> tuple[str, ...]:
        """The names of the files :meth:`save` writes besides ``run.json``."""
        stems = (cls.figure_name, *cls.more_figure_names)
        figures = tuple(f"{stem}.{suffix}" for stem in stems for suffix in FIGURE_FORMATS)
        return (*(f"{stem}.csv" for stem in cls.table_names), *figures)

    @property
    @abstractmethod
    def tables(self) -> dict[str, pd.DataFrame]:
        """Every table of the study by file stem."""

    @property
    @abstractmethod
    def record(self) -> dict[str, object]:
        """Settings, seeds, versions and timings, as written to ``run.json``."""

    @abstractmethod
    def plot(self) -> Figure:
        """The study's figure (a new :class:`matplotlib.figure.Figure`, not registered with pyplot)."""

    def more_figures(self) -> dict[str, Figure]:
        """Further figures by file stem (:attr:`more_figure_names`); none by default."""
        return {}

    def save(self, out: str | Path) -> list[Path]:
        """Write every table as CSV, the figure as PNG and PDF and the record as ``run.json`` into
        ``out`` (created if needed; each file written atomically). Returns the paths written."""
        directory = output_directory(out)
        paths = []
        tables = self.tables
        if set(tables) != set(self.table_names):
            name = type(self).__name__
            raise AssertionError(f"{name}.table_names {self.table_names} are not its tables {tuple(tables)}")
        for stem, table in tables.items():
            path = directory / f"{stem}.csv"
            write_table(path, table)
            paths.append(path)
        figures = {self.figure_name: self.plot(), **self.more_figures()}
        if set(figures) != {self.figure_name, *self.more_figure_names}:
            name = type(self).__name__
            raise AssertionError(f"{name}.more_figure_names {self.more_figure_names} are not its figures")
        for stem, figure in figures.items():
            paths += save_figure(figure, directory / stem, self.figure_dpi)
        write_json(directory / "run.json", with_package(self.record))
        paths.append(directory / "run.json")
        logger.info("wrote %s", ", ".join(p.name for p in paths))
        return paths


FIGURE_FORMATS = ("png", "pdf")


def save_figure(fig: Figure, out_stem: Path, dpi: int = 150) -> list[Path]:
    """Write ``fig`` as ``out_stem.png`` and ``out_stem.pdf``, each atomically (creating the directory)."""
    paths = [out_stem.with_suffix(f".{suffix}") for suffix in FIGURE_FORMATS]
    for path in paths:
        with atomic_file(path, binary=True) as handle:
            fig.savefig(handle, format=path.suffix[1:], dpi=dpi)
    return paths


#: The scalar parameters a figure title names.
TITLE_SCALARS = ("omega", "sigma", "lambda")


def _matrix_entries(parameters: Mapping[str, float]) -> dict[str, dict[tuple[int, int], float]]:
    """The entries of every matrix parameter, flattened as ``A_i_j`` (1-based), by the matrix's name."""
    matrices: dict[str, dict[tuple[int, int], float]] = {}
    for name, value in parameters.items():
        head, *index = name.split("_")
        if len(index) == 2 and all(part.isdigit() for part in index):
            matrices.setdefault(head, {})[(int(index[0]), int(index[1]))] = value
    return matrices


def parameter_title(parameters: Mapping[str, float]) -> str:
    """A figure title from a model's named parameters: the scalars of :data:`TITLE_SCALARS` and every
    matrix parameter (``A_1_1``, ... as ``$A$ = [[0.6, 0.4], [0.4, 0.6]]``), in mathtext."""
    shown = [f"{symbol(name)} = {parameters[name]:g}" for name in TITLE_SCALARS if name in parameters]
    for head, entries in _matrix_entries(parameters).items():
        rows, columns = max(i for i, _ in entries), max(j for _, j in entries)
        lines = [[entries.get((i, j), math.nan) for j in range(1, columns + 1)] for i in range(1, rows + 1)]
        text = ", ".join("[" + ", ".join(f"{v:g}" for v in line) + "]" for line in lines)
        shown.append(f"{symbol(head)} = [{text}]")
    return ", ".join(shown)
