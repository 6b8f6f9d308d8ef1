"""Numba kernels over quadrature nodes: the multi-start prox and the weighted integrals.

The prox (THEORY.md sec. 3) is the global minimiser of the non-convex Moreau envelope ``M``.
Every start is refined by Newton's method with the Hessian shifted to be positive definite
and an Armijo backtracking line search; the lowest ``M`` over starts is kept per node.

The kernels are written here once, as templates in plain Python over the placeholder names
below (``K``, ``SIZE``, ``INVARIANTS``, ``node_terms``, ``derivatives``, ``integrand``). For every
model, :mod:`saddle.compilation.codegen` copies their source into a generated module next to that model's
compiled integrands and jits it there, so that numba can cache the machine code on disk.
The templates are never called themselves (tests/test_replica.py runs the compiled ones).
"""

from __future__ import annotations

import numba
import numpy as np

from attnphase.saddle.tuning import KernelTuning

# ---------------------------------------------------------------- placeholders, bound per model
# The numerical constants (:meth:`~attnphase.saddle.tuning.KernelTuning.template_constants`) and the sizes
# below are defined in every generated module; the values here only make this file importable.
_MAX_HALVINGS = KernelTuning().line_search_halvings
_MAX_SWEEPS = KernelTuning().eigen_sweeps
BLOCK = KernelTuning().block
MERGE_DISTANCE = KernelTuning().merge_distance
K = 1  # number of prox variables z
SIZE = 1  # number of integrands of an integral kernel
P = 1  # number of order parameters (rows and columns of a Jacobian kernel)
INVARIANTS = 1  # number of the envelope's terms that depend on the node only


def node_terms(node, params, consts, out):  # pragma: no cover - placeholder
    """The envelope's subexpressions free of ``z`` at ``node``, into ``out`` (``INVARIANTS``)."""
    raise NotImplementedError


def derivatives(z, a, out):  # pragma: no cover - placeholder
    """Gradient (``K``), Hessian (``K*K``, row-major) and value of ``M`` at ``z``, given the node's terms
    ``a`` (:func:`node_terms`), into ``out`` (``K + K*K + 1``)."""
    raise NotImplementedError


def integrand(*arrays_then_out):  # pragma: no cover - placeholder
    """``SIZE`` integrands at one node, into the last argument."""
    raise NotImplementedError


def pieces(z, node, params, consts, out):  # pragma: no cover - placeholder
    """At one node, row-major into ``out``: ``partial_Y f_X`` (``P*P``), ``partial_z f_X`` (``P*K``),
    ``d^2 M / dz dY`` (``K*P``) and the Hessian of ``M`` in ``z`` (``K*K``)
    (:class:`attnphase.replica.saddle_equations.IntegrandDerivatives`)."""
    raise NotImplementedError


# ---------------------------------------------------------------- helpers (copied as they are)
# The prox runs Newton at every node from every start: nothing below allocates inside that loop
# (every buffer is made once per block of nodes and passed down), since a heap allocation costs as
# much as an evaluation of the envelope.
def _max_abs(a, k):  # pragma: no cover - compiled
    """``max_j |a_j|`` over the first ``k`` entries (the gradient part of a derivatives buffer)."""
    largest = 0.0
    for j in range(k):
        largest = max(largest, abs(a[j]))
    return largest


def _column(array, i, out):  # pragma: no cover - compiled
    """Column ``i`` of the 2-d ``array`` into ``out``."""
    for j in range(out.size):
        out[j] = array[j, i]


def _dot(a, b, k):  # pragma: no cover - compiled
    """``sum_j a_j b_j`` over the first ``k`` entries."""
    total = 0.0
    for j in range(k):
        total += a[j] * b[j]
    return total


def _cholesky(h, k, shift, low):  # pragma: no cover - compiled
    """The lower Cholesky factor of ``h + shift I`` (``h`` row-major ``k*k``) into ``low`` (row-major);
    ``False`` if that matrix is not positive definite (or not finite)."""
    for i in range(k):
        for j in range(i + 1):
            total = h[i * k + j] + (shift if i == j else 0.0)
            for m in range(j):
                total -= low[i * k + m] * low[j * k + m]
            if i == j:
                if not total > 0.0:
                    return False
                low[i * k + i] = np.sqrt(total)
            else:
                low[i * k + j] = total / low[j * k + j]
    return True


