"""The paper's figures, one small class each, by the paper's numbering."""

from __future__ import annotations

from collections.abc import Mapping

from attnphase.experiments.gallery.base import FigureRequest, PaperFigure
from attnphase.experiments.gallery.finite_d import Fig3Left, Fig7
from attnphase.experiments.gallery.one_study import Fig1, Fig15
from attnphase.experiments.gallery.over_alpha import OverAlpha
from attnphase.experiments.gallery.over_omega import Fig3Centre, Fig3Right, Fig9, Fig14
from attnphase.replica.variants import Value


class Fig2(OverAlpha):
    name = "fig2"
    description = "omega 0.3: training loss, overlaps and test error over alpha, theory against GD, linear baseline"
    defaults = {"omega": 0.3}


class Fig8(OverAlpha):
    name = "fig8"
    description = "more slices of the phase diagram: fig2's panels at omega 0.1, 0.2, 0.4, 0.5"

    def slices(self, request: FigureRequest) -> tuple[Mapping[str, Value], ...]:
        omegas = (0.2, 0.4) if request.quick else (0.1, 0.2, 0.4, 0.5)
        return tuple({"omega": omega} for omega in omegas)


class Fig10(OverAlpha):
    name = "fig10"
    variant = "mixture"
    description = "correlated tokens (the mixture variant): fig2's panels, with the theory the paper lacks"


class Fig11(OverAlpha):
    name = "fig11"
    variant = "rank2"
    description = "a rank-2 student of the rank-1 teacher: fig2's panels, with the theory the paper lacks"


class Fig12(OverAlpha):
    name = "fig12"
    variant = "untied"
    description = "untied key and query: fig2's panels, with the theory the paper lacks"


#: Every figure, in the paper's order.
PAPER_FIGURES: tuple[PaperFigure, ...] = (
    Fig1(),
    Fig2(),
    Fig3Left(),
    Fig3Centre(),
    Fig3Right(),
    Fig7(),
    Fig8(),
    Fig9(),
    Fig10(),
    Fig11(),
    Fig12(),
    Fig14(),
    Fig15(),
)
