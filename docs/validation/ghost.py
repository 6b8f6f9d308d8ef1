"""Past the fold of the positional branch (omega = 0.2) the residual keeps a minimum where the two fixed
points met: the ghost of the branch. Its size at alphas past the fold, on the default rule and on
Gauss-Hermite 28.

    python docs/validation/ghost.py

Least squares on (q, m, V) with theta = 0 (the positional subspace), each alpha started from the last,
from the positional point at alpha = 1.5: the smallest scaled residual ``|F(x) - x| / (1 + |x|)`` and where
it is. This needs the map itself, so it uses the solver behind ``ap.scan`` (``attnphase.saddle``).
"""

from __future__ import annotations

import numpy as np
import scipy.optimize

import attnphase as ap
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.prox.policy import Effort
from attnphase.saddle.search.anchors import AnchorSearch


def ghost(settings: ap.SolverSettings, alphas: tuple[float, ...]) -> None:
    solver = make_solver(ap.paper_model(omega=0.2), settings)
    x = AnchorSearch(solver)(1.5, solver.branch("positional")).values[:3]
    saddle_map = solver.problem.map
    for alpha in alphas:

        def residual(y: np.ndarray, alpha: float = alpha) -> np.ndarray:
            return (saddle_map.evaluate(np.r_[y, 0.0], alpha, Effort.QUICK).updated[:3] - y) / (1 + abs(y))

        fit = scipy.optimize.least_squares(residual, x, x_scale=abs(x), xtol=1e-12, ftol=1e-14)
        x = fit.x
        q, m, v = x
        print(f"alpha {alpha:g}: smallest residual {np.max(abs(fit.fun)):.2g} at q = {q:.3f}, m = {m:.3f}, V = {v:.1f}")


def main() -> None:
    print("## default (Gauss-Hermite 20)")
    ghost(ap.SolverSettings(), (1.7, 1.8, 2.0, 2.5))
    fine = ap.GaussHermite(28)
    print("## Gauss-Hermite 28")
    ghost(ap.SolverSettings(quadrature=fine, test_quadrature=fine), (1.7, 1.8, 2.0))


if __name__ == "__main__":
    main()