def _smallest_eigenvalue(h, k, work):  # pragma: no cover - compiled
    """The smallest eigenvalue of the symmetric ``h`` (row-major ``k*k``) by cyclic Jacobi rotations on
    a copy in ``work``, swept until the off-diagonal part is below rounding."""
    for j in range(k * k):
        work[j] = h[j]
    for _ in range(_MAX_SWEEPS):
        off, diagonal = 0.0, 0.0
        for p in range(k):
            diagonal += work[p * k + p] ** 2
            for q in range(p + 1, k):
                off += work[p * k + q] ** 2
        if not off > 1e-32 * diagonal:
            break
        for p in range(k):
            for q in range(p + 1, k):
                apq = work[p * k + q]
                if apq == 0.0:
                    continue
                tau = (work[q * k + q] - work[p * k + p]) / (2.0 * apq)
                t = (1.0 if tau >= 0.0 else -1.0) / (abs(tau) + np.sqrt(1.0 + tau * tau))
                c = 1.0 / np.sqrt(1.0 + t * t)
                s = t * c
                for r in range(k):
                    arp, arq = work[r * k + p], work[r * k + q]
                    work[r * k + p] = c * arp - s * arq
                    work[r * k + q] = s * arp + c * arq
                for r in range(k):
                    apr, aqr = work[p * k + r], work[q * k + r]
                    work[p * k + r] = c * apr - s * aqr
                    work[q * k + r] = s * apr + c * aqr
    smallest = work[0]
    for p in range(1, k):
        smallest = min(smallest, work[p * k + p])
    return smallest


def _newton_direction(gh, k, step, work):  # pragma: no cover - compiled
    """``-(H + shift I)^{-1} g`` into ``step``, with the smallest shift making ``H + shift I``
    positive definite (with a margin ``floor``); ``gh`` holds the gradient ``g`` (``k``) and then the
    Hessian ``H`` (row-major), ``work`` (``k*k``) is a buffer. Beyond two coordinates: a Cholesky
    factorisation of ``H - floor I`` tells whether ``H`` needs no shift, else the shift comes from the
    smallest eigenvalue (:func:`_smallest_eigenvalue`); then ``H + shift I`` is factorised and solved."""
    scale = 0.0
    for j in range(k * k):
        scale = max(scale, abs(gh[k + j]))
    floor = 1e-10 * (1.0 + scale)
    if k == 1:
        step[0] = -gh[0] / max(gh[1], floor)
        return
    if k == 2:
        h0, h1, h2, h3 = gh[2], gh[3], gh[4], gh[5]
        mean = 0.5 * (h0 + h3)
        lam_min = mean - np.sqrt(0.25 * (h0 - h3) ** 2 + h1 * h2)
        shift = max(0.0, floor - lam_min)
        a, b, c, d = h0 + shift, h1, h2, h3 + shift
        det = a * d - b * c
        step[0] = -(d * gh[0] - b * gh[1]) / det
        step[1] = -(a * gh[1] - c * gh[0]) / det
        return
    hessian = gh[k:]
    shift = 0.0
    if not _cholesky(hessian, k, -floor, work):
        shift = max(0.0, floor - _smallest_eigenvalue(hessian, k, work))
    while not _cholesky(hessian, k, shift, work):  # the eigenvalue's rounding: a little more shift
        shift = 2.0 * shift + floor
    for i in range(k):  # L y = -g, then L^T step = y
        total = -gh[i]
        for m in range(i):
            total -= work[i * k + m] * step[m]
        step[i] = total / work[i * k + i]
    for i in range(k - 1, -1, -1):
        total = step[i]
        for m in range(i + 1, k):
            total -= work[m * k + i] * step[m]
        step[i] = total / work[i * k + i]


def _solve_in_place(a, b, k, m):  # pragma: no cover - compiled
    """``b <- a^-1 b`` for ``a (k, k)`` and ``b (k, m)``, by Gaussian elimination with partial pivoting
    (``a`` is overwritten); a singular ``a`` gives non-finite entries."""
    for col in range(k):
        pivot = col
        for row in range(col + 1, k):
            if abs(a[row, col]) > abs(a[pivot, col]):
                pivot = row
        if pivot != col:
            for j in range(k):
                a[col, j], a[pivot, j] = a[pivot, j], a[col, j]
            for j in range(m):
                b[col, j], b[pivot, j] = b[pivot, j], b[col, j]
        for row in range(col + 1, k):
            factor = a[row, col] / a[col, col]
            for j in range(col, k):
                a[row, j] -= factor * a[col, j]
            for j in range(m):
                b[row, j] -= factor * b[col, j]
    for col in range(k - 1, -1, -1):
        for j in range(m):
            total = b[col, j]
            for i in range(col + 1, k):
                total -= a[col, i] * b[i, j]
            b[col, j] = total / a[col, col]


