"""The training loss at fixed overlaps and the stability of fixed points (saddle/search/constrained.py,
saddle/stability/).

Every quantity is checked by another route: the constrained system at a fixed point against the
unconstrained solve, its analytic gradient against differences of its training loss, its curvature
against second differences, its stationary points against the fixed points, and the sign changes
of the curvature against where branches are born.
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np
import pytest
import scipy.optimize

from attnphase.replica.declaration import (
    paper_model,
)
from attnphase.replica.variants import variant
from attnphase.saddle.equations.saddle_map import MemoisedMap, SaddleMap
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.points.checks import Assessment, Check, Failure
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.search.anchors import AnchorSearch, generic_guess
from attnphase.saddle.search.constrained import ConstrainedResidual, ConstrainedSolver, Wanted
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.stability.assessment import assess
from attnphase.saddle.stability.hessian import by_constraints, by_elimination, stability
from attnphase.saddle.tuning import Tuning

STABILITY = Tuning().stability

SETTINGS = SolverSettings(quadrature=GaussHermite(14), test_quadrature=GaussHermite(14))
#: (omega, sigma, lambda, A, alpha): the paper's setting and three others
SETTINGS_GRID = [
    (0.3, 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)), 1.25),
    (0.2, 0.5, 0.01, ((0.6, 0.4), (0.4, 0.6)), 1.0),
    (0.4, 0.7, 0.1, ((0.6, 0.4), (0.4, 0.6)), 1.5),
    (0.3, 0.5, 0.01, ((0.3, 0.7), (0.8, 0.2)), 1.0),
]


def _solver(omega=0.3, sigma=0.5, lam=0.01, A=((0.6, 0.4), (0.4, 0.6))):
    return make_solver(paper_model(omega=omega, sigma=sigma, lam=lam, A=A), SETTINGS)


@pytest.fixture(scope="module")
def base():
    return _solver()


@pytest.fixture
def paper(base):
    """The paper's model on Gauss-Hermite 14 without the memory of other tests' solves."""
    return base.renewed()


@pytest.fixture(scope="module")
def positional(base):
    solver = base.renewed()
    point = AnchorSearch(solver)(1.25, solver.branch("positional"))
    assert point.converged and point.branch == "positional"
    return point


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "sigma", "lam", "A", "alpha"), SETTINGS_GRID)
def test_held_at_a_fixed_point_the_constrained_system_is_that_fixed_point(omega, sigma, lam, A, alpha):
    """Holding m and theta at a fixed point's values gives back its q, V, conjugates (the multipliers
    equal the energetic conjugates) and training loss, with zero gradient: every branch found."""
    solver = _solver(omega, sigma, lam, A)
    constrained = ConstrainedSolver(solver, ("m", "theta"))
    search = AnchorSearch(solver)
    found = 0
    for branch in solver.branches:
        point = search(alpha, branch)
        if not point.converged:
            continue
        found += 1
        held = constrained.solve(alpha, [point["m"], point["theta"]], generic_guess(solver))
        assert held.converged, held.status
        assert held.values == pytest.approx(point.values, rel=1e-6, abs=1e-9)
        assert held.conjugates == pytest.approx(point.conjugates, rel=1e-5, abs=1e-8)
        assert held.energy == pytest.approx(point.energy, rel=1e-8)
        uncorrected = held.train_loss - held.line_correction
        assert uncorrected == pytest.approx(point.train_loss - point.line_correction, rel=1e-8)
        # the kink correction itself (~3e-3 of eps_t) can move by ~1 % under changes of 1e-10 in V
        assert held.line_correction == pytest.approx(point.line_correction, rel=2e-2, abs=1e-12)
        assert np.abs(held.gradient).max() < 1e-6
    assert found >= 2


def test_gradient_is_the_derivative_of_the_constrained_training_loss():
    """At a point that is no fixed point, ``d eps/d m`` and ``d eps/d theta`` from the multipliers (score
    form) equal central differences of the kink-corrected constrained training loss. Off the symmetric
    subspaces the kinks of ``M*`` move with m and limit both to a few per cent on a 24-point rule."""
    rule = GaussHermite(24)
    constrained = ConstrainedSolver(make_solver(paper_model(), SolverSettings(quadrature=rule)), ("m", "theta"))
    centre = np.array([0.15, 0.06])
    point = constrained.solve(1.25, centre, generic_guess(constrained.solver))
    assert point.converged, point.status
    assert np.abs(point.gradient).min() > 1e-4  # far from stationary
    h = 3e-3
    for j in range(2):
        step = np.eye(2)[j] * h
        up, down = (constrained.solve(1.25, centre + s * step, point.values) for s in (1, -1))
        assert up.converged and down.converged
        assert (up.train_loss - down.train_loss) / (2 * h) == pytest.approx(point.gradient[j], rel=5e-2)


def test_constrained_points_satisfy_the_energy_identity(paper):
    """Away from the fixed points ``-Phi`` is still the training loss ``alpha E[l] + E[R]`` of the
    constrained weights (THEORY.md sec. 5)."""
    constrained = ConstrainedSolver(paper, ("m", "theta"))
    initial = generic_guess(paper)
    for held in ([0.05, 0.02], [0.3, 0.0], [0.0, 0.15], [0.2, 0.1]):
        point = constrained.solve(1.25, held, initial)
        assert point.converged, (held, point.status)
        assert point.energy == pytest.approx(point.train_loss - point.line_correction, rel=1e-6), held
        initial = point.values


@pytest.mark.parametrize("held", [[0.2, 0.1], [0.0, 0.15], [0.3, 0.0]])
def test_a_point_wanted_for_its_gradient_has_the_gradient_of_the_converged_one(paper, held):
    """A ray's constrained point (:attr:`Wanted.GRADIENT`) stops once its gradient is usable (residual at
    most the stability tuning's ``hessian_residual``), and that gradient is the fully converged point's to
    1e-3 relative."""
    initial = generic_guess(paper)
    full = ConstrainedSolver(paper, ("m", "theta")).solve(1.25, held, initial, correct_kinks=False)
    gradient = Wanted.GRADIENT
    quick = ConstrainedSolver(paper, ("m", "theta")).solve(1.25, held, initial, correct_kinks=False, wanted=gradient)
    assert full.converged, full.status
    assert quick.usable_gradient(STABILITY.hessian_residual), quick.status
    assert quick.gradient == pytest.approx(full.gradient, rel=1e-3, abs=1e-7)
    assert quick.train_loss == pytest.approx(full.train_loss, rel=1e-5)


def test_stationary_point_of_the_landscape_is_the_positional_fixed_point(paper, positional):
    """The root in m of ``d eps/d m`` along theta = 0 (found by bisection on constrained solves) is the
    positional branch's m."""
    constrained = ConstrainedSolver(paper, ("m", "theta"))

    def slope(m: float) -> float:
        point = constrained.solve(1.25, [m, 0.0], positional.values)
        assert point.converged, point.status
        return float(point.gradient[0])

    assert slope(0.15) < 0 < slope(0.35)
    root = scipy.optimize.brentq(slope, 0.15, 0.35, xtol=1e-10)
    assert root == pytest.approx(positional["m"], rel=1e-6)


