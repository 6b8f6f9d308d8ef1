"""A student of rank 2: the rotations of its columns, the gauge that fixes them, and its fixed points."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import pytest
import sympy as sp

import attnphase as ap
from attnphase.replica.declaration import DeclarationError, ElasticNet, UntiedDotProductAttention
from attnphase.replica.saddle_equations import derive
from attnphase.saddle.branches import branches_of
from attnphase.saddle.gauge import into_gauge, rotated


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
        moved = dict(zip(names, into_gauge(values, entries, generators, held), strict=True))
        assert abs(moved[gauge[0]]) < 1e-12
        original = dict(zip(names, values, strict=True))
        for a, b in (("m_1", "m_2"), ("theta_1", "theta_2")):  # the overlap vectors keep their norms
            assert np.hypot(moved[a], moved[b]) == pytest.approx(np.hypot(original[a], original[b]), rel=1e-12)
        assert moved["q_1_1"] + moved["q_2_2"] == pytest.approx(original["q_1_1"] + original["q_2_2"], rel=1e-12)