# ---------------------------------------------------------------- the prox
def _known_minimum(z, value, minima, minima_values, count):  # pragma: no cover - compiled
    """Whether ``z`` (where ``M = value``) lies within ``MERGE_DISTANCE`` (relative, in the largest
    coordinate) of one of the first ``count`` ``minima`` (rows) of the node, with ``M`` no lower than
    there: Newton, descending ``M``, ends in that minimum from there."""
    for j in range(count):
        largest, scale = 0.0, 1.0
        for i in range(K):
            largest = max(largest, abs(z[i] - minima[j, i]))
            scale = max(scale, 1.0 + abs(minima[j, i]))
        if largest <= MERGE_DISTANCE * scale and value >= minima_values[j]:
            return True
    return False


def refine(z, a, tol, maxit, gh, gh_trial, trial, step, work, minima, minima_values, count):  # pragma: no cover
    """Newton from ``z`` (updated in place) at the node whose terms are ``a`` (:func:`node_terms`):
    ``(M, max |grad M|, merged)`` at the end, ``merged`` when the iterate reached one of the ``count``
    minima already found at the node (rows of ``minima``, values ``minima_values``:
    :func:`_known_minimum`), where it stops, since refining it further would find that minimum again.
    ``gh``, ``gh_trial`` (``K + K*K + 1``: :func:`derivatives`), ``trial``, ``step`` (``K``) and
    ``work`` (``K*K``) are work buffers. Each trial point of the line search is evaluated with its
    derivatives, which are the next Newton step's if it is accepted."""
    derivatives(z, a, gh)
    value = gh[K + K * K]
    for _ in range(maxit if np.isfinite(value) else 0):
        if _known_minimum(z, value, minima, minima_values, count):
            return value, _max_abs(gh, K), True
        gmax = _max_abs(gh, K)
        if not gmax > tol:
            break
        finite = True
        for j in range(K, K + K * K):
            finite = finite and np.isfinite(gh[j])
        if not finite:
            break  # invalid parameters (e.g. q < 0): the caller sees a non-finite map
        _newton_direction(gh, K, step, work)
        # cap the step: the envelope varies on the scale of |z| + 1
        norm_step = np.sqrt(_dot(step, step, K))
        cap = 2.0 * (1.0 + np.sqrt(_dot(z, z, K)))
        if norm_step > cap:
            for j in range(K):
                step[j] *= cap / norm_step
        slope = _dot(gh, step, K)
        accepted = False
        # below M's floating-point resolution no trial can show the decrease the line search asks for
        if value + 1e-4 * slope < value:
            t = 1.0
            for _ in range(_MAX_HALVINGS):
                for j in range(K):
                    trial[j] = z[j] + t * step[j]
                derivatives(trial, a, gh_trial)
                if gh_trial[K + K * K] < value + 1e-4 * t * slope:
                    accepted = True
                    break
                t *= 0.5
        if not accepted:
            # M is at its floating-point floor along the Newton direction: below it only
            # the gradient still resolves the minimum, so take the full Newton step if it
            # halves the gradient (the quadratic-convergence regime), and stop otherwise
            for j in range(K):
                trial[j] = z[j] + step[j]
            derivatives(trial, a, gh_trial)
            if not _max_abs(gh_trial, K) < 0.5 * gmax:
                break
        for j in range(K):
            z[j] = trial[j]
        for j in range(K + K * K + 1):
            gh[j] = gh_trial[j]
        value = gh[K + K * K]
    return value, _max_abs(gh, K), False


def prox_kernel(nodes, params, consts, starts, tol, maxit):  # pragma: no cover - compiled
    """``(z (K, N), M (N,), |grad M| (N,), minima (S, K, N))``: the lowest of the refined ``starts (S, K, N)``,
    and every distinct minimum the starts converged to at each node, the lowest first and NaN in the
    slots left over (the starts of a later prox nearby: every basin found here, followed). At a node
    where no start gives a finite value, ``z`` is NaN, ``M`` infinite and the gradient infinite (counted
    as an unconverged prox). The starts are refined in order, and one that reaches a minimum an earlier
    start ended in stops there (:func:`refine`): put the start nearest the prox first. A start with a
    non-finite first coordinate is skipped."""
    n_starts, _, n = starts.shape
    dimension = nodes.shape[0]
    z_best = np.full((K, n), np.nan)
    v_best = np.empty(n)
    g_best = np.full(n, np.inf)
    found = np.full((n_starts, K, n), np.nan)
    n_blocks = (n + BLOCK - 1) // BLOCK
    for b in numba.prange(n_blocks):
        node = np.empty(dimension)
        a = np.empty(INVARIANTS)
        z = np.empty(K)
        gh = np.empty(K + K * K + 1)
        gh_trial = np.empty(K + K * K + 1)
        trial = np.empty(K)
        step = np.empty(K)
        work = np.empty(K * K)
        minima = np.empty((n_starts, K))
        minima_values = np.empty(n_starts)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            _column(nodes, i, node)
            node_terms(node, params, consts, a)
            best = np.inf
            lowest = -1
            count = 0
            for s in range(n_starts):
                if not np.isfinite(starts[s, 0, i]):
                    continue
                for j in range(K):
                    z[j] = starts[s, j, i]
                value, gmax, merged = refine(
                    z, a, tol, maxit, gh, gh_trial, trial, step, work, minima, minima_values, count
                )
                if merged:
                    continue
                if gmax <= tol:
                    for j in range(K):
                        minima[count, j] = z[j]
                    minima_values[count] = value
                    count += 1
                if value < best:
                    best = value
                    lowest = count - 1 if gmax <= tol else -1
                    for j in range(K):
                        z_best[j, i] = z[j]
                    g_best[i] = gmax
            v_best[i] = best
            for j in range(K):
                found[0, j, i] = z_best[j, i]
            slot = 1
            for m in range(count):
                if m != lowest and slot < n_starts:  # a start that is no minimum may hold slot 0
                    for j in range(K):
                        found[slot, j, i] = minima[m, j]
                    slot += 1
    return z_best, v_best, g_best, found


