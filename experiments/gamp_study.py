"""GAMP on one training set beside its state evolution, and which stationary point each sample sits on.

:func:`gamp` draws the training set of one seed (as :func:`~attnphase.experiments.simulate.simulate`
does), starts GAMP (:mod:`attnphase.experiments.gamp`) at the chosen initial weights, or at the minimum
L-BFGS reaches from them (``trained``), and iterates it to a fixed point; beside it the saddle-point
map (the state evolution, App. B.3) is iterated from the same overlaps with the same damping. At the
end state it tells, per sample, whether the sample's field is the global minimiser of its envelope or
another stationary point (THEORY.md sec. 12): what decides which prox policy describes the minima
training reaches.
"""

from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure

from attnphase.experiments.finite_model import FiniteModel
from attnphase.experiments.gamp import (
    Denoiser,
    Envelopes,
    Gamp,
    GampState,
    GampTuning,
    ProxRule,
    global_starts,
    isotropic_variances,
    lowest,
    newton,
    output_response,
)
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.study import StudyResult, checked_model, progress_bar, versions
from attnphase.experiments.training import (
    SimulationSettings,
    TrainingData,
    initial_weights,
    objective_and_gradient,
    train,
    training_data,
)
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort, ProxChoice
from attnphase.saddle.settings import SolverSettings

#: Order-parameter names drawn as Greek letters in the figure's labels.
GREEK = ("theta", "mu", "rho")

#: The initial weights a run can start from (those of a simulation).
INITS = ("positional", "semantic", "random")

#: The columns of :func:`sample_classes` (empty where the end state is not finite).
CLASS_COLUMNS = (
    "sample",
    "envelope",
    "global_envelope",
    "gap",
    "distance",
    "smallest_curvature",
    "at_global",
    "descent_at_global",
)

#: The relative shrink of the rescaled ``theta`` that keeps the state evolution's start inside its domain.
INSIDE = 1e-9

#: Relative gap ``(M(z*) - M_global) / |M_global|`` below which a sample's stationary point is the global one.
GLOBAL_GAP = 1e-9


@dataclass(frozen=True)
class GampSettings:
    """One GAMP run: ``model`` at ``alpha`` and ``d``, the training set and random starts of ``seed``,
    ``init`` weights (``positional``, ``semantic`` or ``random``, as a simulation starts), from the L-BFGS
    minimum they lead to if ``trained``; ``start_scale`` multiplies an untrained start (the positional
    start has ``m = 1/sqrt(d)``; ``start_scale = m_0 sqrt(d)`` starts every d at the same ``m_0``, so the
    state evolution's path does not depend on d); ``rule`` picks each sample's stationary point; at most
    ``iterations`` steps, stopped once ``|Q_t+1 - Q_t| / |Q_t|`` is below ``tolerance``."""

    model: AttentionModel
    alpha: float = 1.5
    d: int = 500
    init: str = "semantic"
    trained: bool = False
    rule: ProxRule = ProxRule.GLOBAL
    seed: int = 0
    iterations: int = 200
    tolerance: float = 1e-7
    tuning: GampTuning = field(default_factory=GampTuning)
    state_evolution: bool = True
    start_scale: float = 1.0

    def __post_init__(self) -> None:
        if self.init not in INITS:
            raise ValueError(f"init: {self.init!r} is not one of {', '.join(INITS)}")
        if not self.start_scale > 0:
            raise ValueError(f"start_scale: {self.start_scale} is not positive")
        if not 1 <= self.iterations <= 100_000:
            raise ValueError(f"iterations: {self.iterations} is not an integer in [1, 100000]")
        if not self.tolerance > 0:
            raise ValueError(f"tolerance: {self.tolerance} is not positive")

    def simulation(self) -> SimulationSettings:
        """The simulation settings whose training set and starts this run uses."""
        return SimulationSettings.of_model(
            self.model, d=self.d, alphas=(self.alpha,), seeds=(self.seed,), inits=(self.init,), optimiser="lbfgs"
        ).validate()

    def as_dict(self) -> dict[str, object]:
        """The settings as JSON-ready values (the model by its repr)."""
        values = {k: v for k, v in asdict(self).items() if k not in ("model", "tuning")}
        return values | {"rule": str(self.rule), "tuning": asdict(self.tuning), "model": repr(self.model)}


