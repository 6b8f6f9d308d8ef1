"""The simulator reads its model from the declaration: coordinates, encodings, attention maps, order
parameters and objective, each checked against a direct computation, and the paper's runs against
the paper-only simulator that preceded it."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from attnphase.experiments.finite_model import FiniteModel, block_sizes, sign_pattern
from attnphase.experiments.training import (
    SimulationSettings,
    generator,
    initial_weights,
    objective,
    objective_and_gradient,
    simulate,
    teacher,
    training_data,
)
from attnphase.replica.declaration import (
    AttentionModel,
    DotProductAttention,
    ElasticNet,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    paper_model,
)

#: Three tokens, rank 2 against a rank-1 teacher, two spectral atoms; two positional directions in
#: the first atom and one in the second.
VARIANT = AttentionModel(
    tokens=GaussianTokens(variances=((0.25, 0.25, 0.5), (1.0, 1.0, 0.2)), weights=(0.75, 0.25)),
    positions=PositionalEncodings(coefficients=((1.0, 0.0, 0.5), (0.0, 1.0, 0.0), (-1.0, -1.0, -0.5)), atoms=(0, 0, 1)),
    teacher=MixedPositionalTeacher(0.3, ((0.5, 0.3, 0.2), (0.2, 0.5, 0.3), (0.3, 0.2, 0.5))),
    student=DotProductAttention(),
    regulariser=Ridge(0.02),
    rank=2,
    teacher_rank=1,
)


def _softmax_rows(a: np.ndarray) -> np.ndarray:
    e = np.exp(a - a.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def test_atoms_own_blocks_of_coordinates_summing_to_d():
    assert block_sizes((0.75, 0.25), 10) == (8, 2)  # 7.5 and 2.5: the tie goes to the first
    assert block_sizes((1 / 3, 1 / 3, 1 / 3), 10) == (4, 3, 3)
    assert sum(block_sizes((0.1, 0.2, 0.7), 37)) == 37


def test_encodings_are_orthonormal_flat_and_in_their_atoms():
    finite = FiniteModel(VARIANT, 64)
    u = finite.directions.numpy()
    np.testing.assert_allclose(u @ u.T, np.eye(3), atol=1e-15)
    assert np.all(u[:2, 48:] == 0) and np.all(u[2, :48] == 0)  # atoms (0, 0, 1): 48 and 16 coordinates
    np.testing.assert_allclose(np.abs(u[:2, :48]), 1 / math.sqrt(48))
    assert sign_pattern(1, 8).tolist() == [1, -1, 1, -1, 1, -1, 1, -1]
    p = finite.positions.numpy()
    np.testing.assert_allclose(p, np.array(VARIANT.positions.coefficients) @ u)


def test_tokens_have_the_declared_variances_per_atom():
    finite = FiniteModel(VARIANT, 40)
    z = finite.tokens(torch.Generator().manual_seed(0), 20_000).numpy()
    variance = z.var(axis=0)  # (L, d)
    np.testing.assert_allclose(variance[:, :30].mean(axis=1), (0.25, 0.25, 0.5), rtol=0.01)
    np.testing.assert_allclose(variance[:, 30:].mean(axis=1), (1.0, 1.0, 0.2), rtol=0.01)


def test_attention_maps_are_the_declared_ones():
    finite = FiniteModel(VARIANT, 8)
    h = torch.randn((5, 3, 2), generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    scores = (h @ h.transpose(-1, -2)).numpy()
    np.testing.assert_allclose(finite.student_attention(h).numpy(), _softmax_rows(scores), rtol=1e-13)
    h_star = h[..., :1]
    a = np.array(VARIANT.teacher.positional)
    expected = 0.7 * _softmax_rows((h_star @ h_star.transpose(-1, -2)).numpy()) + 0.3 * a
    np.testing.assert_allclose(finite.teacher_attention(h_star).numpy(), expected, rtol=1e-13)


def test_order_parameters_are_the_theory_s_under_its_names():
    d = 64
    finite = FiniteModel(VARIANT, d)
    rng = np.random.default_rng(2)
    w, w_star = rng.normal(size=(d, 2)), rng.normal(size=(d, 1))
    values = finite.order_parameters(torch.tensor(w), torch.tensor(w_star))
    # covariance classes: tokens 1 and 2 share (0.25 on atom 0, 1.0 on atom 1), token 3 (0.5, 0.2)
    sigma = [np.r_[np.full(48, 0.25), np.full(16, 1.0)], np.r_[np.full(48, 0.5), np.full(16, 0.2)]]
    u = finite.directions.numpy()
    expected = {}
    for c in range(2):
        q = w.T @ (sigma[c][:, None] * w) / d
        expected |= {f"q_{c + 1}_1_1": q[0, 0], f"q_{c + 1}_1_2": q[0, 1], f"q_{c + 1}_2_2": q[1, 1]}
        theta = w_star.T @ (sigma[c][:, None] * w) / d
        expected |= {f"theta_{c + 1}_1": theta[0, 0], f"theta_{c + 1}_2": theta[0, 1]}
    for k in range(3):
        m = u[k] @ w / math.sqrt(d)
        expected |= {f"m_{k + 1}_1": m[0], f"m_{k + 1}_2": m[1]}
    assert values.keys() == expected.keys()
    assert values == pytest.approx(expected, rel=1e-12)
    assert finite.measured_names() == tuple(values)


def test_the_variant_objective_matches_its_definition_sample_by_sample():
    """E(Q) = sum_mu ||T(z Q*/sqrt(d)) z - S((z + p) Q/sqrt(d)) (z + p)||^2/(2d) + lambda/2 ||Q||^2
    (THEORY.md sec. 1), at L = 3, r = 2, two spectral atoms."""
    d, alpha = 8, 0.5
    settings = SimulationSettings(model=VARIANT, d=d, alphas=(alpha,), seeds=(3,))
    finite = settings.finite
    data = training_data(alpha, [3], settings)
    w = np.random.default_rng(4).normal(size=(d, 2))
    w_star = teacher(3, settings).numpy()
    z = finite.tokens(generator(3, d, 2, alpha), 4).numpy()
    p, a = finite.positions.numpy(), np.array(VARIANT.teacher.positional)
    total = 0.0
    for sample in z:
        x = sample + p
        h_star, h = sample @ w_star / math.sqrt(d), x @ w / math.sqrt(d)
        t = 0.7 * _softmax_rows(h_star @ h_star.T) + 0.3 * a
        total += np.sum((t @ sample - _softmax_rows(h @ h.T) @ x) ** 2) / (2 * d)
    total += 0.02 / 2 * np.sum(w * w)
    assert data.n == 4
    assert float(objective(torch.tensor(w)[None], data, settings)[0]) == pytest.approx(total, rel=1e-12)


def test_the_variant_gradient_matches_central_differences():
    settings = SimulationSettings(model=VARIANT, d=8, alphas=(1.0,), seeds=(1, 2))
    data = training_data(1.0, [1, 2], settings)
    q = torch.randn((2, 8, 2), generator=torch.Generator().manual_seed(5), dtype=torch.float64)
    _, grad = objective_and_gradient(q, data, settings)
    numeric = torch.zeros_like(q)
    for i in range(8):
        for j in range(2):
            e = torch.zeros_like(q)
            e[:, i, j] = 1e-6
            numeric[:, i, j] = (objective(q + e, data, settings) - objective(q - e, data, settings)) / 2e-6
    np.testing.assert_allclose(grad.numpy(), numeric.numpy(), rtol=1e-6, atol=1e-9)


def test_informed_starts_at_rank_two_add_the_random_start():
    settings = SimulationSettings(model=VARIANT, d=16, alphas=(1.0,), seeds=2)
    data = training_data(1.0, [0, 1], settings)
    noise = initial_weights("random", [0, 1], data, settings)
    positional = initial_weights("positional", [0, 1], data, settings)
    torch.testing.assert_close(positional - noise, settings.finite.directions[0][None, :, None].expand(2, 16, 2))
    semantic = initial_weights("semantic", [0, 1], data, settings)
    torch.testing.assert_close(semantic - noise, data.teachers.expand(2, 16, 2))
    assert 0.05 < float(noise.std()) < 0.2


def test_a_too_small_d_is_refused_naming_the_atom():
    with pytest.raises(ValueError, match="d must give spectral atom 1 at least 1 coordinates"):
        SimulationSettings(model=VARIANT, d=2, alphas=(1.0,)).validate()


REFERENCE = pd.read_csv(Path(__file__).parent / "data" / "simulator_reference.csv")
#: The settings of ``tests/data/make_simulator_reference.py``, as declarations.
CASES = (
    ({"optimiser": "gd"}, paper_model()),
    ({"optimiser": "lbfgs"}, paper_model(omega=0.4, sigma=0.7, lam=0.03)),
    ({"optimiser": "adam"}, paper_model(omega=0.1, A=((0.3, 0.7), (0.8, 0.2)))),
    ({"optimiser": "gd", "lr": 0.5}, paper_model(omega=0.2)),
)


@pytest.mark.slow
@pytest.mark.parametrize("case", range(len(CASES)))
def test_the_paper_s_runs_are_those_of_the_paper_only_simulator(case):
    """Equal up to rounding (the attention is now the declaration's expression, not ``torch.softmax``),
    which L-BFGS's line search amplifies to a few 1e-9, and to 1e-9 in absolute terms in the
    gradient norm at convergence."""
    training, model = CASES[case]
    if case == 3:
        model = dataclasses.replace(model, regulariser=ElasticNet(0.005, 0.01))
    settings = SimulationSettings(
        model=model,
        d=40,
        alphas=(0.8, 1.6),
        seeds=2,
        inits=("positional", "semantic", "random"),
        max_steps=300,
        n_test=400,
        **training,
    )
    runs = simulate(settings)
    expected = REFERENCE[REFERENCE["case"] == case].reset_index(drop=True)
    assert (runs["steps"].to_numpy() == expected["steps"].to_numpy()).all()
    for column in ("train_loss", "test_error", "theta", "m", "q"):
        np.testing.assert_allclose(runs[column], expected[column], rtol=1e-6, atol=1e-12, err_msg=column)
    # a converged run's gradient (below 1e-6) is rounding-sized: absolute agreement
    np.testing.assert_allclose(runs["grad_norm"], expected["grad_norm"], rtol=1e-6, atol=1e-8)
