"""Results on disk: atomic writes, strict reading back, and one run at a time per output directory.

What is guaranteed:

* Every file (tables, ``run.json``, figures) is written to a temporary file in the same directory,
  flushed to disk and renamed over the target (``os.replace`` is atomic on POSIX), so an interrupted
  or killed run never leaves a truncated file: the points computed so far survive and a rerun
  resumes from them. Files get the permissions :func:`open` would give them (``0o666`` less the umask).
* Reading back is strict: a table or ``run.json`` that is empty, cut off, without its header, or
  holding something that is not a number where a number belongs raises
  :class:`CorruptResultsError` (a ``ValueError``) naming the file and what is wrong.
* A run holds its directory (:func:`exclusive`, a lock file ``.attnphase.lock`` in it) from its
  start to its end; a second run into the same directory is refused at once with
  :class:`DirectoryInUseError`.
* :func:`start_run` resumes a previous run of the same settings (compared by value, as JSON keeps
  them), and otherwise refuses, naming the settings that differ, unless ``overwrite``, in which
  case every file of the old run is removed (``run.json`` last) before the new ``run.json`` says
  ``"running"``: a ``run.json`` never sits beside files of a run with other settings.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import secrets
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, TypeVar

import pandas as pd
from filelock import FileLock, Timeout

from attnphase.saddle.points.fixed_point import FixedPoint

#: The record of a run, next to its tables.
RUN_FILE = "run.json"
#: The lock file a run holds in its directory while it runs.
LOCK_FILE = ".attnphase.lock"
#: What a refusal to resume suggests.
OVERWRITE_HINT = "rerun with --overwrite (overwrite=True) to discard the previous run, or use another --out"

T = TypeVar("T")


class CorruptResultsError(ValueError):
    """A results file that cannot be read back; the message is one line naming the file and the problem."""

    def __init__(self, path: Path, problem: str, remedy: str | None = None) -> None:
        self.path, self.problem, self.remedy = Path(path), problem, remedy
        super().__init__(f"{path} is corrupt: {problem}" + (f"; {remedy}" if remedy else ""))


class DirectoryInUseError(RuntimeError):
    """Another run holds the output directory (its lock file is locked)."""


# ---------------------------------------------------------------- writing


@contextmanager
def atomic_file(path: Path, binary: bool = False) -> Iterator[IO]:
    """A handle on a temporary file that is renamed over ``path`` when the block ends without an
    error (never a truncated file), and removed otherwise.

    The temporary file ``.<name>.<random>.tmp`` is created with mode ``0o666`` less the umask, as
    :func:`open` creates files, and flushed to disk before the rename.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(6)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (:func:`atomic_file`)."""
    with atomic_file(path) as handle:
        handle.write(text)


def write_table(path: Path, rows: Iterable[Mapping[str, object]] | pd.DataFrame) -> pd.DataFrame:
    """Write ``rows`` (dicts or a DataFrame) as CSV atomically, every float as the shortest decimal that
    reads back as the same double (:func:`read_table` reads it so); return the table."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    atomic_write_text(path, frame.to_csv(index=False))
    return frame


def write_json(path: Path, payload: Mapping[str, object]) -> None:
    """Write ``payload`` as indented, key-sorted, standard JSON atomically: a float that is not finite (NaN,
    an infinity, which JSON has no number for) is written as ``null``."""
    atomic_write_text(path, _json_text(payload, indent=2) + "\n")


def _json_text(payload: object, indent: int | None = None) -> str:
    return json.dumps(_finite(payload), indent=indent, sort_keys=True, default=str, allow_nan=False)


