"""Shared fixtures: the paper's model compiled once, and its branches on the reference alphas.

A solver remembers what it solved (warm prox starts), so a solver fixture shared between tests would
make their results depend on their order: the expensive part is shared (``paper_base``: the compiled
system, its folds and its memory of full proxes, none of which changes a result), and each test gets
it renewed (:meth:`SaddlePointSolver.renewed`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from attnphase.replica.declaration import (
    AttentionModel,
    DotProductAttention,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    paper_model,
)
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.search.solver import SaddlePointSolver
from attnphase.saddle.search.trace import BranchTrace
from attnphase.saddle.search.tracer import trace_branch
from attnphase.saddle.settings import SolverSettings

REFERENCE_DIR = Path(__file__).parent / "data" / "reference"


@pytest.fixture(scope="session")
def paper_base() -> SaddlePointSolver:
    """The paper's instance (THEORY.md sec. 6) at the default solver settings, compiled once; tests use
    it renewed (``paper_solver``)."""
    return make_solver(paper_model(), SolverSettings())


@pytest.fixture
def paper_solver(paper_base) -> SaddlePointSolver:
    """The paper's instance without the memory of what other tests solved on it."""
    return paper_base.renewed()


def retuned_solver(solver: SaddlePointSolver, **parts: Any) -> SaddlePointSolver:
    """A fresh solver of ``solver``'s compiled model, settings and constants but with the parts of its
    tuning in ``parts`` replaced (:meth:`Tuning.replaced`, e.g. ``continuation={"max_anchors": 2}``)."""
    settings = replace(solver.settings, tuning=solver.tuning.replaced(**parts))
    return SaddlePointSolver.of(solver.problem.compiled, settings, solver.problem.consts)


@pytest.fixture(scope="session")
def retuned() -> Callable[..., SaddlePointSolver]:
    """:func:`retuned_solver`: a solver under another tuning (what a module constant patched in was)."""
    return retuned_solver


@pytest.fixture(scope="session")
def reference() -> dict[str, pd.DataFrame]:
    """Fixed points computed by the paper's authors (omega = 0.3), one table per branch."""
    return {
        name: pd.read_csv(REFERENCE_DIR / f"omega0.3_{name}.csv", index_col=0).sort_values("alpha")
        for name in ("positional", "semantic", "agnostic")
    }


@pytest.fixture(scope="session")
def reference_traces(paper_base, reference) -> dict[str, BranchTrace]:
    """Every branch continued over the reference's alphas (each on the paper's solver renewed)."""
    traces = {}
    for name in ("positional", "semantic", "agnostic"):
        solver = paper_base.renewed()
        traces[name] = trace_branch(solver, solver.branch(name), reference[name]["alpha"].round(12).tolist())
    return traces


@pytest.fixture(scope="session")
def three_token_model() -> AttentionModel:
    """A declaration other than the paper's: L = 3 tokens, two positional directions, isotropic tokens."""
    return AttentionModel(
        tokens=GaussianTokens.isotropic(3, 0.5),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )
