"""Fixed points: residuals, the energy identity, both forms of the conjugate equations,
the global prox, and the general machinery on a second declaration (THEORY.md sec. 3-5)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from attnphase.replica.declaration import (
    BranchLabels,
    paper_model,
)
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.equations.residual import residual_norm
from attnphase.saddle.geometry.branches import Branch, branches_of
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort, declared_start_count, first_direction_split
from attnphase.saddle.prox.symmetry import Fold
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning
from attnphase.saddle.validation import ParameterError


def all_points(traces):
    return [p for trace in traces.values() for p in trace.points]


@pytest.mark.slow
def test_every_reported_fixed_point_satisfies_its_equations_on_the_unfolded_rule(paper_solver, reference_traces):
    """Checked by another route than the one that found them: one evaluation of F on the whole rule
    (no symmetry fold, no warm start, every prox start), max |F(x) - x| / (1 + |x|) <= 1e-8 over the
    free order parameters, and the equations of those a branch holds at zero satisfied to rounding
    (its subspace is invariant under the sign-symmetric Gauss-Hermite rule)."""
    settings = paper_solver.settings
    cold = settings.tuning.replaced(prox={"warm_start": False})
    plain = make_solver(paper_model(), dataclasses.replace(settings, fold_symmetries=False, tuning=cold))
    points = [p for p in all_points(reference_traces) if p.converged]
    assert len(points) >= 10
    for point in points:
        updated = plain.problem.map.evaluate(point.values, point.alpha).updated
        free = plain.problem.layout.free_mask(plain.branch(point.branch))
        assert residual_norm(point.values[free], updated[free]) <= 1e-8, (point.branch, point.alpha)
        assert np.all(np.abs(updated[~free]) <= 1e-12), (point.branch, point.alpha)


def test_branch_ends_are_classified_and_no_point_is_kept_off_its_branch(reference_traces):
    """A branch that cannot be continued records where and why it ended; at omega = 0.3 the semantic
    branch merges into the agnostic one below alpha ~ 0.74 (THEORY.md sec. 6), and the point it merged
    into is not kept as a semantic point. Every point of a trace carries the trace's label."""
    for name, trace in reference_traces.items():
        assert all(p.branch == name for p in trace.points), name
        for end in trace.ends:
            assert end.kind in ("merged", "failed") and end.direction in (-1, 1)
            assert end.alpha in {p.alpha for p in trace.converged()}
            if end.kind == "merged":
                assert end.detail != name
    (end,) = reference_traces["semantic"].ends
    assert (end.kind, end.detail) == ("merged", "agnostic")
    assert not reference_traces["agnostic"].ends and len(reference_traces["agnostic"].converged()) == len(
        reference_traces["agnostic"].points
    )


def test_training_loss_equals_the_energy(reference_traces):
    """eps_t = -Phi equals alpha E[l(prox, h*)] + lambda/2 ||Q||^2/d (THEORY.md sec. 5), both on
    the quadrature rule (the reported eps_t adds the kink correction of saddle/quadrature/kinks.py,
    whose accuracy tests/test_quadrature.py measures)."""
    for p in all_points(reference_traces):
        assert p.energy == pytest.approx(p.train_loss - p.line_correction, rel=1e-6)


def test_regulariser_energy_is_lambda_q_over_two_sigma_squared(reference_traces, paper_solver):
    """For isotropic tokens ||Q||^2/d = q/sigma^2, so E[R]/d = lambda q / (2 sigma^2)."""
    compiled = paper_solver.problem.compiled
    for p in all_points(reference_traces):
        regulariser = float(compiled.regulariser(p.conjugates, paper_solver.problem.consts))
        assert regulariser == pytest.approx(0.01 * p["q"] / (2 * 0.25), rel=1e-7)  # q solves its equation to 1e-8


