"""The replicon's symbolic pieces (:mod:`attnphase.replica.replicon`) as numpy callables over nodes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cache

import numpy as np

from attnphase.replica.replicon import replicon_terms
from attnphase.replica.saddle_equations import ReplicaSystem
from attnphase.saddle.compilation.compiled import _lambdify_vector


@dataclass(frozen=True)
class RepliconCallables:
    """``envelope_hessian(z, nodes, params, consts)`` and ``prior_hessian(nodes, params, consts)``:
    ``(N, k, k)``; ``incidence(nodes)``: ``(E, N, L, r, r)``; ``multiplicity (E,)`` and ``entries (E,)``
    as in :class:`~attnphase.replica.replicon.RepliconTerms`; ``student_fields(nodes, params, consts)``
    ``(N, k)``, ``student_jacobian``, ``teacher_on_student``, ``teacher_on_teacher`` (same arguments)
    ``(N, rows, columns)``, and the node indices ``student_nodes``, ``teacher_nodes``."""

    envelope_hessian: Callable[..., np.ndarray]
    prior_hessian: Callable[..., np.ndarray]
    incidence: Callable[[np.ndarray], np.ndarray]
    multiplicity: np.ndarray
    entries: np.ndarray
    student_fields: Callable[..., np.ndarray]
    student_jacobian: Callable[..., np.ndarray]
    teacher_on_student: Callable[..., np.ndarray]
    teacher_on_teacher: Callable[..., np.ndarray]
    student_nodes: np.ndarray
    teacher_nodes: np.ndarray


def _per_node(values: np.ndarray, count: int, shape: tuple[int, ...]) -> np.ndarray:
    """Stacked outputs ``(prod(shape), N)`` or ``(prod(shape),)`` as ``(N, *shape)``."""
    flat = values.reshape(values.shape[0], -1)
    return np.broadcast_to(flat, (flat.shape[0], count)).T.reshape(count, *shape)


def _per_node_matrix(matrix, args: list) -> Callable[..., np.ndarray]:
    """``matrix`` (a sympy matrix in ``args``) as a callable returning ``(N, rows, columns)``."""
    function = _lambdify_vector(args, list(matrix))
    shape = (matrix.rows, matrix.cols)
    return lambda n, *rest: _per_node(function(n, *rest), n.shape[1], shape)


@cache
def compile_replicon(system: ReplicaSystem) -> RepliconCallables:
    """The callables of ``system``'s replicon, made once per system."""
    terms = replicon_terms(system)
    z, nodes, params, consts = system.z, system.nodes, system.parameters.symbols, system.constants
    k, length, rank = len(z), system.model.length, system.model.rank
    hessian = _lambdify_vector([z, nodes, params, consts], [h for row in system.envelope_hessian for h in row])
    prior = _lambdify_vector([nodes, params, consts], list(terms.prior_hessian))
    flat = [e for per_entry in terms.incidence for matrix in per_entry for e in matrix]
    incidence = _lambdify_vector([nodes], flat)
    entries = len(terms.entries)

    def envelope_hessian(z_: np.ndarray, n: np.ndarray, p: np.ndarray, c: np.ndarray) -> np.ndarray:
        return _per_node(hessian(z_, n, p, c), n.shape[1], (k, k))

    def prior_hessian(n: np.ndarray, p: np.ndarray, c: np.ndarray) -> np.ndarray:
        return _per_node(prior(n, p, c), n.shape[1], (k, k))

    def incidence_of(n: np.ndarray) -> np.ndarray:
        per_node = _per_node(incidence(n), n.shape[1], (entries, length, rank, rank))
        return np.moveaxis(per_node, 1, 0)

    fields = _per_node_matrix(terms.student_fields, [nodes, params, consts])
    return RepliconCallables(
        envelope_hessian,
        prior_hessian,
        incidence_of,
        np.array(terms.multiplicity, dtype=float),
        np.array(terms.entries, dtype=int),
        lambda n, p, c: fields(n, p, c)[..., 0],
        _per_node_matrix(terms.student_jacobian, [nodes, params, consts]),
        _per_node_matrix(terms.teacher_on_student, [nodes, params, consts]),
        _per_node_matrix(terms.teacher_on_teacher, [nodes, params, consts]),
        np.array(terms.student_nodes, dtype=int),
        np.array(terms.teacher_nodes, dtype=int),
    )
