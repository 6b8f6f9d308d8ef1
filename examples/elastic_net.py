"""The elastic net g(w) = l1 |w| + l2/2 w^2 in place of ridge: its entropic potential is a Gaussian
average of the soft-thresholding Moreau envelope (THEORY.md sec. 3), derived from the declaration.
Declared, derived, scanned, trained by proximal gradient descent, plotted.
Run: python examples/elastic_net.py (about four minutes on two cores)."""

import dataclasses

import attnphase as ap

model = dataclasses.replace(ap.paper_model(omega=0.3), regulariser=ap.ElasticNet(l1=0.005, l2=0.01))
assert model == ap.variant("elastic-net").model()

system = ap.derive(model)
print(system.order_updates)  # m, q, V, theta in closed form in the conjugates (erf and exp)
print(system.equations_document().latex())

result = ap.scan(model, alphas="0.5:2.5:0.5", order=12, out="elastic-net-scan")
print(result.thresholds.T)  # alpha_c near 1.88 (ridge alone: 1.25)
runs = ap.simulate(
    model,
    d=200,
    alphas=[1.0, 2.0],
    seeds=2,
    optimiser="gd",  # proximal gradient descent: a gradient step, then soft-thresholding
    lr=0.5,
    tolerance=1e-5,
    max_steps=20_000,
    theory=result,
    out="elastic-net-simulate",
)
print(runs.runs.groupby(["alpha", "init"])[["train_loss", "test_error", "m", "theta", "q"]].mean())
runs.plot().savefig("elastic-net-simulate.png")
