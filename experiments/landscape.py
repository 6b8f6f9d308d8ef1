"""The training loss in the plane of two overlaps at one alpha (``attnphase landscape``).

At every node of a grid of the two overlap entries ``axes`` (by default the leading entries of the
declaration's first two overlap families: ``m`` and ``theta`` for the paper), the constrained saddle
point (:class:`~attnphase.saddle.search.constrained.ConstrainedSolver`, THEORY.md sec. 3-4) gives the
lowest training loss among all weights with those two overlaps and every other overlap entry held at
zero (for the paper's model, whose overlaps are ``m`` and ``theta`` alone, every weight with those
overlaps). The grid is solved row by row, each point continued from its neighbour, or where that fails
from the node below it; the fixed points found at that alpha (an anchor search per branch) are marked
with their stability (:func:`~attnphase.saddle.stability.assessment.assess`). This is the picture of a
first-order transition: two minima and the barrier, a saddle, between them. The loss is even in every
overlap family, so the grid covers the quadrant of non-negative overlaps.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.figures import branch_colours, branch_marker
from attnphase.experiments.options import ProxOption, choice_of
from attnphase.experiments.parsing import EXTENT, GRID_POINTS
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.storage import read_table, write_table
from attnphase.experiments.study import StudyResult, checked_model, progress_bar, versions
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.quadrature.rules import GAUSS_HERMITE_ORDER, GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.search.constrained import ConstrainedSolver
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.validation import ALPHA, check

#: Without ``extent``, each axis reaches this multiple of the largest value a fixed point takes there.
MARGIN = 1.6


@dataclass(frozen=True, eq=False)
class LandscapeResult(StudyResult):
    """The outcome of :func:`landscape`: ``grid`` (one row per node: the two held overlaps, every
    order parameter and multiplier, ``train_loss``, the gradient ``grad_<axis>``, ``converged``,
    ``status``, ``residual``) and ``fixed_points`` (one row per fixed point found at ``alpha``, with
    ``stable`` and its curvatures)."""

    model: AttentionModel
    alpha: float
    axes: tuple[str, str]
    grid: pd.DataFrame
    fixed_points: pd.DataFrame
    options: dict[str, object]
    seconds: float
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "landscape"
    table_names = ("landscape", "fixed_points")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"landscape": self.grid, "fixed_points": self.fixed_points}

    @property
    def record(self) -> dict[str, object]:
        identity = landscape_identity(self.model, self.alpha, self.axes, self.options)
        return {**identity, "status": "complete", "seconds": round(self.seconds, 2), "versions": self.provenance}

    def plot(self) -> Figure:
        """Filled contours of the training loss over the grid, every fixed point marked by its label
        (filled marker: a minimum; open: a saddle)."""
        return landscape_figure(self.grid, self.fixed_points, self.axes, self.alpha)

    def summary(self) -> str:
        """One line per fixed point: label, overlaps, training loss and stability."""
        ok = int(self.grid["converged"].sum())
        lines = [f"{ok} of {len(self.grid)} grid points converged"]
        for _, p in self.fixed_points.iterrows():
            where = ", ".join(f"{a} = {p[a]:.4f}" for a in self.axes)
            lines.append(f"{p['branch']}: {where}, train_loss = {p['train_loss']:.6g} ({_kind(p['stable'])})")
        return "\n".join(lines)


def _kind(stable: object) -> str:
    """What a fixed point's ``stable`` entry makes it: a minimum, a saddle, or not assessed."""
    return {True: "minimum", False: "saddle"}.get(stable, "stability not assessed")


def landscape_identity(
    model: AttentionModel, alpha: float, axes: Sequence[str], options: dict[str, object]
) -> dict[str, object]:
    """What makes two landscape runs the same computation (written to ``run.json``)."""
    return {"model": model.record(), "alpha": alpha, "axes": list(axes), "options": options}