def test_hessian_agrees_with_second_differences_of_the_training_loss(paper, positional):
    """The curvature from differences of the gradient equals the second difference of the constrained
    training loss itself (Richardson-extrapolated), in the free and the held-at-zero direction."""
    found = stability(paper, positional)
    constrained = ConstrainedSolver(paper, ("m", "theta"))
    centre = np.array([positional["m"], 0.0])

    def second_difference(direction: np.ndarray, h: float) -> float:
        losses = [constrained.solve(1.25, centre + s * h * direction, positional.values).train_loss for s in (1, -1)]
        return (losses[0] + losses[1] - 2 * positional.train_loss) / h**2

    # the kinks of M* move with m: the quadrature error of d eps/d m is a few per cent on this rule
    for j, (family, tolerance) in enumerate((("m", 6e-2), ("theta", 2e-2))):
        direction = np.eye(2)[j]
        coarse, fine = second_difference(direction, 0.02), second_difference(direction, 0.01)
        extrapolated = (4 * fine - coarse) / 3
        assert found.hessian[j, j] == pytest.approx(extrapolated, rel=tolerance), family
    assert abs(found.hessian[0, 1]) < 1e-12  # theta is held at zero: eps is even in it


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "sigma", "lam", "A", "alpha"), SETTINGS_GRID)
def test_the_hessian_by_elimination_equals_the_hessian_from_constrained_gradients(omega, sigma, lam, A, alpha):
    """Two routes to the Hessian of the training loss in the overlaps: the Schur complement of the
    Hessian of Phi (Psi_out'' from differences of one evaluation's expectations, the rest closed form)
    and differences of the gradients of constrained saddle points. At every fixed point an anchor
    finds, in every branch (both held-at-zero families and free ones, minima and saddles), they agree
    to 1 % of the Hessian's largest entry (measured: at most 0.4 %, in m, whose differences carry the
    rule's kinks), and the elimination's forward and backward differences in ``q`` and ``V`` agree well
    enough for it to be kept (the stability tuning's ``elimination_spread``)."""
    solver = _solver(omega, sigma, lam, A)
    search = AnchorSearch(solver)
    for branch in solver.branches:
        point = search(alpha, branch)
        if not point.converged or solver.problem.geometry.vanishes(point.values):
            continue
        eliminated = by_elimination(solver.renewed(), point)
        constrained = by_constraints(solver.renewed(), point)
        assert eliminated.converged and constrained.converged
        assert eliminated.names == constrained.names
        scale = np.abs(constrained.hessian).max()
        np.testing.assert_allclose(eliminated.hessian, constrained.hessian, atol=1e-2 * scale, err_msg=point.branch)
        assert eliminated.stable == constrained.stable, point.branch
        assert eliminated.spread <= STABILITY.elimination_spread, point.branch  # so stability() keeps the elimination


