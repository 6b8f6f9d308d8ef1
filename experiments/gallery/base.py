"""What every paper figure is: a request, the studies it runs, its tables and its drawing.

A :class:`PaperFigure` runs the package's studies (``scan``, ``simulate``, ``phase_diagram``,
``finite_size``, ``uninformed``, ``histogram``), each into its own subdirectory of the figure's
directory (so each resumes as it does alone), takes its tables from their results unchanged (a
figure's numbers are the study's) and draws them in the shared style (:mod:`attnphase.experiments.style`).
Each figure has a full size (the studies' defaults, the paper's grids) and a quick one (coarse
grids, small d, a coarse quadrature: about a minute), chosen by :attr:`FigureRequest.quick`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

import pandas as pd
from matplotlib.figure import Figure

from attnphase.experiments.options import ProxOption
from attnphase.experiments.study import StudyResult, versions
from attnphase.replica.declaration import AttentionModel
from attnphase.replica.variants import Value, Variant


@dataclass(frozen=True)
class FigureRequest:
    """One figure asked for: the model family ``variant`` with the parameter ``values`` set on it, the
    ``quick`` or the full size, the ``directory`` its studies write into, the prox policies its scans
    trace branches under (``prox``, THEORY.md sec. 12), and for its studies ``overwrite`` and ``progress``."""

    variant: Variant
    values: Mapping[str, Value]
    quick: bool
    directory: Path
    prox: ProxOption = ProxOption.GLOBAL
    overwrite: bool = False
    progress: bool | None = False

    def model(self, **more: Value) -> AttentionModel:
        """The declaration at :attr:`values`, with ``more`` parameters set (a swept ``omega``)."""
        return self.variant.model({**self.values, **more})

    def part(self, name: str) -> Path:
        """The directory of the figure's study ``name``."""
        return self.directory / name

    def study_options(self) -> dict[str, object]:
        """What every study of the figure is run with: where it writes is :meth:`part`'s."""
        return {"overwrite": self.overwrite, "progress": self.progress}


@dataclass(frozen=True)
class Drawn:
    """What a figure computed: its tables by file stem and how to draw them."""

    tables: dict[str, pd.DataFrame]
    draw: Callable[[], Figure]


class PaperFigure(ABC):
    """One figure of the paper (module docstring): its ``name`` (``fig2``), a one-line ``description``,
    the shipped model it is drawn for by default and the parameter values it sets on it, the stems of
    its tables."""

    name: ClassVar[str]
    description: ClassVar[str]
    variant: ClassVar[str] = "paper"
    defaults: ClassVar[Mapping[str, Value]] = {}
    table_names: ClassVar[tuple[str, ...]]
    #: Whether the figure draws the branches of a prox policy other than the global one.
    draws_local_policy: ClassVar[bool] = False

    @abstractmethod
    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        """The subdirectories its studies write into for ``request``."""

    def outputs(self, request: FigureRequest) -> tuple[str, ...]:
        """Every file and directory the figure writes besides ``run.json``."""
        images = tuple(f"{self.name}.{suffix}" for suffix in ("png", "pdf"))
        return (*(f"{stem}.csv" for stem in self.table_names), *images, *self.parts(request))

    def values_for(self, variant: Variant) -> dict[str, Value]:
        """The figure's :attr:`defaults` that ``variant`` has (a researcher's variant gets the rest of its own)."""
        names = {p.name for p in variant.parameters}
        return {k: v for k, v in self.defaults.items() if k in names}

    @abstractmethod
    def build(self, request: FigureRequest) -> Drawn:
        """Run the figure's studies for ``request`` and return its tables and drawing."""


@dataclass(frozen=True, eq=False)
class FigureResult(StudyResult):
    """A drawn paper figure: ``figure_name`` (its name), the tables by stem, how to draw them, and the
    record written to ``run.json`` (the request, the studies' directories, the time)."""

    drawn: Drawn
    settings: dict[str, object]
    seconds: float
    figure_name: str = "figure"
    table_names: tuple[str, ...] = ()
    provenance: dict[str, str] = field(default_factory=versions)

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return self.drawn.tables

    @property
    def record(self) -> dict[str, object]:
        return {**self.settings, "status": "complete", "seconds": round(self.seconds, 2), "versions": self.provenance}

    def plot(self) -> Figure:
        return self.drawn.draw()

    def summary(self) -> str:
        """One line: the figure and its tables."""
        return f"{self.figure_name}: {', '.join(f'{s}.csv ({len(t)} rows)' for s, t in self.tables.items())}"