def response_parameters(finite: FiniteModel, s: torch.Tensor) -> dict[str, float]:
    """The declaration's response ``V`` entries of GAMP's input variances ``s (d, r, r)``:
    ``V_c = sum_i (Sigma_c)_ii s_i / d`` per covariance class, as ``q_c = Q^T Sigma_c Q / d``."""
    basis = finite.model.independent_classes()
    values = {}
    for entry in finite.model.reduced_parameters().entries:
        if entry.family == "V":
            i, j = entry.entry
            values[entry.name] = float(finite.class_variances[basis[entry.group]] @ s[:, i, j] / finite.d)
    return values


class VarianceMap:
    """At a stationary point ``q`` of the training loss, the input variances ``s -> denoiser'(A(s))`` with
    every sample's ``z* = F Q`` and ``g`` the negative loss gradient there (App. B.4 read backwards):
    ``A(s) = -sum_mu F^T dg F``, ``dg = P (K + P)^{-1} P - P`` with ``P = V(s)^{-1}`` and ``K`` the loss's
    Hessian at ``z*``. A sample with ``K`` not positive definite turns ``K + P`` singular as ``V`` grows:
    :meth:`smallest_curvature` says how far from that ``s`` is."""

    def __init__(self, gamp: Gamp, q: torch.Tensor) -> None:
        self.gamp, self.q = gamp, q
        self.h = gamp.fields(q)
        _, self.grad, self.hess = gamp.losses.derivatives(self.h, torch.arange(self.h.shape[0]))

    def curvature_and_derivative(self, s: torch.Tensor) -> tuple[float, torch.Tensor]:
        """The smallest eigenvalue of ``K + P`` over samples, and ``dg`` at ``s``."""
        p = torch.linalg.inv(self.gamp.variances(s))
        envelope_hessian = self.hess + p
        return float(torch.linalg.eigvalsh(envelope_hessian)[:, 0].min()), output_response(p, envelope_hessian)

    def __call__(self, s: torch.Tensor) -> tuple[torch.Tensor, float, torch.Tensor]:
        """The denoiser's variances at ``A(s)``, the smallest envelope curvature and ``dg`` at ``s``."""
        curvature, dg = self.curvature_and_derivative(s)
        return self.gamp.input(-self.grad, dg, self.q)[1], curvature, dg

    def state(self, s: torch.Tensor, dg: torch.Tensor) -> GampState:
        """GAMP's state at ``q`` with variances ``s``: ``z* = F Q``, ``g = -grad l``."""
        return GampState(self.q, s, self.q, -self.grad, dg, self.h)


def uniform_root(variances: VarianceMap, d: int, r: int, steps: int = 200) -> torch.Tensor | None:
    """The smallest ``v`` with ``mean denoiser'(A(v I)) = v`` on the branch that starts at ``v -> 0`` (where
    every envelope is convex at ``z*``), by a geometric scan and bisection; ``None`` if the envelopes of
    some samples stop being convex at ``z*`` before it."""

    def excess(v: float) -> tuple[float, float]:
        new, curvature, _ = variances(isotropic_variances(d, r, v, variances.q.dtype))
        return float(new.diagonal(dim1=-2, dim2=-1).mean()) - v, curvature

    low, high = 1e-3, None
    for _ in range(steps):
        trial = low * 1.25
        gap, curvature = excess(trial)
        if curvature <= 0:
            return None
        if gap < 0:
            high = trial
            break
        low = trial
    if high is None:
        return None
    for _ in range(60):
        middle = 0.5 * (low + high)
        gap, curvature = excess(middle)
        low, high = (middle, high) if gap > 0 and curvature > 0 else (low, middle)
    return isotropic_variances(d, r, high, variances.q.dtype)


