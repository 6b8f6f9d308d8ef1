"""Tables on disk: atomic writes, incremental saving and resuming of scans.

Every write goes to a temporary file in the same directory and is then renamed over the
target (``os.replace`` is atomic on POSIX), so an interrupted run never leaves a truncated
table: the points computed so far survive and a rerun resumes from them.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

from attnphase.saddle.fixed_point import FixedPoint


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file renamed over it (never a truncated file)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_table(path: Path, rows: Iterable[Mapping[str, object]] | pd.DataFrame) -> pd.DataFrame:
    """Write ``rows`` (dicts or a DataFrame) as CSV atomically, floats to 12 significant digits; return the table."""
    frame = rows if isinstance(rows, pd.DataFrame) else pd.DataFrame(list(rows))
    atomic_write_text(path, frame.to_csv(index=False, float_format="%.12g"))
    return frame


def write_json(path: Path, payload: Mapping[str, object]) -> None:
    """Write ``payload`` as indented, key-sorted JSON atomically."""
    atomic_write_text(path, json.dumps(payload, indent=2, sort_keys=True, default=str) + "\n")


def read_json(path: Path) -> dict[str, object] | None:
    """The JSON object in ``path``, or ``None`` if there is no such file."""
    return json.loads(path.read_text()) if path.exists() else None


class PointLog:
    """Fixed points of a scan, saved after every new point (sorted by branch and alpha)."""

    def __init__(self, path: Path, points: Iterable[FixedPoint] = ()) -> None:
        self.path = path
        self._points: dict[tuple[str, float], FixedPoint] = {(p.branch, p.alpha): p for p in points}

    @classmethod
    def resume(cls, path: Path, names: Sequence[str], conjugate_names: Sequence[str]) -> PointLog:
        """The log of the points already in ``path`` (empty if there is no such file)."""
        if not path.exists():
            return cls(path)
        frame = pd.read_csv(path)
        return cls(path, [FixedPoint.from_row(row, names, conjugate_names) for row in frame.to_dict("records")])

    @property
    def points(self) -> list[FixedPoint]:
        """The points, sorted by branch and alpha."""
        return [self._points[k] for k in sorted(self._points)]

    def add(self, point: FixedPoint) -> None:
        """Record ``point`` (replacing one of the same branch and alpha) and save the table."""
        self._points[(point.branch, point.alpha)] = point
        self.save()

    def save(self) -> pd.DataFrame:
        """Write the table of every point; return it."""
        return write_table(self.path, [p.row() for p in self.points])