@pytest.mark.parametrize(("name", "alpha"), [("semantic", 2.0), ("positional", 2.0), ("semantic", 1.25)])
def test_envelope_and_integration_by_parts_forms_agree(paper_solver, reference_traces, name, alpha):
    """E[dM/dX at prox] (envelope) and E[M* s_X + partial_X M] (Gaussian integration by
    parts) are the same derivative; at a fixed point they agree up to the quadrature error,
    which is larger for the envelope form (its integrand jumps where the prox changes basin).
    Measured with a finer rule than the default."""
    solver = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(28)))
    branch = solver.branch(name)
    start = min(reference_traces[name].points, key=lambda p: abs(p.alpha - alpha))
    point, _ = solver.solve(alpha, branch, initial=start.values)
    problem = solver.problem
    z, _, _ = problem.engine(point.values, Effort.FULL)[:3]
    c, m = problem.compiled, problem.map
    envelope = c.energetic(z, m.nodes, m.weights, point.values, problem.consts)[2:]
    score = c.score(z, m.nodes, m.weights, point.values, problem.consts)[2:]
    free = problem.layout.free_mask(branch)
    scale = np.abs(score[free]).max()
    np.testing.assert_allclose(envelope[free], score[free], atol=0.02 * scale)


def test_more_prox_starts_change_nothing(paper_solver, reference_traces):
    """The multi-start prox is global: more start directions leave F unchanged (to the
    prox's own convergence, well below the fixed-point tolerance 1e-8)."""
    point = reference_traces["positional"].points[-1]
    base = paper_solver.problem.map.evaluate(point.values, point.alpha)
    many = make_solver(paper_model(), SolverSettings(seed=3, tuning=Tuning().replaced(prox={"extra_directions": 8})))
    other = many.problem.map.evaluate(point.values, point.alpha)
    np.testing.assert_allclose(other.updated, base.updated, rtol=1e-8, atol=1e-14)
    assert other.mean_envelope == pytest.approx(base.mean_envelope, rel=1e-12)


def _full_starts(solver, point):
    """The prox engine of ``solver``, the nodes it computes the prox on at ``point`` (its fold's
    representatives), the kernel point there and the full starts at those nodes."""
    engine = solver.problem.engine
    params = solver.problem.geometry.kernel_point(point.values)
    fold = engine.fold(params)
    nodes = solver.problem.map.nodes if fold is None else fold.nodes
    return engine, nodes, params, engine.policy.starts(nodes, params, Effort.FULL, None)


def _assert_each_start_alone_agrees(solver, point) -> int:
    """The prox at ``point``'s folded nodes with every start is, node by node, the lowest minimum of the
    starts refined each in a call of its own (where no start can stop at a minimum another one found):
    the same value, and a minimiser one of the starts reaches alone with that value (at a node on a
    mirror plane, images of one minimum tie). Returns the number of starts."""
    engine, nodes, params, starts = _full_starts(solver, point)
    z, value, _ = engine.from_starts(nodes, params, starts)[:3]
    alone = [engine.from_starts(nodes, params, starts[s : s + 1])[:3] for s in range(len(starts))]
    values = np.stack([v for _, v, _ in alone])
    np.testing.assert_allclose(value, values.min(axis=0), rtol=1e-12, atol=1e-15)
    lowest = values <= values.min(axis=0) + 1e-12 * np.abs(values.min(axis=0)) + 1e-15
    reached = np.stack([np.abs(z_s - z).max(axis=0) <= 1e-7 for z_s, _, _ in alone])
    assert np.all(np.any(lowest & reached, axis=0))
    return len(starts)


