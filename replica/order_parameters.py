"""Reduced order parameters and their conjugates (THEORY.md sec. 2, 6).

Per-token order parameters of THEORY.md sec. 2 are functionals of the weights ``Q``:
``q_l = Q^T Sigma_l Q/d``, ``theta_l = Q*^T Sigma_l Q/d``, ``m_l = p_l^T Q/sqrt(d)`` and the
response ``V_l``. Two tokens with the same covariance spectrum therefore have identical
``q``, ``V`` and ``theta``; and since ``p_l = sum_k P_lk u_k``, ``m_l = sum_k P_lk mu_k``.
The reduction below introduces one symbol family per covariance class (``q, V, theta``) and
per positional direction (``mu``, printed ``m``); the per-token parameters are expressions in
them (e.g. ``m_1 = m, m_2 = -m`` in the paper's instance). The conjugate of a reduced
parameter is the sum of the per-token conjugates it stands for.
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

#: Families of order parameters, in the order used everywhere (tables, vectors).
FAMILIES = ("q", "m", "V", "theta")
HAT_NAMES = {"q": "qhat", "m": "mhat", "V": "Vhat", "theta": "thetahat"}


@dataclass(frozen=True)
class OrderParameter:
    """One independent scalar entry of a reduced order parameter and its conjugate."""

    family: str
    group: int
    entry: tuple[int, int]
    symbol: sp.Symbol
    conjugate: sp.Symbol

    @property
    def name(self) -> str:
        """The printed name of the entry, e.g. ``q`` or ``theta_2``."""
        return self.symbol.name


def _label(base: str, group: int, n_groups: int, entry: tuple[int, int], shape: tuple[int, int]) -> str:
    parts = []
    if n_groups > 1:
        parts.append(str(group + 1))
    if shape != (1, 1):
        parts.append(f"{entry[0] + 1}_{entry[1] + 1}" if min(shape) > 1 else str(max(entry) + 1))
    return base + ("_" + "_".join(parts) if parts else "")


@dataclass(frozen=True)
class ReducedParameters:
    """Symbol matrices of the reduced order parameters.

    ``q[c], V[c]`` are symmetric r x r, ``theta[c]`` is t x r (one per covariance class c);
    ``mu[k]`` is r x 1 (one per positional direction k). ``hat`` holds the conjugates with
    the same shapes.
    """

    entries: tuple[OrderParameter, ...]
    q: tuple[sp.Matrix, ...]
    V: tuple[sp.Matrix, ...]
    theta: tuple[sp.Matrix, ...]
    mu: tuple[sp.Matrix, ...]
    qhat: tuple[sp.Matrix, ...]
    Vhat: tuple[sp.Matrix, ...]
    thetahat: tuple[sp.Matrix, ...]
    muhat: tuple[sp.Matrix, ...]

    @classmethod
    def build(cls, n_classes: int, n_directions: int, rank: int, teacher_rank: int) -> ReducedParameters:
        """Symbols for ``n_classes`` covariance classes and ``n_directions`` positional directions at
        student rank ``rank`` and teacher rank ``teacher_rank`` (THEORY.md sec. 2)."""
        entries: list[OrderParameter] = []
        mats: dict[str, list[sp.Matrix]] = {}
        specs = {
            "q": (n_classes, (rank, rank), True),
            "m": (n_directions, (rank, 1), False),
            "V": (n_classes, (rank, rank), True),
            "theta": (n_classes, (teacher_rank, rank), False),
        }
        for family in FAMILIES:
            n_groups, shape, symmetric = specs[family]
            for hat in (False, True):
                mats.setdefault(family + ("hat" if hat else ""), [])
            for group in range(n_groups):
                plain = sp.zeros(*shape)
                hatted = sp.zeros(*shape)
                for i in range(shape[0]):
                    for j in range(shape[1]):
                        if symmetric and j < i:
                            plain[i, j] = plain[j, i]
                            hatted[i, j] = hatted[j, i]
                            continue
                        label = _label(family, group, n_groups, (i, j), shape)
                        hat_label = _label(HAT_NAMES[family], group, n_groups, (i, j), shape)
                        positive = family in ("q", "V") and i == j
                        symbol = sp.Symbol(label, real=True, positive=positive or None)
                        conjugate = sp.Symbol(hat_label, real=True)
                        plain[i, j], hatted[i, j] = symbol, conjugate
                        entries.append(OrderParameter(family, group, (i, j), symbol, conjugate))
                mats[family].append(plain)
                mats[family + "hat"].append(hatted)
        return cls(
            entries=tuple(entries),
            q=tuple(mats["q"]),
            V=tuple(mats["V"]),
            theta=tuple(mats["theta"]),
            mu=tuple(mats["m"]),
            qhat=tuple(mats["qhat"]),
            Vhat=tuple(mats["Vhat"]),
            thetahat=tuple(mats["thetahat"]),
            muhat=tuple(mats["mhat"]),
        )

    def of_family(self, family: str) -> tuple[OrderParameter, ...]:
        """The entries of one family (``q``, ``m``, ``V`` or ``theta``)."""
        return tuple(e for e in self.entries if e.family == family)

    @property
    def symbols(self) -> tuple[sp.Symbol, ...]:
        """The order-parameter symbols, in the order of :attr:`entries`."""
        return tuple(e.symbol for e in self.entries)

    @property
    def conjugates(self) -> tuple[sp.Symbol, ...]:
        """The conjugate symbols, in the order of :attr:`entries`."""
        return tuple(e.conjugate for e in self.entries)