@pytest.mark.slow
@pytest.mark.parametrize(("omega", "sigma", "lam", "A", "alpha"), SETTINGS_GRID)
def test_the_hessians_quick_differences_see_the_basins_every_start_sees(omega, sigma, lam, A, alpha, monkeypatch):
    """The differences behind the Hessian evaluate the quick map: its prox starts are the minima the
    full prox at the point found at each node, followed, then +-omega. At every fixed point an
    anchor finds, the Hessian equals the one with every evaluation from all the full starts, to
    1e-7 of its largest entry (measured: at most 1.1e-9). The lowest minimum and +-omega alone miss
    a known basin that becomes the lowest (off by up to 8e-6 here, 9e-3 at the mixed point at
    alpha = 1.62 on Gauss-Hermite 20); the followed minima alone miss a basin born within the step
    (3e-3 at the semantic point at alpha = 0.98 on Gauss-Hermite 20)."""
    solver = _solver(omega, sigma, lam, A)
    quick = SaddleMap.evaluate

    def from_every_start(self, params, alpha, effort=Effort.FULL, around=None):
        return quick(self, params, alpha, Effort.FULL, around)

    search = AnchorSearch.with_rays(solver)
    for branch in solver.branches:
        point = search(alpha, branch)
        if not point.converged or solver.problem.geometry.vanishes(point.values):
            continue
        found = by_elimination(solver.renewed(), point)
        with monkeypatch.context() as patch:
            patch.setattr(SaddleMap, "evaluate", from_every_start)
            full = by_elimination(solver.renewed(), point)
        scale = np.abs(full.hessian).max()
        np.testing.assert_allclose(found.hessian, full.hessian, rtol=0, atol=1e-7 * scale, err_msg=point.branch)


def test_stability_of_the_branches_at_the_first_order_transition(paper, positional):
    """At alpha = 1.25 (omega = 0.3) positional and semantic are both minima, the agnostic point is
    unstable in both families and the mixed point between them is a saddle (one negative eigenvalue)."""
    assert assess(paper, positional).stable
    search = AnchorSearch(paper)
    semantic = assess(paper, search(1.25, paper.branch("semantic")))
    assert semantic.branch == "semantic" and semantic.stable
    agnostic = assess(paper, search(1.25, paper.branch("agnostic")))
    assert not agnostic.stable and agnostic.curvature["m"] < 0 and agnostic.curvature["theta"] < 0
    mixed = AnchorSearch.with_rays(paper)(1.25, paper.branch("mixed"))
    assert mixed.branch == "mixed"
    eigenvalues = np.linalg.eigvalsh(stability(paper, mixed).hessian)
    assert eigenvalues[0] < 0 < eigenvalues[1]


