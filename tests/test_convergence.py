"""What ``converged`` means: every check holds; otherwise the point is kept and its status says which failed.

The checks (:class:`~attnphase.saddle.points.diagnosis.Diagnosis`): the residual, finite values, order parameters in
their domain, the energy identity and the prox converged; a point is labelled by the overlaps it
converged to, whatever branch was searched.
Rows the solver reports as converged are re-checked here from their own values (an independent
route: the domain and the energy identity computed from the table row, not from the flags).
"""

from __future__ import annotations

import numpy as np
import pytest

import attnphase as ap
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.search.anchors import AnchorSearch


@pytest.fixture(scope="module")
def semantic_point(paper_base) -> FixedPoint:
    solver = paper_base.renewed()
    return AnchorSearch(solver)(2.0, solver.branch("semantic"))


def test_a_converged_point_passes_every_check_and_keeps_its_status_in_a_table(semantic_point):
    assert semantic_point.converged and semantic_point.status == "converged" and semantic_point.failed_checks == ()
    row = semantic_point.row()
    assert row["status"] == "converged" and row["converged"] is True
    back = FixedPoint.from_row(row, semantic_point.names, semantic_point.conjugate_names)
    assert back.status == "converged" and back.converged and back.branch == "semantic"
    assert back.error_check == semantic_point.error_check != ""
    assert (back.train_loss_check, back.train_loss_check_se) == (
        semantic_point.train_loss_check,
        semantic_point.train_loss_check_se,
    )
    assert row["train_loss_error"] == abs(row["train_loss"] - row["train_loss_check"])


def test_a_moved_point_fails_the_residual_check(paper_solver, semantic_point):
    values = semantic_point.values.copy()
    values[semantic_point.names.index("q")] *= 1.05
    moved = paper_solver.observe(values, 2.0, paper_solver.branch("semantic"))
    assert not moved.converged and "residual" in moved.failed_checks
    back = FixedPoint.from_row(moved.row(), moved.names, moved.conjugate_names)
    assert back.failed_checks == moved.failed_checks


def test_order_parameters_outside_their_domain_are_named(paper_solver, semantic_point):
    names = semantic_point.names
    negative_v = semantic_point.values.copy()
    negative_v[names.index("V")] = -1.0
    geometry = paper_solver.problem.geometry
    assert any(v.startswith("V not positive definite") for v in geometry.domain_violations(negative_v))
    too_aligned = semantic_point.values.copy()
    q, rho = too_aligned[names.index("q")], 0.25  # sigma^2 of the paper's instance
    too_aligned[names.index("theta")] = 1.01 * np.sqrt(q * rho)
    assert any("Cauchy-Schwarz" in v for v in geometry.domain_violations(too_aligned))
    assert geometry.domain_violations(semantic_point.values) == []
    observed = paper_solver.observe(negative_v, 2.0, paper_solver.branch("semantic"))
    assert "domain" in observed.failed_checks and not observed.converged


def test_a_point_is_labelled_by_the_overlaps_it_converged_to_not_by_the_branch_searched(paper_solver):
    search = AnchorSearch(paper_solver)
    agnostic = search(2.0, paper_solver.branch("agnostic"))
    assert agnostic.converged and agnostic.branch == "agnostic"
    for searched in ("semantic", "positional", "mixed"):
        seen = paper_solver.observe(agnostic.values, 2.0, paper_solver.branch(searched))
        assert seen.converged and seen.branch == "agnostic", searched
    semantic = search(2.0, paper_solver.branch("semantic"))
    for searched in ("semantic", "mixed"):  # the subspaces holding the semantic point
        assert paper_solver.observe(semantic.values, 2.0, paper_solver.branch(searched)).branch == "semantic"
    tilted = semantic.values.copy()
    tilted[semantic.names.index("m")] = 0.1  # both overlaps non-zero: a mixed point (not a fixed point)
    assert paper_solver.problem.geometry.label_of(tilted) == "mixed"
    tilted[semantic.names.index("m")] = 1e-5 * np.sqrt(semantic["q"] / 0.25)  # below 1e-3 of its bound
    assert paper_solver.problem.geometry.label_of(tilted) == "semantic"


