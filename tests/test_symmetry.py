"""Folding the prox by the envelope's symmetries: the right symmetries are found, and the
folded map equals the unfolded one."""

from __future__ import annotations

import numpy as np
import pytest

from attnphase.replica.declaration import paper_model
from attnphase.saddle.geometry.branches import Branch
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.prox.symmetry import NodeLookup, SignedPermutation, envelope_symmetries
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.search.anchors import AnchorSearch
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning

#: The relative tolerance of the envelope's symmetry test (the prox tuning's).
INVARIANCE = Tuning().prox.invariance_tolerance

#: The paper's branches (THEORY.md sec. 6), named as its declaration names them.
AGNOSTIC = Branch("agnostic", ("m", "theta"))
POSITIONAL = Branch("positional", ("theta",))
SEMANTIC = Branch("semantic", ("m",))

SWAP = (1, 0)
IDENTITY = (0, 1)


def symmetries(solver, params) -> set[tuple]:
    rng = np.random.default_rng(1)
    found = envelope_symmetries(solver.problem.engine.kernel.envelope(params), 2, 1, 1, rng, INVARIANCE)
    return {(g.permutation, g.sign_xi[0], g.sign_eta[0], g.sign_z[0]) for g in found}


@pytest.fixture(scope="module")
def coarse_base():
    return make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(8), fold_symmetries=False))


@pytest.fixture
def coarse_solver(coarse_base):
    """The unfolded solver on Gauss-Hermite 8 without the memory of other tests' solves."""
    return coarse_base.renewed()


def test_the_symmetries_of_the_paper_model_are_found(coarse_solver):
    # params (q, m, V, theta). With m = 0 the fields are odd in (xi, eta) and both attentions
    # are even, so the global sign flip is a symmetry; with theta = 0 the teacher field is
    # sqrt(rho) eta alone, so eta -> -eta is one; the standard A is invariant under the
    # token swap, which maps m_1 = m to -m_2 and hence needs xi, z -> -xi, -z.
    semantic = symmetries(coarse_solver, np.array([0.1, 0.0, 15.0, 0.1]))
    positional = symmetries(coarse_solver, np.array([0.05, 0.25, 13.0, 0.0]))
    generic = symmetries(coarse_solver, np.array([0.1, 0.2, 15.0, 0.1]))
    assert (IDENTITY, -1, -1, -1) in semantic
    assert (IDENTITY, 1, -1, 1) not in semantic
    assert (IDENTITY, 1, -1, 1) in positional
    assert (SWAP, -1, 1, -1) in positional
    assert (IDENTITY, -1, -1, -1) not in positional
    assert generic == {(IDENTITY, 1, 1, 1), (SWAP, -1, -1, -1)}


def test_an_asymmetric_positional_target_breaks_the_token_swap():
    solver = make_solver(
        paper_model(A=((0.3, 0.7), (0.8, 0.2))),
        SolverSettings(quadrature=GaussHermite(8), fold_symmetries=False),
    )
    found = symmetries(solver, np.array([0.05, 0.25, 13.0, 0.0]))
    assert all(perm == IDENTITY for perm, *_ in found)
    assert (IDENTITY, 1, -1, 1) in found


@pytest.mark.parametrize(("branch", "alpha"), [(POSITIONAL, 1.5), (SEMANTIC, 1.5), (AGNOSTIC, 1.0)])
def test_the_folded_map_equals_the_unfolded_one(coarse_solver, branch, alpha):
    point = AnchorSearch(coarse_solver)(alpha, branch)
    folded = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(8)))
    fold = folded.problem.engine.fold(point.values)
    assert fold is not None and fold.ratio > 3.5
    for effort in (Effort.FULL, Effort.QUICK):  # the full prox first: the quick one starts from it too (warm start)
        plain = coarse_solver.problem.map.evaluate(point.values, alpha, effort)
        quick = folded.problem.map.evaluate(point.values, alpha, effort)
        assert quick.mean_envelope == pytest.approx(plain.mean_envelope, rel=1e-12)
        np.testing.assert_allclose(quick.updated, plain.updated, rtol=1e-8, atol=1e-12)


def test_a_rule_without_the_symmetry_is_not_folded():
    solver = make_solver(paper_model(), SolverSettings(quadrature=ScrambledSobol(8)))
    assert solver.problem.engine.fold(np.array([0.1, 0.0, 15.0, 0.1])) is None