def test_semantic_branch_is_born_where_the_agnostic_point_loses_stability(paper):
    """The curvature in theta of the agnostic point changes sign where the semantic branch's theta
    vanishes (a pitchfork): both located by root finding, independently."""
    agnostic = paper.branch("agnostic")
    search = AnchorSearch(paper)

    def theta_curvature(alpha: float) -> float:
        return assess(paper, search(alpha, agnostic)).curvature["theta"]

    assert theta_curvature(0.5) > 0 > theta_curvature(1.0)
    birth = scipy.optimize.brentq(theta_curvature, 0.5, 1.0, xtol=1e-4)
    semantic = [search(a, paper.branch("semantic")) for a in (birth + 0.02, birth + 0.04)]
    assert all(p.branch == "semantic" for p in semantic)
    # theta^2 grows linearly from the pitchfork: extrapolate the two points to theta = 0
    (a1, t1), (a2, t2) = ((p.alpha, p["theta"] ** 2) for p in semantic)
    assert a1 - t1 * (a2 - a1) / (t2 - t1) == pytest.approx(birth, abs=5e-3)


@pytest.mark.slow
def test_constrained_system_on_a_three_token_declaration(three_token_model):
    """Nothing in the landscape is specific to the paper: L = 3 with two positional directions, the
    constrained system at an anchored point reproduces it and its Hessian is finite."""
    solver = make_solver(three_token_model, SolverSettings(quadrature=GaussHermite(5), test_quadrature=GaussHermite(5)))
    point = AnchorSearch(solver)(2.0, solver.branch("semantic"))
    assert point.converged
    layout = solver.problem.layout
    overlaps = [n for n, f in zip(layout.names, layout.families, strict=True) if f in ("m", "theta")]
    held = ConstrainedSolver(solver, overlaps).solve(2.0, [point[n] for n in overlaps], point.values)
    assert held.converged and held.train_loss == pytest.approx(point.train_loss, rel=1e-8)
    found = stability(solver, point)
    assert found.names == tuple(overlaps) and found.converged
    assert np.all(np.isfinite(found.hessian))


def test_stability_survives_a_table_round_trip(paper, positional):
    """A resumed scan reads ``stable``, the curvatures and the stability status back from its table."""
    assessed = assess(paper, positional)
    row = {k: (str(v) if isinstance(v, bool) else v) for k, v in assessed.row().items()}
    back = FixedPoint.from_row(row, paper.problem.layout.names, paper.problem.layout.conjugate_names)
    assert back.stable is True and back.curvature == assessed.curvature
    assert back.stability_status == assessed.stability_status == Assessment.ASSESSED
    assert back.rs_stable is assessed.rs_stable and np.isfinite(assessed.replicon_smooth)
    assert back.replicon == assessed.replicon and back.jump_ratio == assessed.jump_ratio
    assert positional.stability_status == Assessment.NOT_ASKED  # a point nobody assessed says so


def test_a_point_without_a_curvature_says_why(paper, positional, monkeypatch):
    """``stable`` is empty for an unconverged point and for one whose Hessian rests on evaluations whose
    prox did not converge; ``stability_status`` names the reason, never a bare NaN."""
    stalled_residual = (Failure(Check.RESIDUAL, "1.0e-03 > 1e-08"),)
    unconverged = assess(paper, replace(positional, failures=stalled_residual))
    assert unconverged.stable is None and np.isnan(unconverged.curvature["m"])
    assert unconverged.stability_status == Assessment.UNCONVERGED

    evaluate = paper.problem.map.evaluate

    def unconverged_prox(params, alpha, effort=Effort.FULL, around=None):
        return replace(evaluate(params, alpha, effort, around), prox_unconverged=3, prox_unconverged_weight=2e-3)

    monkeypatch.setattr(paper.problem.map, "evaluate", unconverged_prox)
    flagged = assess(paper, positional)
    assert flagged.stable is None and np.isnan(flagged.curvature["theta"])
    assert flagged.stability_status.startswith("prox: unconverged on weight 2.0e-03 > 1e-06")
    monkeypatch.undo()

    solve = ConstrainedSolver.solve

    def stalled(self, *args, **kwargs):
        return replace(solve(self, *args, **kwargs), residual=1e-3, failures=stalled_residual)

    monkeypatch.setattr(ConstrainedSolver, "solve", stalled)
    found = by_constraints(paper, positional)  # m moved both ways, theta (held at zero) one way
    assert found.problem.text() == (
        "constrained: 3 of 3 constrained points without a usable gradient (largest residual 1.0e-03; "
        "failed checks: residual)"
    )


