"""A scan over alpha: every branch, the thresholds alpha_c and alpha_l, tables and a figure.

:func:`scan` is one call of the public API (``attnphase.scan``) and the whole of
``attnphase scan``: it traces the fixed-point branches of a declared model over a grid of sample
complexities (THEORY.md sec. 4-6), finds ``alpha_c`` (the change of global minimum) and ``alpha_l``
(the global minimum against the linear baseline, sec. 7), and returns a :class:`ScanResult`.
Given an output directory it also writes every point as soon as it is computed (atomically) and
records every branch whose trace is finished; a rerun with the same model and options reuses the
finished traces and traces the others again, so that it ends with exactly the tables of an
uninterrupted run.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.baseline.linear import LinearBaseline, linear_baseline
from attnphase.experiments.figures import scan_figure
from attnphase.experiments.options import ProxOption, ScanOptions
from attnphase.experiments.parsing import DEFAULT_ALPHAS, parse_alphas
from attnphase.experiments.policy_scans import PolicyScans
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.storage import RUN_FILE, CorruptResultsError, PointLog, read_json
from attnphase.experiments.study import StudyResult, checked_model, logger, progress_bar, versions
from attnphase.replica.declaration import AttentionModel, InputTypeError
from attnphase.saddle.phases.survey import Survey, make_solver, survey
from attnphase.saddle.points.checks import Assessment
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import Anchor, BranchEnd, BranchTrace, Gap


@dataclass(frozen=True, eq=False)
class ScanResult(StudyResult):
    """The outcome of :func:`scan`.

    ``branches`` (one row per alpha and branch: order parameters, conjugates, ``free_entropy``,
    ``train_loss`` = eps_t = -Phi, ``energy``, ``line_correction``, ``test_error``, ``converged``,
    ``residual``, ...) and ``thresholds`` (one row: the model's parameters, ``alpha_c``,
    ``alpha_l``, ``baseline_test_error`` and how each threshold was found) are the tables
    ``attnphase scan`` writes as ``branches.csv`` and ``thresholds.csv``.
    """

    model: AttentionModel
    alphas: np.ndarray
    options: ScanOptions
    solution: Survey
    baseline: LinearBaseline
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "scan"
    table_names = ("branches", "thresholds", "transitions")

    @property
    def points(self) -> list[FixedPoint]:
        """Every fixed point of every branch, sorted by branch and alpha."""
        return self.solution.points()

    @property
    def branches(self) -> pd.DataFrame:
        """One row per computed point (:meth:`attnphase.saddle.points.fixed_point.FixedPoint.row`)."""
        return pd.DataFrame([p.row() for p in self.points])

    @property
    def global_minimum(self) -> pd.DataFrame:
        """At every alpha, the row of the converged point with the lowest training loss (THEORY.md sec. 5)."""
        return pd.DataFrame([p.row() for p in self.solution.global_minimum().values()])

    @property
    def missing(self) -> pd.DataFrame:
        """Every requested alpha at which a branch has no row, with the reason (``alpha, branch,
        reason``): where the branch could not be continued, and the checks that failed there."""
        rows = [
            {"alpha": alpha, "branch": name, "reason": reason}
            for name, trace in self.solution.traces.items()
            for alpha, reason in trace.missing(self.alphas).items()
        ]
        return pd.DataFrame(rows, columns=["alpha", "branch", "reason"])

    @property
    def alpha_c(self) -> float:
        """Where the global minimum changes from the positional to the semantic branch (NaN if not found)."""
        return self.solution.alpha_c.value

    @property
    def alpha_l(self) -> float:
        """Above which the global minimum beats the linear baseline's test error (NaN if not found)."""
        return self.solution.alpha_l.value

    @property
    def thresholds(self) -> pd.DataFrame:
        """One row: the model's parameters; each threshold with its ``status`` (found, absent in range or
        not converged: :data:`~attnphase.saddle.phases.thresholds.FOUND` ...) and the grid alphas ``low``,
        ``high`` that bracket it (NaN if none do); the baseline's test error; how each was found."""
        s = self.solution
        row: dict[str, object] = dict(self.model.parameters())
        for threshold in (s.alpha_c, s.alpha_l):
            low, high = threshold.bracket or (float("nan"), float("nan"))
            row[threshold.name] = threshold.value
            row.update(
                {
                    f"{threshold.name}_status": threshold.status,
                    f"{threshold.name}_low": low,
                    f"{threshold.name}_high": high,
                }
            )
        row.update(
            baseline_test_error=self.baseline.test_error,
            alpha_c_note=s.alpha_c.note,
            alpha_l_note=s.alpha_l.note,
            quadrature=self.points[0].quadrature if self.points else "",
            prox=self.options.prox.value,
        )
        return pd.DataFrame([row])

    @property
    def transitions(self) -> pd.DataFrame:
        """Every change of the global minimum's branch between neighbouring alphas of the grid
        (``below``, ``above``, ``before``, ``after``: the branches at the lower and the upper alpha)."""
        rows = [asdict(t) | {"prox": self.options.prox.value} for t in self.solution.transitions]
        return pd.DataFrame(rows, columns=["below", "above", "before", "after", "prox"])

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"branches": self.branches, "thresholds": self.thresholds, "transitions": self.transitions}

    def identity(self, options: ScanOptions | None = None) -> dict[str, object]:
        """What makes this scan (or, with ``options``, the same model and grid under those) the same
        computation (:func:`scan_identity`)."""
        return scan_identity(self.model, self.alphas, options or self.options)

    @property
    def record(self) -> dict[str, object]:
        return {
            **self.identity(),
            "status": "complete",
            "seconds": round(self.seconds, 2),
            **trace_records(self.solution.traces.values()),
            "missing": self.missing.to_dict("records"),
            "versions": self.provenance,
            "seeds": {"prox": self.options.seed, "quadrature": self.options.seed, "error_check": self.options.seed},
        }

    def plot(self) -> Figure:
        """Overlaps, training loss per branch, test error of the global minimum against the
        baseline, and the training-loss gap, with alpha_c and alpha_l marked."""
        return scan_figure(self.branches, self.thresholds.iloc[0], self.model)

    def summary(self) -> str:
        """A few lines: the thresholds, the baseline, how many points converged, where branches ended, the
        largest estimated quadrature error of a training loss, the converged points whose stability could
        not be computed."""
        s = self.solution
        points = self.points
        failed = [p for p in points if not p.converged]
        lines = [
            f"alpha_c = {s.alpha_c.value:.6f}  ({s.alpha_c.note})",
            f"alpha_l = {s.alpha_l.value:.6f}  ({s.alpha_l.note})",
            f"linear baseline test error = {self.baseline.test_error:.6g}",
            f"{len(points) - len(failed)} converged fixed points, {len(failed)} flagged"
            + (f" (branch ends: {', '.join(f'{p.branch} at alpha={p.alpha:g}' for p in failed)})" if failed else ""),
        ]
        checked = [p for p in points if p.converged and np.isfinite(p.train_loss_check)]
        if checked:
            bounds = [p.train_loss_error_bound / p.train_loss for p in checked]
            worst = checked[int(np.argmax(bounds))]
            lines.append(
                f"quadrature error of eps_t below {max(bounds):.1e} relative at every checked point "
                f"(|eps_t - check| + 2 standard errors, largest for {worst.branch} at alpha={worst.alpha:g}: "
                f"{worst.quadrature} against {worst.error_check})"
            )
        unassessed = [
            p for p in points if p.converged and p.assessment not in (Assessment.ASSESSED, Assessment.NOT_ASKED)
        ]
        if unassessed:
            where = ", ".join(f"{p.branch} at alpha={p.alpha:g}" for p in unassessed)
            lines.append(f"no stability at {len(unassessed)} converged points ({where}; why: stability_status)")
        if len(self.transitions):
            changes = [f"{t.before} -> {t.after} in ({t.below:g}, {t.above:g})" for t in self.transitions.itertuples()]
            lines.append("global minimum changes: " + ", ".join(changes))
        missing = self.missing
        if len(missing):
            counts = missing.groupby("branch").size()
            lines.append(
                "no row (reasons in run.json): " + ", ".join(f"{n} alphas of the {b} branch" for b, n in counts.items())
            )
        return "\n".join(lines)


