"""The local prox policy against the global one (THEORY.md sec. 12), where they could differ.

    python docs/validation/prox_policies.py

First table: at omega 0.3 (alphas 1.0, 1.5, 2.0) and at omega 0.2 and 0.15 (alphas up to 2.0), every
converged fixed point the anchor search finds on the default rule under each policy (``ap.landscape``'s
search, without stability), with the share of the rule's weight where the two policies' minimisers
differ (``prox_disagreement``). Second table: the positional branch at omega 0.15 and alphas 1.0, 1.37,
1.79 (where the authors' notebook reports m = 0.226, 0.229, 0.228 for a descent from z = 0 on a degree-7
cubature) under the global policy and the local one from the cavity mean and from zero, on Gauss-Hermite
rules of 4, 6 and 20 points per dimension: the positional point the same search finds, or none. Third
table: ``|m|`` of the positional branch at each alpha from 1.2 to 2.1 and where it ends, under each
policy, from ``ap.scan(prox="both")`` at omega 0.15 and 0.2, on the default rule and on a scrambled Sobol
rule of 2^17 points (whose rule is not symmetric under ``m -> -m``: there a point labelled positional
may be the agnostic one, ``|m|`` of a few 1e-3).
"""

from __future__ import annotations

import time

import attnphase as ap
from attnphase.experiments.landscape import fixed_points_at
from attnphase.experiments.parsing import parse_alphas
from attnphase.saddle.phases.survey import make_solver
from attnphase.saddle.quadrature.rules import GaussHermite
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import DescentStart, Tuning

#: (omega, alphas) of the first table
SETTINGS = ((0.3, (1.0, 1.5, 2.0)), (0.2, (1.4, 1.6, 1.8, 2.0)), (0.15, (1.0, 1.4, 1.8)))
#: the second table's alphas and rules
NOTEBOOK_ALPHAS = (1.0, 1.37, 1.79)
ORDERS = (4, 6, 20)
#: the third table's scans (``ap.scan(prox="both")``)
ENDS_OMEGAS = (0.15, 0.2)
ENDS_ALPHAS = "1.2:2.1:0.1"
#: the default rule, and a scrambled Sobol rule (unbiased for the local policy's jumping envelope)
ENDS_RULES = ({}, {"quadrature": "sobol", "order": 17})


def settings(prox: str, order: int = 20, start: DescentStart = DescentStart.CAVITY_MEAN) -> SolverSettings:
    rule = GaussHermite(order)
    tuning = Tuning().replaced(prox={"descent_start": start})
    return SolverSettings(quadrature=rule, test_quadrature=rule, threshold_quadrature=None, prox=prox, tuning=tuning)


def every_branch() -> None:
    print("| omega | alpha | branch | prox | m | theta | q | eps_t | disagreement |")
    print("|---|---|---|---|---|---|---|---|---|")
    for omega, alphas in SETTINGS:
        model = ap.paper_model(omega=omega)
        solvers = [make_solver(model, settings(prox)) for prox in ("global", "local")]
        for alpha in alphas:
            points = [p for solver in solvers for p in fixed_points_at(solver, alpha, stability=False)]
            for p in sorted(points, key=lambda p: (p.branch, p.prox)):
                cells = [f"{omega:g}", f"{alpha:g}", p.branch, p.prox]
                cells += [f"{abs(p[n]):.4f}" for n in ("m", "theta", "q")]
                cells += [f"{p.train_loss:.6f}", f"{p.prox_disagreement:.1e}"]
                print("| " + " | ".join(cells) + " |", flush=True)


def notebook_rule() -> None:
    print("| rule | policy | " + " | ".join(f"m at alpha {a:g}" for a in NOTEBOOK_ALPHAS) + " |")
    print("|---|---|" + "---|" * len(NOTEBOOK_ALPHAS))
    model = ap.paper_model(omega=0.15)
    policies = (("global", DescentStart.CAVITY_MEAN), ("local", DescentStart.CAVITY_MEAN), ("local", DescentStart.ZERO))
    for order in ORDERS:
        for prox, start in policies:
            solver = make_solver(model, settings(prox, order, start))
            cells = []
            for alpha in NOTEBOOK_ALPHAS:
                found = [p for p in fixed_points_at(solver, alpha, stability=False) if p.branch == "positional"]
                cells.append(f"{abs(found[0]['m']):.4f}" if found else "none")
            name = prox if prox == "global" else f"local from {start.value}"
            print(f"| Gauss-Hermite {order} | {name} | " + " | ".join(cells) + " |", flush=True)


def branch_ends() -> None:
    alphas = parse_alphas(ENDS_ALPHAS)
    print("| omega | rule | prox | " + " | ".join(f"m at {a:g}" for a in alphas) + " | ends |")
    print("|---|---|---|" + "---|" * (len(alphas) + 1))
    for omega in ENDS_OMEGAS:
        for rule in ENDS_RULES:
            model = ap.paper_model(omega=omega)
            result = ap.scan(model, alphas, prox="both", stability=False, progress=False, **rule)
            for choice, part in result.parts.items():
                trace = part.solution.traces["positional"]
                m = {p.alpha: abs(p["m"]) for p in trace.converged() if p.sheet == 0}
                ends = [end.describe("positional") for end in trace.ends if end.direction > 0 and end.sheet == 0]
                cells = [f"{omega:g}", part.points[0].quadrature, choice.value]
                cells += [f"{m[a]:.3f}" if a in m else "-" for a in alphas] + ["; ".join(ends) or "-"]
                print("| " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    started = time.perf_counter()
    every_branch()
    print()
    notebook_rule()
    print()
    branch_ends()
    print(f"\n{time.perf_counter() - started:.0f} s")