def teacher_normalised_overlaps(finite: FiniteModel, q: torch.Tensor, teacher: torch.Tensor) -> dict[str, float]:
    """The overlaps of ``q`` with ``teacher``'s columns rescaled to the theory's norm: ``theta`` of teacher
    column ``i`` in class ``c`` times ``sqrt(rho_c / rho_c,d)``, ``rho_c = mean_i (Sigma_c)_ii`` and
    ``rho_c,d = Q*_i^T Sigma_c Q*_i / d`` (the finite teacher's own). At finite ``d`` the measured
    ``theta^2 / q`` may exceed the theory's ``rho``, outside the map's domain; the rescaled overlaps,
    moved :data:`INSIDE` inwards (the semantic start ``Q = Q*`` is the domain's boundary), are the
    theory's start nearest to GAMP's."""
    values = finite.order_parameters(q, teacher)
    basis = finite.model.independent_classes()
    for entry in finite.model.reduced_parameters().entries:
        if entry.family == "theta":
            variances = finite.class_variances[basis[entry.group]]
            column = teacher[:, entry.entry[0]]
            measured = float(column @ (variances * column)) / finite.d
            values[entry.name] *= math.sqrt(float(variances.mean()) / measured) * (1 - INSIDE)
    return values


def theory_parameters(finite: FiniteModel, state: GampState, teacher: torch.Tensor) -> dict[str, float]:
    """GAMP's ``state`` as the theory's order parameters: its :func:`teacher_normalised_overlaps` and the
    :func:`response_parameters` of its input variances."""
    return teacher_normalised_overlaps(finite, state.q, teacher) | response_parameters(finite, state.s)


def consistent_state(
    gamp: Gamp, q: torch.Tensor, sweeps: int = 500, tolerance: float = 1e-10
) -> tuple[GampState, bool]:
    """GAMP's state at a stationary point ``q`` of the training loss (:class:`VarianceMap`): the uniform
    variances of :func:`uniform_root`, refined coordinate by coordinate by the averaged iteration of the
    map while every envelope stays convex at ``z*``; and whether the per-coordinate fixed point was reached
    to ``tolerance``. Without a uniform root, the variances ``I`` and ``False``."""
    d, r = q.shape
    variances = VarianceMap(gamp, q)
    root = uniform_root(variances, d, r)
    if root is None:
        start = isotropic_variances(d, r, 1.0, q.dtype)
        return variances.state(start, variances.curvature_and_derivative(start)[1]), False
    s = root
    for _ in range(sweeps):
        new, curvature, dg = variances(s)
        change = float((new - s).abs().max() / s.abs().max())
        if curvature <= 0 or not math.isfinite(change):
            break
        if change < tolerance:
            return variances.state(s, dg), True
        s = 0.5 * (new + s)
    return variances.state(root, variances.curvature_and_derivative(root)[1]), False


def field_envelopes(gamp: Gamp, state: GampState) -> tuple[Envelopes, torch.Tensor]:
    """Every sample's envelope for which its field ``h = F Q`` at ``state`` is a stationary point (``V`` from
    ``state``'s variances, ``omega = h + V grad l(h)``, as at a fixed point), and the fields."""
    h = gamp.fields(state.q)
    samples = torch.arange(h.shape[0])
    _, grad, _ = gamp.losses.derivatives(h, samples)
    v = gamp.variances(state.s)
    return Envelopes(gamp.losses, h + torch.einsum("nab,nb->na", v, grad), torch.linalg.inv(v), samples), h