def scan_identity(model: AttentionModel, alphas: Sequence[float], options: ScanOptions) -> dict[str, object]:
    """What makes two scans the same computation (compared by value when resuming, with the package
    version the run context adds): the declaration, the alphas and the options, resolved for the model,
    the tuning in full (:meth:`ScanOptions.record`)."""
    return {"model": model.record(), "options": {"alphas": [float(a) for a in alphas], **options.record(model)}}


def trace_records(traces: Iterable[BranchTrace]) -> dict[str, dict[str, list[object]]]:
    """Where the pieces of each of ``traces`` ended, what its anchors found and the (sheet, alpha) of
    its points, by branch name, as ``run.json`` records them (``branch_ends``, ``anchors``,
    ``traced_points``): with the points' rows, all of the trace."""
    traces = list(traces)
    return {
        "branch_ends": {t.branch: [asdict(end) for end in t.ends] for t in traces},
        "anchors": {t.branch: [asdict(a) for a in t.anchors] for t in traces},
        "gaps": {t.branch: [asdict(g) for g in t.gaps] for t in traces},
        "traced_points": {t.branch: [[p.sheet, p.alpha] for p in t.points] for t in traces},
    }


def restored_traces(run_file: Path, points: Sequence[FixedPoint]) -> dict[str, BranchTrace]:
    """The traces that ``run_file`` records as finished (:func:`trace_records`), each with its
    ``points``; a trace whose recorded points are not all there, or not the only ones of its branch,
    is left out (logged, to be traced again).

    Raises :class:`~attnphase.experiments.storage.CorruptResultsError` naming ``run_file`` if the
    records cannot be read back as branch ends, anchors and points."""
    record = read_json(run_file) or {}
    ends, anchors, gaps = record.get("branch_ends", {}), record.get("anchors", {}), record.get("gaps", {})
    recorded = record.get("traced_points", {})
    try:
        traces = {}
        for name in ends:
            own = sorted((p for p in points if p.branch == name), key=lambda p: (p.sheet, p.alpha))
            listed = recorded.get(name)
            if listed is None or {(p.sheet, p.alpha) for p in own} != {(int(s), float(a)) for s, a in listed}:
                logger.warning("%s: the table does not match the finished %s trace; it is traced again", run_file, name)
                continue
            traces[name] = BranchTrace(
                name,
                tuple(own),
                tuple(BranchEnd(**end) for end in ends[name]),
                tuple(Anchor(**anchor) for anchor in anchors[name]),
                tuple(Gap(**gap) for gap in gaps.get(name, ())),
            )
    except (AttributeError, KeyError, TypeError, ValueError) as error:
        raise CorruptResultsError(run_file, f"its branch ends and anchors cannot be read ({error!r})") from None
    return traces