def landscape_figure(grid: pd.DataFrame, fixed_points: pd.DataFrame, axes: Sequence[str], alpha: float) -> Figure:
    """Filled contours of ``train_loss`` over the two ``axes`` (converged nodes only, where they make a grid
    of two rows and two columns at least; else the fixed points alone), the fixed points marked in their
    branch's style, filled if stable and open if not, the local policy's smaller."""
    x_name, y_name = axes
    table = grid[grid["converged"].astype(bool)].pivot_table(index=y_name, columns=x_name, values="train_loss")
    fig = Figure(figsize=(6.5, 5), layout="constrained")
    ax = fig.subplots()
    if min(table.shape) >= 2:  # contours need a grid of at least two converged rows and columns
        values = table.to_numpy()
        # levels at quantiles of the values: the valleys between the minima are resolved as finely as the walls
        levels = np.unique(np.nanquantile(values, np.linspace(0, 1, 31)))
        filled = ax.contourf(table.columns, table.index, values, levels=levels, cmap="viridis")
        ax.contour(table.columns, table.index, values, levels=levels, colors="k", linewidths=0.3)
        fig.colorbar(filled, ax=ax, label="training loss (constrained)")
    colours = branch_colours(fixed_points["branch"].astype(str)) if len(fixed_points) else {}
    for _, p in fixed_points.iterrows():
        colour = colours[str(p["branch"])]
        stable = _kind(p["stable"]) == "minimum"
        local = p.get("prox", "global") == "local"
        ax.plot(
            abs(p[x_name]),
            abs(p[y_name]),
            linestyle="none",
            marker=branch_marker(str(p["branch"])),
            markersize=6 if local else 10,
            markerfacecolor=colour if stable else "white",
            markeredgecolor="k" if stable else colour,
            markeredgewidth=1.0 if local else 1.5,
            label=f"{p['branch']}{', local prox' if local else ''} ({_kind(p['stable'])})",
        )
    ax.set_xlabel(x_name)
    ax.set_ylabel(y_name)
    ax.set_title(rf"lowest training loss at fixed overlaps, $\alpha$ = {alpha:g}")
    if len(fixed_points):
        ax.legend(fontsize=8, loc="upper right")
    return fig


def fixed_points_at(
    solver: SaddlePointSolver, alpha: float, most_free: int | None = None, stability: bool = True
) -> list[FixedPoint]:
    """The converged fixed points an anchor search per branch finds at ``alpha``
    (:meth:`~attnphase.saddle.search.anchors.AnchorSearch.with_rays`: seeded, then along rays from the
    points found on the branches it contains), one per label, each with its stability if ``stability``;
    with ``most_free``, only on the branches with at most that many free overlap families."""
    found: dict[str, FixedPoint] = {}
    layout = solver.problem.layout
    branches = [b for b in solver.branches if most_free is None or len(layout.free_families(b)) <= most_free]
    search = AnchorSearch.with_rays(
        solver, lambda subspace, _: [p for p in found.values() if p.branch == subspace.name]
    )
    for branch in branches:  # the most symmetric first: a branch's subspaces are searched before it
        point = search(alpha, branch)
        if point.converged and point.branch not in found:
            found[point.branch] = assess(solver, point) if stability else point
    return list(found.values())


def _axis_values(
    axis: str, extent: float | None, points: int, found: Sequence[FixedPoint], solver: SaddlePointSolver
) -> np.ndarray:
    if extent is None:
        largest = max((abs(p[axis]) for p in found), default=0.0)
        bound = max(abs(b) for b in solver.problem.geometry.overlap_bounds(found[0].values)) if found else 0.5
        extent = MARGIN * largest if largest > 0 else bound
    return np.linspace(0.0, extent, points)