def sample_classes(gamp: Gamp, state: GampState) -> pd.DataFrame:
    """Per sample at ``state``: the envelope of which its field is a stationary point
    (:func:`field_envelopes`) at the field and at the global rule's minimiser, their relative gap, the
    distance between the two, the smallest Hessian eigenvalue at the field, whether the field is the
    global minimiser (:data:`GLOBAL_GAP`) and whether the descent from the cavity mean (the local rule)
    reaches the global minimiser there (``descent_at_global``)."""
    envelopes, z = field_envelopes(gamp, state)
    value, _, hess = envelopes.derivatives(z)
    starts = torch.cat([z, global_starts(envelopes, None, gamp.directions)])
    count = starts.shape[0] // z.shape[0]
    best = lowest(newton(envelopes.repeated(count), starts, gamp.tuning), count)
    scale = best.value.abs().clamp(min=1e-300)
    gap = (value - best.value) / scale
    descent = newton(envelopes, envelopes.omega, gamp.tuning)
    return pd.DataFrame(
        {
            "sample": np.arange(z.shape[0]),
            "envelope": value.numpy(),
            "global_envelope": best.value.numpy(),
            "gap": gap.numpy(),
            "distance": (z - best.z).norm(dim=-1).numpy(),
            "smallest_curvature": torch.linalg.eigvalsh(hess)[:, 0].numpy(),
            "at_global": (gap <= GLOBAL_GAP).numpy(),
            "descent_at_global": ((descent.value - best.value) / scale <= GLOBAL_GAP).numpy(),
        }
    )