#: Relative agreement asked of a resumed point's stored conjugates, energy and test error with those
#: observed again at its order parameters (smooth in them; the table holds them exactly).
RECOMPUTED_TOLERANCE = 1e-7
#: Relative agreement asked of its ``train_loss - line_correction`` with the recomputed energy: the
#: energy identity (THEORY.md sec. 5) to the solver's ``energy_tolerance``. The kink correction is
#: not compared directly: it moves by ~1e-8 under the rounding of the stored order parameters.


def verify_point(solver: SaddlePointSolver, point: FixedPoint) -> str | None:
    """Why the stored ``point`` cannot be trusted as a converged fixed point of ``solver``, or ``None``.

    The point is observed again at its stored order parameters
    (:meth:`~attnphase.saddle.search.solver.SaddlePointSolver.observe`: one evaluation of the map and
    every convergence check) and must pass every check; its stored conjugates, ``energy`` and
    ``test_error`` must agree with the recomputed ones, its ``train_loss - line_correction`` with the
    recomputed energy (the energy identity) and its ``free_entropy`` with ``-train_loss``.
    """
    by_name = {b.name: b for b in solver.branches}
    if point.branch not in by_name:
        return f"{point.branch!r} is not a branch of this model"
    settings = solver.settings
    computed = (point.quadrature, point.conjugate_form, point.prox)
    if computed != (settings.quadrature.label, settings.conjugate_form, settings.prox):
        return f"it was computed with {point.quadrature}, the {point.conjugate_form} form and the {point.prox} prox"
    if not point.converged:
        return "it has not converged"
    fresh = solver.observe(point.values, point.alpha, by_name[point.branch])
    if not fresh.converged:
        return f"it fails the checks there ({fresh.status})"
    if fresh.branch != point.branch:
        return f"its overlaps make it a point of the {fresh.branch} branch"
    checks = (  # (what is stored, its value, what it must equal, that value, relative tolerance)
        ("conjugates", point.conjugates, "those recomputed there", fresh.conjugates, RECOMPUTED_TOLERANCE),
        ("energy", point.energy, "the one recomputed there", fresh.energy, RECOMPUTED_TOLERANCE),
        ("test_error", point.test_error, "the one recomputed there", fresh.test_error, RECOMPUTED_TOLERANCE),
        (
            "train_loss - line_correction",
            point.train_loss - point.line_correction,
            "the energy",
            fresh.energy,
            settings.tuning.acceptance.energy,
        ),
        ("-free_entropy", -point.free_entropy, "train_loss", point.train_loss, RECOMPUTED_TOLERANCE),
    )
    for name, stored, expected, recomputed, rtol in checks:
        if not np.allclose(stored, recomputed, rtol=rtol, atol=1e-12):  # NaN never agrees
            return f"its {name} {_shown(stored)} is not {expected} ({_shown(recomputed)})"
    return None


