"""Shared fixtures: the paper's model compiled once, and its branches on the reference alphas."""

from __future__ import annotations

from pathlib import Path

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
from attnphase.saddle.continuation import BranchTrace, trace_branch
from attnphase.saddle.scan import make_solver
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.solver import SaddlePointSolver

REFERENCE_DIR = Path(__file__).parent / "data" / "reference"


@pytest.fixture(scope="session")
def paper_solver() -> SaddlePointSolver:
    """The paper's instance (THEORY.md sec. 6) at the default solver settings."""
    return make_solver(paper_model(), SolverSettings())


@pytest.fixture(scope="session")
def reference() -> dict[str, pd.DataFrame]:
    """Fixed points computed by the paper's authors (omega = 0.3), one table per branch."""
    return {
        name: pd.read_csv(REFERENCE_DIR / f"omega0.3_{name}.csv", index_col=0).sort_values("alpha")
        for name in ("positional", "semantic", "agnostic")
    }


@pytest.fixture(scope="session")
def reference_traces(paper_solver, reference) -> dict[str, BranchTrace]:
    """Every branch continued over the reference's alphas."""
    return {
        name: trace_branch(paper_solver, paper_solver.branch(name), reference[name]["alpha"].round(12).tolist())
        for name in ("positional", "semantic", "agnostic")
    }


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