@pytest.mark.slow
def test_the_group_is_closed():
    """The candidates compose as maps of the node variables: the composite of any two is a candidate, and
    there are ``2^(2r + t) r! L!`` of them."""
    from math import factorial

    from attnphase.saddle.prox.symmetry import candidates

    def as_map(g: SignedPermutation, r: int, t: int) -> tuple:
        index, sign = g.node_map(r, t)
        z_index, z_sign = g.z_map(r)
        return tuple(index), tuple(sign), tuple(z_index), tuple(z_sign)

    def compose(a: SignedPermutation, b: SignedPermutation, r: int, t: int) -> tuple:
        (ia, sa, za, zsa), (ib, sb, zb, zsb) = as_map(a, r, t), as_map(b, r, t)
        # (a b n)[i] = sa[i] (b n)[ia[i]] = sa[i] sb[ia[i]] n[ib[ia[i]]]
        nodes = tuple(ib[i] for i in ia), tuple(sa[k] * sb[i] for k, i in enumerate(ia))
        prox = tuple(zb[i] for i in za), tuple(zsa[k] * zsb[i] for k, i in enumerate(za))
        return (*nodes, *prox)

    for r, t in ((1, 1), (2, 1)):
        group = candidates(3, r, t)
        keys = {as_map(g, r, t) for g in group}
        assert len(keys) == len(group) == 2 ** (2 * r + t) * factorial(r) * 6
        assert all(compose(a, b, r, t) in keys for a in group for b in group)


def test_a_negligible_overlap_does_not_lend_its_pattern_the_symmetry_that_flips_it():
    """The fold of a zero pattern is found at generic points of the pattern, not at the first point
    met: a positional point on its way to a merger (m ~ 1e-12, theta = 0) seen first must not fold the
    rule by Q -> -Q, which holds only at m = 0 (it made every later positional point wrong)."""
    solver = make_solver(paper_model(omega=0.2), SolverSettings(quadrature=GaussHermite(8)))
    nearly_agnostic = np.array([0.05, 1e-12, 13.0, 0.0])
    fold = solver.problem.engine.fold(nearly_agnostic)
    assert fold is not None and fold.ratio < 4.5  # the positional group (order 4), not order 8
    positional = np.array([0.05, 0.2, 13.0, 0.0])
    for effort in (Effort.QUICK, Effort.FULL):
        folded = solver.problem.map.evaluate(positional, 1.3, effort)
        plain = make_solver(paper_model(omega=0.2), SolverSettings(quadrature=GaussHermite(8), fold_symmetries=False))
        unfolded = plain.problem.map.evaluate(positional, 1.3, effort)
        assert folded.mean_envelope == pytest.approx(unfolded.mean_envelope, rel=1e-12)
        np.testing.assert_allclose(folded.updated, unfolded.updated, rtol=1e-8, atol=1e-12)


@pytest.mark.slow
@pytest.mark.parametrize(
    "point",
    [
        (0.265, 0.275, -0.127, 7.57, 0.133),  # every overlap non-zero, m_1 and m_2 of opposite signs
        (0.265, 0.275, 0.127, 7.57, 0.0),  # positional pattern, m_1 != m_2 of one sign
    ],
)
def test_entries_of_one_family_are_not_tested_equal(three_token_model, point):
    """The symmetries of a zero pattern are tested where the entries of one family differ: with
    ``m_1 = +-m_2`` at both test points, the swap of the two tokens whose encodings exchange ``u_1`` and
    ``u_2`` passed for a symmetry of every pattern of the three-token declaration, and the folded map
    was wrong wherever ``|m_1| != |m_2|`` (its ``q`` update 0.34 instead of 0.14 at the first point)."""
    params = np.array(point)
    rule = GaussHermite(6)
    folded = make_solver(three_token_model, SolverSettings(quadrature=rule))
    plain = make_solver(three_token_model, SolverSettings(quadrature=rule, fold_symmetries=False))
    for effort in (Effort.FULL, Effort.QUICK):
        with_fold = folded.problem.map.evaluate(params, 2.5, effort)
        without = plain.problem.map.evaluate(params, 2.5, effort)
        assert with_fold.mean_envelope == pytest.approx(without.mean_envelope, rel=1e-10)
        np.testing.assert_allclose(with_fold.updated, without.updated, rtol=1e-7, atol=1e-12)


def test_node_lookup_finds_every_image_of_a_rule_and_only_those():
    """The indices of sign-flipped and permuted nodes among a tensor Gauss-Hermite rule's nodes,
    against a dictionary of the rounded coordinates; ``-0`` and ``+0`` are one coordinate."""
    nodes, _ = GaussHermite(7).nodes(4)
    table = {tuple(key): i for i, key in enumerate(np.round(nodes.T, 9) + 0.0)}
    images = -nodes[[1, 0, 3, 2]]
    expected = [table.get(tuple(key), -1) for key in np.round(images.T, 9) + 0.0]
    found = NodeLookup(nodes).indices(images)
    np.testing.assert_array_equal(found, expected)
    assert (found >= 0).all()
    assert (NodeLookup(nodes).indices(nodes + 0.01) == -1).all()


