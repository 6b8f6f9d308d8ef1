"""Figures of one study each: the histogram task (paper Fig. 1) and uninformed Adam (Fig. 15).

The figure's table is the study's own; the drawing is the study's, in the shared style.
"""

from __future__ import annotations

from dataclasses import dataclass

from attnphase.experiments.gallery.base import Drawn, FigureRequest, PaperFigure
from attnphase.experiments.histogram import histogram
from attnphase.experiments.uninformed import uninformed


@dataclass(frozen=True)
class HistogramSize:
    """The histogram task's training: ``n_train`` sequences, ``epochs`` frozen, ``sgd_epochs`` unfrozen."""

    n_train: int = 20_000
    n_test: int = 5_000
    epochs: int = 20
    sgd_epochs: int = 5


class Fig1(PaperFigure):
    name = "fig1"
    description = "the histogram task (App. A): attention maps of the positional and the semantic solution"
    table_names = ("histogram",)

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        return ("histogram",)

    def build(self, request: FigureRequest) -> Drawn:
        size = HistogramSize(2_000, 500, 2, 1) if request.quick else HistogramSize()
        study = histogram(
            n_train=size.n_train,
            n_test=size.n_test,
            epochs=size.epochs,
            sgd_epochs=size.sgd_epochs,
            out=request.part("histogram"),
            **request.study_options(),
        )
        return Drawn({"histogram": study.table}, study.plot)


@dataclass(frozen=True)
class AdamSize:
    """Uninformed Adam: dimension ``d``, the ``alphas``, ``seeds`` runs per alpha, ``max_steps``."""

    d: int = 200
    alphas: str = "0.5:2.5:0.5"
    seeds: int = 8
    max_steps: int = 2500


class Fig15(PaperFigure):
    name = "fig15"
    description = "Adam from a random start: the share of runs ending on each theory minimum over alpha"
    table_names = ("uninformed_fractions",)

    def parts(self, request: FigureRequest) -> tuple[str, ...]:
        return ("uninformed",)

    def build(self, request: FigureRequest) -> Drawn:
        size = AdamSize(60, "0.5:2.0:0.75", 3, 400) if request.quick else AdamSize()
        study = uninformed(
            request.model(),
            d=size.d,
            alphas=size.alphas,
            seeds=size.seeds,
            max_steps=size.max_steps,
            out=request.part("uninformed"),
            **request.study_options(),
        )
        return Drawn({"uninformed_fractions": study.fractions}, study.plot)
