"""``attnphase scan`` as a resumable job: settings, incremental tables, thresholds, figure."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from experiments.figures import scan_figure
from experiments.storage import PointLog, read_json, write_json, write_table
from replica.declaration import AttentionModel
from saddle.fixed_point import FixedPoint, SolverSettings
from saddle.scan import ScanResult, make_solver, run_scan


class ScanJob:
    """One scan writing into ``out``: ``prepare`` -> ``run`` -> ``finish``."""

    def __init__(
        self,
        out: Path,
        model: AttentionModel,
        alphas: Sequence[float],
        settings: SolverSettings,
        options: Mapping[str, object],
    ) -> None:
        self.out = Path(out)
        self.model = model
        self.alphas = np.asarray(alphas, dtype=float)
        self.settings = settings
        self.options = dict(options)
        self.result: ScanResult | None = None
        compiled = make_solver(model, settings).compiled
        self.log = PointLog(self.out / "branches.csv")
        self._names = (compiled.names, compiled.conjugate_names)

    @property
    def run_file(self) -> Path:
        return self.out / "run.json"

    def prepare(self, overwrite: bool) -> None:
        """Resume from ``out`` if it holds a scan with the same settings."""
        previous = read_json(self.run_file)
        if previous is not None and previous.get("options") != self.options:
            if not overwrite:
                raise FileExistsError(
                    f"{self.out} holds a scan with other settings ({previous.get('options')}); "
                    "use --overwrite or another --out"
                )
            (self.out / "branches.csv").unlink(missing_ok=True)
        elif previous is not None:
            self.log = PointLog.resume(self.out / "branches.csv", *self._names)
        self.out.mkdir(parents=True, exist_ok=True)
        write_json(self.run_file, {"options": self.options, "status": "running"})

    def completed(self) -> int:
        grid = set(self.alphas.tolist())
        return sum(1 for p in self.log.points if p.converged and p.alpha in grid)

    def run(self, on_point: Callable[[FixedPoint], None] | None = None) -> str:
        def record(point: FixedPoint) -> None:
            self.log.add(point)
            if on_point is not None:
                on_point(point)

        self.result = run_scan(self.model, self.alphas, self.settings, known=self.log.points, on_point=record)
        self.log.save()
        return self.summary()

    def thresholds(self) -> pd.Series:
        assert self.result is not None
        return pd.Series(
            {
                "omega": self.options["omega"],
                "sigma": self.options["sigma"],
                "lambda": self.options["lambda"],
                "alpha_c": self.result.alpha_c.value,
                "alpha_l": self.result.alpha_l.value,
                "baseline_test_error": self.result.baseline.test_error,
                "alpha_c_note": self.result.alpha_c.note,
                "alpha_l_note": self.result.alpha_l.note,
                "quadrature": self.settings.quadrature.label,
            }
        )

    def finish(self, versions: Mapping[str, str], seconds: float) -> None:
        thresholds = self.thresholds()
        write_table(self.out / "thresholds.csv", [thresholds.to_dict()])
        branches = pd.read_csv(self.out / "branches.csv")
        scan_figure(branches, thresholds, self.out / "scan")
        assert self.result is not None
        ends = {
            name: {"ended_below": t.ended_below, "ended_above": t.ended_above} for name, t in self.result.traces.items()
        }
        write_json(
            self.run_file,
            {
                "options": self.options,
                "status": "complete",
                "seconds": round(seconds, 2),
                "branch_ends": ends,
                "versions": dict(versions),
                "seeds": {"prox": self.settings.prox.seed, "quadrature": self.options["seed"]},
            },
        )

    def summary(self) -> str:
        assert self.result is not None
        r = self.result
        points = self.log.points
        failed = [p for p in points if not p.converged]
        lines = [
            f"alpha_c = {r.alpha_c.value:.6f}  ({r.alpha_c.note})",
            f"alpha_l = {r.alpha_l.value:.6f}  ({r.alpha_l.note})",
            f"linear baseline test error = {r.baseline.test_error:.6g}",
            f"{len(points) - len(failed)} converged fixed points, {len(failed)} not converged"
            + (f" (branch ends: {', '.join(f'{p.branch} at alpha={p.alpha:g}' for p in failed)})" if failed else ""),
            f"tables and figure in {self.out}/",
        ]
        return "\n".join(lines)
