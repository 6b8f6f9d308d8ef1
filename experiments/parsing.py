"""Values as a user types them (command-line options, or strings in the API) turned into numbers.

Every function raises :class:`UsageError` (text that cannot be read) or a
:class:`~attnphase.saddle.validation.ParameterError` (a value outside its range), each naming the
parameter, so the command line can report it in one line.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from attnphase.saddle.validation import ParameterError

MAX_ALPHAS = 2000


class UsageError(ValueError):
    """A value given as text cannot be parsed."""


def parse_alphas(text: str | Sequence[float] | np.ndarray, name: str = "alphas") -> np.ndarray:
    """Sample complexities ``alpha = n/d`` as a sorted-as-given array rounded to 10 decimals.

    Text is ``start:stop:step`` (stop included) or a comma-separated list; a sequence of numbers is
    taken as it is. Every alpha must be a finite number > 0, and there are at most
    ``MAX_ALPHAS`` of them.
    """
    if isinstance(text, str):
        try:
            if ":" in text:
                start, stop, step = (float(x) for x in text.split(":"))
                if not step > 0:
                    raise ParameterError(f"{name} step must be > 0; got {step:g}")
                if stop < start:
                    raise ParameterError(f"{name} stop must be >= start; got {start:g}:{stop:g}")
                count = int(math.floor((stop - start) / step + 1e-9)) + 1
                if count > MAX_ALPHAS:
                    raise ParameterError(f"{name} must have at most {MAX_ALPHAS} values; got {count}")
                values = start + step * np.arange(count)
            else:
                values = np.array([float(x) for x in text.split(",")])
        except ValueError as error:
            if isinstance(error, ParameterError):
                raise
            raise UsageError(f"{name} must be start:stop:step or a comma-separated list; got {text!r}") from None
    else:
        try:
            values = np.asarray(text, dtype=float).reshape(-1)
        except (TypeError, ValueError):
            raise UsageError(f"{name} must be numbers; got {text!r}") from None
    if values.size == 0:
        raise ParameterError(f"{name} must hold at least one value")
    if not np.all(np.isfinite(values) & (values > 0)):
        raise ParameterError(f"alpha must be a finite number > 0; got {name} {_shown(text)}")
    if values.size > MAX_ALPHAS:
        raise ParameterError(f"{name} must have at most {MAX_ALPHAS} values; got {values.size}")
    return np.round(values, 10)


def parse_matrix(text: str) -> tuple[tuple[float, ...], ...]:
    """``a11,a12,a21,a22`` (row-major, a square number of entries) as a tuple of rows."""
    try:
        entries = [float(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"A must be comma-separated numbers a11,a12,a21,a22; got {text!r}") from None
    size = int(round(math.sqrt(len(entries))))
    if size * size != len(entries):
        raise ParameterError(f"A must be a square matrix given row-major; got {len(entries)} entries")
    return tuple(tuple(entries[i * size : (i + 1) * size]) for i in range(size))


def parse_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """A comma-separated list (or a sequence) of names, stripped."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    return tuple(str(part).strip() for part in parts)


def parse_dims(text: str | Sequence[int]) -> list[int]:
    """Distinct integers ``>= 2``, at least two of them (a power law needs two points), sorted."""
    try:
        dims = [int(part) for part in (text.split(",") if isinstance(text, str) else text)]
    except (TypeError, ValueError):
        raise UsageError(f"dims must be comma-separated integers; got {text!r}") from None
    if len(dims) < 2 or len(set(dims)) != len(dims) or min(dims) < 2:
        raise UsageError(f"dims must be at least two distinct integers >= 2; got {_shown(text)}")
    return sorted(dims)


def _shown(value: object) -> str:
    return repr(value) if isinstance(value, str) else repr(list(np.asarray(value).reshape(-1)))