def _rank_two_envelope(z: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """A stand-in for a rank-2 student's envelope (L = 2, r = 2, t = 1): a prior pulling each token's
    field ``z_l`` to its nodes ``xi_l``, and a loss that sees the fields only through ``z z^T`` and the
    teacher's fields only through ``eta eta^T``."""
    xi, eta = nodes[:4].reshape(2, 2, -1), nodes[4:6]
    fields = z.reshape(2, 2, -1)
    gram = np.einsum("lis,kis->lks", fields, fields)
    target = np.einsum("ls,ks->lks", eta, eta)
    return 0.5 * ((fields - xi) ** 2).sum(axis=(0, 1)) + ((gram - target) ** 2).sum(axis=(0, 1))


def test_each_column_of_a_rank_two_student_has_its_own_reflection_and_the_columns_exchange():
    """``W -> W diag(1, -1)`` is a rotation's reflection, not a global sign, and ``W -> W [[0, 1], [1, 0]]``
    exchanges the columns: the candidates carry one sign per column and the column permutations, so the
    fold (and the ties on its mirror planes) see them."""
    found = envelope_symmetries(_rank_two_envelope, 2, 2, 1, np.random.default_rng(2), INVARIANCE)
    keys = {(g.permutation, g.columns, g.sign_xi, g.sign_eta, g.sign_z) for g in found}
    assert (IDENTITY, IDENTITY, (1, -1), (1,), (1, -1)) in keys  # the second column's reflection
    assert (SWAP, IDENTITY, (-1, 1), (-1,), (-1, 1)) in keys
    assert (IDENTITY, SWAP, (1, 1), (1,), (1, 1)) in keys  # the columns' exchange
    assert (IDENTITY, IDENTITY, (1, -1), (1,), (1, 1)) not in keys  # the nodes reflected without the prox
    assert (IDENTITY, SWAP, (1, 1), (1,), (1, -1)) not in keys
    assert len(keys) == 2 * 2 * 4 * 2  # token swap, column exchange, column signs, teacher sign


def test_a_node_on_a_mirror_plane_stands_for_the_images_of_its_prox():
    """On a rule folded by the token swap, the nodes with ``xi_1 = xi_2`` are their own images: their
    stabiliser has two elements, and ``Fold.mirrored`` gives the swapped prox there (where the prox is not
    swap-symmetric, an equally good minimiser), for the integrands to be averaged over both."""
    from attnphase.saddle.prox.symmetry import fold_nodes

    rule = GaussHermite(4)
    nodes, weights = rule.nodes(2)
    swap = SignedPermutation(SWAP, (1,), (), (1,))
    fold = fold_nodes(nodes, weights, [swap], r=1, t=0)
    assert fold is not None and fold.ratio > 1.5
    on_plane = np.isclose(nodes[0], nodes[1])
    np.testing.assert_array_equal(fold.stabiliser_sizes, np.where(on_plane, 2, 1))
    z = nodes.copy()
    z[0, on_plane] += 0.5  # the prox leans to token 1 on the plane
    ((mirror_nodes, image),) = fold.mirrored(z)
    np.testing.assert_array_equal(mirror_nodes, np.flatnonzero(on_plane))
    np.testing.assert_array_equal(image, z[::-1][:, on_plane])


def test_a_pattern_met_first_outside_the_domain_still_folds_later():
    """At ``q < 0`` the envelope is not finite at the pattern's generic points, so no fold is found (nor
    remembered) there and the full prox runs on all nodes; a quick evaluation of the same pattern
    inside the domain then folds, and the warm start left on all nodes is not one of its starts: it
    computes what a map that never left the domain computes."""
    solver = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(8)))
    outside, inside = np.array([-0.01, 0.0, 30.0, 0.05]), np.array([0.03, 0.0, 30.0, 0.05])
    patterns, engine, saddle_map = solver.problem.patterns, solver.problem.engine, solver.problem.map
    assert patterns.zero_pattern(outside) == patterns.zero_pattern(inside)
    with np.errstate(all="ignore"):
        saddle_map.evaluate(outside, 1.0, Effort.FULL)
    assert engine.fold(outside) is None
    quick = saddle_map.evaluate(inside, 1.0, Effort.QUICK)
    assert engine.fold(inside) is not None
    fresh = make_solver(paper_model(), SolverSettings(quadrature=GaussHermite(8))).problem.map  # never outside
    np.testing.assert_allclose(quick.updated, fresh.evaluate(inside, 1.0, Effort.QUICK).updated, rtol=1e-12)