@pytest.mark.parametrize("branch", ["positional", "semantic", "agnostic"])
def test_a_start_that_stops_at_a_minimum_found_before_changes_no_prox(paper_solver, reference_traces, branch):
    """A prox start whose iterate reaches a minimum an earlier start ended in stops there
    (saddle/compilation/templates.py ``refine``), and the prox is still the best of the starts refined one at a time."""
    point = reference_traces[branch].points[len(reference_traces[branch].points) // 2]
    _assert_each_start_alone_agrees(paper_solver, point)


@pytest.mark.slow
def test_in_three_prox_coordinates_a_start_that_stops_early_changes_no_prox(three_token_model):
    """As above, with the three-token declaration's random starts (three prox coordinates)."""
    rule = GaussHermite(5)
    solver = make_solver(three_token_model, SolverSettings(quadrature=rule, test_quadrature=rule))
    point = AnchorSearch(solver)(2.0, solver.branch("agnostic"))
    assert _assert_each_start_alone_agrees(solver, point) > 8


@pytest.mark.slow
def test_random_prox_starts_are_added_beyond_two_prox_coordinates(paper_solver, three_token_model):
    """The paper's prox has two coordinates and no random starts; three tokens have three, and three
    random start directions by default."""
    rule = GaussHermite(5)
    three = make_solver(three_token_model, SolverSettings(quadrature=rule, test_quadrature=rule))
    assert paper_solver.problem.compiled.prox_dimension == 2 and len(paper_solver.problem.engine.policy.directions) == 0
    assert three.problem.compiled.prox_dimension == 3 and len(three.problem.engine.policy.directions) == 3
    declared = Tuning().replaced(prox={"extra_directions": 0})
    declared_only = make_solver(three_token_model, SolverSettings(tuning=declared))
    assert len(declared_only.problem.engine.policy.directions) == 0


def _three_token_solver(model, seed: int = 0, **prox):
    """The three-token declaration on Gauss-Hermite 8 with the prox tuning's ``prox`` fields replaced,
    its random start directions drawn with ``seed``."""
    rule = GaussHermite(8)
    tuning = Tuning().replaced(prox=prox)
    return make_solver(model, SolverSettings(quadrature=rule, test_quadrature=rule, seed=seed, tuning=tuning))


@pytest.mark.slow
def test_in_three_prox_coordinates_the_random_starts_find_lower_minima_and_more_change_nothing(three_token_model):
    """At the agnostic point of the three-token declaration at alpha = 2 the declared starts alone
    miss lower minima at some nodes: ``E[M*]`` is lower and ``F`` moves with the default random
    starts. Twelve directions with another seed give the default's ``F`` to the prox's convergence."""
    default = _three_token_solver(three_token_model)
    point = AnchorSearch(default)(2.0, default.branch("agnostic"))
    assert point.converged and point.branch == "agnostic"
    found = default.problem.map.evaluate(point.values, point.alpha)
    declared_only = _three_token_solver(three_token_model, extra_directions=0)
    declared = declared_only.problem.map.evaluate(point.values, point.alpha)
    assert found.mean_envelope < declared.mean_envelope - 1e-14
    assert np.abs(found.updated - declared.updated).max() > 1e-9
    many_solver = _three_token_solver(three_token_model, extra_directions=12, seed=7)
    many = many_solver.problem.map.evaluate(point.values, point.alpha)
    np.testing.assert_allclose(many.updated, found.updated, rtol=1e-9, atol=1e-12)
    assert many.mean_envelope == pytest.approx(found.mean_envelope, rel=1e-13)
    _assert_random_starts_run_only_where_needed(default, point)


def _assert_random_starts_run_only_where_needed(solver, point) -> None:
    """The full prox (:meth:`GlobalMinimum.minimise`) runs the first random direction's shifts at every
    node and the other directions' only where those and the declared starts end in two or more minima or
    none, and equals, node by node, the prox with every start at every node; here the random starts lower
    the prox at some node, and the other directions run at under a fifth of the nodes."""
    engine, nodes, params, starts = _full_starts(solver, point)
    policy = engine.policy
    _, value, _, _ = policy.minimise(nodes, params, starts, solver.tuning.prox.gradient_tolerance, Effort.FULL)
    _, everywhere, _ = engine.from_starts(nodes, params, starts)[:3]
    np.testing.assert_allclose(value, everywhere, rtol=1e-13, atol=1e-15)
    declared = declared_start_count(len(starts), len(policy.directions))
    _, alone, _ = engine.from_starts(nodes, params, starts[:declared])[:3]
    assert np.any(alone > everywhere + 1e-12)
    first, _ = first_direction_split(len(starts), len(policy.directions))
    _, _, _, minima = engine.from_starts(nodes, params, starts[first])
    assert np.mean(np.isfinite(minima[:, 0, :]).sum(axis=0) != 1) < 0.2


@pytest.mark.slow
def test_a_move_off_a_point_finds_its_minima_from_the_points_prox_without_random_starts(three_token_model, monkeypatch):
    """A full evaluation a difference step away from a point, started from the point's minima,
    their mirror images and the declared starts (``around``) instead of the random directions, has the
    prox of every start: at the agnostic point of the three-token declaration at alpha = 1, each overlap
    entry moved by the stability's step (1e-2 of its bound) has every node's ``M*`` of the full start
    set, and its ``F``. Without the point's minima lower minima are missed at some nodes, and so they
    are from the point's lowest minimum alone without its mirror images where the move of theta
    breaks the tokens' symmetries (the other minima and the images each carry the mirror minima)."""
    solver = _three_token_solver(three_token_model)
    search = AnchorSearch(solver)
    point = search(1.0, solver.branch("agnostic"))
    assert point.converged and point.branch == "agnostic"
    declared = _three_token_solver(three_token_model, extra_directions=0)
    saddle_map, layout = solver.problem.map, solver.problem.layout
    centre = saddle_map.evaluate(point.values, point.alpha)
    bounds = solver.problem.geometry.overlap_bounds(point.values)
    missed: dict[str, tuple[float, float]] = {}
    for i, (name, family) in enumerate(zip(layout.names, layout.families, strict=True)):
        if family not in ("m", "theta"):
            continue
        assert bounds[i] > 0
        moved = point.values + 1e-2 * bounds[i] * np.eye(point.values.size)[i]
        every = saddle_map.evaluate(moved, point.alpha)
        near = saddle_map.evaluate(moved, point.alpha, around=centre)
        np.testing.assert_allclose(near.envelope_values, every.envelope_values, rtol=0, atol=1e-12)
        np.testing.assert_allclose(near.updated, every.updated, rtol=1e-9, atol=1e-12)
        without_prox = declared.problem.map.evaluate(moved, point.alpha).envelope_values - every.envelope_values
        lowest = dataclasses.replace(centre, minima=centre.minima[:1])
        with monkeypatch.context() as patch:
            patch.setattr(Fold, "images", lambda _fold, _z: [])
            unmirrored = saddle_map.evaluate(moved, point.alpha, around=lowest).envelope_values - every.envelope_values
        missed[name] = (without_prox.max(), unmirrored.max())
    assert max(declared_only for declared_only, _ in missed.values()) > 1e-10
    assert missed["theta"][1] > 1e-10
    with pytest.raises(ValueError, match="around"):
        search.coarse().solver.problem.map.evaluate(point.values, point.alpha, around=centre)
    quick = saddle_map.evaluate(point.values, point.alpha, Effort.QUICK)
    with pytest.raises(ValueError, match="every prox start"):
        saddle_map.evaluate(point.values, point.alpha, around=quick)


def test_symmetric_subspaces_are_invariant(paper_solver, reference_traces):
    """The zero overlaps of a branch stay zero under F to rounding (exact symmetry)."""
    for name, zero in (("positional", "theta"), ("semantic", "m"), ("agnostic", "theta")):
        point = reference_traces[name].points[0]
        updated = paper_solver.problem.map.evaluate(point.values, point.alpha).updated
        assert abs(updated[paper_solver.problem.layout.index(zero)]) < 1e-12


def test_a_renewed_solver_computes_what_a_new_one_does_whatever_was_solved_before(paper_solver, reference_traces):
    """What a renewed solver finds depends only on what it is asked: not on the warm prox starts and
    cached points of the solves before (here every reference trace, on copies of it that share its
    memory of full proxes, and a solve from each trace's nearest point on it), so a resumed scan is exact."""
    new = make_solver(paper_model(), SolverSettings())
    for name, alpha in (("semantic", 1.7), ("positional", 1.3)):
        branch = paper_solver.branch(name)
        nearest = min(reference_traces[name].converged(), key=lambda p: abs(p.alpha - alpha))
        paper_solver.solve(alpha, branch, initial=nearest.values)  # warm prox starts on the solver
        renewed = AnchorSearch(paper_solver.renewed())(alpha, branch)
        afresh = AnchorSearch(new.renewed())(alpha, branch)
        assert renewed.converged and renewed.branch == name
        assert np.array_equal(renewed.values, afresh.values) and renewed.residual == afresh.residual


def test_a_misleading_carried_jacobian_is_replaced_by_a_fresh_estimate(paper_solver):
    """Broyden's iteration started from a Jacobian carried over from elsewhere that points away from
    the root (here its negative) estimates the Jacobian afresh instead of stalling, and reaches the
    tolerance itself, in few evaluations (Powell's fallback, which returns no Jacobian, is not needed)."""
    n = 6
    matrix = 2.0 * np.eye(n) + 0.5 * np.eye(n, k=1) + 0.5 * np.eye(n, k=-1)
    root = np.linspace(-0.5, 0.7, n)
    evaluations = []

    def residual(x: np.ndarray) -> np.ndarray:
        evaluations.append(x)
        return np.tanh(matrix @ (x - root))

    x, jacobian = paper_solver.roots(residual, np.zeros(n), jacobian=-matrix)
    assert np.abs(residual(x)).max() <= paper_solver.tuning.roots.tolerance
    assert jacobian is not None
    assert len(evaluations) <= 36  # 46 when the carried estimate is only corrected by Broyden's updates


def test_alpha_must_be_positive(paper_solver):
    for alpha in (0.0, -1.0, float("nan")):
        with pytest.raises(ParameterError, match="alpha must be"):
            paper_solver.solve(alpha, paper_solver.branch("semantic"), initial=generic_guess(paper_solver))


@pytest.mark.slow
def test_three_token_model_has_converged_fixed_points(three_token_model):
    """The machinery is not specific to the paper's instance: L = 3, two positional directions."""
    solver = make_solver(three_token_model, SolverSettings(quadrature=GaussHermite(5), test_quadrature=GaussHermite(5)))
    assert [b.name for b in solver.branches] == ["agnostic", "semantic", "positional", "mixed"]
    search = AnchorSearch(solver)
    for name in ("agnostic", "semantic"):
        point = search(2.0, solver.branch(name))
        assert point.converged and point.branch == name
        assert point.energy == pytest.approx(point.train_loss - point.line_correction, rel=1e-6)
    assert solver.problem.compiled.dimension == 6


def test_every_requested_alpha_has_a_point_or_a_reason(reference_traces, reference):
    for name, trace in reference_traces.items():
        requested = reference[name]["alpha"].round(12).tolist()
        reasons = trace.missing(requested)
        covered = {p.alpha for p in trace.points}
        assert set(requested) <= covered | set(reasons), name
        assert not set(reasons) & covered
        for alpha, reason in reasons.items():
            assert reason.startswith(f"the {name} branch could not be continued below alpha = "), reason
            assert "merges into the agnostic branch" in reason and alpha < min(e.alpha for e in trace.ends)
    assert reference_traces["semantic"].missing(reference["semantic"]["alpha"].round(12).tolist())


def test_the_paper_declaration_names_its_four_subspaces(paper_solver):
    """Every subset of the overlap families held at zero is a branch, named by the declaration from
    the families it leaves free (THEORY.md sec. 6); the solver knows no name of its own."""
    named = {b.name: b.zero for b in paper_solver.branches}
    assert named == {"agnostic": ("m", "theta"), "semantic": ("m",), "positional": ("theta",), "mixed": ()}
    labels = BranchLabels(meanings=(("m", "P"), ("theta", "S")), none="O", several="PS", critical=("P", "S"))
    renamed = branches_of(derive(dataclasses.replace(paper_model(), labels=labels)))
    assert renamed == (Branch("O", ("m", "theta")), Branch("S", ("m",)), Branch("P", ("theta",)), Branch("PS", ()))
    with pytest.raises(ValueError, match="branch must be one of agnostic, semantic, positional, mixed; got 'P'"):
        paper_solver.branch("P")
