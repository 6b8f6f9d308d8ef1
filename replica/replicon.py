"""The pieces of the replicon (de Almeida-Thouless) condition a declaration's system needs (THEORY.md sec. 12).

A replica-symmetry-breaking fluctuation gives two replicas fields that differ by an independent
Gaussian ``delta`` of small covariance ``dq_l`` per token. To first order it moves the conjugates by

    dqhat_e = (alpha / kappa_e) E[ sum_l < D_e,l , sum_l' G_ll' dq_l' G_ll'^T > ],   G = d g_out / d omega,

with ``g_out = V^-1 (prox - omega)`` and ``G = P H^-1 P - P`` at the prox, ``P`` the Hessian of the
envelope's quadratic prior (``blockdiag V_l^-1``) and ``H`` the envelope's Hessian; ``D_e,l`` is
``d q_l / d q_e`` (token ``l``'s field covariance in the order parameter entry ``e``) and
``kappa_e`` the entry's multiplicity in its symmetric matrix (1 on the diagonal, 2 off it). The
entropic side maps ``dqhat`` back to ``dq`` by ``d q / d qhat`` (for the ridge and the soft threshold,
whose prox ``w(b)`` has ``w w'' = 0``, this is ``E[w' dqhat w'^T]``). Everything here is symbolic;
:mod:`attnphase.saddle.stability.replicon` evaluates it at the prox.

The first-order response assumes ``g_out`` smooth. Where the global minimiser jumps between basins,
the two replicas' fields straddle the jump surface with probability ``O(sqrt(eps))`` for a fluctuation
of size ``eps``, and ``dqhat`` gains a term of that order. To measure it, the fluctuation is applied on
the nodes: the student's nodes ``xi`` (those ``omega = m + S xi`` depends on) move by
``sqrt(eps) zeta`` while the teacher's ``eta`` move by ``-B^-1 A sqrt(eps) zeta`` so that
``h* = A xi + B eta`` stays put (the teacher is common to the replicas); the Jacobians ``S``, ``A``,
``B`` are constant in the Gaussian nodes (the fields are linear in them).
"""

from __future__ import annotations

from dataclasses import dataclass

import sympy as sp

from attnphase.replica.saddle_equations import ReplicaSystem


@dataclass(frozen=True)
class RepliconTerms:
    """``prior_hessian``: ``P`` (``k x k`` in the nodes, parameters and constants); ``incidence[e][l]``:
    ``D_e,l`` (``r x r``, in the label nodes where tokens are mixtures); ``multiplicity[e]``: ``kappa_e``;
    ``entries``: the indices of the ``q`` entries among the system's order parameters. The fluctuation on
    the nodes (module docstring): ``student_fields`` ``omega`` (``k``), the indices of the student's nodes
    ``xi`` and of the teacher's ``eta`` among the system's nodes, and the Jacobians ``S = d omega / d xi``,
    ``A = d h* / d xi``, ``B = d h* / d eta``."""

    prior_hessian: sp.Matrix
    incidence: tuple[tuple[sp.Matrix, ...], ...]
    multiplicity: tuple[int, ...]
    entries: tuple[int, ...]
    student_fields: sp.Matrix
    student_nodes: tuple[int, ...]
    teacher_nodes: tuple[int, ...]
    student_jacobian: sp.Matrix
    teacher_on_student: sp.Matrix
    teacher_on_teacher: sp.Matrix


def _token_covariance(system: ReplicaSystem, token: int) -> sp.Matrix:
    """Token ``token``'s field covariance ``q_l`` as an ``r x r`` matrix."""
    value = system.per_token[f"q_{token + 1}"]
    return value if isinstance(value, sp.MatrixBase) else sp.Matrix([[value]])


def replicon_terms(system: ReplicaSystem) -> RepliconTerms:
    """The replicon's symbolic pieces of ``system`` (module docstring)."""
    prior = system.envelope - system.loss
    z = sp.Matrix(system.z)
    entries = tuple(i for i, e in enumerate(system.entries) if e.family == "q")
    covariances = [_token_covariance(system, l) for l in range(system.model.length)]
    incidence = tuple(tuple(c.diff(system.entries[i].symbol) for c in covariances) for i in entries)
    multiplicity = tuple(1 if system.entries[i].entry[0] == system.entries[i].entry[1] else 2 for i in entries)
    omega, hstar = sp.Matrix(list(system.student_fields)), sp.Matrix(list(system.teacher_fields))
    gaussian = system.nodes[: system.gaussian_dimension]
    student = tuple(i for i, n in enumerate(gaussian) if omega.has(n))
    teacher = tuple(i for i, n in enumerate(gaussian) if i not in student)
    xi, eta = [gaussian[i] for i in student], [gaussian[i] for i in teacher]
    return RepliconTerms(
        sp.hessian(prior, z),
        incidence,
        multiplicity,
        entries,
        omega,
        student,
        teacher,
        omega.jacobian(xi),
        hstar.jacobian(xi),
        hstar.jacobian(eta),
    )
