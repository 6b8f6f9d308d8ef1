"""Untied key and query (THEORY.md sec. 8): W = [Q, K], the student's attention softmax(hQ hK^T), so
its fields are two columns and the quadrature has six Gaussian dimensions. The order parameters
are 2 x 2 (q_1_2 is the query-key overlap) and m, theta have one entry per column. Declared,
derived, solved on Gauss-Hermite 8 at two alphas, simulated from the same declaration, plotted.
Run: python examples/untied.py (about eleven minutes on two cores; most of it the anchor searches of
the six-dimension branches, one of which alone takes about six)."""

from dataclasses import replace

import attnphase as ap

model = replace(ap.paper_model(omega=0.3), student=ap.UntiedDotProductAttention(), rank=2)
assert model == ap.variant("untied").model()  # the shipped variant of the same name

system = ap.derive(model)
document = system.equations_document()
print(document.text())  # the saddle-point system, plain
print(document.latex())  # the same, align* environments

# six dimensions: the pruned Gauss-Hermite 8 rule (docs/validation/quadrature.md, "Pruning and six dimensions"),
# every point's eps_t checked on four scrambled Sobol rules (the train_loss_error column)
result = ap.scan(model, alphas="1.0,2.0", order=8, threshold_order=0, stability=False, out="untied-scan")
columns = ["alpha", "branch", "train_loss", "train_loss_error", "q_1_1", "q_1_2", "q_2_2", "m_1", "m_2"]
print(result.branches[columns + ["theta_1", "theta_2", "converged"]].to_string())
runs = ap.simulate(model, d=200, alphas=[1.0, 2.0], seeds=2, theory=result, out="untied-simulate")
print(runs.runs.groupby(["alpha", "init"])[["train_loss", "test_error"]].mean())
runs.plot().savefig("untied-simulate.png")  # simulations over the theory's branches
