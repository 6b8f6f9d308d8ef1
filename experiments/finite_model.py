"""A declaration at finite ``d``, in PyTorch: the data, teacher and student a simulation trains.

Everything is read from the :class:`~attnphase.replica.declaration.AttentionModel` the theory derives
its equations from (THEORY.md sec. 1-2), so a declared variant is simulated without code of its own:

* coordinates: the spectral atom ``a`` of the tokens' covariances owns a block of
  ``round(w_a d)`` consecutive coordinates (largest remainders, summing to ``d``); token ``l`` has the
  variance ``variances[a][l]`` on them, so ``Sigma_l`` is diagonal in the standard basis (for mixture
  tokens, cluster ``j`` has ``variances[a][j]``, and each sequence's labels are drawn from the label
  law, THEORY.md sec. 8);
* positional encodings ``p_l = sum_k P_lk u_k`` (and cluster means ``mu_j = sum_k M_jk u_k``): ``u_k`` is
  flat over its atom's block,
  ``u_k,i = s_k(i) / sqrt(block)``, with the sign pattern ``s_k`` of Rademacher function ``j`` for the
  ``j``-th direction of the block (``+1`` for the first; ``(-1)^bit_{j-1}(i)`` after it): orthonormal when
  the block is a multiple of ``2^j``, and with the balanced independent signs of the field law of
  ``Psi_w`` (:class:`~attnphase.replica.declaration.FieldLaw`). The paper's ``p_1 = -p_2 = 1_d/sqrt(d)``
  is one direction in one atom;
* teacher ``Q* in R^{d x t}`` with iid ``N(0, 1)`` entries; the target attention ``T(h*)`` and the
  student attention ``S(h)`` are the declaration's own sympy expressions, compiled to torch by
  ``sympy.lambdify`` with the declaration's constants substituted;
* the regulariser ``sum_i g(Q_i)`` with ``g(w) = l1 |w|_1 + l2/2 |w|^2`` (its
  :meth:`separable_weights`);
* the measured order parameters are the declaration's reduced ones (THEORY.md sec. 2), under the
  theory's names: ``q_c = Q^T Sigma_c Q / d`` and ``theta_c = Q*^T Sigma_c Q / d`` per covariance
  class, ``mu_k = u_k^T Q / sqrt(d)`` per positional direction (printed ``m``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import sympy as sp
import torch

from attnphase.replica.declaration import AttentionModel

#: Attention maps compiled once per (declaration, which map) within a process.
_COMPILED: dict[tuple, Callable[..., list]] = {}


def block_sizes(weights: tuple[float, ...], d: int) -> tuple[int, ...]:
    """``round(w_a d)`` coordinates per atom by largest remainders: they sum to ``d`` exactly."""
    exact = np.asarray(weights, dtype=float) * d
    sizes = np.floor(exact).astype(int)
    order = np.argsort(-(exact - sizes), kind="stable")
    sizes[order[: d - int(sizes.sum())]] += 1
    return tuple(int(s) for s in sizes)


def sign_pattern(index: int, size: int) -> np.ndarray:
    """Rademacher function ``index`` on ``size`` points: ones for ``index = 0``, else ``(-1)^bit``
    of the point's position, bit ``index - 1``."""
    if index == 0:
        return np.ones(size)
    return np.where((np.arange(size) >> (index - 1)) & 1, -1.0, 1.0)


def _attention_function(model: AttentionModel, part: str, columns: int) -> Callable[..., list]:
    """The declaration's ``part`` (``student`` or ``teacher``) attention map, an ``L x L`` nested
    list of torch expressions in the ``L x columns`` fields (token-major), with its constants'
    values substituted."""
    key = (model.structure(), tuple(sorted(model.constants().items())), part)
    if key not in _COMPILED:
        values = model.constants()
        symbols = {name: sp.Symbol(name, real=True) for name in values}
        fields = sp.Matrix(model.length, columns, lambda l, i: sp.Symbol(f"h_{l}_{i}", real=True))
        expression = getattr(model, part).expression(fields, symbols)
        expression = expression.subs({symbols[name]: value for name, value in values.items()})
        _COMPILED[key] = sp.lambdify(list(fields), expression.tolist(), modules="torch", cse=True)
    return _COMPILED[key]


