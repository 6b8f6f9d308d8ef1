"""A student of rank 2: the rotations of its columns, the gauge that fixes them, and its fixed points."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
import sympy as sp

import attnphase as ap
from attnphase.replica.declaration import DeclarationError, ElasticNet, UntiedDotProductAttention
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.geometry.branches import Branch, branches_of
from attnphase.saddle.geometry.gauge import into_gauge, rotated
from attnphase.saddle.geometry.layout import ParameterLayout
from attnphase.saddle.geometry.overlaps import OverlapGeometry
from attnphase.saddle.geometry.patterns import SymmetryPatterns
from attnphase.saddle.geometry.seeds import Seeds
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.stability.hessian import by_constraints, by_elimination, stability
from attnphase.saddle.tuning import Tuning

GEOMETRY = Tuning().geometry
ELIMINATION_SPREAD = Tuning().stability.elimination_spread


def rank_two(**changes) -> ap.AttentionModel:
    return replace(ap.variant("rank2").model(), **changes)


def test_the_rotations_are_those_of_the_declaration():
    assert len(rank_two().rotations()) == 1  # O(2)
    assert len(replace(ap.paper_model(), rank=3).rotations()) == 3  # O(3)
    assert ap.paper_model().rotations() == ()  # rank 1: only the sign, a discrete symmetry
    assert ap.variant("untied").model().rotations() == ()  # Q and K of one column each
    (generator,) = replace(ap.paper_model(), rank=4, student=UntiedDotProductAttention()).rotations()
    assert generator == sp.diag(sp.Matrix([[0, 1], [-1, 0]]), sp.Matrix([[0, 1], [-1, 0]]))  # Q and K together
    assert replace(ap.paper_model(), regulariser=ElasticNet(0.01)).rotations() == ()


@dataclass(frozen=True)
class _WronglyRotated(UntiedDotProductAttention):
    """Declares the rotation of Q into K, which changes hQ hK^T."""

    def rotations(self, rank: int) -> tuple[sp.Matrix, ...]:
        return (sp.Matrix([[0, 1], [-1, 0]]),)


def test_a_declared_rotation_that_is_no_symmetry_is_refused():
    model = replace(ap.paper_model(), rank=2, student=_WronglyRotated())
    with pytest.raises(DeclarationError, match="student.rotations must leave the attention unchanged"):
        derive(model)


def test_each_branch_fixes_the_gauge_on_the_overlaps_it_leaves_free():
    system = derive(rank_two())
    assert system.gauge(()) == ("q_1_2",)  # no overlap: diagonal q
    assert system.gauge(("m",)) == ("m_2",)  # the positional overlap on the first column
    assert system.gauge(("theta",)) == ("theta_2",)
    assert system.gauge(("m", "theta")) == ("m_2",)
    assert derive(ap.paper_model()).gauge(("m", "theta")) == ()
    branches = {b.name: b.gauge for b in branches_of(system)}
    assert branches == {"agnostic": ("q_1_2",), "positional": ("m_2",), "semantic": ("theta_2",), "mixed": ("m_2",)}


def _overlaps(W: np.ndarray, p: np.ndarray, w_star: np.ndarray, d: int) -> dict[str, float]:
    """The rank-2 order parameters of weights ``W`` (d x 2) at isotropic unit covariance: q = W^T W/d,
    m = W^T p/sqrt(d), theta = w*^T W/d (THEORY.md sec. 2); V is given the same form as q."""
    q, m, theta = W.T @ W / d, W.T @ p / np.sqrt(d), w_star @ W / d
    V = q + np.eye(2)
    return {
        "q_1_1": q[0, 0], "q_1_2": q[0, 1], "q_2_2": q[1, 1], "m_1": m[0], "m_2": m[1],
        "V_1_1": V[0, 0], "V_1_2": V[0, 1], "V_2_2": V[1, 1], "theta_1": theta[0], "theta_2": theta[1],
    }  # fmt: skip


def test_rotating_the_order_parameters_is_rotating_the_weights():
    rng = np.random.default_rng(3)
    d = 50
    W, p, w_star = rng.normal(size=(d, 2)), rng.normal(size=d), rng.normal(size=d)
    angle = 0.7
    R = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    entries = derive(rank_two()).entries
    before, after = _overlaps(W, p, w_star, d), _overlaps(W @ R, p, w_star, d)
    values = np.array([before[e.name] for e in entries])
    np.testing.assert_allclose(rotated(values, entries, R), [after[e.name] for e in entries], atol=1e-12)


def test_a_point_is_rotated_onto_the_gauge_without_changing_its_invariants():
    rng = np.random.default_rng(4)
    d = 50
    W, p, w_star = rng.normal(size=(d, 2)), rng.normal(size=d), rng.normal(size=d)
    system = derive(rank_two())
    entries = system.entries
    values = np.array([_overlaps(W, p, w_star, d)[e.name] for e in entries])
    generators = [np.array(g.tolist(), dtype=float) for g in system.model.rotations()]
    names = [e.name for e in entries]
    for gauge in (("m_2",), ("theta_2",), ("q_1_2",)):
        held = np.isin(names, gauge)
        moved = dict(zip(names, into_gauge(values, entries, generators, held, GEOMETRY.gauge_angles), strict=True))
        assert abs(moved[gauge[0]]) < 1e-12
        original = dict(zip(names, values, strict=True))
        for a, b in (("m_1", "m_2"), ("theta_1", "theta_2")):  # the overlap vectors keep their norms
            assert np.hypot(moved[a], moved[b]) == pytest.approx(np.hypot(original[a], original[b]), rel=1e-12)
        assert moved["q_1_1"] + moved["q_2_2"] == pytest.approx(original["q_1_1"] + original["q_2_2"], rel=1e-12)


def _at(expression: sp.Expr, values: dict[str, float]) -> float:
    """``expression`` at the values of its symbols, given by name."""
    return float(expression.subs({x: values[x.name] for x in expression.free_symbols}).evalf())


@pytest.mark.slow
def test_with_its_second_column_switched_off_the_rank_two_envelope_is_the_rank_one_envelope():
    """``W = [w, 0]``: with ``q_1_2 = q_2_2 = V_1_2 = m_2 = theta_2 = 0`` the second column's fields are zero,
    the prox stays there (the loss sees ``z z^T``, so its gradient in the second column vanishes at zero)
    and the envelope and the energetic integrands of the first column are those of rank 1, term for term
    (at random points; ``q_2_2`` is taken to 1e-40, where the teacher's conditional variance is finite)."""
    one, two = derive(ap.paper_model()), derive(rank_two())
    rng = np.random.default_rng(5)
    renamed = {"q": "q_1_1", "m": "m_1", "V": "V_1_1", "theta": "theta_1"}
    for _ in range(2):
        first = dict(zip(("q", "m", "V", "theta"), rng.uniform(0.05, 0.3, 4), strict=True))
        first["V"] = 5.0 + 10.0 * first["V"]
        first["theta"] *= np.sqrt(first["q"] * 0.25) / 0.3  # below the Cauchy-Schwarz bound sqrt(q rho)
        fields, xi, eta = rng.normal(size=2), rng.normal(size=2), rng.normal(size=2)
        at_one = first | {str(c): v for c, v in one.constant_values().items()}
        at_two = {renamed[name]: v for name, v in first.items()} | {str(c): v for c, v in two.constant_values().items()}
        at_two |= {"q_1_2": 0.0, "V_1_2": 0.0, "m_2": 0.0, "theta_2": 0.0, "q_2_2": 1e-40, "V_2_2": 7.0}
        for l in range(2):
            at_one |= {f"z_{l + 1}": fields[l], f"xi_{l + 1}": xi[l], f"eta_{l + 1}": eta[l]}
            at_two |= {f"z_{l + 1}_1": fields[l], f"z_{l + 1}_2": 0.0, f"xi_{l + 1}_1": xi[l], f"xi_{l + 1}_2": 0.3}
            at_two[f"eta_{l + 1}"] = eta[l]
        assert _at(two.envelope, at_two) == pytest.approx(_at(one.envelope, at_one), rel=1e-12)
        for l in range(2):
            assert abs(_at(sp.diff(two.envelope, two.z[2 * l + 1]), at_two)) < 1e-12
        integrands = {x.name: e for x, e in two.energetic_integrands.items()}
        for x, expression in one.energetic_integrands.items():
            expected = _at(expression, at_one)
            assert _at(integrands[renamed[x.name]], at_two) == pytest.approx(expected, rel=1e-9, abs=1e-12)


#: A start near the rank-2 semantic fixed point at alpha 2 (the second column orthogonal to the teacher).
SEMANTIC_START = {
    "q_1_1": 0.0858, "q_1_2": 0.0, "q_2_2": 0.032, "m_1": 0.0, "m_2": 0.0,
    "V_1_1": 17.7, "V_1_2": 0.0, "V_2_2": 37.6, "theta_1": 0.130, "theta_2": 0.0,
}  # fmt: skip


@dataclass(frozen=True)
class RankTwoGeometry:
    """The rank-2 declaration's order-parameter geometry, built from its derived system alone (no kernels)."""

    layout: ParameterLayout
    patterns: SymmetryPatterns
    seeds: Seeds
    branches: dict[str, Branch]


@pytest.fixture(scope="module")
def rank_two_geometry() -> RankTwoGeometry:
    system = derive(rank_two())
    values = system.constant_values()
    consts = np.array([values[c] for c in system.constants], dtype=float)
    layout = ParameterLayout(system)
    geometry = OverlapGeometry(system, layout, consts, GEOMETRY)
    branches = {b.name: b for b in branches_of(system)}
    return RankTwoGeometry(layout, SymmetryPatterns(geometry), Seeds(geometry), branches)


@pytest.fixture(scope="module")
def rank_two_base():
    rule = ap.GaussHermite(6)
    return make_solver(rank_two(), ap.SolverSettings(quadrature=rule, test_quadrature=rule))


@pytest.fixture
def rank_two_solver(rank_two_base):
    """The rank-2 solver without the memory of other tests' solves."""
    return rank_two_base.renewed()


@pytest.mark.slow
def test_a_rank_two_fixed_point_holds_its_gauge_equation_and_is_the_same_from_any_rotation(rank_two_solver):
    """On the semantic branch (gauge ``theta_2 = 0``) the fixed point converges with a regular Jacobian;
    the held entry's equation, not solved, holds to rounding (the rule's nodes on mirror planes average
    their tied proxes, so the folded map keeps the reflection of each column); the second column is
    uncorrelated with the first (``q_1_2 = V_1_2 = 0``, the reflection's invariant subspace). A start
    rotated by any angle is rotated back onto the gauge and gives the same point."""
    solver = rank_two_solver
    branch = solver.branch("semantic")
    start = np.array([SEMANTIC_START[name] for name in solver.problem.layout.names])
    point, _ = solver.solve(2.0, branch, start)
    assert point.converged and point.branch == "semantic", point.status
    assert point.symmetry_defect < 1e-12
    values = dict(zip(point.names, point.values, strict=True))
    assert abs(values["q_1_2"]) < 1e-12 and abs(values["V_1_2"]) < 1e-10
    angle = 1.1
    R = np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]])
    turned = rotated(point.values, solver.problem.compiled.system.entries, R)
    assert abs(dict(zip(point.names, turned, strict=True))["theta_2"]) > 0.1  # off the gauge
    again, _ = solver.solve(2.0, branch, turned)
    assert again.converged
    np.testing.assert_allclose(np.abs(again.values), np.abs(point.values), rtol=1e-7, atol=1e-9)  # up to W -> -W
    assert again.energy == pytest.approx(point.energy, rel=1e-9)
    # the kink correction (1e-3 of eps_t) moves by about 1 % when the point moves by 1e-9
    assert again.line_correction == pytest.approx(point.line_correction, rel=2e-2)


