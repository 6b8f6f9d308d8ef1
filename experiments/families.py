"""The overlap families of a declaration in its tables (THEORY.md sec. 2, 6): which branch label each
family names, the entries of each family as table columns, and the families' norms per row, whatever
the rank, the number of positional directions or of covariance classes. Shared by the scan's figures,
the simulations and their comparison with the theory."""

from __future__ import annotations

import numpy as np
import pandas as pd

from attnphase.replica.declaration import OVERLAP_FAMILIES, AttentionModel

#: The overlap family each informed start aims at (THEORY.md sec. 6, 11): the positional start lies along
#: the first positional direction, the semantic one on the teacher.
FAMILY_OF_INIT = {"positional": "m", "semantic": "theta"}


def family_labels(model: AttentionModel) -> dict[str, str]:
    """The label of the branch on which each overlap family alone is non-zero (THEORY.md sec. 6;
    the paper's: ``m`` positional, ``theta`` semantic), for the families the declaration has."""
    meanings = dict(model.labels.meanings)
    present = {e.family for e in model.reduced_parameters().entries}
    return {family: meanings[family] for family in OVERLAP_FAMILIES if family in meanings and family in present}


def basins(model: AttentionModel) -> tuple[str, ...]:
    """The basins a run is put in: the labels of :func:`family_labels`, the label of the points with
    several non-zero families (the paper's ``mixed``), then ``neither``."""
    return (*family_labels(model).values(), model.labels.several, "neither")


def overlap_names(model: AttentionModel) -> tuple[str, ...]:
    """The entries of the overlap families (``m`` and ``theta``, THEORY.md sec. 2), as named in tables."""
    return tuple(e.name for e in model.reduced_parameters().entries if e.family in OVERLAP_FAMILIES)


def family_norms(table: pd.DataFrame, model: AttentionModel) -> dict[str, np.ndarray]:
    """Per row, the Euclidean norm of each overlap family's entries (the paper's ``|m|`` and ``|theta|``):
    the size of the overlap with the encodings and with the teacher, whatever the rank and the number
    of positional directions or covariance classes."""
    names = {family: [e.name for e in model.reduced_parameters().of_family(family)] for family in OVERLAP_FAMILIES}
    return {
        family: np.sqrt(sum(table[name].to_numpy(float) ** 2 for name in names[family]))
        for family in family_labels(model)
    }


def norm_columns(model: AttentionModel) -> dict[str, str]:
    """The columns of the overlap norms, ``|m|`` and ``|theta|`` (:func:`family_norms`), keyed by column
    name, valued by family."""
    return {f"|{family}|": family for family in family_labels(model)}


def with_family_norms(table: pd.DataFrame, model: AttentionModel) -> pd.DataFrame:
    """``table`` with the columns of :func:`norm_columns`."""
    sizes = family_norms(table, model)
    return table.assign(**{column: sizes[family] for column, family in norm_columns(model).items()})