def start_and_minimum(
    settings: GampSettings, data: TrainingData, simulation: SimulationSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    """GAMP's start (the ``init`` weights times ``start_scale``, or the minimum if ``trained``) and the
    L-BFGS minimum the ``init`` weights lead to on the same training set."""
    q0 = initial_weights(settings.init, [settings.seed], data, simulation)
    minimum = train(q0, data, simulation).q[0]
    return (minimum if settings.trained else settings.start_scale * q0[0]), minimum


def gram_overlap(q: torch.Tensor, other: torch.Tensor) -> float:
    """``<Q Q^T, P P^T>_F / (|Q Q^T|_F |P P^T|_F) = |Q^T P|_F^2 / (|Q^T Q|_F |P^T P|_F)``: the cosine of
    the students' Gram matrices, which the loss sees (invariant under ``Q -> Q O`` for orthogonal ``O``)."""
    cross = float((q.T @ other).square().sum())
    return cross / float((q.T @ q).norm() * (other.T @ other).norm())


def _row(iteration: int, source: str, values: dict[str, float]) -> dict[str, object]:
    return {"iteration": iteration, "source": source} | values


def gamp_on_training_set(settings: GampSettings) -> tuple[Gamp, TrainingData, SimulationSettings]:
    """GAMP on the training set of ``settings`` (its seed's, as a simulation draws it), with the
    declaration's regulariser as denoiser, beside that training set and the simulation settings."""
    simulation = settings.simulation()
    data = training_data(settings.alpha, [settings.seed], simulation)
    finite = simulation.finite
    l1, l2 = settings.model.regulariser.separable_weights()
    gamp = Gamp(data, finite, Denoiser(l1, l2, finite.rank), settings.rule, settings.tuning, settings.seed)
    return gamp, data, simulation


def run_gamp(settings: GampSettings, progress: bool | None = False) -> tuple[pd.DataFrame, pd.DataFrame, dict]:
    """GAMP's iterations (one row each: overlaps, ``V``, relative step, training loss ``eps_t = E/d``, its
    gradient norm, samples whose Newton did not converge), the per-sample classes at the end state and a
    summary (:func:`gamp`)."""
    gamp, data, simulation = gamp_on_training_set(settings)
    finite = simulation.finite
    q0, minimum = start_and_minimum(settings, data, simulation)
    state, consistent = consistent_state(gamp, q0) if settings.trained else (gamp.start(q0, 1.0), True)
    teacher = data.teachers[0]

    def measured(state: GampState, step: float, unconverged: int) -> dict[str, float]:
        loss, grad = objective_and_gradient(state.q[None], data, simulation)
        overlaps = finite.order_parameters(state.q, teacher) | response_parameters(finite, state.s)
        return overlaps | {
            "step": step,
            "eps_t": float(loss[0]) / settings.d,
            "gradient_norm": float(grad.norm()),
            "prox_unconverged": unconverged,
        }

    rows = [_row(0, "gamp", measured(state, math.nan, 0))]
    start_state = state
    converged = False
    with progress_bar(settings.iterations, "gamp", "step", progress) as bar:
        for t in range(1, settings.iterations + 1):
            new, found = gamp.step(state)
            step = float((new.q - state.q).norm() / state.q.norm().clamp(min=1e-300))
            state = new
            rows.append(_row(t, "gamp", measured(state, step, int((~found.converged).sum()))))
            bar.update(1)
            if not math.isfinite(step):
                break
            if step < settings.tolerance:
                converged = True
                break
    finite_end = bool(torch.isfinite(state.q).all() and torch.isfinite(state.s).all())
    classes = sample_classes(gamp, state) if finite_end else pd.DataFrame(columns=list(CLASS_COLUMNS))
    iterations = pd.DataFrame(rows)
    if settings.state_evolution:
        start = theory_parameters(finite, start_state, teacher)
        iterations = pd.concat([iterations, state_evolution(settings, start, len(rows) - 1)])
    summary = {
        "converged": converged,
        "start_variances_consistent": consistent,
        "iterations": len(rows) - 1,
        "final_step": rows[-1]["step"],
        "gradient_norm": rows[-1]["gradient_norm"],
        "at_global": float(classes["at_global"].mean()) if finite_end else None,
        "descent_at_global": float(classes["descent_at_global"].mean()) if finite_end else None,
        "training_minimum_overlap": gram_overlap(state.q, minimum) if finite_end else None,
        "training_minimum": finite.order_parameters(minimum, teacher),
        "start_at_global": float(sample_classes(gamp, start_state)["at_global"].mean()) if settings.trained else None,
    }
    return iterations.reset_index(drop=True), classes, summary


def state_evolution(settings: GampSettings, start: dict[str, float], steps: int) -> pd.DataFrame:
    """The saddle-point map iterated ``steps`` times from ``start`` (GAMP's initial order parameters under
    the theory's names, :func:`theory_parameters`), each step moved by GAMP's damping fraction
    towards the map's value; under the theory's local policy where GAMP takes the local rule, else the
    global one (THEORY.md sec. 12)."""
    policy = ProxChoice.LOCAL if settings.rule is ProxRule.LOCAL else ProxChoice.GLOBAL
    solver = make_solver(settings.model, SolverSettings(prox=policy))
    names = solver.problem.compiled.names
    params = np.array([float(start[name]) for name in names])
    beta = settings.tuning.damping
    rows = [_row(0, "state_evolution", dict(zip(names, params, strict=True)))]
    for t in range(1, steps + 1):
        updated = solver.problem.map.evaluate(params, settings.alpha, Effort.FULL).updated
        new = beta * updated + (1 - beta) * params
        step = float(np.linalg.norm(new - params) / max(np.linalg.norm(params), 1e-300))
        params = new
        rows.append(_row(t, "state_evolution", dict(zip(names, params, strict=True)) | {"step": step}))
    return pd.DataFrame(rows)


def gamp_figure(iterations: pd.DataFrame, names: tuple[str, ...]) -> Figure:
    """The overlaps per iteration (GAMP markers, the state evolution lines) and GAMP's relative step and
    training-loss gradient on a log scale."""
    fig = Figure(figsize=(9, 4.4), layout="constrained")
    left, right = fig.subplots(1, 2)
    gamp_rows = iterations[iterations["source"] == "gamp"]
    se_rows = iterations[iterations["source"] == "state_evolution"]
    for i, name in enumerate(names):
        colour = f"C{i}"
        symbol = "\\" + name if name.split("_")[0] in GREEK else name
        left.plot(gamp_rows["iteration"], gamp_rows[name], "o", ms=3, color=colour, label=f"${symbol}$ GAMP")
        if len(se_rows):
            left.plot(se_rows["iteration"], se_rows[name], "-", color=colour, label=f"${symbol}$ state evolution")
    left.set_xlabel("iteration $t$")
    left.set_ylabel("overlap")
    left.legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    right.semilogy(gamp_rows["iteration"], gamp_rows["step"], label=r"$|Q_{t} - Q_{t-1}| / |Q_{t-1}|$")
    right.semilogy(gamp_rows["iteration"], gamp_rows["gradient_norm"], label=r"$|\nabla E(Q_t)|$")
    right.set_xlabel("iteration $t$")
    right.legend(fontsize=7)
    return fig


@dataclass(frozen=True, eq=False)
class GampResult(StudyResult):
    """The outcome of :func:`gamp`: ``iterations`` (GAMP's and the state evolution's, column ``source``),
    ``samples`` (per sample at the end state, :func:`sample_classes`) and the ``outcome``: convergence,
    steps, the last step and gradient, the share of samples at their envelope's global minimiser (at the
    end state and, if ``trained``, at the L-BFGS minimum)."""

    settings: GampSettings
    iterations: pd.DataFrame
    samples: pd.DataFrame
    outcome: dict[str, object]
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "gamp"
    table_names = ("gamp_iterations", "gamp_samples")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"gamp_iterations": self.iterations, "gamp_samples": self.samples}

    @property
    def record(self) -> dict[str, object]:
        return {
            "settings": self.settings.as_dict(),
            "status": "complete",
            "outcome": self.outcome,
            "seconds": round(self.seconds, 2),
            "versions": self.provenance,
        }

    def plot(self) -> Figure:
        """Overlaps per iteration and the convergence of GAMP."""
        measured = FiniteModel(self.settings.model, self.settings.d).measured_names()
        return gamp_figure(self.iterations, measured)

    def summary(self) -> str:
        """One line: convergence, the last step and gradient, the share of samples at the global minimiser."""
        o = self.outcome
        state = "converged" if o["converged"] else "not converged"
        return (
            f"GAMP {state} after {o['iterations']} steps (step {o['final_step']:.1e}, gradient "
            f"{o['gradient_norm']:.1e}); samples at their envelope's global minimiser: "
            + ("none classified (non-finite end state)" if o["at_global"] is None else f"{o['at_global']:.1%}")
        )