def test_rounding_residue_of_an_off_diagonal_entry_counts_as_zero_in_the_fold_s_pattern(rank_two_geometry):
    """``q_1_2`` and ``V_1_2`` flip sign under the reflection of the second column, like ``m_2``: a Newton
    step leaves them at the rounding level, which must not cost the point its fold (without it the tied
    nodes on the reflection's mirror plane take whichever minimum the search meets, and ``F_q_1_2``
    jumps by 3e-4 with the residue's sign). An entry of 1e-6 is no residue. The symmetries of a pattern
    are tested with such an entry at a fraction of its bound (the geometry tuning's ``generic_fractions``),
    however small it was."""
    overlaps, names = rank_two_geometry.patterns, list(rank_two_geometry.layout.names)
    point = np.array([POSITIONAL_START[name] for name in names])
    residue, small = point.copy(), point.copy()
    residue[names.index("q_1_2")], residue[names.index("V_1_2")] = 3e-17, -2e-15
    small[names.index("q_1_2")] = 1e-6
    assert overlaps.zero_pattern(residue) == overlaps.zero_pattern(point)
    assert overlaps.zero_pattern(small) != overlaps.zero_pattern(point)
    generic_points = overlaps.generic_points(small, np.random.default_rng(0))
    for generic, (low, high) in zip(generic_points, GEOMETRY.generic_fractions, strict=True):
        bound = np.sqrt(generic[names.index("q_1_1")] * generic[names.index("q_2_2")])
        assert low * bound <= generic[names.index("q_1_2")] <= high * bound


