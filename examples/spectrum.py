"""A covariance spectrum with two atoms: half of the directions have variance 0.25, half 0.64, and
the encodings p_1 = -p_2 live in the first half. Declared, derived, scanned, simulated from the same
declaration, plotted. Run: python examples/spectrum.py (about four minutes on two cores)."""

import attnphase as ap

model = ap.AttentionModel(
    tokens=ap.GaussianTokens(variances=((0.5**2, 0.5**2), (0.8**2, 0.8**2)), weights=(0.5, 0.5)),
    positions=ap.PositionalEncodings(coefficients=((1.0,), (-1.0,))),  # in the first atom (the default)
    teacher=ap.MixedPositionalTeacher(omega=0.3, positional=((0.6, 0.4), (0.4, 0.6))),
    student=ap.DotProductAttention(),
    regulariser=ap.Ridge(0.01),
)
assert model == ap.variant("spectrum").model()  # the shipped variant of the same name

system = ap.derive(model)
document = system.equations_document()
print(document.text())  # the saddle-point system, plain
print(document.latex())  # the same, align* environments

result = ap.scan(model, alphas="0.4:2.4:0.4", out="spectrum-scan")  # branches, alpha_c, alpha_l
print(result.thresholds.T)
runs = ap.simulate(model, d=200, alphas=[0.8, 1.6, 2.4], seeds=2, theory=result, out="spectrum-simulate")
print(runs.runs.groupby(["alpha", "init"])[["train_loss", "test_error", "m", "theta", "q"]].mean())
runs.plot().savefig("spectrum-simulate.png")  # simulations over the theory's branches
