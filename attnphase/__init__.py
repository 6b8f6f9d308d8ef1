"""attnphase: derive, solve and check the replica theory of a solvable model of dot-product attention.

The model and its theory are those of Cui, Behrens, Krzakala and Zdeborova, *A phase transition
between positional and semantic learning in a solvable model of dot-product attention* (NeurIPS
2024); the mathematics and its conventions are in THEORY.md. One namespace holds the public API::

    import attnphase as ap

    model = ap.paper_model(omega=0.3)            # a declaration (THEORY.md sec. 1, 6)
    system = ap.derive(model)                    # free entropy and saddle-point equations (sec. 3, 4)
    print(system.latex())                        # the whole system, ready for a paper
    result = ap.scan(model, alphas="0.5:2.5:0.1")  # branches, alpha_c, alpha_l (sec. 5-7)
    result.branches, result.thresholds           # tidy pandas tables
    result.plot(); result.save("results")        # a figure; what `attnphase scan` writes
    ap.scan(model, "1.0,1.5", ap.ScanOptions(order=12))  # the numerical options as one object
    runs = ap.simulate(model, d=200, alphas=[1.0, 2.0], seeds=2)  # finite-d training (sec. 11)
    diagram = ap.phase_diagram([ap.paper_model(omega=w) for w in (0.2, 0.3)])  # alpha_c(omega), ...
    view = ap.landscape(model, alpha=1.25)       # training loss over (m, theta), minima and saddles
    ap.figure("fig2", quick=True, out="fig2")    # a figure of the paper from the studies' tables

The stages of the pipeline are subpackages: :mod:`attnphase.replica` (declarations and symbolic
derivation, sympy only), :mod:`attnphase.saddle` (compiled kernels, fixed points, branches,
thresholds, one room per role), :mod:`attnphase.baseline` (the linear positional baseline) and
:mod:`attnphase.experiments` (studies, simulations, figures, files, the command line). Every numerical
knob is one :class:`Tuning`, recorded with every result.
"""

from __future__ import annotations

import importlib
from importlib import metadata
from typing import TYPE_CHECKING

from attnphase.experiments.landscape import LandscapeResult, landscape
from attnphase.experiments.options import ScanOptions
from attnphase.experiments.phase_diagram import PhaseDiagramResult, phase_diagram
from attnphase.experiments.scan import ScanResult, fixed_point, scan
from attnphase.replica.declaration import (
    AttentionModel,
    DeclarationError,
    DotProductAttention,
    ElasticNet,
    GaussianMixtureTokens,
    GaussianTokens,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    UntiedDotProductAttention,
    paper_model,
)
from attnphase.replica.saddle_equations import ReplicaSystem, derive
from attnphase.replica.variants import VARIANTS, Variant, variant
from attnphase.saddle.points.fixed_point import FixedPoint
from attnphase.saddle.quadrature.check import QuadratureCheck
from attnphase.saddle.quadrature.rules import GaussHermite, ScrambledSobol
from attnphase.saddle.settings import SolverSettings
from attnphase.saddle.tuning import Tuning

if TYPE_CHECKING:
    from attnphase.experiments.finite_size import FiniteSizeResult, finite_size
    from attnphase.experiments.gallery.base import FigureResult
    from attnphase.experiments.gallery.registry import figure
    from attnphase.experiments.gamp_study import GampResult, gamp
    from attnphase.experiments.histogram import HistogramResult, histogram
    from attnphase.experiments.simulate import SimulationResult, simulate
    from attnphase.experiments.uninformed import UninformedResult, uninformed

try:
    __version__ = metadata.version("attnphase")
except metadata.PackageNotFoundError:  # pragma: no cover - running from a source tree without installing
    __version__ = "unknown"

# the studies that train torch models load torch only when first used
_LAZY = {
    "simulate": "attnphase.experiments.simulate",
    "SimulationResult": "attnphase.experiments.simulate",
    "finite_size": "attnphase.experiments.finite_size",
    "FiniteSizeResult": "attnphase.experiments.finite_size",
    "uninformed": "attnphase.experiments.uninformed",
    "UninformedResult": "attnphase.experiments.uninformed",
    "histogram": "attnphase.experiments.histogram",
    "gamp": "attnphase.experiments.gamp_study",
    "GampResult": "attnphase.experiments.gamp_study",
    "HistogramResult": "attnphase.experiments.histogram",
    "figure": "attnphase.experiments.gallery.registry",
    "FigureResult": "attnphase.experiments.gallery.base",
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'attnphase' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))


__all__ = [
    "AttentionModel",
    "DeclarationError",
    "DotProductAttention",
    "ElasticNet",
    "FigureResult",
    "FiniteSizeResult",
    "FixedPoint",
    "GaussHermite",
    "GaussianMixtureTokens",
    "GaussianTokens",
    "GampResult",
    "HistogramResult",
    "LandscapeResult",
    "MixedPositionalTeacher",
    "PhaseDiagramResult",
    "PositionalEncodings",
    "QuadratureCheck",
    "ReplicaSystem",
    "Ridge",
    "ScanOptions",
    "ScanResult",
    "ScrambledSobol",
    "SimulationResult",
    "SolverSettings",
    "Tuning",
    "UninformedResult",
    "UntiedDotProductAttention",
    "VARIANTS",
    "Variant",
    "__version__",
    "derive",
    "figure",
    "finite_size",
    "fixed_point",
    "gamp",
    "histogram",
    "landscape",
    "paper_model",
    "phase_diagram",
    "scan",
    "simulate",
    "uninformed",
    "variant",
]