# ---------------------------------------------------------------- weighted sums over nodes
def integral_kernel_z(z, nodes, weights, params, consts):  # pragma: no cover - compiled
    """``sum_i w_i integrand(z_i, n_i)`` -> ``(SIZE,)``, summed per block of ``BLOCK`` nodes."""
    dimension, n = nodes.shape
    n_blocks = (n + BLOCK - 1) // BLOCK
    partial = np.zeros((n_blocks, SIZE))
    for b in numba.prange(n_blocks):
        node = np.empty(dimension)
        zi = np.empty(K)
        out = np.empty(SIZE)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            _column(nodes, i, node)
            _column(z, i, zi)
            integrand(zi, node, params, consts, out)
            for j in range(SIZE):
                partial[b, j] += weights[i] * out[j]
    return partial.sum(axis=0)


def integral_kernel(nodes, weights, params, consts):  # pragma: no cover - compiled
    """``sum_i w_i integrand(n_i)`` -> ``(SIZE,)`` (an integrand without the prox), summed per block."""
    dimension, n = nodes.shape
    n_blocks = (n + BLOCK - 1) // BLOCK
    partial = np.zeros((n_blocks, SIZE))
    for b in numba.prange(n_blocks):
        node = np.empty(dimension)
        out = np.empty(SIZE)
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            _column(nodes, i, node)
            integrand(node, params, consts, out)
            for j in range(SIZE):
                partial[b, j] += weights[i] * out[j]
    return partial.sum(axis=0)


def jacobian_kernel(z, nodes, weights, params, consts):  # pragma: no cover - compiled
    """``sum_i w_i d f_X / dY`` at the prox ``z`` -> ``(P*P,)`` row-major: the integrands' explicit
    derivative less their slope in ``z`` times the prox's sensitivity ``H^-1 d^2M/dz dY`` (implicit
    function theorem; :func:`pieces`), summed per block of ``BLOCK`` nodes."""
    dimension, n = nodes.shape
    n_blocks = (n + BLOCK - 1) // BLOCK
    partial = np.zeros((n_blocks, P * P))
    along, mixed, hessian = P * P, P * P + P * K, P * P + 2 * P * K
    for b in numba.prange(n_blocks):
        node = np.empty(dimension)
        zi = np.empty(K)
        out = np.empty(P * P + 2 * P * K + K * K)
        h = np.empty((K, K))
        sensitivity = np.empty((K, P))
        for i in range(b * BLOCK, min(n, (b + 1) * BLOCK)):
            _column(nodes, i, node)
            _column(z, i, zi)
            pieces(zi, node, params, consts, out)
            for j in range(K):
                for k in range(K):
                    h[j, k] = out[hessian + j * K + k]
                for y in range(P):
                    sensitivity[j, y] = out[mixed + j * P + y]
            _solve_in_place(h, sensitivity, K, P)
            for x in range(P):
                for y in range(P):
                    value = out[x * P + y]
                    for j in range(K):
                        value -= out[along + x * K + j] * sensitivity[j, y]
                    partial[b, x * P + y] += weights[i] * value
    return partial.sum(axis=0)


#: Templates every generated module holds as they are, in dependency order: the helpers, then the prox.
SHARED_TEMPLATES = (
    _max_abs,
    _column,
    _dot,
    _cholesky,
    _smallest_eigenvalue,
    _newton_direction,
    _solve_in_place,
    _known_minimum,
    refine,
    prox_kernel,
)
