"""The look every figure of the package shares: symbols, colours, error bars, colour bars.

Labels are mathtext (matplotlib's LaTeX subset, no TeX installation needed): :func:`symbol` names a
table column by its symbol in THEORY.md (``alpha`` -> ``$\\alpha$``, ``train_loss`` -> ``$\\epsilon_t$``).
Branch families keep one colour everywhere (:data:`FAMILY_COLOURS`, the same for the training runs
started on them); a sweep over a parameter is coloured along a sequential colour map with a colour
bar (:class:`SweepColours`), never the cyclic default; error bars are standard deviations over seeds.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.cm import ScalarMappable
from matplotlib.colors import ListedColormap, Normalize
from matplotlib.figure import Figure

#: The symbol of each table column and parameter in figures (THEORY.md sec. 2, 5).
SYMBOLS = {
    "alpha": r"$\alpha$",
    "omega": r"$\omega$",
    "sigma": r"$\sigma$",
    "lambda": r"$\lambda$",
    "lambda_1": r"$\lambda_1$",
    "lambda_2": r"$\lambda_2$",
    "d": r"$d$",
    "m": r"$m$",
    "theta": r"$\theta$",
    "q": r"$q$",
    "V": r"$V$",
    "|m|": r"$|m|$",
    "|theta|": r"$|\theta|$",
    "train_loss": r"$\epsilon_t$",
    "test_error": r"$\epsilon_g$",
    "alpha_c": r"$\alpha_c$",
    "alpha_l": r"$\alpha_l$",
}

#: The colour of each branch family, and of the training runs started on it (THEORY.md sec. 6).
FAMILY_COLOURS = {
    "positional": "tab:orange",
    "semantic": "tab:blue",
    "agnostic": "tab:gray",
    "mixed": "tab:purple",
    "random": "tab:purple",
    "neither": "tab:red",
}

#: How a mean over seeds with its standard deviation is drawn.
ERROR_BARS = {"linestyle": "none", "markersize": 4, "capsize": 2, "elinewidth": 0.8}

#: The sequential colour map of parameter sweeps: viridis without its palest yellow, which white paper hides.
SWEEP_MAP = ListedColormap(colormaps["viridis"](np.linspace(0.0, 0.85, 256)), name="viridis_dark")


#: Names spelled as Greek letters (``gamma`` -> ``$\\gamma$``).
GREEK = frozenset(
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi pi rho sigma tau phi chi psi omega"
    .split()
)


def symbol(name: str) -> str:
    """The mathtext symbol of column ``name`` (:data:`SYMBOLS`); any other name as ``$name$`` with its
    subscript (``m_1`` -> ``$m_1$``, a Greek name as its letter: ``gamma_1`` -> ``$\\gamma_{1}$``), so
    that every label renders as mathematics."""
    if name in SYMBOLS:
        return SYMBOLS[name]
    head, _, tail = name.partition("_")
    head = f"\\{head}" if head in GREEK else head
    return f"${head}_{{{tail}}}$" if tail else f"${head}$"


def gap_symbol(low: str, high: str) -> str:
    """The label of the training-loss gap between the branches ``high`` and ``low``."""
    return rf"$\epsilon_t^{{\mathrm{{{high}}}}} - \epsilon_t^{{\mathrm{{{low}}}}}$"


def family_colour(label: str) -> str:
    """The colour of a branch family or an init (:data:`FAMILY_COLOURS`), black for any other."""
    return FAMILY_COLOURS.get(label, "k")


class SweepColours:
    """Colours of the values of a swept parameter along :data:`SWEEP_MAP`, and their colour bar."""

    def __init__(self, name: str, values: Iterable[float]) -> None:
        values = np.asarray(sorted(set(float(v) for v in values)), dtype=float)
        low, high = (values[0], values[-1]) if values.size else (0.0, 1.0)
        self.name = name
        self.mappable = ScalarMappable(Normalize(low, high if high > low else low + 1.0), SWEEP_MAP)

    def __call__(self, value: float) -> tuple[float, float, float, float]:
        """The colour of ``value``."""
        return tuple(self.mappable.to_rgba(float(value)))

    def bar(self, fig: Figure, ax: Axes | list[Axes]) -> None:
        """A colour bar beside ``ax`` labelled by the parameter's symbol."""
        fig.colorbar(self.mappable, ax=ax, label=symbol(self.name))
