"""The branches of the default scan: where each exists, where it is stable, where its curvatures change
sign and how its pieces end, with alpha_c and alpha_l.

    python docs/validation/branches.py [OMEGA ...]      # default: 0.3 0.2

Each omega is one ``ap.scan(ap.paper_model(omega=OMEGA))`` on the default rule and grid (what
``attnphase scan --omega OMEGA`` computes), with the stability of every point.
"""

from __future__ import annotations

import sys
import time

from scan_tables import branch_table, thresholds

import attnphase as ap


def main(omegas: list[float]) -> None:
    for omega in omegas:
        started = time.perf_counter()
        result = ap.scan(ap.paper_model(omega=omega), progress=False)
        print(f"## omega = {omega:g} ({time.perf_counter() - started:.0f} s)\n")
        print(branch_table(result))
        print()
        print(thresholds(result))
        print()


if __name__ == "__main__":
    main([float(w) for w in sys.argv[1:]] or [0.3, 0.2])
