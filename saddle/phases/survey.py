"""A survey of every branch over an alpha grid, the changes of global minimum and the thresholds.

This is the numerical core of ``attnphase scan``; it writes nothing. Every invariant subspace of the
declaration (:mod:`saddle.geometry.branches`) is searched and continued over the grid
(:class:`~attnphase.saddle.search.tracer.BranchTracer`), its anchors found with rays from the branches
it contains (:class:`~attnphase.saddle.search.anchors.Rays`); points are handed to ``on_point`` as soon
as they are computed and every finished trace to ``on_trace`` (the command line writes both to disk), and
the traces an interrupted run finished are reused. Each branch is traced on a renewed solver
(:meth:`SaddlePointSolver.renewed`), so a trace depends only on the traces before it: a survey resumed
from the finished traces of an interrupted one computes exactly what the uninterrupted survey does.
``alpha_c`` is the change of global minimum the declaration names
(:class:`~attnphase.replica.declaration.BranchLabels`); ``alpha_l`` is measured against a reference test
error the caller supplies (the linear baseline, THEORY.md sec. 7).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial

from attnphase.replica.declaration import AttentionModel
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.compilation.compiled import compile_system
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.minimum import Transition, global_minimum, transitions
from attnphase.saddle.phases.thresholds import (
    Threshold,
    ThresholdStatus,
    critical_alpha,
    linear_threshold,
)
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, Rays, default_strategies
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import BranchTrace
from attnphase.saddle.search.tracer import BranchTracer, PointCallback
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess


@dataclass(frozen=True)
class Survey:
    """Every branch traced over alpha (THEORY.md sec. 6), the changes of global minimum, and the thresholds
    ``alpha_c`` and ``alpha_l`` (sec. 7), the latter against ``reference_error``."""

    traces: dict[str, BranchTrace]
    transitions: tuple[Transition, ...]
    alpha_c: Threshold
    alpha_l: Threshold
    reference_error: float

    def points(self) -> list[FixedPoint]:
        """Every computed point of every branch, sorted by branch name and alpha."""
        return sorted((p for trace in self.traces.values() for p in trace.points), key=lambda p: (p.branch, p.alpha))

    def global_minimum(self) -> dict[float, FixedPoint]:
        """At every alpha, the converged point with the lowest training loss (THEORY.md sec. 5)."""
        return global_minimum(list(self.traces.values()))


def make_solver(model: AttentionModel, settings: SolverSettings | None = None) -> SaddlePointSolver:
    """Derive, compile (both cached) and wrap the model in a solver."""
    settings = settings or SolverSettings()
    return SaddlePointSolver.of(compile_system(derive(model), settings.tuning.kernels), settings)


def anchor_search(solver: SaddlePointSolver, traces: Mapping[str, BranchTrace]) -> AnchorSearch:
    """The anchor search of a survey on ``solver``: its rays start from the converged points at the anchor's
    alpha of the traced branches it contains, on every sheet, lowest sheet first (past a fold a subspace
    branch has a second point at the same alpha, and the branch may be born from that one alone)."""

    def subspace_points(subspace: Branch, alpha: float) -> list[FixedPoint]:
        trace = traces.get(subspace.name)
        here = [] if trace is None else [p for p in trace.converged() if p.alpha == alpha]
        return sorted(here, key=lambda p: p.sheet)

    return AnchorSearch(solver, default_strategies(Rays(subspace_points)))


def survey(
    solver: SaddlePointSolver,
    alphas: Sequence[float],
    reference_error: float,
    traced: Mapping[str, BranchTrace] | None = None,
    on_point: PointCallback | None = None,
    on_trace: Callable[[BranchTrace], None] | None = None,
    stability: bool = True,
) -> Survey:
    """Trace every branch of the solver's model over ``alphas``, with ``stability`` every point with its
    stability (:func:`~attnphase.saddle.stability.assessment.assess`); then the changes of global minimum,
    alpha_c (the declared change, found by the training losses) and alpha_l (where the global minimum's test
    error crosses ``reference_error``). ``traced``: the finished traces of an interrupted survey of the same
    solver and alphas, reused as they are; ``on_trace``: called with every trace this call finishes."""
    model = solver.problem.model
    traced = dict(traced or {})
    traces: dict[str, BranchTrace] = {}
    for b in solver.branches:  # the most symmetric first: a branch's subspaces are traced before it
        if b.name in traced:
            traces[b.name] = traced[b.name]
            continue
        fresh = solver.renewed()
        # the stability assessment on a solver of its own: its solves leave the trace's warm prox
        # starts as they were, so a trace is the same with and without it
        finish = partial(assess, fresh.renewed()) if stability else None
        tracer = BranchTracer.on(fresh, b, anchor_search(fresh, traces), finish, on_point)
        traces[b.name] = tracer.trace(alphas)
        if on_trace is not None:
            on_trace(traces[b.name])
    solver = solver.renewed()
    named = {b.name: b for b in solver.branches}
    low, high = model.labels.critical
    if low in named and high in named:
        alpha_c = critical_alpha(solver, (named[low], traces[low]), (named[high], traces[high]))
    else:
        note = f"the model has no {low} or no {high} branch"
        alpha_c = Threshold("alpha_c", float("nan"), None, note, ThresholdStatus.ABSENT)
    alpha_l = linear_threshold(
        threshold_solver(model, solver.settings),
        [(b, traces[b.name]) for b in solver.branches],
        reference_error,
        loss_solver=solver,
    )
    return Survey(traces, transitions(list(traces.values())), alpha_c, alpha_l, reference_error)


def threshold_solver(model: AttentionModel, settings: SolverSettings) -> SaddlePointSolver:
    """The solver on which alpha_l's root is found: the settings' ``threshold_quadrature`` if the survey's
    rule is a coarser Gauss-Hermite rule, else the survey's own. (alpha_l needs only the test error, so the
    finer solver skips the kink correction of eps_t.)"""
    rule, finer = settings.quadrature, settings.threshold_quadrature
    if finer is None or not isinstance(rule, GaussHermite) or rule.order >= finer.order:
        return make_solver(model, settings)
    return make_solver(model, replace(settings, quadrature=finer, line_correction=False))
