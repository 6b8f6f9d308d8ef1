"""Roots of a residual ``G(x) = 0`` in a few dozen unknowns, each evaluation of ``G`` costly (THEORY.md
sec. 4: ``G`` is the scaled fixed-point residual of the saddle-point map).

:class:`RootFinder` tries Newton's method with the residual's own Jacobian (where it has one, as
:class:`~attnphase.saddle.equations.residual.ScaledResidual` does in closed form) or Broyden's update of
a carried-over estimate, both with a backtracking step; Broyden's falls back on scipy's Powell hybrid
method if it stops short of the tolerance, Newton's with the exact Jacobian only if it diverges; or
damped iteration of ``x + G(x)``. It knows nothing of the map behind ``G``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.optimize

from attnphase.saddle.tuning import RootMethod, RootTuning


class Residual(Protocol):
    """A residual ``G``: called at ``x``; it may also have ``jacobian(x)`` (``None`` where not finite) and
    ``feasible(x)``, whether ``x`` lies in its domain (a cheap test, without evaluating ``G``)."""

    def __call__(self, x: np.ndarray) -> np.ndarray: ...


@dataclass(frozen=True)
class RootFinder:
    """A root of a residual from a start by ``method`` (``newton``, ``broyden``, ``hybr`` or ``damped``),
    to ``max |G| <= tolerance``, within ``max_evaluations`` steps per stage (Newton's or Broyden's
    iterations, each with a line search; the hybrid method's and the damped iteration's evaluations of
    ``G``); ``damping`` is the step of the damped iteration. ``evaluation_budget``: a search that has
    evaluated ``G`` this many times in all gives way and returns its best iterate (``None``: no budget;
    an exact Jacobian costs no evaluation, differences one per coordinate). ``feasible_halvings``: the
    halvings of a step in search of a point inside the residual's domain."""

    method: RootMethod = RootMethod.NEWTON
    tolerance: float = 1e-9
    max_evaluations: int = 60
    damping: float = 0.5
    evaluation_budget: int | None = None
    feasible_halvings: int = 30

    def __post_init__(self) -> None:
        object.__setattr__(self, "method", RootMethod(self.method))

    @classmethod
    def of(cls, tuning: RootTuning) -> RootFinder:
        """The root finder ``tuning`` describes."""
        return cls(
            tuning.method, tuning.tolerance, tuning.max_evaluations, tuning.damping, None, tuning.feasible_halvings
        )

    def __call__(
        self, residual: Residual, x0: np.ndarray, jacobian: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """A root of ``residual`` from ``x0``: ``newton`` (the residual's own Jacobian at every iterate,
        where it has one, else as ``broyden``) or ``broyden`` (Broyden's update of ``jacobian`` or of a
        first estimate), then Powell's hybrid method if Broyden's falls short of the tolerance or either
        diverges (module docstring); or damped iteration of ``x + residual``. Returns the best iterate
        found and the final Jacobian estimate, if any; with an ``evaluation_budget``, the best point
        evaluated before the budget was spent, if it was (:class:`BudgetedResidual`)."""
        if self.evaluation_budget is None:
            return self._search(residual, x0, jacobian)
        budgeted = BudgetedResidual(residual, self.evaluation_budget)
        try:
            return self._search(budgeted, x0, jacobian)
        except BudgetSpent:
            return budgeted.best_x, None

    def _search(
        self, residual: Residual, x0: np.ndarray, jacobian: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray | None]:
        if self.method is RootMethod.DAMPED:
            return self._damped(residual, x0), None
        exact = self.method is RootMethod.NEWTON and hasattr(residual, "jacobian")
        if self.method is RootMethod.HYBR:
            x, jac_out = None, None
        else:
            x, jac_out = self._quasi_newton(residual, x0, jacobian, exact)
        if x is None or (not exact and np.abs(residual(x)).max() > self.tolerance):
            begin = x0 if x is None else x
            jac = (lambda y: jacobian_of(residual, y, residual(y))) if exact else None
            sol = scipy.optimize.root(
                residual,
                begin,
                jac=jac,
                method="hybr",
                options={"xtol": 1e-14, "maxfev": self.max_evaluations},
            )
            if np.abs(residual(sol.x)).max() < np.abs(residual(begin)).max():
                return sol.x, None
            return begin, jac_out
        return x, jac_out

    def settles(self, residual: Residual, x: np.ndarray) -> bool:
        """Whether ``x`` meets the tolerance: ``max |residual(x)| <= tolerance`` (not where it is not finite)."""
        with np.errstate(all="ignore"):
            return bool(np.abs(residual(x)).max() <= self.tolerance)

    def _quasi_newton(self, residual: Residual, x0: np.ndarray, jacobian: np.ndarray | None, exact: bool):
        """Newton's method (``exact``: the residual's Jacobian at every iterate) or Broyden's good update,
        with a backtracking step.

        Without ``exact``, a Jacobian carried over from a neighbouring point is trusted only while it
        leads: at the first step that does not lower the residual, or if four steps have not lowered it
        tenfold, it is replaced by a fresh estimate at the best iterate (once). Returns the best iterate
        and the last Jacobian, or ``(None, None)`` if the iteration diverges.
        """
        x = x0.copy()
        g = residual(x)
        carried = jacobian is not None and not exact
        if not carried:
            jacobian = jacobian_of(residual, x, g)
        best_norm, best_x, best_g, stalled, checkpoint = np.abs(g).max(), x, g, 0, np.abs(g).max()
        for iteration in range(self.max_evaluations):
            if best_norm <= self.tolerance:
                break
            if carried and (stalled >= 1 or (iteration == 4 and best_norm > 0.1 * checkpoint)):
                # the carried estimate does not lead to the root: estimate the Jacobian afresh
                x, g, carried, stalled = best_x, best_g, False, 0
                jacobian = jacobian_of(residual, x, g)
                continue
            if stalled >= (2 if exact else 6):
                break
            if iteration % 8 == 7:  # less than a halving of the residual in 8 steps: give up
                if best_norm > 0.5 * checkpoint:
                    break
                checkpoint = best_norm
            try:
                step = -np.linalg.solve(jacobian, g)
            except np.linalg.LinAlgError:
                return None, None
            t = _feasible_fraction(residual, x, step, self.feasible_halvings)
            for _ in range(6):
                x_new = x + t * step
                g_new = residual(x_new)
                if np.abs(g_new).max() < np.abs(g).max() or t < 0.05:
                    break
                t *= 0.5
            dx, dg = x_new - x, g_new - g
            x, g = x_new, g_new
            norm = np.abs(g).max()
            if norm < best_norm:
                best_norm, best_x, best_g, stalled = norm, x, g, 0
            else:
                stalled += 1
            if not np.isfinite(norm) or norm > 1e3 * max(best_norm, 1e-3):
                return None, None
            if not exact:
                jacobian = jacobian + np.outer(dg - jacobian @ dx, dx) / max(float(dx @ dx), 1e-300)
            elif norm > self.tolerance:
                jacobian = jacobian_of(residual, x, g)
        return best_x, jacobian

    def _damped(self, residual: Residual, x0: np.ndarray) -> np.ndarray:
        """Iterate ``x <- x + damping (F(x) - x)`` (the residual unscaled) until ``|G| <= tolerance``."""
        x = x0.copy()
        for _ in range(self.max_evaluations):
            g = residual(x) * (1.0 + np.abs(x))
            if np.abs(g / (1.0 + np.abs(x))).max() <= self.tolerance:
                break
            x = x + self.damping * g
        return x


class BudgetSpent(Exception):
    """A root search evaluated its residual as often as its budget allows (:class:`BudgetedResidual`)."""


class BudgetedResidual:
    """``residual`` evaluated at no more than ``budget`` distinct points: a call at one more raises
    :class:`BudgetSpent`. It keeps the best point evaluated (``best_x``, the lowest ``max |G|``) and has
    the residual's ``jacobian`` and ``feasible`` where the residual has them."""

    def __init__(self, residual: Residual, budget: int) -> None:
        self.residual, self.budget = residual, budget
        self.best_x: np.ndarray | None = None
        self._best_norm = np.inf
        self._seen: set[bytes] = set()

    def __call__(self, x: np.ndarray) -> np.ndarray:
        key = x.tobytes()
        if key not in self._seen:
            if len(self._seen) >= self.budget:
                raise BudgetSpent
            self._seen.add(key)
        g = self.residual(x)
        norm = np.abs(g).max()
        norm = norm if np.isfinite(norm) else np.inf  # a non-finite residual is the worst point
        if self.best_x is None or norm < self._best_norm:
            self.best_x, self._best_norm = x.copy(), norm
        return g

    def __getattr__(self, name: str):
        return getattr(self.residual, name)


def _feasible_fraction(residual: Residual, x: np.ndarray, step: np.ndarray, halvings: int) -> float:
    """The largest ``2^-k`` (``k < halvings``) with ``x + 2^-k step`` in the residual's domain,
    where it says what its domain is (``feasible(x)``, evaluated without the residual), else 1: the line
    search starts inside the domain, and its halvings are spent on lowering the residual."""
    feasible: Callable[[np.ndarray], bool] | None = getattr(residual, "feasible", None)
    if feasible is None:
        return 1.0
    return largest_halving(lambda t: feasible(x + t * step), halvings)


def largest_halving(admissible: Callable[[float], bool], halvings: int) -> float:
    """The largest ``t = 2^-k`` (``k < halvings``) that is ``admissible``, else ``2^-halvings``: the
    fraction of a step that keeps its end inside a domain."""
    t = 1.0
    for _ in range(halvings):
        if admissible(t):
            break
        t *= 0.5
    return t


def jacobian_of(residual: Residual, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """``d residual / dx`` at ``x`` (where it is ``g``): the residual's own ``jacobian`` where it has one
    and it is finite, else forward differences (:func:`finite_difference_jacobian`)."""
    exact: Callable[[np.ndarray], np.ndarray | None] | None = getattr(residual, "jacobian", None)
    jacobian = exact(x) if exact is not None else None
    return jacobian if jacobian is not None else finite_difference_jacobian(residual, x, g)


def finite_difference_jacobian(residual: Residual, x: np.ndarray, g: np.ndarray) -> np.ndarray:
    """Forward differences of ``residual`` at ``x`` (where it is ``g``), step ``1e-6 max(|x_j|, 1e-2)``."""
    jac = np.empty((g.size, x.size))
    for j in range(x.size):
        h = 1e-6 * max(abs(x[j]), 1e-2)
        e = x.copy()
        e[j] += h
        jac[:, j] = (residual(e) - g) / h
    return jac