def _apply(function: Callable[..., list], fields: torch.Tensor) -> torch.Tensor:
    """``function`` of fields ``(..., L, k)`` as a tensor ``(..., L, L)``."""
    rows = function(*fields.flatten(-2).unbind(-1))
    shape = fields.shape[:-2]
    entries = [[torch.as_tensor(x, dtype=fields.dtype).expand(shape) for x in row] for row in rows]
    return torch.stack([torch.stack(row, -1) for row in entries], -2)


@dataclass(frozen=True, eq=False)
class FiniteModel:
    """``model`` at embedding dimension ``d`` in ``dtype`` (see the module docstring)."""

    model: AttentionModel
    d: int
    dtype: torch.dtype = torch.float64

    @property
    def length(self) -> int:
        """Tokens per sequence L."""
        return self.model.length

    @property
    def rank(self) -> int:
        """Student rank r."""
        return self.model.rank

    @property
    def teacher_rank(self) -> int:
        """Teacher rank t."""
        return self.model.teacher_rank

    @cached_property
    def blocks(self) -> tuple[slice, ...]:
        """The coordinates of each spectral atom."""
        edges = np.cumsum((0, *block_sizes(self.model.tokens.weights, self.d)))
        return tuple(slice(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True))

    @cached_property
    def patterns(self) -> tuple[int, ...]:
        """The sign pattern (Rademacher function, :func:`sign_pattern`) of each positional direction:
        its rank among the directions of its atom."""
        used = [0] * len(self.blocks)
        ranks = []
        for k in range(self.model.positions.directions):
            atom = self.model.positions.atom_of(k)
            ranks.append(used[atom])
            used[atom] += 1
        return tuple(ranks)

    def too_small(self) -> str:
        """What ``d`` lacks for this model (empty if nothing): every spectral atom needs a coordinate,
        and ``2^j`` of them for a direction of sign pattern ``j`` (its ``j + 1``-th) to be distinct."""
        for atom, block in enumerate(self.blocks):
            ranks = [j for k, j in enumerate(self.patterns) if self.model.positions.atom_of(k) == atom]
            needed = 2 ** max(ranks, default=0)
            if block.stop - block.start < needed:
                return f"spectral atom {atom} at least {needed} coordinates (it has {block.stop - block.start})"
        return ""

    @cached_property
    def cluster_variances(self) -> torch.Tensor:
        """``(C, d)``: the variance of each cluster at each coordinate (for Gaussian tokens the clusters
        are the tokens)."""
        variances = self.model.tokens.variances
        out = torch.empty((len(variances[0]), self.d), dtype=self.dtype)
        for block, row in zip(self.blocks, variances, strict=True):
            out[:, block] = torch.tensor(row, dtype=self.dtype)[:, None]
        return out

    @cached_property
    def _cluster_spreads(self) -> torch.Tensor:
        """``(C, d)``: the standard deviation of each cluster at each coordinate."""
        return self.cluster_variances.sqrt()

    @cached_property
    def class_variances(self) -> torch.Tensor:
        """``(C, d)``: the diagonal of ``Sigma_c`` of each covariance class."""
        classes = self.model.tokens.covariance_classes()
        return torch.stack([self.cluster_variances[classes.index(c)] for c in range(max(classes) + 1)])

    @cached_property
    def cluster_means(self) -> torch.Tensor:
        """``(C, d)``: the mean ``mu_j = sum_k M_jk u_k`` of each cluster."""
        means = self.model.tokens.cluster_means(self.model.positions.directions)
        coefficients = torch.tensor(means, dtype=self.dtype).reshape(len(means), -1)
        return coefficients @ self.directions

    @cached_property
    def _label_law(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The label configurations ``(K, L)`` and their probabilities ``(K,)``."""
        law = self.model.tokens.configurations()
        labels = torch.tensor([c for c, _ in law], dtype=torch.long)
        return labels, torch.tensor([p for _, p in law], dtype=torch.float64)

    @cached_property
    def directions(self) -> torch.Tensor:
        """``(K, d)``: the unit directions ``u_k`` of the positional encodings."""
        positions = self.model.positions
        out = torch.zeros((positions.directions, self.d), dtype=self.dtype)
        for k, rank in enumerate(self.patterns):
            block = self.blocks[positions.atom_of(k)]
            size = block.stop - block.start
            out[k, block] = torch.tensor(sign_pattern(rank, size) / math.sqrt(size), dtype=self.dtype)
        return out

    @cached_property
    def positions(self) -> torch.Tensor:
        """``(L, d)``: the encodings ``p_l = sum_k P_lk u_k``."""
        coefficients = torch.tensor(self.model.positions.coefficients, dtype=self.dtype).reshape(self.length, -1)
        return coefficients @ self.directions

    def tokens(self, generator: torch.Generator, n: int) -> torch.Tensor:
        """``n`` sequences of tokens ``x``, shape ``(n, L, d)`` (:meth:`labelled_tokens`)."""
        return self.labelled_tokens(generator, n)[1]

    def labelled_tokens(self, generator: torch.Generator, n: int) -> tuple[torch.Tensor, torch.Tensor]:
        """``n`` sequences' cluster labels ``(c_1, ..., c_L)``, shape ``(n, L)``, drawn from the label law
        (drawn only when it has more than one configuration), and their tokens
        ``x_l ~ N(mu_{c_l}, Sigma_{c_l})``, shape ``(n, L, d)`` (THEORY.md sec. 1, 8)."""
        configurations, probabilities = self._label_law
        if len(probabilities) == 1:  # every sequence alike: its means and spreads broadcast, (L, d)
            labels = configurations.expand(n, -1)
            means, spreads = self.cluster_means[configurations[0]], self._cluster_spreads[configurations[0]]
        else:
            labels = configurations[torch.multinomial(probabilities, n, replacement=True, generator=generator)]
            means, spreads = self.cluster_means[labels], self._cluster_spreads[labels]
        draws = torch.randn((n, self.length, self.d), generator=generator, dtype=self.dtype)
        return labels, means + draws * spreads

    def teacher_weights(self, generator: torch.Generator) -> torch.Tensor:
        """``Q* ~ N(0, I)`` entrywise, shape ``(d, t)``."""
        return torch.randn((self.d, self.teacher_rank), generator=generator, dtype=self.dtype)

    @cached_property
    def _teacher_map(self) -> Callable[..., list]:
        return _attention_function(self.model, "teacher", self.teacher_rank)

    @cached_property
    def _student_map(self) -> Callable[..., list]:
        return _attention_function(self.model, "student", self.rank)

    def teacher_attention(self, teacher_fields: torch.Tensor) -> torch.Tensor:
        """``T(h*)`` for teacher fields ``(..., L, t)``; result ``(..., L, L)``."""
        return _apply(self._teacher_map, teacher_fields)

    def student_attention(self, fields: torch.Tensor) -> torch.Tensor:
        """``S(h)`` for student fields ``(..., L, r)``; result ``(..., L, L)``."""
        return _apply(self._student_map, fields)

    def order_parameters(self, weights: torch.Tensor, teacher: torch.Tensor) -> dict[str, float]:
        """The declaration's reduced order parameters (except the response ``V``, which has no
        finite-``d`` counterpart) at student weights ``(d, r)`` and teacher weights ``(d, t)``, under the
        theory's names (THEORY.md sec. 2)."""
        parameters = self.model.reduced_parameters()
        basis = self.model.independent_classes()
        d = self.d
        values: dict[str, float] = {}
        for entry in parameters.entries:
            i, j = entry.entry
            if entry.family in ("q", "theta"):
                left = weights if entry.family == "q" else teacher
                value = left[:, i] @ (self.class_variances[basis[entry.group]] * weights[:, j]) / d
            elif entry.family == "m":
                value = self.directions[entry.group] @ weights[:, i] / math.sqrt(d)
            else:
                continue
            values[entry.name] = float(value)
        return values

    def measured_names(self) -> tuple[str, ...]:
        """The names :meth:`order_parameters` returns, in the theory's order."""
        return tuple(e.name for e in self.model.reduced_parameters().entries if e.family != "V")
