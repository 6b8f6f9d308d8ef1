"""The continuation predictor: Lagrange extrapolation of a path of points."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.saddle.search.extrapolation import lagrange


def test_three_points_reproduce_a_parabola_and_two_a_line_anywhere():
    def parabola(x):
        return np.array([1.0 - 2.0 * x + 0.5 * x**2, 3.0 * x**2])

    xs = [0.4, 0.9, 1.7]
    for at in (-1.0, 0.0, 1.2, 2.5):
        np.testing.assert_allclose(lagrange(xs, [parabola(x) for x in xs], at), parabola(at), atol=1e-12)
        np.testing.assert_allclose(lagrange(xs[:2], [np.array([2 * x - 1]) for x in xs[:2]], at), [2 * at - 1])


def test_one_point_is_a_constant_prediction():
    assert lagrange([0.7], [np.array([3.0, -1.0])], 5.0) == pytest.approx([3.0, -1.0])
