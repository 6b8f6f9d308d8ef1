"""Generalised approximate message passing on one training set (paper App. B.2, THEORY.md sec. 10, 12).

The training loss of a declaration is a multi-output generalised linear model: sample ``mu`` enters
only through its fields ``h_mu = F_mu Q`` (``F_mu = x_mu / sqrt(d)``, ``L x d``), with the exact finite-d
per-sample loss ``l_mu(h) = [c0 - 2 <B, S(h)> + <S(h) G_xx, S(h)>] / (2d)`` of
:func:`~attnphase.experiments.training.objective` and the regulariser ``sum_i g(Q_i)``. One iteration,
with ``k = L r`` output coordinates per sample and an ``r x r`` variance per input coordinate ``i``:

* output: ``V_mu = sum_i F_mu,.i F_mu,.i^T (x) s_i`` (``k x k``), ``omega_mu = F_mu Q - V_mu g_mu`` (the
  Onsager term uses the last ``g``), ``z*_mu`` a stationary point of the envelope
  ``M_mu(z) = (z - omega)^T V^{-1} (z - omega) / 2 + l_mu(z)`` (:class:`ProxRule`),
  ``g_mu = V^{-1} (z* - omega)`` and ``dg_mu = V^{-1} H^{-1} V^{-1} - V^{-1}`` (``H`` the Hessian of ``M_mu``);
* input: ``A_i = - sum_mu F_mu,.i^T dg_mu F_mu,.i``, ``b_i = sum_mu F_mu,.i^T g_mu + A_i Q_i`` and the
  regulariser's denoiser ``Q_i = argmin_w g(w) + w^T A_i w / 2 - b_i^T w`` with its derivative ``s_i``;
  ``g``, ``dg`` and the centre ``Q`` of ``b`` are damped (:meth:`Gamp.step`).

At a fixed point ``z*_mu = F_mu Q`` and ``l2 Q = sum_mu F_mu^T g_mu = - sum_mu F_mu^T grad l_mu``: the
gradient of the training loss vanishes whichever stationary point each sample's envelope takes
(App. B.4), exactly at every ``d``. Its state evolution is the saddle-point map (App. B.3).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

import torch

from attnphase.experiments.finite_model import FiniteModel
from attnphase.experiments.training import TrainingData

#: A predicted decrease of ``M`` below which its rounding (about ``1e-16`` of the loss's O(1) Gram terms)
#: hides the change: the line search then takes the full Newton step.
RESOLVED_DECREASE = 1e-13


class ProxRule(enum.StrEnum):
    """Which stationary point of each sample's envelope an output step takes (THEORY.md sec. 12)."""

    GLOBAL = "global"  # the lowest of Newton from omega, 0, the last z* and shifted starts: the theory's rule
    FOLLOWED = "followed"  # Newton from the sample's last z* (from omega at the first step): a local rule
    LOCAL = "local"  # Newton from the sample's cavity mean omega at every step: the theory's local policy


@dataclass(frozen=True)
class GampTuning:
    """The numerical knobs of GAMP: ``damping`` (weight of the new ``g``, ``dg`` and input centre), the Newton gradient
    ``prox_tolerance`` and ``prox_iterations``, the ``directions`` of the global rule's shifted starts,
    and the smallest eigenvalue ``floor`` Newton's Hessian is shifted to."""

    damping: float = 0.2
    prox_tolerance: float = 1e-9
    prox_iterations: int = 100
    directions: int = 4
    floor: float = 1e-8

    def __post_init__(self) -> None:
        if not 0.0 < self.damping <= 1.0:
            raise ValueError(f"damping: {self.damping} is not in (0, 1]")


