"""Finite-d training against the theory on the paper's model.

    python docs/validation/agreement.py [default] [leaving]     # default: both

``default``: L-BFGS (gradient norm 1e-6, 10 000 test samples) at d = 400 and 800, eight seeds, from the
positional start at alpha = 0.8 and the semantic start at alpha = 2.0 (on each side of alpha_c), seed means
with their standard errors against the fixed point on the default rule (``attnphase simulate --d D --alphas
0.8,2.0 --seeds 8``).
``leaving``: with A = (0.3, 0.7; 0.8, 0.2), random starts at d = 3200, two seeds, alpha 1 and 2: where they end,
against the stable semantic point (``attnphase simulate --A 0.3,0.7,0.8,0.2 --d 3200 --alphas 1.0,2.0
--init random --seeds 2``).
"""

from __future__ import annotations

import sys

import numpy as np

import attnphase as ap

QUANTITIES = {"train_loss": "eps_t", "test_error": "eps_g", "m": "|m|", "theta": "theta"}


def default() -> None:
    model = ap.paper_model()
    theory = ap.scan(model, alphas=[0.8, 2.0], stability=False, progress=False)
    points = theory.branches.set_index(["branch", "alpha"])
    print("| alpha, start | d | " + " | ".join(QUANTITIES.values()) + " |")
    print("|---|---|---|---|---|---|")
    for d in (400, 800):
        for alpha, init in ((0.8, "positional"), (2.0, "semantic")):
            runs = ap.simulate(model, d=d, alphas=[alpha], seeds=8, init=init, theory=theory, progress=False).runs
            point = points.loc[(init, alpha)]
            cells = []
            for column in QUANTITIES:
                values = runs[column].abs() if column == "m" else runs[column]
                se = values.std(ddof=1) / np.sqrt(len(values))
                cells.append(f"{values.mean():.4g} +- {se:.2g} (theory {abs(point[column]):.4g})")
            converged = int(runs["converged"].sum())
            print(f"| {alpha:g}, {init} ({converged}/{len(runs)} converged) | {d} | " + " | ".join(cells) + " |")


def leaving() -> None:
    model = ap.paper_model(A=((0.3, 0.7), (0.8, 0.2)))
    theory = ap.scan(model, alphas=[1.0, 2.0], stability=False, progress=False)
    for row in theory.branches[theory.branches["converged"].astype(bool)].itertuples():
        print(f"theory {row.branch} at {row.alpha:g}: theta {row.theta:.4f}, q {row.q:.4f}, eps_t {row.train_loss:.5f}")
    runs = ap.simulate(model, d=3200, alphas=[1.0, 2.0], seeds=2, init="random", theory=theory, progress=False).runs
    for r in runs.itertuples():
        print(
            f"run alpha {r.alpha:g} seed {r.seed}: theta {r.theta:.3f}, q {r.q:.3f}, eps_t {r.train_loss:.5f}, "
            f"basin {r.basin}, converged {r.converged}"
        )


if __name__ == "__main__":
    parts = {"default": default, "leaving": leaving}
    for name in sys.argv[1:] or list(parts):
        parts[name]()
