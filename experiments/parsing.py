"""Values as a user types them (command-line options, or strings in the API) turned into numbers, and
the allowed ranges of the studies' options (stated in the errors, the ``--help`` texts and the README).

Every function raises :class:`UsageError` (text that cannot be read) or a
:class:`~attnphase.saddle.validation.ParameterError` (a value outside its range), each naming the
parameter, so the command line can report it in one line.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np

from attnphase.replica.declaration import Interval
from attnphase.replica.variants import Value, Variant
from attnphase.saddle.validation import ALPHA, SEED, ParameterError, check

#: The paper's grid of sample complexities (``start:stop:step``, stop included).
DEFAULT_ALPHAS = "0.1:2.5:0.08"
#: At most this many values in one grid (of alphas, omegas, ...).
MAX_ALPHAS = 2000
#: The step of a ``start:stop:step`` grid.
STEP = Interval(0.0, ALPHA.high, low_open=True)

# Ranges of the options of the studies at finite d (simulate, finite-size, uninformed; the simulation
# settings check them, :meth:`attnphase.experiments.training.SimulationSettings.validate`).
#: The embedding dimension d (the memory a simulation needs is bounded separately, below).
DIMENSION = Interval(2, 100_000, integer=True)
#: Runs per point, as a count (seeds ``0`` to ``seeds - 1``); each seed is in :data:`SEED`.
SEED_COUNT = Interval(1, 1000, integer=True)
#: Learning rates of GD, Adam, L-BFGS and SGD: larger steps only diverge on these losses.
LEARNING_RATE = Interval(0.0, 1.0, low_open=True)
#: The gradient norm below which a run has converged.
TOLERANCE = Interval(0.0, 1.0, low_open=True)
#: Optimiser steps per run.
STEPS = Interval(1, 1_000_000, integer=True)
#: Fresh samples for the test error of a run (drawn in chunks).
TEST_SAMPLES = Interval(1, 10_000_000, integer=True)
#: The bytes of data a simulation may hold at once: the training data of a block (``seeds x n x L x d``
#: numbers at ``n = round(alpha d)``) or one chunk of test samples, whichever is larger.
MAX_SIMULATION_BYTES = 2 * 2**30

# Ranges of the histogram task's options (:meth:`attnphase.experiments.histogram.HistogramSettings.validate`).
#: Training and test sequences.
SEQUENCES = Interval(1, 1_000_000, integer=True)
#: Epochs of the frozen (Adam) stage; the unfrozen (SGD) stage may have none.
EPOCHS = Interval(1, 10_000, integer=True)
SGD_EPOCHS = Interval(0, 10_000, integer=True)
#: Minibatch size.
BATCH_SIZE = Interval(1, 1_000_000, integer=True)
#: Standard deviation of the noise added to the weights at unfreezing.
NOISE = Interval(0.0, 1.0)
#: Every numeric field of the histogram task's settings and its range (the letters of the alphabet
#: are A-Z; the architecture's sizes are bounded so that the model fits in memory).
HISTOGRAM_RANGES = {
    "seed": SEED,
    "length": Interval(2, 64, integer=True),
    "alphabet": Interval(2, 26, integer=True),
    "width": Interval(2, 4096, integer=True),
    "hidden": Interval(1, 16_384, integer=True),
    "n_train": SEQUENCES,
    "n_test": SEQUENCES,
    "batch_size": BATCH_SIZE,
    "adam_epochs": EPOCHS,
    "sgd_epochs": SGD_EPOCHS,
    "adam_lr": LEARNING_RATE,
    "sgd_lr": LEARNING_RATE,
    "adam_final_lr_fraction": Interval(0.0, 1.0, low_open=True),
    "noise": NOISE,
}


class UsageError(ValueError):
    """A value given as text cannot be parsed."""


#: Grid nodes per axis of a landscape (``attnphase landscape``).
GRID_POINTS = Interval(3, 101, integer=True)
#: Largest value of a landscape's overlap axis (overlaps are of order one at most).
EXTENT = Interval(1e-6, 10.0)


def parse_alphas(text: str | Sequence[float] | np.ndarray, name: str = "alphas") -> np.ndarray:
    """Sample complexities ``alpha = n/d`` (:func:`parse_grid` in
    :data:`~attnphase.saddle.validation.ALPHA`)."""
    return parse_grid(text, name, ALPHA)


def parse_grid(text: str | Sequence[float] | np.ndarray, name: str, allowed: Interval) -> np.ndarray:
    """Values of the parameter ``name`` as an array (in the order given) rounded to 10 decimals.

    Text is ``start:stop:step`` (stop included) or a comma-separated list; a sequence of numbers is
    taken as it is. Every value must lie in ``allowed``, and there are at most ``MAX_ALPHAS`` of
    them; a grid is checked before it is built.
    """
    if isinstance(text, str):
        values = _grid(text, name, allowed) if ":" in text else [_number(x, name, text) for x in text.split(",")]
    else:
        values = list(np.ravel(text)) if isinstance(text, np.ndarray | numbers.Real) else text
    checked = allowed.check_each(values, name, ParameterError)
    if not checked:
        raise ParameterError(f"{name} must hold at least one value")
    if len(checked) > MAX_ALPHAS:
        raise ParameterError(f"{name} must have at most {MAX_ALPHAS} values; got {len(checked)}")
    return np.round(np.array(checked, dtype=float), 10)


def _grid(text: str, name: str, allowed: Interval) -> list[float]:
    """The values of ``start:stop:step`` (stop included), every part checked before the grid is built."""
    parts = text.split(":")
    if len(parts) != 3:
        raise UsageError(f"{name} must be start:stop:step or a comma-separated list; got {text!r}")
    start, stop = (check(_number(x, name, text), name, allowed) for x in parts[:2])
    step = check(_number(parts[2], name, text), f"{name} step", STEP)
    if stop < start:
        raise ParameterError(f"{name} stop must be >= start; got {start:g}:{stop:g}")
    count = int(math.floor((stop - start) / step + 1e-9)) + 1
    if count > MAX_ALPHAS:
        raise ParameterError(f"{name} must have at most {MAX_ALPHAS} values; got {count}")
    return (start + step * np.arange(count)).tolist()


def _number(part: str, name: str, text: str) -> float:
    """One number of an option's text, else :class:`UsageError` naming the option."""
    try:
        return float(part)
    except ValueError:
        raise UsageError(f"{name} must be start:stop:step or a comma-separated list; got {text!r}") from None