@pytest.mark.slow
def test_differences_near_the_edge_of_the_domain_stay_inside_it():
    """The spectrum variant's semantic point at alpha = 2.2 has theta within 2 % of its Cauchy-Schwarz
    bound ``sqrt(q rho)``, so the elimination's step in ``q`` (5 % of q) would cross ``theta^2 = q rho``,
    where the quadrature's covariance has no square root. The step is shortened to stay in the domain,
    and the curvatures equal those of the constrained route, which never leaves it."""
    solver = make_solver(variant("spectrum").model(), SETTINGS)
    point = AnchorSearch(solver)(2.2, solver.branch("semantic"))
    assert point.converged and point.branch == "semantic"
    layout, geometry = solver.problem.layout, solver.problem.geometry
    q, theta = layout.index("q"), layout.index("theta")
    assert point.values[theta] > 0.98 * geometry.overlap_bounds(point.values)[theta]
    crossing = point.values - STABILITY.smoothing_step * point.values[q] * np.eye(point.values.size)[q]
    assert not geometry.in_domain(crossing)
    eliminated = by_elimination(solver, point)
    constrained = by_constraints(solver, point)
    assert eliminated.converged and constrained.converged
    np.testing.assert_allclose(eliminated.hessian, constrained.hessian, rtol=1e-3, atol=1e-5)
    assert assess(solver, point).stability_status == Assessment.ASSESSED


def test_fixed_entries_are_checked(paper):
    with pytest.raises(ValueError, match="fixed must name distinct order parameters among q, m, V, theta"):
        ConstrainedSolver(paper, ("m", "mhat"))
    with pytest.raises(ValueError, match="held must be 2 finite values"):
        ConstrainedSolver(paper, ("m", "theta")).solve(1.0, [0.1, float("nan")], generic_guess(paper))


@pytest.mark.slow
def test_landscape_study_writes_the_grid_and_resumes(tmp_path):
    """``ap.landscape``: every converged node lies above the lowest fixed point (the global minimum of
    the landscape is a fixed point), the fixed points are written with their stability, and a rerun
    reads the finished grid back unchanged."""
    from attnphase.experiments.landscape import landscape

    out = tmp_path / "landscape"
    kwargs = dict(points=3, extent=(0.3, 0.15), order=10, out=out, progress=False)
    result = landscape(paper_model(), 1.25, **kwargs)
    assert {p.name for p in out.iterdir()} >= {"landscape.csv", "fixed_points.csv", "landscape.png", "run.json"}
    grid, fixed = result.grid, result.fixed_points
    assert len(grid) == 9 and grid["converged"].all()
    assert sorted(grid["m"].unique()) == pytest.approx([0.0, 0.15, 0.3])
    assert grid["train_loss"].min() >= fixed["train_loss"].min() - 1e-9
    minima = set(fixed.loc[fixed["stable"] == True, "branch"])  # noqa: E712
    assert minima == {"positional", "semantic"}
    again = landscape(paper_model(), 1.25, **kwargs)
    assert again.grid[["m", "theta", "train_loss"]].to_numpy() == pytest.approx(grid[["m", "theta", "train_loss"]])


def test_landscape_command_refuses_bad_input_in_one_line(tmp_path):
    from typer.testing import CliRunner

    from attnphase.experiments.cli import app

    for option, value, message in (
        ("--points", "2", "points must be"),
        ("--extent", "0.3", "extent must give two values"),
        ("--alpha", "0", "alpha must be"),
    ):
        result = CliRunner().invoke(app, ["landscape", "--out", str(tmp_path / "x"), option, value])
        assert result.exit_code == 2, result.output
        assert message in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("residue", [1e-16, -3e-17])
def test_rounding_residue_in_a_held_family_does_not_change_the_hessian(paper, residue):
    """A solve that converges into a family's subspace from outside it leaves the family's entries at
    the rounding level; the family is still held at zero there (one-sided differences with every prox
    start), so the Hessian is that of the exact point. (Read as a free family, the central differences
    left the zero pattern with the quick prox and put the theta curvature of the agnostic point at
    omega = 0.3, alpha = 0.6 at 0.045 instead of 0.012.)"""
    agnostic = AnchorSearch(paper)(0.6, paper.branch("agnostic"))
    assert agnostic.branch == "agnostic" and agnostic["theta"] == 0.0
    values = agnostic.values.copy()
    values[paper.problem.layout.index("theta")] = residue
    exact = by_elimination(paper.renewed(), agnostic).hessian
    rounded = by_elimination(paper.renewed(), replace(agnostic, values=values)).hessian
    np.testing.assert_allclose(rounded, exact, rtol=1e-6, atol=1e-9)


