"""GAMP on data (paper App. B.2): its pieces against the training objective, its fixed points against
the training loss's stationary points and the state evolution."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import torch

import attnphase as ap
from attnphase.experiments.gamp import Denoiser, GampTuning, ProxRule, newton, prox
from attnphase.experiments.gamp_study import GampSettings, gamp_on_training_set, run_gamp
from attnphase.experiments.training import (
    initial_weights,
    objective_and_gradient,
)


def _gamp(model, alpha, d):
    return gamp_on_training_set(GampSettings(model, alpha, d))


def test_sample_losses_add_up_to_the_training_objective_and_its_gradient():
    """sum_mu l_mu(F_mu Q) + l2 |Q|^2 / 2 is the simulator's objective, and F^T grad l + l2 Q its gradient."""
    model = ap.paper_model(omega=0.4, lam=0.05)
    gamp, data, simulation = _gamp(model, 1.2, 60)
    q = initial_weights("random", [0], data, simulation)[0] * 5
    h = gamp.fields(q)
    value, grad, _ = gamp.losses.derivatives(h, torch.arange(h.shape[0]))
    l2 = model.regulariser.separable_weights()[1]
    expected, expected_grad = objective_and_gradient(q[None], data, simulation)
    assert float(value.sum() + 0.5 * l2 * (q * q).sum()) == pytest.approx(float(expected[0]), rel=1e-12)
    n, length, _ = gamp.f.shape
    chained = torch.einsum("nli,nla->ia", gamp.f, grad.reshape(n, length, -1)) + l2 * q
    torch.testing.assert_close(chained, expected_grad[0], rtol=1e-10, atol=1e-12)


def test_the_hessian_is_the_derivative_of_the_gradient():
    """The per-sample Hessian equals central differences of the per-sample gradient."""
    gamp, data, simulation = _gamp(ap.paper_model(omega=0.2), 1.0, 40)
    h = gamp.fields(initial_weights("random", [0], data, simulation)[0] * 8)
    samples = torch.arange(h.shape[0])
    _, _, hess = gamp.losses.derivatives(h, samples)
    step = 1e-5
    for j in range(h.shape[1]):
        e = torch.zeros_like(h)
        e[:, j] = step
        up, down = gamp.losses.derivatives(h + e, samples)[1], gamp.losses.derivatives(h - e, samples)[1]
        torch.testing.assert_close(hess[:, :, j], (up - down) / (2 * step), rtol=1e-5, atol=1e-8)


def test_newton_ends_at_a_stationary_point_and_the_global_rule_at_the_lowest():
    """Each row's Newton meets the gradient tolerance; the global rule's value is at most that of Newton
    from omega and from zero, at every sample."""
    gamp, data, simulation = _gamp(ap.paper_model(omega=0.15), 2.0, 50)
    state = gamp.start(initial_weights("positional", [0], data, simulation)[0] * 40, 30.0)
    envelopes = gamp.envelopes(state)
    tuning = GampTuning()
    best = prox(envelopes, ProxRule.GLOBAL, None, gamp.directions, tuning)
    assert bool(best.converged.all())
    assert float(envelopes.derivatives(best.z)[1].norm(dim=-1).max()) <= tuning.prox_tolerance
    for start in (envelopes.omega, torch.zeros_like(envelopes.omega)):
        single = newton(envelopes, start, tuning)
        assert bool((best.value <= single.value + 1e-14).all())


def test_the_local_rule_descends_from_the_cavity_mean_whatever_the_last_step():
    """The local rule (the theory's local policy) is Newton from omega at every step, never lower than the
    global rule and never above the envelope at omega."""
    gamp, data, simulation = _gamp(ap.paper_model(omega=0.15), 2.0, 50)
    state = gamp.start(initial_weights("positional", [0], data, simulation)[0] * 40, 30.0)
    envelopes = gamp.envelopes(state)
    tuning = GampTuning()
    local = prox(envelopes, ProxRule.LOCAL, None, gamp.directions, tuning)
    elsewhere = prox(envelopes, ProxRule.LOCAL, torch.zeros_like(envelopes.omega), gamp.directions, tuning)
    assert torch.equal(local.z, elsewhere.z)
    best = prox(envelopes, ProxRule.GLOBAL, None, gamp.directions, tuning)
    assert bool((local.value >= best.value - 1e-14).all())
    assert bool((local.value <= envelopes.value(envelopes.omega) + 1e-14).all())


@pytest.mark.parametrize("l1", [0.0, 0.3])
def test_the_denoiser_minimises_the_input_objective(l1):
    """w = argmin l1 |w| + l2 w^2/2 + A w^2/2 - b w at rank 1, against a dense grid."""
    denoiser = Denoiser(l1, 0.1, 1)
    a = torch.tensor([[[0.5]], [[2.0]], [[0.05]]], dtype=torch.float64)
    b = torch.tensor([[0.2], [-1.5], [0.7]], dtype=torch.float64)
    w, _ = denoiser(a, b)
    grid = np.linspace(-40, 40, 800_001)
    for i in range(3):
        objective = l1 * np.abs(grid) + 0.5 * (0.1 + float(a[i, 0, 0])) * grid**2 - float(b[i, 0]) * grid
        assert float(w[i, 0]) == pytest.approx(grid[np.argmin(objective)], abs=2e-4)


def test_bad_settings_are_named():
    model = ap.paper_model()
    with pytest.raises(ValueError, match="init"):
        GampSettings(model, init="sideways")
    with pytest.raises(ValueError, match="damping"):
        GampTuning(damping=1.5)
    with pytest.raises(ValueError, match="prox"):
        ap.gamp(model, prox="nearest", d=20, progress=False)
    with pytest.raises(ValueError, match="regulariser"):
        Denoiser(0.1, 0.1, 2)


