"""A whole scan: every branch over an alpha grid, the thresholds and the baseline.

This is the numerical core of ``attnphase scan``; it writes nothing. Points are handed to
``on_point`` as soon as they are computed (the command line writes them to disk
incrementally), and ``known`` points from an interrupted run are reused.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

from attnphase.baseline.linear import LinearBaseline, linear_baseline
from attnphase.replica.declaration import AttentionModel
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.compiled import compile_system
from attnphase.saddle.continuation import BranchTrace, PointCallback, trace_branch
from attnphase.saddle.fixed_point import (
    POSITIONAL,
    SEMANTIC,
    STANDARD_BRANCHES,
    Branch,
    FixedPoint,
    SaddlePointSolver,
    SolverSettings,
)
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.thresholds import Threshold, critical_alpha, global_minimum, linear_threshold


@dataclass(frozen=True)
class ScanSolution:
    """Every branch traced over alpha (THEORY.md sec. 6), the thresholds ``alpha_c`` and
    ``alpha_l`` and the linear baseline (sec. 7) they are measured against."""

    traces: dict[str, BranchTrace]
    alpha_c: Threshold
    alpha_l: Threshold
    baseline: LinearBaseline

    def points(self) -> list[FixedPoint]:
        """Every computed point of every branch, sorted by branch name and alpha."""
        return sorted((p for trace in self.traces.values() for p in trace.points), key=lambda p: (p.branch, p.alpha))

    def global_minimum(self) -> dict[float, FixedPoint]:
        """At every alpha, the converged point with the lowest training loss (THEORY.md sec. 5)."""
        return global_minimum(list(self.traces.values()))


def make_solver(model: AttentionModel, settings: SolverSettings | None = None) -> SaddlePointSolver:
    """Derive, compile (both cached) and wrap the model in a solver."""
    return SaddlePointSolver(compile_system(derive(model)), settings)


def run_scan(
    model: AttentionModel,
    alphas: Sequence[float],
    settings: SolverSettings | None = None,
    branches: Sequence[Branch] = STANDARD_BRANCHES,
    known: Iterable[FixedPoint] = (),
    on_point: PointCallback | None = None,
) -> ScanSolution:
    """Trace every branch over ``alphas``; then alpha_c (semantic vs positional training
    loss) and alpha_l (global minimum vs linear baseline test error)."""
    solver = make_solver(model, settings)
    known = list(known)
    traces = {b.name: trace_branch(solver, b, alphas, known=known, on_point=on_point) for b in branches}
    baseline = linear_baseline(solver.compiled.system)
    named = {b.name: b for b in branches}
    if POSITIONAL.name in named and SEMANTIC.name in named:
        alpha_c = critical_alpha(
            solver, (named["positional"], traces["positional"]), (named["semantic"], traces["semantic"])
        )
    else:
        alpha_c = Threshold("alpha_c", float("nan"), None, "needs the positional and semantic branches")
    alpha_l = linear_threshold(
        threshold_solver(model, solver.settings),
        [(b, traces[b.name]) for b in branches],
        baseline.test_error,
        alpha_c.value,
    )
    return ScanSolution(traces, alpha_c, alpha_l, baseline)


def threshold_solver(model: AttentionModel, settings: SolverSettings) -> SaddlePointSolver:
    """The solver on which alpha_l's root is found: the settings' ``threshold_quadrature`` if
    the scan's rule is a coarser Gauss-Hermite rule, else the scan's own. (alpha_l needs only
    the test error, so the finer solver skips the kink correction of eps_t.)"""
    rule, finer = settings.quadrature, settings.threshold_quadrature
    if finer is None or not isinstance(rule, GaussHermite) or rule.order >= finer.order:
        return make_solver(model, settings)
    return make_solver(model, replace(settings, quadrature=finer, line_correction=False))