def _finite(value: object) -> object:
    """``value`` with every non-finite float replaced by ``None`` (in dicts, lists and tuples)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


# ---------------------------------------------------------------- reading


def _read_text(path: Path) -> str:
    """The text of ``path``; :class:`CorruptResultsError` if it cannot be read or is empty."""
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise CorruptResultsError(path, "it is not UTF-8 text") from None
    except OSError as error:
        raise CorruptResultsError(path, f"it cannot be read ({error.strerror or error})") from None
    if not text.strip():
        raise CorruptResultsError(path, "the file is empty")
    return text


def read_json(path: Path) -> dict[str, object] | None:
    """The JSON object in ``path``, or ``None`` if there is no such file.

    Raises :class:`CorruptResultsError` if the file is empty, not valid JSON (e.g. cut off) or not
    a JSON object.
    """
    if not path.exists() and not path.is_symlink():
        return None
    text = _read_text(path)
    try:
        payload = json.loads(text)
    except json.JSONDecodeError as error:
        raise CorruptResultsError(path, f"it is not valid JSON ({error})") from None
    if not isinstance(payload, dict):
        raise CorruptResultsError(path, f"it holds a JSON {type(payload).__name__}, not an object")
    return payload


def _is_number(text: str) -> bool:
    """A number as the tables write it (an empty field is a missing value, NaN)."""
    if text == "":
        return True
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_table(
    path: Path, numbers: Sequence[str] = (), flags: Sequence[str] = (), texts: Sequence[str] = ()
) -> pd.DataFrame:
    """The CSV table in ``path``, checked before it is parsed.

    The file must end with a complete line, have a header line (no number in it, no column twice)
    holding every column of ``numbers``
    (numbers, or empty for a missing value), ``flags`` (``True``/``False``) and ``texts``
    (non-empty), and every line as many fields as the header; otherwise
    :class:`CorruptResultsError` names the file, the line and what is wrong. Blank lines are
    skipped; other columns are not checked.
    """
    text = _read_text(path)
    if not text.endswith("\n"):
        raise CorruptResultsError(path, f"it ends in the middle of line {text.count(chr(10)) + 1} (cut off)")
    reader = csv.reader(io.StringIO(text), strict=True)
    try:
        header = next(reader)
        if any(field and _is_number(field) for field in header):
            raise CorruptResultsError(path, "the header line is missing (line 1 holds numbers)")
        if len(set(header)) != len(header):
            raise CorruptResultsError(path, "the header names a column twice")
        missing = [name for name in (*numbers, *flags, *texts) if name not in header]
        if missing:
            plural = "s" * (len(missing) > 1)
            raise CorruptResultsError(path, f"the header lacks the column{plural} {', '.join(missing)}")
        column = {name: i for i, name in enumerate(header)}
        for row in reader:
            line = reader.line_num
            if not row:
                continue
            if len(row) != len(header):
                raise CorruptResultsError(path, f"line {line} has {len(row)} fields, the header {len(header)}")
            for name in numbers:
                if not _is_number(row[column[name]]):
                    raise CorruptResultsError(path, f"line {line}: {name} = {row[column[name]]!r} is not a number")
            for name in flags:
                if row[column[name]] not in ("True", "False"):
                    raise CorruptResultsError(path, f"line {line}: {name} = {row[column[name]]!r} is not True or False")
            for name in texts:
                if not row[column[name]]:
                    raise CorruptResultsError(path, f"line {line}: {name} is empty")
    except csv.Error as error:
        raise CorruptResultsError(path, f"it is not a CSV table (line {reader.line_num}: {error})") from None
    return pd.read_csv(io.StringIO(text))  # pandas >= 3 reads every double back exactly


# ---------------------------------------------------------------- one run per directory

_LOCKS: dict[str, FileLock] = {}


@contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold ``directory`` (which exists) for the duration of the block.

    The lock is ``directory/.attnphase.lock`` (:mod:`filelock`, an OS lock that dies with its
    process, so a killed run holds nothing). Another process, or another thread, that holds it makes
    this raise :class:`DirectoryInUseError` at once; the same thread may enter again (a study and
    the writer it calls). The lock file is removed when the outermost block ends, before the lock is
    released, so a finished run leaves only its results.
    """
    path = (Path(directory) / LOCK_FILE).absolute()
    lock = _LOCKS.get(str(path))
    if lock is None:
        lock = _LOCKS[str(path)] = FileLock(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        raise DirectoryInUseError(
            f"{directory} is in use by another run (it holds {path.name} there); "
            "wait for that run to end, or use another --out"
        ) from None
    try:
        yield
    finally:
        if lock.lock_counter == 1:
            path.unlink(missing_ok=True)  # while still held: a newcomer locks a fresh file, never this one
        lock.release()


def _normalised(value: object) -> object:
    """``value`` as :func:`write_json` writes it and it reads back (tuples as lists, NaN as null)."""
    return json.loads(_json_text(value))


def _differences(here: object, there: object, path: str = "") -> list[tuple[str, object, object]]:
    """The leaves (dotted path, value here, value there) where two JSON values differ."""
    if isinstance(here, dict) and isinstance(there, dict):
        found = []
        for key in sorted(set(here) | set(there)):
            found += _differences(here.get(key), there.get(key), f"{path}.{key}" if path else key)
        return found
    return [] if here == there else [(path, here, there)]


def identity_differences(
    identity: Mapping[str, object], record: Mapping[str, object]
) -> list[tuple[str, object, object]]:
    """Where the ``run.json`` ``record`` is not a run of ``identity``: each setting (dotted path, value
    here, value there) that differs, compared by value as :func:`write_json` writes it."""
    wanted = _normalised(dict(identity))
    return _differences(wanted, {key: record.get(key) for key in wanted})


def _shown(value: object, limit: int = 80) -> str:
    text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def remove_path(path: Path) -> None:
    """Remove a file or a whole directory (nothing if it does not exist)."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


def start_run(
    directory: Path,
    identity: Mapping[str, object],
    outputs: Sequence[str],
    overwrite: bool,
    load: Callable[[], T],
) -> T | None:
    """Make ``directory`` (held with :func:`exclusive`) hold a run of ``identity``, marked running.

    ``identity``: what makes two runs the same computation (written to ``run.json`` and compared
    by value); ``outputs``: the names of every file or directory the run writes besides
    ``run.json``; ``load``: reads what a previous run left (raising :class:`CorruptResultsError`
    if it cannot).

    Returns ``load()`` when ``run.json`` holds the same identity (a resumed run), else ``None`` (a
    fresh start). A ``run.json`` of other settings raises :class:`FileExistsError` naming each
    setting that differs, an unreadable ``run.json`` or table raises :class:`CorruptResultsError`,
    and outputs without a ``run.json`` raise :class:`FileExistsError`, all unless ``overwrite``:
    then every output is removed, ``run.json`` last, so that a run killed meanwhile leaves either
    the old run (perhaps partly removed) or nothing. Temporary files of killed writes are removed.
    Afterwards ``run.json`` is ``{**identity, "status": "running"}``.
    """
    run_file = directory / RUN_FILE
    wanted = _normalised(dict(identity))
    for name in (*outputs, RUN_FILE):
        for stale in directory.glob(f".{name}.*.tmp"):
            stale.unlink(missing_ok=True)
    try:
        previous = read_json(run_file)
        if previous is None:
            leftover = [name for name in outputs if (directory / name).exists()]
            if leftover:
                raise FileExistsError(
                    f"{directory} holds {', '.join(leftover)} but no {RUN_FILE}, so no run to resume; {OVERWRITE_HINT}"
                )
            loaded = None
        else:
            differences = identity_differences(identity, previous)
            if differences:
                described = "; ".join(
                    f"{name} differs: {_shown(here)} here, {_shown(there)} in {run_file}"
                    for name, here, there in differences[:3]
                )
                more = f" (and {len(differences) - 3} more)" if len(differences) > 3 else ""
                raise FileExistsError(
                    f"{directory} holds a run with other settings: {described}{more}; {OVERWRITE_HINT}"
                )
            loaded = load()
    except (CorruptResultsError, FileExistsError) as error:
        if not overwrite:
            if isinstance(error, CorruptResultsError):
                raise CorruptResultsError(error.path, error.problem, OVERWRITE_HINT) from None
            raise
        for name in outputs:
            remove_path(directory / name)
        remove_path(run_file)
        loaded = None
    write_json(run_file, {**wanted, "status": "running"})
    return loaded


# ---------------------------------------------------------------- fixed points of a scan

#: The columns of a scan's table that are not order parameters or conjugates, by kind.
POINT_NUMBERS = (
    "alpha",
    "sheet",
    "free_entropy",
    "train_loss",
    "energy",
    "test_error",
    "residual",
    "symmetry_defect",
    "iterations",
    "prox_unconverged",
)
POINT_TEXTS = ("branch", "quadrature", "conjugate_form", "prox")


class PointLog:
    """Fixed points of a scan, saved after every new point (sorted by branch, sheet and alpha)."""

    def __init__(self, path: Path, points: Iterable[FixedPoint] = ()) -> None:
        self.path = path
        self._points: dict[tuple[str, int, float], FixedPoint] = {(p.branch, p.sheet, p.alpha): p for p in points}

    @classmethod
    def resume(cls, path: Path, names: Sequence[str], conjugate_names: Sequence[str]) -> PointLog:
        """The log of the points already in ``path`` (empty if there is no such file).

        The table is read strictly (:func:`read_table`): :class:`CorruptResultsError` names the file
        and the line if it cannot be read back as the points that were written.
        """
        if not path.exists():
            return cls(path)
        numbers = (*POINT_NUMBERS, *names, *conjugate_names)
        frame = read_table(path, numbers=numbers, flags=("converged",), texts=POINT_TEXTS)
        points = []
        for line, row in enumerate(frame.to_dict("records"), start=2):
            try:
                points.append(FixedPoint.from_row(row, names, conjugate_names))
            except (KeyError, TypeError, ValueError) as error:
                raise CorruptResultsError(path, f"the point on line {line} cannot be read ({error})") from None
        return cls(path, points)

    @property
    def points(self) -> list[FixedPoint]:
        """The points, sorted by branch, sheet and alpha."""
        return [self._points[k] for k in sorted(self._points)]

    def add(self, point: FixedPoint) -> None:
        """Record ``point`` (replacing one of the same branch, sheet and alpha) and save the table."""
        self._points[(point.branch, point.sheet, point.alpha)] = point
        self.save()

    def save(self) -> pd.DataFrame:
        """Write the table of every point (remove it if there is none); return it."""
        frame = pd.DataFrame([p.row() for p in self.points])
        if frame.empty:
            self.path.unlink(missing_ok=True)
            return frame
        return write_table(self.path, frame)
