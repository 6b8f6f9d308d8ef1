"""A student of rank 2 against the paper's rank-1 teacher (the paper's App. E.3): six Gaussian
dimensions, fixed points that are orbits of the rotations W -> W R (a gauge holds one entry per
branch at zero), its mixed point one column positional and the other semantic. Declared, derived,
solved on Gauss-Hermite 8 at two alphas, simulated from the same declaration, plotted.
Run: python examples/rank2.py (about eight minutes on two cores; most of it the anchor searches of
the six-dimension branches)."""

from dataclasses import replace

import attnphase as ap

model = replace(ap.paper_model(omega=0.3), rank=2)
assert model == ap.variant("rank2").model()  # the shipped variant of the same name
print(model.rotations())  # the continuous symmetry the gauge fixes

system = ap.derive(model)
document = system.equations_document()
print(document.text())  # the saddle-point system, plain
print(document.latex())  # the same, align* environments

# six dimensions: the pruned Gauss-Hermite 8 rule (docs/validation/quadrature.md, "Pruning and six dimensions"),
# every point's eps_t checked on four scrambled Sobol rules (the train_loss_error column)
result = ap.scan(model, alphas="1.0,2.0", order=8, threshold_order=0, stability=False, out="rank2-scan")
columns = ["alpha", "branch", "train_loss", "train_loss_error", "q_1_1", "q_2_2", "m_1", "theta_1", "theta_2"]
print(result.branches[columns].to_string())
runs = ap.simulate(model, d=200, alphas=[1.0, 2.0], seeds=2, theory=result, out="rank2-simulate")
print(runs.runs.groupby(["alpha", "init"])[["train_loss", "test_error"]].mean())
runs.plot().savefig("rank2-simulate.png")  # simulations over the theory's branches
