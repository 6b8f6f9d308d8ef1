"""Every paper figure the package draws, by its name, and :func:`figure`, which draws one."""

from __future__ import annotations

import tempfile
import time
from collections.abc import Mapping
from contextlib import nullcontext
from pathlib import Path

from attnphase.experiments.gallery.base import FigureRequest, FigureResult, PaperFigure
from attnphase.experiments.gallery.figures import PAPER_FIGURES
from attnphase.experiments.options import ProxOption
from attnphase.experiments.run_context import RunContext
from attnphase.replica.variants import Value, Variant, variant

#: The figures by name, in the paper's order.
FIGURES: dict[str, PaperFigure] = {f.name: f for f in PAPER_FIGURES}


def listing() -> str:
    """One line per figure: its name and what it shows."""
    width = max(len(name) for name in FIGURES)
    return "\n".join(f"{name:<{width}}  {f.description}" for name, f in FIGURES.items())


def paper_figure(name: str) -> PaperFigure:
    """The figure called ``name``; a ``ValueError`` naming the figures otherwise."""
    if name not in FIGURES:
        raise ValueError(f"name: {name!r} is not a figure; the figures are {', '.join(FIGURES)}")
    return FIGURES[name]


def prox_option(prox: str | ProxOption, spec: PaperFigure) -> ProxOption:
    """``prox`` as a :class:`ProxOption` the figure ``spec`` can draw; a ``ValueError`` naming it otherwise."""
    if str(prox) not in tuple(ProxOption):
        raise ValueError(f"prox: {prox!r} is not one of {', '.join(ProxOption)}")
    chosen = ProxOption(str(prox))
    if chosen is not ProxOption.GLOBAL and not spec.draws_local_policy:
        raise ValueError(f"prox: {spec.name} draws the global policy only; got {chosen.value}")
    return chosen


def figure(
    name: str,
    model: str | Variant | None = None,
    values: Mapping[str, Value] | None = None,
    *,
    quick: bool = False,
    out: str | Path | None = None,
    studies: str | Path | None = None,
    prox: str | ProxOption = ProxOption.GLOBAL,
    overwrite: bool = False,
    progress: bool | None = False,
) -> FigureResult:
    """Draw the paper's figure ``name`` (``fig2``, ...; :func:`listing`) for the shipped model ``model``
    (a name or a :class:`~attnphase.replica.variants.Variant`; default: the figure's) with its parameters
    at ``values`` over the figure's own defaults (the paper's for its figure), at the full size or
    ``quick``. With ``out``, the figure's tables (CSV), image (PNG, PDF) and ``run.json`` are written
    there and each of its studies runs in a subdirectory, resuming as it does alone; the directory is
    locked for the call and a run of other settings there is refused unless ``overwrite``. Without it
    the studies run in a temporary directory and nothing is kept. ``studies``: the directory of the
    studies' subdirectories instead of ``out``, to share them between figures that run the same
    studies (fig3-centre and fig3-right, fig3-left and fig7). ``prox``: the policies the scans of the
    figures over alpha trace branches under (``global``, ``local`` or ``both``: the local policy's
    branches drawn beside the global ones with ``+``; the other figures draw the global policy's)."""
    spec = paper_figure(name)
    policies = prox_option(prox, spec)
    chosen = model if isinstance(model, Variant) else variant(model or spec.variant)
    request_values = {**spec.values_for(chosen), **(values or {})}
    identity = {"figure": spec.name, "model": chosen.name, "values": request_values, "quick": bool(quick)}
    identity |= {"prox": policies.value}
    home = studies if studies is not None else out
    scratch = tempfile.TemporaryDirectory(prefix="attnphase-figure-") if home is None else nullcontext(home)
    with scratch as directory:
        request = FigureRequest(chosen, request_values, bool(quick), Path(directory), policies, overwrite, progress)
        return _drawn(spec, request, identity, out, shared=studies is not None)


def _drawn(
    spec: PaperFigure, request: FigureRequest, identity: dict[str, object], out: str | Path | None, shared: bool
) -> FigureResult:
    """Build ``spec`` for ``request`` inside the run of ``out`` (nothing written without one); its
    outputs hold the studies' subdirectories unless they are ``shared`` elsewhere."""
    outputs = spec.outputs(request)
    if shared:
        outputs = tuple(name for name in outputs if name not in spec.parts(request))
    with RunContext(out, identity, outputs, request.overwrite) as run:
        run.resume()
        started = time.perf_counter()
        drawn = spec.build(request)
        seconds = time.perf_counter() - started
        result = FigureResult(drawn, identity, seconds, figure_name=spec.name, table_names=spec.table_names)
        run.save(result)
    return result