def parse_matrix(text: str, name: str = "A") -> tuple[tuple[float, ...], ...]:
    """``a11,a12,a21,a22`` (row-major, a square number of entries) as a tuple of rows."""
    try:
        entries = [float(x) for x in text.split(",")]
    except ValueError:
        raise UsageError(f"{name} must be comma-separated numbers a11,a12,a21,a22; got {text!r}") from None
    size = int(round(math.sqrt(len(entries))))
    if size * size != len(entries):
        raise ParameterError(f"{name} must be a square matrix given row-major; got {len(entries)} entries")
    return tuple(tuple(entries[i * size : (i + 1) * size]) for i in range(size))


def parse_settings(items: Sequence[str], variant: Variant) -> dict[str, Value]:
    """``name=value`` pairs for the parameters of ``variant``: a number, or a matrix given row-major
    (:func:`parse_matrix`). Each name is checked against the variant and given at most once; the
    numbers are checked by the declaration they enter. Nothing is evaluated."""
    values: dict[str, Value] = {}
    for item in items:
        name, equals, text = item.partition("=")
        name, text = name.strip(), text.strip()
        if not equals or not name or not text:
            raise UsageError(f"set must be name=value; got {item!r}")
        parameter = variant.parameter(name)
        if name in values:
            raise UsageError(f"set gives {name} twice")
        if parameter.is_matrix:
            values[name] = parse_matrix(text, name)
            continue
        try:
            values[name] = float(text)
        except ValueError:
            raise UsageError(f"{name} must be a number; got {text!r}") from None
    return values


def parse_names(text: str | Sequence[str]) -> tuple[str, ...]:
    """A comma-separated list (or a sequence) of names, stripped."""
    parts = text.split(",") if isinstance(text, str) else list(text)
    return tuple(str(part).strip() for part in parts)


def parse_dims(text: str | Sequence[int]) -> list[int]:
    """Distinct dimensions in :data:`DIMENSION`, at least two of them (a power law needs two points), sorted."""
    dims: object = text
    if isinstance(text, str):
        try:
            dims = [int(part) for part in text.split(",")]
        except ValueError:
            raise UsageError(f"dims must be comma-separated integers; got {text!r}") from None
    dims = list(DIMENSION.check_each(dims, "dims", ParameterError))
    if len(dims) < 2 or len(set(dims)) != len(dims):
        raise UsageError(f"dims must be at least two distinct integers {DIMENSION}; got {dims}")
    return sorted(dims)
