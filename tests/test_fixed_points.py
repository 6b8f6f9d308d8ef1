"""Fixed points: residuals, the energy identity, both forms of the conjugate equations,
the global prox, and the general machinery on a second declaration (THEORY.md sec. 3-5)."""

from __future__ import annotations

import numpy as np
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
from attnphase.saddle.fixed_point import AGNOSTIC, POSITIONAL, SEMANTIC, ProxSettings, SolverSettings
from attnphase.saddle.quadrature import GaussHermite
from attnphase.saddle.scan import make_solver
from attnphase.saddle.validation import ParameterError


def all_points(traces):
    return [p for trace in traces.values() for p in trace.points]


def test_every_reported_fixed_point_satisfies_its_equations(reference_traces):
    """max |F(x) - x| / (1 + |x|) <= 1e-8 over the free order parameters, and the equations
    of those a branch holds at zero are satisfied to rounding (its subspace is invariant
    under the sign-symmetric Gauss-Hermite rule)."""
    points = [p for p in all_points(reference_traces) if p.converged]
    assert points and all(p.status == "converged" for p in points)
    assert max(p.residual for p in points) <= 1e-8
    assert max(p.symmetry_defect for p in points) <= 1e-12


def test_the_only_points_not_converged_are_flagged_branch_ends(reference_traces):
    """A branch that cannot be continued reports the point where it stopped, with the checks it
    failed; at omega = 0.3 the positional branch merges into the agnostic one at small alpha and
    the semantic one below alpha ~ 0.74 (THEORY.md sec. 6): their overlaps vanish there."""
    for name, trace in reference_traces.items():
        converged = [p.alpha for p in trace.points if p.converged]
        for point in trace.points:
            if point.converged:
                continue
            assert point.status != "converged" and point.failed_checks
            assert point.alpha < min(converged) or point.alpha > max(converged), (name, point.alpha)
    ends = {name: [p for p in trace.points if not p.converged] for name, trace in reference_traces.items()}
    assert [p.failed_checks for p in ends["semantic"]] == [("label",)]
    assert ends["semantic"][0].solved and abs(ends["semantic"][0]["theta"]) < 1e-6
    assert not ends["agnostic"]


def test_training_loss_equals_the_energy(reference_traces):
    """eps_t = -Phi equals alpha E[l(prox, h*)] + lambda/2 ||Q||^2/d (THEORY.md sec. 5), both on
    the quadrature rule (the reported eps_t adds the kink correction of saddle/line_correction.py,
    whose accuracy tests/test_quadrature.py measures)."""
    for p in all_points(reference_traces):
        assert p.energy == pytest.approx(p.train_loss - p.line_correction, rel=1e-6)


def test_regulariser_energy_is_lambda_q_over_two_sigma_squared(reference_traces, paper_solver):
    """For isotropic tokens ||Q||^2/d = q/sigma^2, so E[R]/d = lambda q / (2 sigma^2)."""
    compiled = paper_solver.compiled
    for p in all_points(reference_traces):
        regulariser = float(compiled.regulariser(p.conjugates, paper_solver.consts))
        assert regulariser == pytest.approx(0.01 * p["q"] / (2 * 0.25), rel=1e-7)  # q solves its equation to 1e-8


@pytest.mark.parametrize(("branch", "alpha"), [(SEMANTIC, 2.0), (POSITIONAL, 2.0), (SEMANTIC, 1.25)])
def test_envelope_and_integration_by_parts_forms_agree(paper_solver, reference_traces, branch, alpha):
    """E[dM/dX at prox] (envelope) and E[M* s_X + partial_X M] (Gaussian integration by
    parts) are the same derivative; at a fixed point they agree up to the quadrature error,
    which is larger for the envelope form (its integrand jumps where the prox changes basin).
    Measured with a finer rule than the default."""
    solver = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(28)))
    start = min(reference_traces[branch.name].points, key=lambda p: abs(p.alpha - alpha))
    point, _ = solver.solve(alpha, branch, initial=start.values)
    z, _, _ = solver.prox(point.values)
    c = solver.compiled
    envelope = c.energetic(z, solver.nodes, solver.weights, point.values, solver.consts)[2:]
    score = c.score(z, solver.nodes, solver.weights, point.values, solver.consts)[2:]
    free = solver.free_mask(branch)
    scale = np.abs(score[free]).max()
    np.testing.assert_allclose(envelope[free], score[free], atol=0.02 * scale)


def test_more_prox_starts_change_nothing(paper_solver, reference_traces):
    """The multi-start prox is global: more start directions leave F unchanged (to the
    prox's own convergence, well below the fixed-point tolerance 1e-8)."""
    point = reference_traces["positional"].points[-1]
    base = paper_solver.evaluate(point.values, point.alpha)
    many = make_solver(paper_model(), SolverSettings(prox=ProxSettings(extra_directions=8, seed=3)))
    other = many.evaluate(point.values, point.alpha)
    np.testing.assert_allclose(other.updated, base.updated, rtol=1e-8, atol=1e-14)
    assert other.mean_envelope == pytest.approx(base.mean_envelope, rel=1e-12)


def test_symmetric_subspaces_are_invariant(paper_solver, reference_traces):
    """The zero overlaps of a branch stay zero under F to rounding (exact symmetry)."""
    for name, zero in (("positional", "theta"), ("semantic", "m"), ("agnostic", "theta")):
        point = reference_traces[name].points[0]
        updated = paper_solver.evaluate(point.values, point.alpha).updated
        assert abs(updated[paper_solver.names.index(zero)]) < 1e-12


def test_alpha_must_be_positive(paper_solver):
    for alpha in (0.0, -1.0, float("nan")):
        with pytest.raises(ParameterError, match="alpha must be"):
            paper_solver.solve(alpha, SEMANTIC, initial=paper_solver.generic_guess())


def test_three_token_model_has_converged_fixed_points():
    """The machinery is not specific to the paper's instance: L = 3, two positional directions."""
    model = AttentionModel(
        tokens=GaussianTokens.isotropic(3, 0.5),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6))),
        student=DotProductAttention(),
        regulariser=Ridge(0.01),
    )
    solver = make_solver(model, SolverSettings(quadrature=GaussHermite(5), test_quadrature=GaussHermite(5)))
    for branch in (AGNOSTIC, SEMANTIC):
        point = solver.anchor(2.0, branch)
        assert point.converged and point.residual <= 1e-8
        assert point.energy == pytest.approx(point.train_loss - point.line_correction, rel=1e-6)
    assert solver.compiled.dimension == 6


def test_every_requested_alpha_has_a_point_or_a_reason(reference_traces, reference):
    for name, trace in reference_traces.items():
        requested = reference[name]["alpha"].round(12).tolist()
        reasons = trace.missing(requested)
        covered = {p.alpha for p in trace.points}
        assert set(requested) <= covered | set(reasons), name
        assert not set(reasons) & covered
        for alpha, reason in reasons.items():
            assert reason.startswith(f"the {name} branch could not be continued below alpha = "), reason
            assert "label: the" in reason and alpha < trace.ended_below
    assert reference_traces["semantic"].missing(reference["semantic"]["alpha"].round(12).tolist())
