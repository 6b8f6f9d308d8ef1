"""Correlated tokens: each token from a two-cluster Gaussian mixture (cluster 1 with probability 0.6),
the clusters' labels drawn jointly (correlation 0.5 between the two tokens), means +-0.5 u_2
orthogonal to the encodings p_1 = -p_2 = u_1, and swapped covariance spectra (cluster 1: variance
0.16 on half of the directions and 0.36 on the other half; cluster 2 the reverse). Psi_out is the
exact sum over the four label configurations (THEORY.md sec. 8); q, V, theta are per cluster.
Declared, derived, scanned, simulated from the same declaration, plotted.
Run: python examples/mixture.py (about two minutes on two cores)."""

import attnphase as ap

model = ap.AttentionModel(
    tokens=ap.GaussianMixtureTokens(
        variances=((0.4**2, 0.6**2), (0.6**2, 0.4**2)),  # rows: the two halves of the directions
        weights=(0.5, 0.5),
        means=((0.0, 0.5), (0.0, -0.5)),  # coefficients on the directions u_1, u_2 of the encodings
        label_law=(((0, 0), 0.48), ((0, 1), 0.12), ((1, 0), 0.12), ((1, 1), 0.28)),
    ),
    positions=ap.PositionalEncodings(coefficients=((1.0, 0.0), (-1.0, 0.0))),
    teacher=ap.MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.4), (0.4, 0.6))),
    student=ap.DotProductAttention(),
    regulariser=ap.Ridge(0.01),
)
assert model == ap.variant("mixture").model()  # the shipped variant of the same name

system = ap.derive(model)
print([e.name for e in system.entries])  # q_1, q_2, m_1 (positional), m_2 (cluster mean), V_1, V_2, ...
print(system.student_fields)  # each token's field, selected by its label indicators s_l_j
print(system.equations_document().latex())

result = ap.scan(model, alphas="0.4:2.4:0.4", out="mixture-scan")  # branches, alpha_c, alpha_l
print(result.thresholds.T)
runs = ap.simulate(model, d=200, alphas=[0.8, 1.6, 2.4], seeds=2, theory=result, out="mixture-simulate")
print(runs.runs.groupby(["alpha", "init"])[["train_loss", "test_error", "m_1", "m_2", "theta_1", "q_1"]].mean())
runs.plot().savefig("mixture-simulate.png")  # simulations over the theory's branches