def _run(model, alpha, d, init, **options):
    return run_gamp(GampSettings(model, alpha, d, init, **options))


@pytest.mark.slow
def test_started_at_a_training_minimum_gamp_stays_there():
    """Check (c): at omega 0.2, alpha 2, d = 400, from the L-BFGS minimum of the positional start with
    consistent variances, GAMP (followed rule) does not move, and nearly every sample's field is its
    envelope's global minimiser there, as is the minimiser a descent from its cavity mean reaches (the
    local policy agrees with the global one on nearly every sample)."""
    model = ap.paper_model(omega=0.2)
    iterations, classes, outcome = _run(
        model,
        2.0,
        400,
        "positional",
        trained=True,
        rule=ProxRule.FOLLOWED,
        iterations=10,
        state_evolution=False,
        tuning=GampTuning(damping=0.3),
    )
    assert outcome["start_variances_consistent"]
    first, last = iterations.iloc[0], iterations.iloc[-1]
    for name in ("q", "m", "theta"):
        assert last[name] == pytest.approx(first[name], abs=1e-6)
    assert last["gradient_norm"] < 1e-6 and first["m"] > 0.1
    assert outcome["at_global"] > 0.9 and (classes["gap"] >= -1e-9).all()
    assert outcome["descent_at_global"] > 0.9
    assert outcome["training_minimum_overlap"] > 0.999


def _iterates_beside_the_map(d: int, seeds: range, start_m: float = 0.05):
    """Undamped GAMP and the map from the same overlaps, one row per (seed, step): the paper's model at
    lambda 0.1, omega 0.3, alpha 1.5, from the positional start scaled to ``m = start_m``."""
    frames = []
    for seed in seeds:
        settings = GampSettings(
            ap.paper_model(omega=0.3, lam=0.1),
            1.5,
            d,
            "positional",
            seed=seed,
            iterations=20,
            tolerance=1e-30,
            tuning=GampTuning(damping=1.0),
            start_scale=start_m * d**0.5,
        )
        iterations, _, _ = run_gamp(settings)
        by_source = iterations.set_index(["source", "iteration"])[["m", "q", "V"]].abs()
        frames.append(by_source.loc["gamp"].join(by_source.loc["state_evolution"], suffixes=("", "_map")))
    return pd.concat(frames)


@pytest.mark.slow
def test_gamp_follows_its_state_evolution_step_by_step_closer_as_d_grows():
    """Check (a): undamped GAMP's overlaps, averaged over training sets, follow the map's iterates from
    the same start at every step, the largest distance shrinking from d = 200 to 800 (docs/validation/
    gamp_iterations.py runs d = 500 to 4000); both converge, to the same fixed point within 0.02."""
    bias = {}
    for d in (200, 800):
        steps = _iterates_beside_the_map(d, range(4)).groupby(level="iteration").mean()
        bias[d] = (steps[["m", "q", "V"]] - steps[["m_map", "q_map", "V_map"]].to_numpy()).abs().max()
        assert steps["m"].iloc[-1] == pytest.approx(steps["m"].iloc[-2], abs=1e-5)
        assert steps["m"].iloc[-1] == pytest.approx(steps["m_map"].iloc[-1], abs=0.02)
        assert steps["m_map"].iloc[-1] > 2 * steps["m_map"].iloc[0]  # the path moves: the check is not trivial
    assert (bias[800] < bias[200]).all(), bias


@pytest.mark.slow
def test_gamp_converges_to_a_stationary_point_near_the_state_evolution_fixed_point():
    """Checks (a), (b), (d) at one size: from the semantic start at omega 0.3, alpha 1.5, d = 100 (global
    rule), GAMP converges to a zero-gradient point of the training loss (App. B.4), the minimum L-BFGS
    reaches from the same start, with every sample at its envelope's global minimiser, within a
    finite-size allowance (15 %) of the state evolution's fixed point, which the map reaches from the
    same overlaps."""
    model = ap.paper_model(omega=0.3)
    iterations, classes, outcome = _run(model, 1.5, 100, "semantic", iterations=300, tuning=GampTuning(damping=0.3))
    assert outcome["converged"] and outcome["gradient_norm"] < 1e-6
    assert outcome["training_minimum_overlap"] > 0.99
    assert (classes["gap"] >= -1e-9).all()
    last = iterations.groupby("source").tail(1).set_index("source")
    assert last.loc["state_evolution", "step"] < 1e-6
    for name in ("q", "theta", "V"):
        theory = last.loc["state_evolution", name]
        assert abs(last.loc["gamp", name] - theory) < 0.15 * abs(theory), name


@pytest.mark.slow
def test_from_the_positional_start_gamp_ends_on_the_training_minimum_of_that_start():
    """Check (d) on the positional branch away from the default: at omega 0.4, alpha 1, d = 400, GAMP from
    the positional start converges to the minimum L-BFGS reaches from it on the same training set (Gram
    matrices' cosine above 0.99), a positional state (m well above theta)."""
    model = ap.paper_model(omega=0.4)
    iterations, _, outcome = _run(
        model, 1.0, 400, "positional", iterations=200, state_evolution=False, tuning=GampTuning(damping=0.3)
    )
    assert outcome["converged"] and outcome["gradient_norm"] < 1e-6
    assert outcome["training_minimum_overlap"] > 0.99
    last = iterations.iloc[-1]
    assert last["m"] > 0.2 > 10 * abs(last["theta"])