def landscape(
    model: AttentionModel,
    alpha: float,
    *,
    axes: Sequence[str] | None = None,
    points: int = 11,
    extent: Sequence[float] | None = None,
    order: int = 14,
    prox: str = "global",
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> LandscapeResult:
    """The lowest training loss at fixed values of two overlaps, on a ``points`` x ``points`` grid from
    0 to ``extent`` (default: 1.6 times the largest value a fixed point takes on that axis), at
    ``alpha``, on a Gauss-Hermite rule of ``order`` points per dimension.

    ``axes``: two order-parameter names of overlap families (default: the leading entries of the first
    two). ``prox``: the fixed points' prox policy (THEORY.md sec. 12; ``global``, ``local`` or ``both``, each
    point with its ``prox``); the grid is the global policy's (the lowest training loss), or the local
    policy's when that is the only one. With ``out``, the directory is held for the call, the grid is
    written row by row, and a rerun with the same settings resumes from the rows written; other settings
    are refused unless
    ``overwrite``. Writes ``landscape.csv``, ``fixed_points.csv``, ``landscape.png/.pdf``, ``run.json``.
    """
    model = checked_model(model)
    alpha = check(alpha, "alpha", ALPHA)
    points = int(check(points, "points", GRID_POINTS))
    order = int(check(order, "order", GAUSS_HERMITE_ORDER))
    policies = choice_of(ProxOption, prox, "prox").policies
    rule = GaussHermite(order)
    solvers = [make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule, prox=p)) for p in policies]
    solver = solvers[0]
    system = solver.problem.compiled.system
    overlap_names = [e.name for e in system.entries if e.family in system.overlap_families]
    leading = [next(e.name for e in system.entries if e.family == f) for f in system.overlap_families]
    chosen = tuple(axes) if axes is not None else tuple(leading[:2])
    if len(chosen) != 2 or len(set(chosen)) != 2 or not set(chosen) <= set(overlap_names):
        raise ValueError(f"axes must name two overlap entries among {', '.join(overlap_names)}; got {chosen}")
    if extent is not None:
        extent = tuple(check(e, "extent", EXTENT) for e in extent)
        if len(extent) != 2:
            raise ValueError(f"extent must give two values, one per axis; got {len(extent)}")
    options = {"points": points, "extent": list(extent) if extent else None, "order": order, "prox": str(prox)}
    identity = landscape_identity(model, alpha, chosen, options)
    with RunContext(out, identity, LandscapeResult.outputs(), overwrite) as run:
        started = time.perf_counter()
        done = run.resume(lambda: _rows(run.path("landscape.csv"), points))
        done = pd.DataFrame() if done is None else done
        every = [point for each in solvers for point in fixed_points_at(each, alpha)]
        found = [point for point in every if point.prox == policies[0].value]
        values = [_axis_values(a, extent[i] if extent else None, points, found, solver) for i, a in enumerate(chosen)]
        held = ConstrainedSolver(solver, overlap_names)
        rows = done.to_dict("records")
        seed = min(found, key=lambda p: p.train_loss).values if found else generic_guess(solver)
        below: dict[int, np.ndarray] = {}  # the converged nodes of the row before, by their column
        finished = len(rows) // points
        if finished:  # resumed: continue from the last finished row as an uninterrupted run would
            below, seed = _continuation_state(
                rows[(finished - 1) * points : finished * points], finished - 1, solver, seed
            )
        with progress_bar(points, "landscape", "row", progress) as bar:
            bar.update(finished)
            for i, y in enumerate(values[1]):
                if i < finished:
                    continue
                row_points, here = [], {}
                for j in _serpentine(points, i):  # each node from its neighbour, else from the node below it
                    x = values[0][j]
                    target = {name: 0.0 for name in overlap_names} | {chosen[0]: x, chosen[1]: y}
                    held_values = [target[n] for n in overlap_names]
                    point = held.solve(alpha, held_values, seed)
                    if not point.converged and j in below:
                        point = held.solve(alpha, held_values, below[j])
                    if point.converged:
                        seed = here[j] = point.values
                    row_points.append(point.row())
                below = here
                rows += sorted(row_points, key=lambda r: r[chosen[0]])
                if run.directory is not None:
                    write_table(run.path("landscape.csv"), rows)
                bar.update(1)
        result = LandscapeResult(
            model,
            alpha,
            chosen,
            pd.DataFrame(rows),
            pd.DataFrame([p.row() for p in every]),
            options,
            time.perf_counter() - started,
        )
        run.save(result)
    return result


def _serpentine(points: int, row: int) -> range:
    """The order of a row's columns: forward on even rows, backward on odd ones (each node then starts
    from its neighbour, the first of a row from the last of the row before)."""
    return range(points) if row % 2 == 0 else range(points - 1, -1, -1)


def _continuation_state(
    last_row: list[dict[str, object]], row: int, solver: SaddlePointSolver, seed: np.ndarray
) -> tuple[dict[int, np.ndarray], np.ndarray]:
    """The converged nodes of a finished row (its rows sorted by column) by column, and the start of the
    next row's first solve: the last converged node in the row's order (``seed`` if none converged)."""
    below = {
        j: np.array([float(r[n]) for n in solver.problem.layout.names])
        for j, r in enumerate(last_row)
        if bool(r["converged"])
    }
    converged = [j for j in _serpentine(len(last_row), row) if j in below]
    return below, below[converged[-1]] if converged else seed


def _rows(path: Path, points: int) -> pd.DataFrame | None:
    """The complete grid rows an interrupted run wrote into ``path`` (``points`` nodes each), or ``None``."""
    if not path.exists():
        return None
    table = read_table(path, numbers=("train_loss", "residual"), flags=("converged",))
    return table.iloc[: len(table) // points * points]
