"""A scan under each prox policy: the branches of the global and of the local policy side by side.

``attnphase scan --prox both`` (``ap.scan(model, prox="both")``) traces every branch once under each
policy of :class:`~attnphase.saddle.prox.policy.ProxChoice` (THEORY.md sec. 12), each a complete scan
of its own in the subdirectory named after the policy (so each resumes as a single scan does), and
gathers their tables, each row with its ``prox``. The global minimum, alpha_c and alpha_l keep their
meaning on the global policy; the local policy's thresholds are where its lowest branch changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.figures import scan_figure
from attnphase.experiments.options import ScanOptions
from attnphase.experiments.study import StudyResult
from attnphase.replica.declaration import AttentionModel
from attnphase.saddle.prox.policy import ProxChoice

if TYPE_CHECKING:
    from attnphase.experiments.scan import ScanResult


@dataclass(frozen=True, eq=False)
class PolicyScans(StudyResult):
    """The scans of one model and grid under each prox policy (``parts``, the global one first): tables
    that stack theirs, each row labelled by its ``prox``; the thresholds of the global policy."""

    model: AttentionModel
    alphas: np.ndarray
    options: ScanOptions
    parts: Mapping[ProxChoice, ScanResult]

    figure_name = "scan"
    table_names = ("branches", "thresholds", "transitions")

    @classmethod
    def outputs(cls) -> tuple[str, ...]:
        return (*super().outputs(), *(choice.value for choice in ProxChoice))

    @property
    def global_scan(self) -> ScanResult:
        """The scan under the global policy."""
        return self.parts[ProxChoice.GLOBAL]

    @property
    def alpha_c(self) -> float:
        """alpha_c of the global policy (:attr:`ScanResult.alpha_c`)."""
        return self.global_scan.alpha_c

    @property
    def alpha_l(self) -> float:
        """alpha_l of the global policy (:attr:`ScanResult.alpha_l`)."""
        return self.global_scan.alpha_l

    @property
    def global_minimum(self) -> pd.DataFrame:
        """The global minimum at every alpha: the global policy's (:attr:`ScanResult.global_minimum`)."""
        return self.global_scan.global_minimum

    def _stacked(self, name: str) -> pd.DataFrame:
        return pd.concat([part.tables[name] for part in self.parts.values()], ignore_index=True)

    @property
    def branches(self) -> pd.DataFrame:
        """Every point of every policy's branches (:attr:`ScanResult.branches`), with its ``prox``."""
        return self._stacked("branches")

    @property
    def thresholds(self) -> pd.DataFrame:
        """One row per policy (:attr:`ScanResult.thresholds`), the global one first."""
        return self._stacked("thresholds")

    @property
    def transitions(self) -> pd.DataFrame:
        """Every change of each policy's lowest branch (:attr:`ScanResult.transitions`)."""
        return self._stacked("transitions")

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"branches": self.branches, "thresholds": self.thresholds, "transitions": self.transitions}

    @property
    def record(self) -> dict[str, object]:
        return {
            **self.global_scan.identity(self.options),
            "status": "complete",
            "seconds": round(sum(part.seconds for part in self.parts.values()), 2),
            "parts": {choice.value: choice.value + "/" for choice in self.parts},
            "versions": self.global_scan.provenance,
        }

    def plot(self) -> Figure:
        """The scan figure (:func:`~attnphase.experiments.figures.scan_figure`) with every policy's
        branches, the local ones with :data:`~attnphase.experiments.figures.LOCAL_STYLE`; the global
        minimum and the thresholds of the global policy."""
        return scan_figure(self.branches, self.global_scan.thresholds.iloc[0], self.model)

    def summary(self) -> str:
        """Each policy's summary (:meth:`ScanResult.summary`) under its name."""
        return "\n".join(f"{choice.value} prox:\n{part.summary()}" for choice, part in self.parts.items())
