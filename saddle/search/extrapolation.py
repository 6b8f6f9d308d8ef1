"""Polynomial extrapolation of a path of points: the predictor of every continuation."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def lagrange(abscissae: Sequence[float], values: Sequence[np.ndarray], at: float) -> np.ndarray:
    """The Lagrange polynomial through ``(abscissae[i], values[i])`` (distinct abscissae, arrays of
    one shape) evaluated at ``at``: a secant through two points, a parabola through three."""
    result = np.zeros_like(np.asarray(values[0], dtype=float))
    for i, (x_i, y_i) in enumerate(zip(abscissae, values, strict=True)):
        weight = 1.0
        for j, x_j in enumerate(abscissae):
            if j != i:
                weight *= (at - x_j) / (x_i - x_j)
        result += weight * np.asarray(y_i, dtype=float)
    return result