def _shown(value: np.ndarray | float) -> str:
    return np.array2string(np.asarray(value, dtype=float), precision=8, separator=", ")


def _trusted(solver: SaddlePointSolver, log: PointLog, traces: dict[str, BranchTrace]) -> dict[str, BranchTrace]:
    """The ``traces`` whose every converged point :func:`verify_point` accepts; each point it rejects
    is logged as a warning, and its branch is left out (to be traced again)."""
    trusted = {}
    for name, trace in traces.items():
        problems = [(p, verify_point(solver, p)) for p in trace.converged()]
        for point, problem in problems:
            if problem is not None:
                logger.warning(
                    "%s: the point at alpha = %g on the %s branch cannot be trusted (%s); the branch is traced again",
                    log.path,
                    point.alpha,
                    name,
                    problem,
                )
        if all(problem is None for _, problem in problems):
            trusted[name] = trace
    return trusted


def _resume(run: RunContext, solver: SaddlePointSolver) -> tuple[PointLog | None, dict[str, BranchTrace]]:
    """The point log of the run's directory and the finished, verified traces of a previous scan of the
    same identity (:meth:`RunContext.resume`). The log keeps the points of those traces only: every other
    branch is traced again. Without a directory, no log and no traces."""
    table = run.path("branches.csv")
    if table is None:
        return None, {}
    layout = solver.problem.layout

    def load() -> tuple[PointLog, dict[str, BranchTrace]]:
        log = PointLog.resume(table, layout.names, layout.conjugate_names)
        traces = _trusted(solver, log, restored_traces(table.with_name(RUN_FILE), log.points))
        return log, traces

    loaded = run.resume(load)
    if loaded is None:
        return PointLog(table), {}
    log, traces = loaded
    kept = PointLog(table, [p for trace in traces.values() for p in trace.points])
    kept.save()
    return kept, traces


