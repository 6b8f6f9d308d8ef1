"""The root finder on residuals whose roots are known (saddle/roots.py): it knows nothing of the map."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.saddle.roots import RootFinder


class Logarithm:
    """``G(x) = log(x)`` (root 1) on ``x > 0``, with its Jacobian and its domain; records where it is called."""

    def __init__(self, with_domain: bool) -> None:
        self.calls: list[float] = []
        if with_domain:
            self.feasible = lambda x: bool(np.all(x > 0))

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.calls.append(float(x[0]))
        return np.log(x) if np.all(x > 0) else np.full_like(x, 1e6)

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        return np.diag(1.0 / x)


@pytest.mark.parametrize("method", ["newton", "broyden"])
def test_newton_and_broyden_find_a_known_root(method):
    def residual(x: np.ndarray) -> np.ndarray:
        return np.array([x[0] ** 2 + x[1] - 3.0, x[0] - x[1] + 1.0])  # root (1, 2)

    x, _ = RootFinder(method=method, tolerance=1e-12)(residual, np.array([2.0, 0.5]))
    np.testing.assert_allclose(x, [1.0, 2.0], atol=1e-10)


def test_a_step_out_of_the_domain_is_shortened_before_the_residual_is_evaluated():
    """From x = 3 Newton's step on ``log x`` lands at ``3 - 3 log 3 < 0``. A residual that states its
    domain is never evaluated outside it, and the root is reached by Newton alone in a few steps; one
    that does not state it is evaluated outside and needs more evaluations."""
    inside, blind = Logarithm(with_domain=True), Logarithm(with_domain=False)
    for residual in (inside, blind):
        x, _ = RootFinder(tolerance=1e-12)(residual, np.array([3.0]))
        assert x[0] == pytest.approx(1.0, abs=1e-12)
    assert min(inside.calls) > 0.0 and len(inside.calls) <= 10
    assert min(blind.calls) < 0.0 and len(blind.calls) > len(inside.calls)