def test_a_pattern_records_which_column_exchanges_leave_the_overlaps_unchanged(rank_two_geometry):
    """Equal columns (``q_1_1 = q_2_2``, ``V_1_1 = V_2_2``, all else zero) are left unchanged by the
    exchange of the columns, also with rounding residue between them, and not where they differ by 1e-9;
    the generic points of an equal-column pattern keep its columns equal (so that the exchange is tested
    where it can hold) and move every non-zero entry."""
    overlaps, names = rank_two_geometry.patterns, list(rank_two_geometry.layout.names)
    swap = next(k for k, p in enumerate(overlaps.column_permutations) if np.array_equal(p, [[0.0, 1.0], [1.0, 0.0]]))
    equal = np.zeros(len(names))
    for name, value in {"q_1_1": 0.046, "q_2_2": 0.046, "V_1_1": 33.0, "V_2_2": 33.0}.items():
        equal[names.index(name)] = value
    residue, apart = equal.copy(), equal.copy()
    residue[names.index("V_2_2")] *= 1 + 1e-14
    apart[names.index("V_2_2")] *= 1 + 1e-9
    assert swap in overlaps.column_stabiliser(equal)
    assert overlaps.symmetry_pattern(residue) == overlaps.symmetry_pattern(equal)
    assert swap not in overlaps.column_stabiliser(apart)
    for generic in overlaps.generic_points(equal, np.random.default_rng(0)):
        values = dict(zip(names, generic, strict=True))
        for first, second in (("q_1_1", "q_2_2"), ("V_1_1", "V_2_2")):
            assert values[first] == pytest.approx(values[second], rel=1e-15)
            assert values[first] != pytest.approx(equal[names.index(first)], rel=1e-6)
        assert overlaps.column_stabiliser(generic) == overlaps.column_stabiliser(equal)