def scan(
    model: AttentionModel,
    alphas: str | Sequence[float] = DEFAULT_ALPHAS,
    options: ScanOptions | None = None,
    *,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
    **option_values: Any,
) -> ScanResult | PolicyScans:
    """Find and trace every branch of ``model`` over ``alphas`` (for the paper's declaration: positional,
    semantic, agnostic and mixed), the changes of global minimum, alpha_c and alpha_l (THEORY.md sec. 4-7).

    ``alphas``: a sequence of sample complexities or, as on the command line, ``start:stop:step`` (stop included) or
    ``a,b,c``. ``options``: the numerical options (:class:`~attnphase.experiments.options.ScanOptions`: the rule,
    the seed, the conjugate form, alpha_l's rule, ``stability`` (the curvature of the training loss in every overlap
    family and whether each point is a minimum), the quadrature error check, ``prox`` (the stationary point
    of the envelope at every node, THEORY.md sec. 12: ``global``, ``local``, or ``both``, which returns the
    scans under each as a :class:`~attnphase.experiments.policy_scans.PolicyScans`, written into
    ``out/global`` and ``out/local`` and gathered in ``out``), the
    :class:`~attnphase.saddle.tuning.Tuning`); ``option_values``: the same options by name (``order=12``), on top of
    ``options``. With ``out``, the directory is held for the whole scan (another
    run into it is refused at once), points are written to ``out/branches.csv`` as they are computed,
    ``run.json`` records every branch whose trace is finished, and the finished result is saved there. A
    rerun with the same model, alphas and options (compared by value, the tuning and the package version
    included) reuses the finished traces, each point checked first by one evaluation of the equations
    (:func:`verify_point`; a branch with a point that fails is logged and traced again), and traces the
    other branches again from their start: it ends with exactly the tables of an uninterrupted scan. Other
    settings, or files that cannot be read back, are refused unless ``overwrite``, which first removes
    every file of the old scan. ``progress``: show a progress bar (``None``: only in a terminal).
    """
    model = checked_model(model)
    grid = parse_alphas(alphas)
    options = scan_options(options, option_values)
    if options.prox is ProxOption.BOTH:
        return _scan_each_policy(model, grid, options, out, overwrite, progress)
    with RunContext(out, scan_identity(model, grid, options), ScanResult.outputs(), overwrite) as run:
        solver = make_solver(model, options.settings(model))
        log, traced = _resume(run, solver)
        finished = list(traced.values())

        def on_trace(trace: BranchTrace) -> None:
            finished.append(trace)
            run.running(**trace_records(finished))

        if traced:
            logger.info("resuming from the traces of %s in %s", ", ".join(traced), run.directory)
            run.running(**trace_records(finished))  # the resume has marked the run as started afresh
        started = time.perf_counter()
        baseline = linear_baseline(solver.problem.compiled.system)
        with progress_bar(len(grid) * len(solver.branches), "fixed points", "pt", progress) as bar:
            requested = set(grid.tolist())
            bar.update(sum(1 for t in finished for p in t.converged() if p.alpha in requested and p.sheet == 0))

            def on_point(point: FixedPoint) -> None:
                if log is not None:
                    log.add(point)
                bar.update(1)

            solution = survey(
                solver,
                grid,
                baseline.test_error,
                traced=traced,
                on_point=on_point,
                on_trace=on_trace,
                stability=options.stability,
            )
        result = ScanResult(model, grid, options, solution, baseline, time.perf_counter() - started)
        logger.info("scan finished: alpha_c = %.6f, alpha_l = %.6f", result.alpha_c, result.alpha_l)
        run.save(result)
    return result


def _scan_each_policy(
    model: AttentionModel,
    grid: np.ndarray,
    options: ScanOptions,
    out: str | Path | None,
    overwrite: bool,
    progress: bool | None,
) -> PolicyScans:
    """:func:`scan` under each policy of ``options.prox`` (both), each into its subdirectory of ``out``."""
    with RunContext(out, scan_identity(model, grid, options), PolicyScans.outputs(), overwrite) as run:
        run.resume()
        parts = {}
        for choice in options.prox.policies:
            into = run.path(choice.value)
            part = dataclasses.replace(options, prox=choice.value)
            parts[choice] = scan(model, grid, part, out=into, overwrite=overwrite, progress=progress)
        result = PolicyScans(model, grid, options, parts)
        run.save(result)
    return result


def scan_options(options: ScanOptions | None, values: Mapping[str, Any]) -> ScanOptions:
    """``options`` (default: the package's) with ``values`` set by name; a ``TypeError``-free refusal of a
    wrong type or an unknown name, naming it."""
    if options is not None and not isinstance(options, ScanOptions):
        raise InputTypeError(f"options must be a ScanOptions; got {options!r}")
    known = {f.name for f in dataclasses.fields(ScanOptions)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise InputTypeError(f"{unknown[0]} is not a scan option (the options: {', '.join(sorted(known))})")
    return dataclasses.replace(options or ScanOptions(), **values)


def fixed_point(
    model: AttentionModel,
    alpha: float,
    branch: str | None = None,
    options: ScanOptions | None = None,
    **option_values: Any,
) -> FixedPoint:
    """One fixed point of the saddle-point equations of ``model`` at ``alpha``, searched on ``branch``
    (for the paper's declaration ``positional``, ``semantic``, ``agnostic`` or ``mixed``: the overlap
    families it holds at zero, THEORY.md sec. 6; default: the second of the declaration's
    ``labels.critical``), found without a prior solution (the anchor search with rays,
    :meth:`~attnphase.saddle.search.anchors.AnchorSearch.with_rays`); the options are those of :func:`scan`
    (alpha_l's rule does not apply). The point is labelled by what it converged to (its ``branch``), which
    may be a more symmetric branch than the one searched. Its ``row()`` is one row of a scan's table."""
    model = checked_model(model)
    options = scan_options(options, option_values)
    solver = make_solver(model, dataclasses.replace(options.settings(model), threshold_quadrature=None))
    chosen = solver.branch(model.labels.critical[1] if branch is None else branch)
    return AnchorSearch.with_rays(solver)(float(alpha), chosen)
