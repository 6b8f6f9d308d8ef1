"""Checks of numerical inputs, with errors that name the parameter and its allowed range.

The ranges are :class:`~attnphase.replica.declaration.Interval` objects (one check, one way of
stating a range, shared with the declarations); this module holds the ranges of the numerical
stages (``alpha``, seeds) and the error they raise, :class:`ParameterError`.
"""

from __future__ import annotations

from collections.abc import Collection

from attnphase.replica.declaration import InputTypeError, Interval, shown


class ParameterError(ValueError):
    """A numerical parameter is outside its allowed range."""


#: Sample complexities alpha = n/d: below 1e-6 there is no data at any d that fits in memory, and
#: above 1e4 every branch has long reached its alpha -> infinity limit (THEORY.md sec. 5).
ALPHA = Interval(1e-6, 1e4)
#: Seeds of every random generator (numpy, scipy's Sobol scrambling, torch): 32-bit unsigned integers.
SEED = Interval(0, 2**32 - 1, integer=True)


def check(value: object, parameter: str, interval: Interval) -> float:
    """``value`` if it lies in ``interval`` (as ``int`` or ``float``), else :class:`ParameterError`
    (:class:`~attnphase.replica.declaration.InputTypeError` for a wrong type) naming ``parameter``."""
    return interval.check(value, parameter, ParameterError)


def check_choice(value: object, parameter: str, choices: Collection[str]) -> str:
    """``value`` if it is one of ``choices``, else :class:`ParameterError` listing them."""
    if not (isinstance(value, str) and value in choices):
        raise ParameterError(f"{parameter} must be one of {', '.join(choices)}; got {shown(value)}")
    return value


def check_type(value: object, parameter: str, kinds: type | tuple[type, ...], allowed: str) -> None:
    """Raise :class:`~attnphase.replica.declaration.InputTypeError` naming ``parameter`` unless
    ``value`` is an instance of ``kinds`` (described as ``allowed``)."""
    if not isinstance(value, kinds):
        raise InputTypeError(f"{parameter} must be {allowed}; got {shown(value)}")


def check_alpha(alpha: float) -> float:
    """``alpha`` as a float if it lies in :data:`ALPHA`, else :class:`ParameterError`."""
    return check(alpha, "alpha", ALPHA)