@pytest.mark.slow
def test_a_rank_two_point_is_assessed_on_the_slice_of_its_gauge_and_from_constrained_points(rank_two_solver):
    """A rotation ``W -> W R`` leaves eps unchanged and moves a fixed point along its orbit, so the Hessian
    in every overlap entry has a zero eigenvalue along the orbit, whose sign only the rule's error
    decides: at the semantic point at alpha 1.168 on Gauss-Hermite 8 (gauge ``theta_2 = 0``) its diagonal
    entry in ``theta_2`` came out -0.026 with the overlaps' step 1e-2 and -0.043 with 3e-2, and the point's
    curvature in theta with it. On the gauge's slice there is no such direction: neither route has a row
    of the gauge's entry.

    There the elimination's block in ``V`` is nearly singular, and its forward and backward differences
    may disagree: where their ``spread`` passes the stability tuning's ``elimination_spread``,
    ``stability`` takes the Hessian from constrained points, else from the elimination. The block of the
    family the branch holds at zero (``m``), which does not see the eliminated variables, is the same by
    both routes to 1 % of its largest entry (measured: 0.2 %)."""
    solver = rank_two_solver.renewed()
    semantic = next(b for b in solver.branches if b.name == "semantic")
    point = AnchorSearch(solver)(1.168, semantic)
    assert point.converged and point.branch == "semantic" and semantic.gauge == ("theta_2",)
    eliminated = by_elimination(solver.renewed(), point)
    constrained = by_constraints(solver.renewed(), point)
    assert eliminated.names == constrained.names == ("m_1", "m_2", "theta_1")
    held = slice(0, 2)
    scale = np.abs(constrained.hessian[held, held]).max()
    np.testing.assert_allclose(eliminated.hessian[held, held], constrained.hessian[held, held], atol=1e-2 * scale)
    found = stability(solver.renewed(), point)
    chosen = constrained if eliminated.spread > ELIMINATION_SPREAD else eliminated
    np.testing.assert_allclose(found.hessian, chosen.hessian, rtol=1e-6, atol=1e-9)
    assert found.curvature("theta") > 0  # across the orbits, the semantic column is a minimum