class SampleLosses:
    """The per-sample losses ``l_mu(z)`` of one run's training set (``data`` of one seed), their gradients
    and Hessians in the flattened ``k = L r`` coordinates, by reverse-mode differentiation; ``samples``
    says whose loss each row of ``z`` is."""

    def __init__(self, data: TrainingData, model: FiniteModel) -> None:
        self.c0, self.b, self.g_xx = data.c0[0], data.b[0], data.g_xx[0]
        self.model, self.d = model, model.d
        self.shape = (model.length, model.rank)

    def value(self, z: torch.Tensor, samples: torch.Tensor) -> torch.Tensor:
        """``l_mu`` at ``z (N, k)`` for the samples ``samples (N,)``: ``(N,)``."""
        s = self.model.student_attention(z.reshape(-1, *self.shape))
        b, g_xx = self.b[samples], self.g_xx[samples]
        per_sample = self.c0[samples] - 2 * (b * s).sum((-1, -2)) + ((s @ g_xx) * s).sum((-1, -2))
        return per_sample / (2 * self.d)

    def derivatives(self, z: torch.Tensor, samples: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``l_mu``, its gradient ``(N, k)`` and Hessian ``(N, k, k)`` at ``z (N, k)`` (each row's loss
        depends on its own ``z`` alone, so the derivatives of the sum are the per-row ones)."""
        z = z.detach().requires_grad_(True)
        with torch.enable_grad():
            value = self.value(z, samples)
            (grad,) = torch.autograd.grad(value.sum(), z, create_graph=True)
            rows = [torch.autograd.grad(grad[:, j].sum(), z, retain_graph=True)[0] for j in range(z.shape[1])]
        return value.detach(), grad.detach(), torch.stack(rows, dim=1).detach()


@dataclass
class Envelopes:
    """The envelopes ``M(z) = (z - omega)^T P (z - omega) / 2 + l_mu(z)`` of the samples ``samples``
    (``P = V^{-1}``), one per row."""

    losses: SampleLosses
    omega: torch.Tensor  # (N, k)
    precision: torch.Tensor  # (N, k, k)
    samples: torch.Tensor  # (N,)

    def rows(self, chosen: torch.Tensor) -> Envelopes:
        """The envelopes of the rows ``chosen``."""
        return Envelopes(self.losses, self.omega[chosen], self.precision[chosen], self.samples[chosen])

    def repeated(self, times: int) -> Envelopes:
        """These envelopes ``times`` over, stacked (one block per start)."""
        return Envelopes(
            self.losses, self.omega.repeat(times, 1), self.precision.repeat(times, 1, 1), self.samples.repeat(times)
        )

    def value(self, z: torch.Tensor) -> torch.Tensor:
        """``M`` at ``z (N, k)``."""
        shift = z - self.omega
        return self.losses.value(z, self.samples) + 0.5 * torch.einsum("na,nab,nb->n", shift, self.precision, shift)

    def derivatives(self, z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """``M``, its gradient and Hessian at ``z (N, k)``."""
        value, grad, hess = self.losses.derivatives(z, self.samples)
        shift = z - self.omega
        pull = torch.einsum("nab,nb->na", self.precision, shift)
        return value + 0.5 * (shift * pull).sum(-1), grad + pull, hess + self.precision


@dataclass
class ProxFound:
    """The stationary point ``z (N, k)`` each row's Newton reached, ``M`` there, the Hessian of ``M``
    there and whether its gradient met the tolerance."""

    z: torch.Tensor
    value: torch.Tensor
    hessian: torch.Tensor
    converged: torch.Tensor


def output_response(precision: torch.Tensor, hessian: torch.Tensor) -> torch.Tensor:
    """``dg/domega = P H^{-1} P - P`` per row, ``P = V^{-1}`` and ``H`` the envelope's Hessian at ``z*``
    (the implicit function theorem on ``grad M(z*) = 0``)."""
    return precision @ torch.linalg.solve(hessian, precision) - precision


def isotropic_variances(d: int, r: int, variance: float, dtype: torch.dtype) -> torch.Tensor:
    """The input variances ``variance I_r`` at each of ``d`` coordinates: ``(d, r, r)``."""
    return variance * torch.eye(r, dtype=dtype).expand(d, r, r).clone()


def newton_direction(hess: torch.Tensor, grad: torch.Tensor, floor: float) -> torch.Tensor:
    """``-(H + c I)^{-1} grad`` with the shift ``c >= 0`` that lifts the smallest eigenvalue of ``H`` to ``floor``."""
    shift = torch.clamp(floor - torch.linalg.eigvalsh(hess)[:, 0], min=0.0)
    eye = torch.eye(hess.shape[-1], dtype=hess.dtype)
    return -torch.linalg.solve(hess + shift[:, None, None] * eye, grad)


def backtracked(
    envelopes: Envelopes, z: torch.Tensor, value: torch.Tensor, step: torch.Tensor, grad: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``z + t step`` with the largest ``t = 2^-j`` (``j < 40``) that meets Armijo's condition per row, and
    whether one did (a row where none does stays). Where the predicted decrease ``-grad . step`` is below
    :data:`RESOLVED_DECREASE`, ``M``'s rounding hides it, and the full Newton step is taken: near a minimum
    only the gradient still resolves it."""
    scale = torch.ones_like(value)
    slope = (grad * step).sum(-1)
    unresolved = -slope < RESOLVED_DECREASE
    worse = torch.zeros_like(unresolved)
    for _ in range(40):
        worse = ~unresolved & (envelopes.value(z + scale[:, None] * step) > value + 1e-4 * scale * slope)
        if not bool(worse.any()):
            break
        scale = torch.where(worse, scale / 2, scale)
    return torch.where(worse[:, None], z, z + scale[:, None] * step), ~worse


def newton(envelopes: Envelopes, start: torch.Tensor, tuning: GampTuning) -> ProxFound:
    """Newton's method on every row's envelope from ``start (N, k)``: the Hessian shifted to a smallest
    eigenvalue of at least ``tuning.floor`` and an Armijo backtracking line search, so each row descends
    ``M`` into the basin its start lies in (the prox kernel's method, THEORY.md sec. 3); rows stop one by
    one as their gradient meets ``tuning.prox_tolerance`` or no step lowers ``M`` any more."""
    z = start.clone()
    value, grad, hess = envelopes.derivatives(z)
    active = torch.arange(z.shape[0])
    for _ in range(tuning.prox_iterations):
        moving = grad[active].norm(dim=-1) > tuning.prox_tolerance
        active = active[moving]
        if not active.numel():
            break
        rows = envelopes.rows(active)
        step = newton_direction(hess[active], grad[active], tuning.floor)
        z[active], moved = backtracked(rows, z[active], value[active], step, grad[active])
        value[active], grad[active], hess[active] = rows.derivatives(z[active])
        active = active[moved]
    return ProxFound(z, value, hess, grad.norm(dim=-1) <= tuning.prox_tolerance)


def lowest(found: ProxFound, starts: int) -> ProxFound:
    """Per sample, the converged stationary point of lowest ``M`` among the ``starts`` blocks of ``found``
    (a non-converged one only where none converged)."""
    n = found.z.shape[0] // starts
    values = torch.where(found.converged, found.value, found.value + math.inf).reshape(starts, n)
    fallback = found.value.reshape(starts, n).argmin(0)
    best = torch.where(torch.isinf(values.min(0).values), fallback, values.argmin(0))
    chosen = best * n + torch.arange(n)
    return ProxFound(found.z[chosen], found.value[chosen], found.hessian[chosen], found.converged[chosen])


def global_starts(envelopes: Envelopes, last: torch.Tensor | None, directions: torch.Tensor) -> torch.Tensor:
    """The global rule's starts ``(S N, k)``: ``+-omega``, ``0``, ``+-`` the last ``z*`` and
    ``+-omega +- sqrt(|V|) u_j`` for the unit ``directions`` ``u_j`` (``|V|`` the sample's largest
    variance), closed under ``z -> -z``."""
    omega = envelopes.omega
    scale = torch.linalg.eigvalsh(torch.linalg.inv(envelopes.precision))[:, -1:].clamp(min=0.0).sqrt()
    starts = [omega, -omega, torch.zeros_like(omega)] + ([] if last is None else [last, -last])
    for u in directions:
        starts += [omega + scale * u, -omega - scale * u, omega - scale * u, -omega + scale * u]
    return torch.cat(starts)


def prox(
    envelopes: Envelopes, rule: ProxRule, last: torch.Tensor | None, directions: torch.Tensor, tuning: GampTuning
) -> ProxFound:
    """The stationary point ``rule`` takes at every sample (:class:`ProxRule`); ``last``: the last output
    step's ``z*`` (``None`` at the first)."""
    if rule is ProxRule.LOCAL:
        return newton(envelopes, envelopes.omega, tuning)
    if rule is ProxRule.FOLLOWED:
        return newton(envelopes, envelopes.omega if last is None else last, tuning)
    starts = global_starts(envelopes, last, directions)
    count = starts.shape[0] // envelopes.omega.shape[0]
    return lowest(newton(envelopes.repeated(count), starts, tuning), count)


@dataclass
class GampState:
    """GAMP's estimate ``Q (d, r)`` and input variances ``s (d, r, r)`` (the denoiser's, undamped), the
    damped estimate ``q_bar`` the input step is centred on, the damped output ``g (n, k)`` and its
    derivative ``dg (n, k, k)``, and the last stationary points ``z (n, k)`` (``None`` before the first)."""

    q: torch.Tensor
    s: torch.Tensor
    q_bar: torch.Tensor
    g: torch.Tensor
    dg: torch.Tensor
    z: torch.Tensor | None = None


class Denoiser:
    """The regulariser's input channel ``w_i = argmin g(w) + w^T A_i w / 2 - b_i^T w`` and ``dw/db``, for
    ``g(w) = l1 |w|_1 + l2 |w|^2 / 2`` (the declaration's :meth:`separable_weights`; ``l1`` at rank 1)."""

    def __init__(self, l1: float, l2: float, rank: int) -> None:
        if l1 > 0 and rank > 1:
            raise ValueError(f"regulariser: GAMP's l1 denoiser is scalar; the student has rank {rank}")
        self.l1, self.l2 = l1, l2

    def __call__(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(w (d, r), s (d, r, r))`` at ``A (d, r, r)`` and ``b (d, r)``."""
        eye = torch.eye(a.shape[-1], dtype=a.dtype)
        s = torch.linalg.inv(self.l2 * eye + a)
        if self.l1 == 0:
            return torch.einsum("iab,ib->ia", s, b), s
        active = (b.abs() > self.l1).to(b.dtype)
        shrunk = torch.sign(b) * (b.abs() - self.l1) * active
        return torch.einsum("iab,ib->ia", s, shrunk), s * active[:, :, None]


class Gamp:
    """GAMP on the training set ``data`` (one seed) of ``model`` (module docstring): ``rule`` picks the
    stationary point of each sample's envelope, ``denoiser`` is the regulariser's input channel."""

    def __init__(
        self, data: TrainingData, model: FiniteModel, denoiser: Denoiser, rule: ProxRule, tuning: GampTuning, seed: int
    ) -> None:
        self.losses = SampleLosses(data, model)
        self.f = data.x[0].reshape(data.n, model.length, model.d) / math.sqrt(model.d)  # (n, L, d)
        self.model, self.denoiser, self.rule, self.tuning = model, denoiser, rule, tuning
        k = model.length * model.rank
        generator = torch.Generator().manual_seed(seed)
        u = torch.randn((tuning.directions, k), generator=generator, dtype=self.f.dtype)
        self.directions = u / u.norm(dim=-1, keepdim=True)

    def fields(self, q: torch.Tensor) -> torch.Tensor:
        """``F_mu Q`` for every sample, flattened: ``(n, k)``."""
        return torch.einsum("nli,ia->nla", self.f, q).reshape(self.f.shape[0], -1)

    def variances(self, s: torch.Tensor) -> torch.Tensor:
        """``V_mu = sum_i F_mu,.i F_mu,.i^T (x) s_i``: ``(n, k, k)``."""
        n, length, r = self.f.shape[0], self.f.shape[1], s.shape[-1]
        v = torch.einsum("nli,nmi,iab->nlamb", self.f, self.f, s)
        return v.reshape(n, length * r, length * r)

    def envelopes(self, state: GampState) -> Envelopes:
        """Every sample's envelope at ``state`` (the Onsager-corrected ``omega``)."""
        v = self.variances(state.s)
        omega = self.fields(state.q) - torch.einsum("nab,nb->na", v, state.g)
        return Envelopes(self.losses, omega, torch.linalg.inv(v), torch.arange(omega.shape[0]))

    def output(self, state: GampState) -> tuple[ProxFound, Envelopes]:
        """The output step's stationary points and the envelopes they are of."""
        envelopes = self.envelopes(state)
        return prox(envelopes, self.rule, state.z, self.directions, self.tuning), envelopes

    def step(self, state: GampState) -> tuple[GampState, ProxFound]:
        """One iteration from ``state`` (the damping of Vila, Schniter and Rangan, *Adaptive damping and
        mean removal for GAMP*, 2015: the output ``g, dg`` and the input centre ``q_bar`` move by the
        fraction ``damping`` towards their new values; a fixed point is undamped GAMP's): the new state and
        the output step's stationary points."""
        found, envelopes = self.output(state)
        p = envelopes.precision
        g_new = torch.einsum("nab,nb->na", p, found.z - envelopes.omega)
        dg_new = output_response(p, found.hessian)
        beta = self.tuning.damping
        g = beta * g_new + (1 - beta) * state.g
        dg = beta * dg_new + (1 - beta) * state.dg
        q_bar = beta * state.q + (1 - beta) * state.q_bar
        q, s = self.input(g, dg, q_bar)
        return GampState(q, s, q_bar, g, dg, found.z), found

    def input(self, g: torch.Tensor, dg: torch.Tensor, q_bar: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The denoiser's ``Q`` and ``s`` at ``A = -sum_mu F^T dg F`` and ``b = sum_mu F^T g + A q_bar``."""
        n, length, _ = self.f.shape
        r = q_bar.shape[1]
        a = -torch.einsum("nli,nmi,nlamb->iab", self.f, self.f, dg.reshape(n, length, r, length, r))
        b = torch.einsum("nli,nla->ia", self.f, g.reshape(n, length, r)) + torch.einsum("iab,ib->ia", a, q_bar)
        return self.denoiser(a, b)

    def start(self, q: torch.Tensor, variance: float) -> GampState:
        """The state at weights ``q (d, r)`` with input variances ``variance I`` and no output yet."""
        d, r = q.shape
        n, k = self.f.shape[0], self.f.shape[1] * r
        s = isotropic_variances(d, r, variance, q.dtype)
        zeros = torch.zeros(n, k, dtype=q.dtype)
        return GampState(q.clone(), s, q.clone(), zeros, torch.zeros(n, k, k, dtype=q.dtype))
