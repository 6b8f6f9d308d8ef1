"""The replicon (saddle/stability/replicon.py) at the fixed points where training and the
replica-symmetric branches disagree, and at the default setting, on three Gauss-Hermite orders.

    python docs/validation/replicon.py

Each row: the fixed point found on the scan's default rule by the anchor search from the branch
named (``ap.fixed_point``; labelled by what it converged to), then solved again from it and its
replicon evaluated on Gauss-Hermite rules of order 14, 20 and 26.
"""

from __future__ import annotations

import time

import attnphase as ap
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.stability.replicon import replicon

ORDERS = (14, 20, 26)
#: (omega, alpha, branch searched)
POINTS = (
    (0.3, 1.5, "positional"),
    (0.3, 1.5, "semantic"),
    (0.3, 1.5, "agnostic"),
    (0.3, 2.0, "agnostic"),
    (0.2, 2.0, "positional"),
    (0.1, 1.5, "positional"),
    (0.5, 0.9, "semantic"),
)


def main() -> None:
    started = time.perf_counter()
    print("| omega | alpha | searched | converged to | m | theta | " + " | ".join(f"GH {o}" for o in ORDERS) + " |")
    print("|" + "---|" * (6 + len(ORDERS)))
    for omega, alpha, searched in POINTS:
        model = ap.paper_model(omega=omega)
        point = ap.fixed_point(model, alpha, searched)
        values = []
        for order in ORDERS:
            solver = make_solver(model, ap.SolverSettings(quadrature=ap.GaussHermite(order)))
            again, _ = solver.solve(alpha, solver.branch(point.branch), point.values, error_check=False)
            values.append(f"{replicon(solver.problem, again):.3f}" if again.converged else "unconverged")
        m, theta = point["m"], point["theta"]
        cells = [f"{omega:g}", f"{alpha:g}", searched, point.branch, f"{m:.3f}", f"{theta:.3f}", *values]
        print("| " + " | ".join(cells) + " |")
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()
