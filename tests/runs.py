"""Helpers the tests share: a simulation written into a directory inside its own run context."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import pandas as pd

from attnphase.experiments.run_context import RunContext
from attnphase.experiments.training import SimulationSettings, simulate_to


def simulate_into(
    directory: Path,
    settings: SimulationSettings,
    overwrite: bool = False,
    progress: Callable[[pd.DataFrame], None] | None = None,
    outputs: Sequence[str] = ("simulations.csv",),
) -> pd.DataFrame:
    """``settings`` trained into ``directory`` (identity: the settings), as the simulate study does."""
    with RunContext(directory, {"settings": settings.as_dict()}, outputs, overwrite) as run:
        return simulate_to(run, settings, progress=progress)
