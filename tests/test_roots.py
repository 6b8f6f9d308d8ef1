"""The root finder on residuals whose roots are known (saddle/search/roots.py): it knows nothing of the map."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.optimize

from attnphase.saddle.search.roots import BudgetedResidual, BudgetSpent, RootFinder


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


class NoRoot:
    """``G(x) = x^2 + 1`` (no real root; ``|G| >= 1``), with its Jacobian; counts its evaluations."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.calls += 1
        return x**2 + 1.0

    def jacobian(self, x: np.ndarray) -> np.ndarray:
        return np.diag(2.0 * x)


def test_newton_with_the_exact_jacobian_gives_up_without_a_fallback_and_broyden_falls_back(monkeypatch):
    """Where there is no root, Newton's method with the residual's own Jacobian ends once the residual
    has not halved in eight steps (or two steps did not lower it), and returns its best iterate: no
    other method is tried after it (after Newton's stalls in scans of the paper's model, Powell's hybrid
    method made two fifths of the evaluations and found no root the scans kept: the knob table's
    ``roots.method``). Broyden's updates of a difference estimate, which may stall short of
    a root, still hand over to Powell's hybrid method."""
    fallbacks = []
    hybrid = scipy.optimize.root
    monkeypatch.setattr(scipy.optimize, "root", lambda *a, **k: fallbacks.append(1) or hybrid(*a, **k))
    residual = NoRoot()
    x, _ = RootFinder(tolerance=1e-12)(residual, np.array([2.0]))
    assert residual(x)[0] < 5.0 and not fallbacks  # the best iterate, not the start; no fallback
    assert residual.calls <= 1 + 16 * 7  # two checks of halving, six halvings a step
    RootFinder(method="broyden", tolerance=1e-12)(lambda y: y**2 + 1.0, np.array([2.0]))
    assert fallbacks


class Counted:
    """A residual that records every point it is evaluated at (as bytes, to count distinct points)."""

    def __init__(self, residual) -> None:
        self.residual, self.points = residual, []

    def __call__(self, x: np.ndarray) -> np.ndarray:
        self.points.append(x.tobytes())
        return self.residual(x)


def slow_residual(x: np.ndarray) -> np.ndarray:
    """``G(x) = x^3`` (a triple root at 0): Newton's method only shrinks it by a third a step."""
    return x**3


@pytest.mark.parametrize("method", ["newton", "broyden"])
def test_a_search_within_an_evaluation_budget_gives_way_with_its_best_point(method):
    """A search with an ``evaluation_budget`` evaluates the residual at no more distinct points than
    that, and returns the best point it evaluated; a budget it does not reach changes nothing."""
    free, budgeted = Counted(slow_residual), Counted(slow_residual)
    x_free, _ = RootFinder(method=method, tolerance=1e-12)(free, np.array([1.0]))
    assert len(set(free.points)) > 8
    x, _ = RootFinder(method=method, tolerance=1e-12, evaluation_budget=8)(budgeted, np.array([1.0]))
    assert len(set(budgeted.points)) == 8
    best = min(budgeted.points, key=lambda p: abs(np.frombuffer(p)[0]))
    assert x.tobytes() == best and abs(x[0]) < 1.0
    roomy = Counted(slow_residual)
    x_roomy, _ = RootFinder(method=method, tolerance=1e-12, evaluation_budget=10_000)(roomy, np.array([1.0]))
    assert x_roomy.tobytes() == x_free.tobytes() and roomy.points == free.points


def test_a_budgeted_search_keeps_the_residuals_jacobian_and_domain():
    """The budget wraps the residual without hiding its own Jacobian and domain: Newton's method with the
    exact Jacobian still never evaluates ``log x`` outside ``x > 0``, and finds its root within the budget."""
    residual = Logarithm(with_domain=True)
    x, _ = RootFinder(tolerance=1e-12, evaluation_budget=10)(residual, np.array([3.0]))
    assert x[0] == pytest.approx(1.0, abs=1e-12) and min(residual.calls) > 0.0


def test_the_best_point_of_a_budget_is_the_lowest_finite_residual_it_saw():
    """Where the residual is not finite at the first point of a budgeted search, a later point with a
    finite residual is its best; once the budget is spent, a call at a new point raises, and a call at a
    point already seen does not."""
    budgeted = BudgetedResidual(lambda x: np.full_like(x, np.nan) if x[0] > 2.5 else x**3, 3)
    for x in (3.0, 2.0, 1.0):
        budgeted(np.array([x]))
    assert budgeted.best_x[0] == 1.0
    budgeted(np.array([2.0]))
    with pytest.raises(BudgetSpent):
        budgeted(np.array([0.5]))
