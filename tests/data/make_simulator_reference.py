"""Regenerate ``simulator_reference.csv``: runs of the paper-only simulator of commit 5a162e2, which
wrote the paper's model (L = 2, r = t = 1, p_1 = -p_2) by hand, at four settings and with every
optimiser. The declaration-driven simulator must reproduce them (``tests/test_finite_model.py``).

Run from the repository root: ``python tests/data/make_simulator_reference.py``.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import tempfile
from pathlib import Path

import pandas as pd

COMMIT = "5a162e2"
#: (settings of the old simulator), each run at d = 40, alphas 0.8 and 1.6, two seeds, three inits.
CASES = (
    {"optimiser": "gd"},
    {"optimiser": "lbfgs", "omega": 0.4, "sigma": 0.7, "lam": 0.03},
    {"optimiser": "adam", "omega": 0.1, "A": ((0.3, 0.7), (0.8, 0.2))},
    {"optimiser": "gd", "omega": 0.2, "l1": 0.005, "lr": 0.5},
)
COMMON = {"d": 40, "alphas": (0.8, 1.6), "seeds": 2, "inits": ("positional", "semantic", "random")}
COMMON |= {"max_steps": 300, "n_test": 400}


def old_simulator():
    source = subprocess.run(
        ["git", "show", f"{COMMIT}:experiments/simulation.py"], check=True, capture_output=True, text=True
    ).stdout
    path = Path(tempfile.mkdtemp()) / "paper_simulator.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("paper_simulator", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["paper_simulator"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    old = old_simulator()
    frames = []
    for case, settings in enumerate(CASES):
        frame = old.simulate(old.SimulationSettings(**COMMON, **settings))
        frames.append(frame.drop(columns="seconds").assign(case=case))
    out = Path(__file__).with_name("simulator_reference.csv")
    pd.concat(frames, ignore_index=True).to_csv(out, index=False, float_format="%.17g")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