#: A start near the rank-2 positional fixed point at alpha 2: rank 1's positional column and a second
#: column uncorrelated with it.
POSITIONAL_START = {
    "q_1_1": 0.0506, "q_1_2": 0.0, "q_2_2": 0.03, "m_1": 0.259, "m_2": 0.0,
    "V_1_1": 11.28, "V_1_2": 0.0, "V_2_2": 37.0, "theta_1": 0.0, "theta_2": 0.0,
}  # fmt: skip


@pytest.mark.slow
def test_the_rank_two_positional_point_converges_on_the_reflection_plane_of_its_second_column(rank_two_solver):
    """The positional point at alpha 2 (gauge ``m_2 = 0``) lies where the second column is uncorrelated
    with the first (``q_1_2 = V_1_2 = 0``); it is not rank 1's point plus a column, its first column
    moves (``q_1_1`` 0.031 against rank 1's 0.051 at Gauss-Hermite 8). Its symmetry defect is at the
    rounding level."""
    solver = rank_two_solver
    start = np.array([POSITIONAL_START[name] for name in solver.problem.layout.names])
    point, _ = solver.solve(2.0, solver.branch("positional"), start)
    assert point.converged and point.branch == "positional", point.status
    assert point.symmetry_defect < 1e-12
    values = dict(zip(point.names, point.values, strict=True))
    assert abs(values["q_1_2"]) < 1e-12 and abs(values["V_1_2"]) < 1e-10
    assert values["q_1_1"] < 0.04 and values["q_2_2"] > values["q_1_1"]


def test_the_mixed_branch_is_seeded_with_its_families_on_one_column_and_on_two(rank_two_geometry):
    """A rank-2 student can fit the positions and the teacher with one column or with one each: the
    mixed branch's anchor seeds both (its gauge holds ``m_2``, so ``m`` goes on the first column); the
    pure branches have one way, as every branch at rank 1."""
    seeds = rank_two_geometry.seeds
    mixed = rank_two_geometry.branches["mixed"]
    assert seeds.columns(mixed) == [{"m": 0, "theta": 0}, {"m": 0, "theta": 1}]
    assert seeds.columns(rank_two_geometry.branches["semantic"]) == [{"theta": 0}]
    names = list(rank_two_geometry.layout.names)
    base = np.array([POSITIONAL_START[name] for name in names])
    seeded = dict(zip(names, seeds.seeded(base, mixed, 0.5, {"m": 0, "theta": 1}), strict=True))
    assert seeded["theta_1"] == 0 and seeded["theta_2"] > 0 and seeded["m_1"] > 0 and seeded["m_2"] == 0


@pytest.mark.slow
def test_at_equal_columns_the_map_treats_the_two_columns_alike(rank_two_solver):
    """Where the two columns have the same overlaps (``q_1_1 = q_2_2``, ``V_1_1 = V_2_2``, all else zero:
    rank2's agnostic point at alpha 1.41), swapping the columns is a symmetry of the envelope, so the
    map's update must swap with them: ``F(q_1_1) = F(q_2_2)``, and the agnostic point converges. At
    nodes on the swap's mirror plane the prox has two minima of equal ``M*`` exchanged by the swap; the
    fold of the pattern's column stabiliser averages them (docs/validation/symmetry.md, "Rank 2's agnostic
    point: equal columns"), where keeping one made the columns' updates differ by
    2.4e-5 in ``q`` and the agnostic point end unconverged."""
    solver = rank_two_solver
    layout = solver.problem.layout
    x = np.zeros(len(layout.names))
    for name, value in {"q_1_1": 0.04618268, "q_2_2": 0.04618268, "V_1_1": 32.972679, "V_2_2": 32.972679}.items():
        x[layout.index(name)] = value
    for effort in (Effort.FULL, Effort.QUICK):
        updated = solver.problem.map.evaluate(x, 1.41, effort).updated
        for pair in (("q_1_1", "q_2_2"), ("V_1_1", "V_2_2")):
            first, second = (updated[layout.index(name)] for name in pair)
            assert first == pytest.approx(second, rel=1e-12)
    point = AnchorSearch(solver).symmetric_point(1.41)
    assert point.converged
    assert solver.problem.patterns.column_stabiliser(point.values)  # the columns stay alike
