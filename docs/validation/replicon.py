"""Where replica symmetry holds (saddle/stability/replicon.py), along the default scan's branches and at
the points where training and the branches disagree, and the jump term by its two routes.

    python docs/validation/replicon.py

First table: at every branch point the anchor search finds on the default rule (``fixed_points_at``, as
``ap.landscape`` does) at each alpha of :data:`ALPHAS` (omega 0.3) and at :data:`OTHERS`, the smooth
part's replicon (default rule), the jump ratio ``J / a`` the assessment uses (the largest over the
tuning's scramblings), the ratio on scramblings 2 to 4 (its third, then two it never uses), and the flag
``rs_stable``. Second table: the ratio on five scramblings along the semantic branch of omega 0.3
where its jumps fade out.
Third table: ``tr J`` from two replica groups (a Gaussian fluctuation of 1e-3, 1e-4, 1e-5 with the
smooth part removed) and from the jump surface (gap below 1e-3, 3e-4, 1e-4), on scrambled Sobol rules
of 2^16 points.
"""

from __future__ import annotations

import time

import numpy as np

import attnphase as ap
from attnphase.experiments.landscape import fixed_points_at
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import ScrambledSobol
from attnphase.saddle.stability.replicon import (
    fluctuation_response,
    gaussian_rule,
    jump_coefficient,
    jump_ratio,
    replica_symmetry,
    smooth_coefficient,
)
from attnphase.saddle.tuning import RepliconTuning

ALPHAS = (0.3, 0.6, 0.9, 1.2, 1.5, 1.8, 2.1, 2.4)
#: (omega, alpha): where converged training and the branches disagree (docs/validation/end_states.md)
OTHERS = ((0.2, 2.0), (0.1, 1.5), (0.5, 0.9))
#: scramblings of the fluctuation rule (0 is the first the assessment uses)
SEEDS = (2, 3, 4)
#: alphas of the semantic branch at omega 0.3 where its jump term fades out
BOUNDARY = (1.2, 1.25, 1.3, 1.35, 1.4, 1.45, 1.5)
#: (omega, alpha, branch) of the jump term's two routes
ROUTES = ((0.3, 2.0, "semantic"), (0.3, 1.0, "positional"), (0.3, 1.5, "agnostic"), (0.2, 1.0, "positional"))


def along_branches() -> None:
    print("| omega | alpha | branch | replicon (smooth) | J / a | J / a, scramblings 2-4 | rs_stable |")
    print("|---|---|---|---|---|---|---|")
    tuning = RepliconTuning()
    for omega, alpha in [(0.3, a) for a in ALPHAS] + list(OTHERS):
        solver = make_solver(ap.paper_model(omega=omega))
        for point in sorted(fixed_points_at(solver, alpha, stability=False), key=lambda p: p.branch):
            symmetry = replica_symmetry(solver.problem, point, tuning)
            others = [jump_ratio(solver.problem, point, tuning, scrambling) for scrambling in SEEDS]
            cells = [f"{omega:g}", f"{alpha:g}", point.branch, f"{symmetry.replicon_smooth:.3f}"]
            cells += [f"{symmetry.jump_ratio:.2g}", ", ".join(f"{r:.2g}" for r in others), str(symmetry.stable)]
            print("| " + " | ".join(cells) + " |", flush=True)


def semantic_boundary() -> None:
    print("\n| alpha | J / a, scramblings 0-4 | rs_stable |")
    print("|---|---|---|")
    model, tuning = ap.paper_model(omega=0.3), RepliconTuning()
    solver = make_solver(model)
    for alpha in BOUNDARY:
        point = ap.fixed_point(model, alpha, "semantic")
        ratios = [jump_ratio(solver.problem, point, tuning, scrambling) for scrambling in range(5)]
        stable = replica_symmetry(solver.problem, point, tuning).stable
        print(f"| {alpha:g} | {', '.join(f'{r:.2g}' for r in ratios)} | {stable} |", flush=True)


def two_routes() -> None:
    print("\n| omega | alpha | branch | a | J, two groups (eps 1e-3, 1e-4, 1e-5) | J, surface (gap 1e-3, 3e-4, 1e-4) |")
    print("|---|---|---|---|---|---|")
    rule = ScrambledSobol(16, 5)
    for omega, alpha, branch in ROUTES:
        model = ap.paper_model(omega=omega)
        point = ap.fixed_point(model, alpha, branch)
        problem = make_solver(model, ap.SolverSettings(quadrature=rule)).problem
        a = smooth_coefficient(problem, point)
        groups = []
        for eps in (1e-3, 1e-4, 1e-5):
            response = np.trace(fluctuation_response(problem, point, rule, eps, gaussian_rule(2, 10)))
            groups.append((response - eps * a) / eps**0.5)
        surface = [jump_coefficient(problem, point, delta) for delta in (1e-3, 3e-4, 1e-4)]
        cells = [f"{omega:g}", f"{alpha:g}", point.branch, f"{a:.3e}"]
        cells += [", ".join(f"{v:.2e}" for v in groups), ", ".join(f"{v:.2e}" for v in surface)]
        print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    started = time.perf_counter()
    along_branches()
    semantic_boundary()
    two_routes()
    print(f"\n({time.perf_counter() - started:.0f} s)")