def test_a_resumed_landscape_continues_from_the_last_finished_row(paper):
    """The grid is solved in a serpentine (forward on even rows, backward on odd ones), each node from
    its neighbour, else from the node below it: resumed after an odd row, the next row starts from
    that row's last converged node in its own order (its leftmost), and every converged node of it
    is a start for the node above."""
    from attnphase.experiments.landscape import _continuation_state, _serpentine

    assert list(_serpentine(3, 0)) == [0, 1, 2] and list(_serpentine(3, 1)) == [2, 1, 0]
    names = paper.problem.layout.names
    row = [
        {**{n: 0.1 * (j + 1) + k for k, n in enumerate(names)}, "converged": converged}
        for j, converged in enumerate((False, True, True))
    ]
    fallback = np.zeros(len(names))
    below, seed = _continuation_state(row, 1, paper, fallback)
    assert sorted(below) == [1, 2]
    np.testing.assert_allclose(seed, [0.2 + k for k in range(len(names))])  # column 1: last in the backward order
    _, seed = _continuation_state([{**r, "converged": False} for r in row], 1, paper, fallback)
    assert seed is fallback


@pytest.mark.slow
def test_a_constrained_trial_point_out_of_range_is_flagged_without_a_warning():
    """A root search's trial point where the closed-form updates overflow (the elastic net's, with a
    multiplier of 1e200) gives the flag value 1e6 in every equation, and numpy prints nothing."""
    rule = GaussHermite(6)
    solver = make_solver(variant("elastic-net").model(), SolverSettings(quadrature=rule, test_quadrature=rule))
    constrained = ConstrainedSolver(solver, ("m",))
    start = generic_guess(solver)
    evaluate = MemoisedMap(solver.problem.map, 1.0, Effort.QUICK)
    residual = ConstrainedResidual(constrained, evaluate, np.array([0.1]), start)
    unknowns = np.concatenate([start[constrained.free], [1e200]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert np.all(residual(unknowns) == 1e6)


def test_where_every_overlap_family_is_held_the_hessian_moves_the_held_entries_alone(paper, monkeypatch):
    """At the agnostic point every overlap family is held at zero, and the held families' block of the
    Hessian does not see ``q`` and ``V``: the Hessian is made from the point's own evaluation and one
    move per overlap entry, and still agrees with the constrained gradients' Hessian (to 1 % of its
    largest entry, as at every branch in the test above)."""
    agnostic = AnchorSearch(paper)(1.0, paper.branch("agnostic"))
    moves = []
    evaluate = SaddleMap.evaluate

    def counted(self, params, alpha, effort=Effort.FULL, around=None):
        moves.append(effort)
        return evaluate(self, params, alpha, effort, around)

    with monkeypatch.context() as patch:
        patch.setattr(SaddleMap, "evaluate", counted)
        eliminated = by_elimination(paper.renewed(), agnostic)
    assert moves == [Effort.FULL, Effort.QUICK, Effort.QUICK]  # the point, then m and theta once each
    constrained = by_constraints(paper.renewed(), agnostic)
    scale = np.abs(constrained.hessian).max()
    np.testing.assert_allclose(eliminated.hessian, constrained.hessian, atol=1e-2 * scale)


def test_a_landscape_under_both_policies_marks_each_policys_fixed_points(tmp_path):
    """``prox="both"``: the fixed points of both policies, each with its ``prox``, the grid the global
    policy's (the same as a global-only landscape's)."""
    from attnphase.experiments.landscape import landscape

    kwargs = dict(points=3, extent=(0.3, 0.15), order=10, progress=False)
    both = landscape(paper_model(), 1.25, prox="both", out=tmp_path / "both", **kwargs)
    alone = landscape(paper_model(), 1.25, **kwargs)
    assert set(both.fixed_points["prox"]) == {"global", "local"}
    assert both.grid["train_loss"].to_numpy() == pytest.approx(alone.grid["train_loss"].to_numpy())
    assert (tmp_path / "both" / "landscape.png").exists()