def gamp(
    model: AttentionModel,
    alpha: float = 1.5,
    *,
    d: int = 500,
    init: str = "semantic",
    trained: bool = False,
    prox: str | ProxRule = ProxRule.GLOBAL,
    seed: int = 0,
    iterations: int = 200,
    tolerance: float = 1e-7,
    damping: float = 0.2,
    state_evolution: bool = True,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> GampResult:
    """GAMP on the training set of ``seed`` of ``model`` at ``alpha`` and ``d`` (module docstring), from the
    ``init`` weights or, if ``trained``, the L-BFGS minimum they lead to; ``prox`` the rule for each
    sample's stationary point (``global``, ``local``: descent from the cavity mean at every step, as the
    theory's local policy, or ``followed``: from the last step's); ``damping`` the fraction of each update taken.
    With ``out``, the directory is locked for the call, files of a run with other settings are refused
    unless ``overwrite``, and the tables, figure and ``run.json`` are written there."""
    model = checked_model(model)
    if str(prox) not in tuple(ProxRule):
        raise ValueError(f"prox: {prox!r} is not one of {', '.join(ProxRule)}")
    tuning = replace(GampTuning(), damping=float(damping))
    settings = GampSettings(
        model,
        float(alpha),
        int(d),
        init,
        bool(trained),
        ProxRule(prox),
        int(seed),
        int(iterations),
        float(tolerance),
        tuning,
        bool(state_evolution),
    )
    with RunContext(out, {"settings": settings.as_dict()}, GampResult.outputs(), overwrite) as run:
        run.resume()
        started = time.perf_counter()
        iterations_table, samples, summary = run_gamp(settings, progress)
        result = GampResult(settings, iterations_table, samples, summary, time.perf_counter() - started)
        run.save(result)
    return result
