"""Numba kernels over quadrature nodes: the multi-start prox and the weighted integrals.

The prox (THEORY.md sec. 3) is the global minimiser of the non-convex Moreau envelope ``M``.
Every start is refined by Newton's method with the Hessian shifted to be positive definite
and an Armijo backtracking line search; the lowest ``M`` over starts is kept per node.
"""

from __future__ import annotations

from collections.abc import Callable

import numba
import numpy as np

#: Backtracking halvings of a Newton step before the line search gives up (M at its
#: floating-point floor along the Newton direction, or a direction that does not descend).
_MAX_HALVINGS = 12


@numba.njit(error_model="numpy")
def _max_abs(a, k):  # pragma: no cover - compiled
    """``max_j |a_j|`` over the first ``k`` entries (the gradient part of a derivatives buffer)."""
    largest = 0.0
    for j in range(k):
        largest = max(largest, abs(a[j]))
    return largest


@numba.njit(error_model="numpy")
def _newton_direction(h, g, k):  # pragma: no cover - compiled
    """``-(H + shift I)^{-1} g`` with the smallest shift making ``H + shift I`` positive definite."""
    scale = 0.0
    for j in range(k * k):
        scale = max(scale, abs(h[j]))
    floor = 1e-10 * (1.0 + scale)
    if k == 1:
        return np.array([-g[0] / max(h[0], floor)])
    if k == 2:
        mean = 0.5 * (h[0] + h[3])
        lam_min = mean - np.sqrt(0.25 * (h[0] - h[3]) ** 2 + h[1] * h[2])
        shift = max(0.0, floor - lam_min)
        a, b, c, d = h[0] + shift, h[1], h[2], h[3] + shift
        det = a * d - b * c
        return np.array([-(d * g[0] - b * g[1]) / det, -(a * g[1] - c * g[0]) / det])
    hm = h.reshape((k, k))
    lam_min = np.linalg.eigvalsh(hm)[0]
    shift = max(0.0, floor - lam_min)
    return -np.linalg.solve(hm + shift * np.eye(k), g)


def make_prox_kernel(envelope: Callable, derivatives: Callable, k: int) -> Callable:
    """``kernel(nodes (D,N), params, consts, starts (S,k,N), tol, maxit) -> (z, value, grad_norm)``.

    ``derivatives(z, node, params, consts, out)`` writes the gradient (``k``) and then the
    Hessian (``k*k``, row-major) of the envelope into ``out``.
    """

    @numba.njit(error_model="numpy")
    def refine(z, node, params, consts, tol, maxit):  # pragma: no cover - compiled
        gh = np.empty(k + k * k)
        gh_trial = np.empty(k + k * k)
        trial = np.empty(k)
        value = envelope(z, node, params, consts)
        derivatives(z, node, params, consts, gh)
        for _ in range(maxit if np.isfinite(value) else 0):
            g = gh[:k]
            h = gh[k:]
            gmax = _max_abs(gh, k)
            if not gmax > tol:
                break
            if not np.all(np.isfinite(h)):
                break  # invalid parameters (e.g. q < 0): the caller sees a non-finite map
            step = _newton_direction(h, g, k)
            # cap the step: the envelope varies on the scale of |z| + 1
            norm_step = np.sqrt((step * step).sum())
            cap = 2.0 * (1.0 + np.sqrt((z * z).sum()))
            if norm_step > cap:
                step *= cap / norm_step
            slope = (g * step).sum()
            t = 1.0
            accepted = False
            for _ in range(_MAX_HALVINGS):
                for j in range(k):
                    trial[j] = z[j] + t * step[j]
                tv = envelope(trial, node, params, consts)
                if tv < value + 1e-4 * t * slope:
                    accepted = True
                    break
                t *= 0.5
            if not accepted:
                # M is at its floating-point floor along the Newton direction: below it only
                # the gradient still resolves the minimum, so take the full Newton step if it
                # halves the gradient (the quadratic-convergence regime), and stop otherwise
                for j in range(k):
                    trial[j] = z[j] + step[j]
                derivatives(trial, node, params, consts, gh_trial)
                if not _max_abs(gh_trial, k) < 0.5 * gmax:
                    break
                z[:] = trial
                value = envelope(trial, node, params, consts)
                gh[:] = gh_trial
                continue
            z[:] = trial
            value = tv
            derivatives(z, node, params, consts, gh)
        return value, _max_abs(gh, k)

    @numba.njit(parallel=True, error_model="numpy")
    def kernel(nodes, params, consts, starts, tol, maxit):  # pragma: no cover - compiled
        n_starts, _, n = starts.shape
        z_best = np.empty((k, n))
        v_best = np.empty(n)
        g_best = np.empty(n)
        for i in numba.prange(n):
            node = nodes[:, i].copy()
            best = np.inf
            z = np.empty(k)
            for s in range(n_starts):
                for j in range(k):
                    z[j] = starts[s, j, i]
                value, gmax = refine(z, node, params, consts, tol, maxit)
                if value < best:
                    best = value
                    z_best[:, i] = z
                    g_best[i] = gmax
            v_best[i] = best
        return z_best, v_best, g_best

    return kernel


def make_integral_kernel(integrand: Callable, size: int, needs_z: bool) -> Callable:
    """Weighted sums of an integrand over nodes, ``-> (size,)``:
    ``kernel(z (k,N), nodes, weights, params, consts)`` if ``needs_z`` else
    ``kernel(nodes, weights, params, consts)``."""

    if needs_z:

        @numba.njit(parallel=True, error_model="numpy")
        def kernel(z, nodes, weights, params, consts):  # pragma: no cover - compiled
            n = nodes.shape[1]
            partial = np.zeros((n, size))
            for i in numba.prange(n):
                out = np.empty(size)
                integrand(z[:, i].copy(), nodes[:, i].copy(), params, consts, out)
                partial[i] = weights[i] * out
            return partial.sum(axis=0)

    else:

        @numba.njit(parallel=True, error_model="numpy")
        def kernel(nodes, weights, params, consts):  # pragma: no cover - compiled
            n = nodes.shape[1]
            partial = np.zeros((n, size))
            for i in numba.prange(n):
                out = np.empty(size)
                integrand(nodes[:, i].copy(), params, consts, out)
                partial[i] = weights[i] * out
            return partial.sum(axis=0)

    return kernel
