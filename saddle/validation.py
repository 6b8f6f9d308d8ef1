"""Checks of numerical inputs, with errors that name the parameter and its allowed range."""

from __future__ import annotations

import math


class ParameterError(ValueError):
    """A numerical parameter is outside its allowed range."""


def check_alpha(alpha: float) -> None:
    """Raise :class:`ParameterError` unless ``alpha`` is a finite number > 0."""
    if not (isinstance(alpha, (int, float)) and math.isfinite(alpha) and alpha > 0):
        raise ParameterError(f"alpha must be a finite number > 0; got {alpha!r}")
