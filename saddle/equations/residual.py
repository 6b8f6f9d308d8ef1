"""Residuals whose roots are saddle points, guarded against points where they mean nothing (THEORY.md sec. 4).

A root finder (:mod:`saddle.search.roots`) drives a residual ``G(x)`` to zero. :class:`GuardedResidual`
is the one guard every residual of the package goes through: outside its domain, or where its equations
are not finite, it is a large constant (``outside``), never a warning or a NaN, so a backtracking line
search stays inside. :class:`ScaledResidual` is ``F(x) - x`` on a branch's free entries, its domain that
of the order parameters.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np

from attnphase.saddle.equations.saddle_map import MemoisedMap


class GuardedResidual(ABC):
    """A residual that is ``outside`` wherever ``x`` is not :meth:`inside` its domain or its equations
    (:meth:`equations`) are not finite; its :meth:`jacobian` is ``None`` where not finite."""

    def __init__(self, outside: float) -> None:
        self.outside = outside

    @abstractmethod
    def equations(self, x: np.ndarray) -> np.ndarray:
        """The residual's equations at ``x`` (evaluated only inside the domain)."""

    def equations_jacobian(self, x: np.ndarray) -> np.ndarray | None:
        """``d equations / dx`` at ``x``, where known in closed form."""
        return None

    def inside(self, x: np.ndarray) -> bool:
        """Whether ``x`` lies in the domain (everywhere, unless a residual says otherwise)."""
        return True

    def size(self, x: np.ndarray) -> int:
        """The number of equations at ``x`` (by default one per unknown)."""
        return x.size

    def feasible(self, x: np.ndarray) -> bool:
        """Whether ``x`` lies in the domain: a cheap test, without evaluating the equations."""
        return self.inside(x)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if not self.inside(x):
            return np.full(self.size(x), self.outside)
        with np.errstate(all="ignore"):
            g = self.equations(x)
        return g if np.all(np.isfinite(g)) else np.full_like(g, self.outside)

    def jacobian(self, x: np.ndarray) -> np.ndarray | None:
        """``dG/dx`` inside the domain; ``None`` where it is not finite or not known."""
        with np.errstate(all="ignore"):
            jacobian = self.equations_jacobian(x)
        return jacobian if jacobian is not None and np.all(np.isfinite(jacobian)) else None


class ScaledResidual(GuardedResidual):
    """``G(x) = (F(y) - y)[free] / (1 + |x|)``, ``y`` equal to ``base`` but ``x`` on the ``free`` entries:
    the residual whose roots are the fixed points (THEORY.md sec. 4), with its Jacobian from the map's.
    Its domain is that of the order parameters (:meth:`OverlapGeometry.in_domain`), where ``F`` alone is
    evaluated: ``F`` is finite at ``V < 0`` (the envelope holds ``V^-1``) but means nothing there, ``|Vhat|``
    grows without bound as ``V -> 0-``, so ``F_q`` and ``F_V`` vanish, and the residual, absolute for small
    entries, vanishes towards ``q = V = 0``: a spurious root outside the domain that a backtracking step
    across ``V = 0`` would settle on."""

    def __init__(self, evaluate: MemoisedMap, free: np.ndarray, base: np.ndarray, outside: float) -> None:
        super().__init__(outside)
        self.evaluate, self.free, self.base = evaluate, free, base

    def full(self, x: np.ndarray) -> np.ndarray:
        """Every order parameter: ``base`` with ``x`` on the free entries."""
        full = self.base.copy()
        full[self.free] = x
        return full

    def inside(self, x: np.ndarray) -> bool:
        return self.evaluate.map.geometry.in_domain(self.full(x))

    def equations(self, x: np.ndarray) -> np.ndarray:
        return (self.evaluate(self.full(x)).updated[self.free] - x) / (1.0 + np.abs(x))

    def equations_jacobian(self, x: np.ndarray) -> np.ndarray:
        """``(dF/dx - I) / (1 + |x|)`` on the free entries, less ``G sign(x) / (1 + |x|)`` on the diagonal."""
        full = self.full(x)
        scale = 1.0 + np.abs(x)
        g = (self.evaluate(full).updated[self.free] - x) / scale
        jacobian = (self.evaluate.jacobian(full)[np.ix_(self.free, self.free)] - np.eye(x.size)) / scale[:, None]
        return jacobian - np.diag(g * np.sign(x) / scale)

    def drift(self, x: np.ndarray) -> np.ndarray:
        """``dG/dalpha`` at ``x``: ``(dF/dalpha)[free] / (1 + |x|)``."""
        return self.evaluate.alpha_derivative(self.full(x))[self.free] / (1.0 + np.abs(x))


def residual_norm(params: np.ndarray, updated: np.ndarray) -> float:
    """``max_i |F_i(x) - x_i| / (1 + |x_i|)``: absolute for small, relative for large entries."""
    if not np.all(np.isfinite(updated)):
        return float("inf")
    return float(np.max(np.abs(updated - params) / (1.0 + np.abs(params)), initial=0.0))