def _independently_valid(row) -> list[str]:
    """The checks a converged row must pass, recomputed from the row itself."""
    problems = []
    numeric = row[["q", "m", "V", "theta", "qhat", "mhat", "Vhat", "thetahat", "train_loss", "energy", "test_error"]]
    if not np.all(np.isfinite(numeric.to_numpy(float))):
        problems.append("finite")
    vanishing = row["q"] == 0 and row["m"] == 0 and row["theta"] == 0  # W = 0 (tests/test_vanishing.py)
    if not (row["V"] > 0 and (vanishing or (row["q"] > 0 and row["theta"] ** 2 <= row["q"] * row["sigma2"]))):
        problems.append("domain")
    expected = row["train_loss"] - row["line_correction"]
    if not abs(row["energy"] - expected) <= 1e-6 * abs(expected):
        problems.append("energy")
    if not row["residual"] <= 1e-8:
        problems.append("residual")
    return problems


@pytest.mark.slow
@pytest.mark.parametrize(
    ("declaration", "alphas"),
    [
        ({"sigma": 2.0}, "2.0"),  # was: semantic points with V < 0 and eps_t ~ 1e31 marked converged
        ({"lam": 0.0}, "2.0"),  # was: V = inf and NaN columns
        ({"omega": 0.0}, "2.0"),  # was: a "positional" row with m ~ 1e-16 marked converged
        ({"omega": 0.0, "A": ((0.3, 0.7), (0.8, 0.2))}, "2.0"),
        ({"sigma": 0.3, "lam": 0.1}, "2.0"),  # was: agnostic creeping to q = 0, flagged; now W = 0
    ],
)
def test_every_row_is_flagged_or_passes_every_check(declaration, alphas):
    model = ap.paper_model(**declaration)
    branches = ap.scan(model, alphas, order=8, threshold_order=0, stability=False, progress=False).branches
    assert len(branches) >= 1
    branches = branches.assign(sigma2=model.parameters()["sigma"] ** 2)
    for _, row in branches.iterrows():
        assert (row["status"] == "converged") == bool(row["converged"])
        if row["converged"]:
            assert _independently_valid(row) == [], row.to_dict()
            if row["branch"] == "positional":
                assert abs(row["m"]) > 1e-6
            if row["branch"] == "semantic":
                assert abs(row["theta"]) > 1e-6
        else:
            assert row["status"] and row["status"] != "converged"
    if declaration == {"sigma": 0.3, "lam": 0.1}:
        agnostic = branches[branches["branch"] == "agnostic"].iloc[0]
        assert agnostic["converged"] and agnostic["q"] == 0
    if declaration == {"lam": 0.0}:  # no ridge term: the generic guess is taken at small conjugates
        assert np.isfinite(branches[["q", "V", "train_loss"]].to_numpy()).all()
        assert branches.set_index("branch").loc["semantic", "converged"]


@pytest.mark.slow
def test_a_scan_gives_every_requested_alpha_a_row_or_a_reason():
    result = ap.scan(ap.paper_model(), "0.3,1.0,2.0", order=8, threshold_order=0, stability=False, progress=False)
    rows = set(zip(result.branches["alpha"], result.branches["branch"], strict=True))
    missing = set(zip(result.missing["alpha"], result.missing["branch"], strict=True))
    wanted = {(a, b) for a in (0.3, 1.0, 2.0) for b in ("positional", "semantic", "agnostic", "mixed")}
    assert wanted <= rows | missing and not rows & missing
    assert ("semantic", 0.3) in {(b, a) for a, b in missing}  # the semantic branch ends near alpha = 0.74
    reasons = result.missing.set_index(["alpha", "branch"])["reason"]
    assert reasons[(0.3, "semantic")].startswith("the semantic branch could not be continued below alpha = 1")
    assert "merges into the agnostic branch at alpha = " in reasons[(0.3, "semantic")]
    assert all("could not be continued" in r or "was not found" in r for r in reasons)
    assert result.record["missing"] == result.missing.to_dict("records")


def test_a_kink_correction_larger_than_its_tolerance_is_flagged(semantic_point):
    """The kink correction refines eps_t by ~1e-3 relative (docs/validation/quadrature.md); a larger one means it
    failed (seen on a second positional solution at omega = 0.2, where it reached -0.9 against an
    energy of 5e-3), so a point whose correction exceeds the acceptance's ``kink`` of its energy is flagged."""
    from attnphase.saddle.phases.survey import make_solver
    from attnphase.saddle.settings import SolverSettings
    from attnphase.saddle.tuning import Tuning

    ratio = abs(semantic_point.line_correction) / semantic_point.energy
    assert 0 < ratio < Tuning().acceptance.kink
    strict = make_solver(ap.paper_model(), SolverSettings(tuning=Tuning().replaced(acceptance={"kink": ratio / 2})))
    flagged = strict.observe(semantic_point.values, 2.0, strict.branch("semantic"))
    assert flagged.failed_checks == ("kink",) and not flagged.converged
    assert flagged.status.startswith("kink: line_correction = ")
