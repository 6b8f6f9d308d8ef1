"""Numba kernels over quadrature nodes: the multi-start prox and the weighted integrals.

The prox (THEORY.md sec. 3) is the global minimiser of the non-convex Moreau envelope ``M``.
Every start is refined by Newton's method with the Hessian shifted to be positive definite
and an Armijo backtracking line search; the lowest ``M`` over starts is kept per node.

The kernels are written here once, as templates in plain Python over the placeholder names
below (``K``, ``SIZE``, ``envelope``, ``derivatives``, ``integrand``). For every model,
:mod:`saddle.codegen` copies their source into a generated module next to that model's
compiled integrands and jits it there, so that numba can cache the machine code on disk.
The templates are never called themselves (tests/test_replica.py runs the compiled ones).
"""

from __future__ import annotations

import numba
import numpy as np

#: Backtracking halvings of a Newton step before the line search gives up (M at its
#: floating-point floor along the Newton direction, or a direction that does not descend).
_MAX_HALVINGS = 12

# ---------------------------------------------------------------- placeholders, bound per model
K = 1  # number of prox variables z
SIZE = 1  # number of integrands of an integral kernel


def envelope(z, node, params, consts):  # pragma: no cover - placeholder
    """``M(z; node)``."""
    raise NotImplementedError


def derivatives(z, node, params, consts, out):  # pragma: no cover - placeholder
    """Gradient (``K``) and then Hessian (``K*K``, row-major) of ``M`` in ``z``, into ``out``."""
    raise NotImplementedError


def integrand(*arrays_then_out):  # pragma: no cover - placeholder
    """``SIZE`` integrands at one node, into the last argument."""
    raise NotImplementedError


# ---------------------------------------------------------------- helpers (copied as they are)
def _max_abs(a, k):  # pragma: no cover - compiled
    """``max_j |a_j|`` over the first ``k`` entries (the gradient part of a derivatives buffer)."""
    largest = 0.0
    for j in range(k):
        largest = max(largest, abs(a[j]))
    return largest


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


# ---------------------------------------------------------------- the prox
def refine(z, node, params, consts, tol, maxit):  # pragma: no cover - compiled
    """Newton from ``z`` (updated in place) at one node: ``(M, max |grad M|)`` at the end."""
    gh = np.empty(K + K * K)
    gh_trial = np.empty(K + K * K)
    trial = np.empty(K)
    value = envelope(z, node, params, consts)
    derivatives(z, node, params, consts, gh)
    for _ in range(maxit if np.isfinite(value) else 0):
        g = gh[:K]
        h = gh[K:]
        gmax = _max_abs(gh, K)
        if not gmax > tol:
            break
        if not np.all(np.isfinite(h)):
            break  # invalid parameters (e.g. q < 0): the caller sees a non-finite map
        step = _newton_direction(h, g, K)
        # cap the step: the envelope varies on the scale of |z| + 1
        norm_step = np.sqrt((step * step).sum())
        cap = 2.0 * (1.0 + np.sqrt((z * z).sum()))
        if norm_step > cap:
            step *= cap / norm_step
        slope = (g * step).sum()
        t = 1.0
        accepted = False
        for _ in range(_MAX_HALVINGS):
            for j in range(K):
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
            for j in range(K):
                trial[j] = z[j] + step[j]
            derivatives(trial, node, params, consts, gh_trial)
            if not _max_abs(gh_trial, K) < 0.5 * gmax:
                break
            z[:] = trial
            value = envelope(trial, node, params, consts)
            gh[:] = gh_trial
            continue
        z[:] = trial
        value = tv
        derivatives(z, node, params, consts, gh)
    return value, _max_abs(gh, K)


def prox_kernel(nodes, params, consts, starts, tol, maxit):  # pragma: no cover - compiled
    """``(z (K, N), M (N,), |grad M| (N,))``: the lowest of the refined ``starts (S, K, N)``; at a
    node where no start gives a finite value, ``z`` is NaN, ``M`` infinite and the gradient infinite
    (counted as an unconverged prox)."""
    n_starts, _, n = starts.shape
    z_best = np.full((K, n), np.nan)
    v_best = np.empty(n)
    g_best = np.full(n, np.inf)
    for i in numba.prange(n):
        node = nodes[:, i].copy()
        best = np.inf
        z = np.empty(K)
        for s in range(n_starts):
            for j in range(K):
                z[j] = starts[s, j, i]
            value, gmax = refine(z, node, params, consts, tol, maxit)
            if value < best:
                best = value
                z_best[:, i] = z
                g_best[i] = gmax
        v_best[i] = best
    return z_best, v_best, g_best


# ---------------------------------------------------------------- weighted sums over nodes
def integral_kernel_z(z, nodes, weights, params, consts):  # pragma: no cover - compiled
    """``sum_i w_i integrand(z_i, n_i)`` -> ``(SIZE,)``."""
    n = nodes.shape[1]
    partial = np.zeros((n, SIZE))
    for i in numba.prange(n):
        out = np.empty(SIZE)
        integrand(z[:, i].copy(), nodes[:, i].copy(), params, consts, out)
        partial[i] = weights[i] * out
    return partial.sum(axis=0)


def integral_kernel(nodes, weights, params, consts):  # pragma: no cover - compiled
    """``sum_i w_i integrand(n_i)`` -> ``(SIZE,)`` (an integrand without the prox)."""
    n = nodes.shape[1]
    partial = np.zeros((n, SIZE))
    for i in numba.prange(n):
        out = np.empty(SIZE)
        integrand(nodes[:, i].copy(), params, consts, out)
        partial[i] = weights[i] * out
    return partial.sum(axis=0)


#: Templates every generated module holds, in dependency order: the helpers, then the prox.
PROX_TEMPLATES = (_max_abs, _newton_direction, refine, prox_kernel)
