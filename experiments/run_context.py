"""A study's hold on its output directory for the whole of a run: the lock, the resume, the overwrite.

Every study (scan, phase diagram, landscape, simulations, finite-size scaling, uninformed starts, the
histogram task) runs inside one :class:`RunContext`::

    with RunContext(out, identity, Result.outputs(), overwrite) as run:
        earlier = run.resume(load)      # what a previous run of the same identity left, or None
        ...                             # compute, writing as it goes into run.directory
        run.save(result)                # tables, figures and run.json, each atomically

Without an output directory (``out`` is ``None``) the context holds nothing and writes nothing. With
one, it checks the location at once (:func:`~attnphase.experiments.study.output_directory`), holds the
directory's lock for the whole run (another run into it is refused at once), and resumes only a run of
the same identity (compared by value; the package version is part of it), refusing another unless
``overwrite`` (:func:`~attnphase.experiments.storage.start_run`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType
from typing import TypeVar

from attnphase.experiments.storage import RUN_FILE, exclusive, start_run, write_json
from attnphase.experiments.study import StudyResult, output_directory, with_package

T = TypeVar("T")


class RunContext:
    """The run of one study into ``out`` (module docstring): ``identity`` is what makes two runs the same
    computation, ``outputs`` the files it writes besides ``run.json``."""

    def __init__(
        self, out: str | Path | None, identity: Mapping[str, object], outputs: Sequence[str], overwrite: bool = False
    ) -> None:
        self.out, self.outputs, self.overwrite = out, tuple(outputs), overwrite
        self.identity = with_package(identity)
        self.directory: Path | None = None
        self._stack = ExitStack()

    def __enter__(self) -> RunContext:
        if self.out is not None:
            self.directory = output_directory(self.out)
            self._stack.enter_context(exclusive(self.directory))
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self._stack.close()

    def resume(self, load: Callable[[], T] = lambda: None) -> T | None:
        """``load()`` if the directory holds a run of this identity (its results, to go on from), else
        ``None`` for a fresh start; marks the run as running. Nothing without a directory."""
        if self.directory is None:
            return None
        return start_run(self.directory, self.identity, self.outputs, self.overwrite, load)

    def running(self, **progress: object) -> None:
        """Record in ``run.json`` that the run is going on, with ``progress`` (what it has finished)."""
        if self.directory is not None:
            write_json(self.directory / RUN_FILE, {**self.identity, "status": "running", **progress})

    def path(self, name: str) -> Path | None:
        """The file ``name`` in the directory (``None`` without one)."""
        return None if self.directory is None else self.directory / name

    def save(self, result: StudyResult) -> list[Path]:
        """Write ``result`` into the directory (:meth:`StudyResult.save`); nothing without one."""
        return [] if self.directory is None else result.save(self.directory)
