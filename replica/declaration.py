"""Declarations of solvable attention models (THEORY.md sec. 1, 6, 8).

A model is declared in Python with frozen dataclasses; nothing here is parsed from text.
Numbers in a declaration (variances, strengths, mixing weights) become named sympy symbols
in the derived equations, so one derivation serves every value of them: see
:meth:`AttentionModel.constants`. The *structure* of a declaration (L, r, t, which tokens
share a covariance, the positional coefficient matrix, the attention maps) is what the
derivation depends on, and what its cache is keyed on (:meth:`AttentionModel.structure`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields, is_dataclass

import sympy as sp


class DeclarationError(ValueError):
    """A declaration parameter is outside its allowed range."""


def require(condition: bool, parameter: str, allowed: str, value: object) -> None:
    """Raise :class:`DeclarationError` naming ``parameter`` and its allowed range."""
    if not condition:
        raise DeclarationError(f"{parameter} must be {allowed}; got {value!r}")


def softmax_rows_stable(scores: sp.Matrix) -> sp.Matrix:
    """Row-wise softmax ``exp(s_j) / sum_k exp(s_k)``, written as ``1 / sum_k exp(s_k - s_j)``:
    the differences of scores keep every exponent of moderate size, which keeps the compiled
    numerics finite for large fields."""
    n = scores.cols
    return sp.Matrix(
        [
            [1 / sp.Add(*[sp.exp(scores[i, k] - scores[i, j]) for k in range(n)]) for j in range(n)]
            for i in range(scores.rows)
        ]
    )


# --------------------------------------------------------------------------- attention maps


@dataclass(frozen=True)
class DotProductAttention:
    """Tied dot-product attention ``S(h) = softmax_row(h h^T)`` (paper eq. 15)."""

    def expression(self, fields: sp.Matrix, constants: dict[str, sp.Symbol]) -> sp.Matrix:
        """``softmax_row(h h^T)`` of the L x r field matrix ``h`` (an L x L sympy matrix)."""
        return softmax_rows_stable(fields * fields.T)

    def constants(self) -> dict[str, float]:
        """No named constants: the map has no parameters."""
        return {}

    def validate(self, length: int) -> None:
        """Every sequence length is allowed."""
        return None


@dataclass(frozen=True)
class MixedPositionalTeacher:
    """``T(h) = (1 - omega) semantic(h) + omega A`` (THEORY.md sec. 6).

    ``omega`` in [0, 1] interpolates between a purely semantic (0) and purely positional (1)
    target; ``A`` is a row-stochastic L x L matrix.
    """

    omega: float
    positional: tuple[tuple[float, ...], ...]
    semantic: DotProductAttention = field(default_factory=DotProductAttention)

    def validate(self, length: int) -> None:
        """``omega`` in [0, 1] and ``A`` a row-stochastic ``length`` x ``length`` matrix."""
        require(0.0 <= self.omega <= 1.0, "omega", "in [0, 1]", self.omega)
        a = self.positional
        require(
            len(a) == length and all(len(row) == length for row in a),
            "A",
            f"a square {length} x {length} matrix (one row and column per token)",
            a,
        )
        for i, row in enumerate(a):
            require(
                all(x >= 0 for x in row) and abs(sum(row) - 1.0) < 1e-9,
                "A",
                f"row-stochastic (entries >= 0, every row summing to 1; row {i + 1} sums to {sum(row):g})",
                a,
            )

    def constants(self) -> dict[str, float]:
        """``omega`` and the entries ``A_i_j`` of ``A`` (1-based), as named constants."""
        values = {"omega": float(self.omega)}
        for i, row in enumerate(self.positional):
            for j, x in enumerate(row):
                values[f"A_{i + 1}_{j + 1}"] = float(x)
        return values

    def expression(self, fields: sp.Matrix, constants: dict[str, sp.Symbol]) -> sp.Matrix:
        """``T(h*) = (1 - omega) softmax_row(h* h*^T) + omega A`` with the named constants."""
        n = len(self.positional)
        omega = constants["omega"]
        a = sp.Matrix(n, n, lambda i, j: constants[f"A_{i + 1}_{j + 1}"])
        return (1 - omega) * self.semantic.expression(fields, constants) + omega * a


# --------------------------------------------------------------------------- data model


@dataclass(frozen=True)
class GaussianTokens:
    """Independent Gaussian tokens ``x_l ~ N(0, Sigma_l)`` with jointly diagonal covariances.

    The limiting joint spectral law is a finite mixture of atoms: with probability
    ``weights[a]`` an eigen-direction carries the variances ``variances[a][l]`` for the
    tokens ``l = 0..L-1`` (THEORY.md sec. 1 and Assumption 4.1 of the paper).
    Tokens whose variance columns coincide share their order parameters.
    """

    variances: tuple[tuple[float, ...], ...]
    weights: tuple[float, ...] = (1.0,)

    @classmethod
    def isotropic(cls, length: int, sigma: float) -> GaussianTokens:
        """``Sigma_l = sigma^2 I`` for every token (the paper's instance)."""
        require(sigma > 0, "sigma", "> 0", sigma)
        return cls(variances=((float(sigma) ** 2,) * length,))

    @property
    def length(self) -> int:
        """The number of tokens L."""
        return len(self.variances[0])

    def validate(self) -> None:
        """At least one atom, positive weights summing to one, positive variances, one per token."""
        require(len(self.variances) >= 1, "variances", "at least one spectral atom", self.variances)
        require(
            len(self.weights) == len(self.variances),
            "weights",
            "one weight per spectral atom",
            self.weights,
        )
        require(
            all(w > 0 for w in self.weights) and abs(sum(self.weights) - 1.0) < 1e-9,
            "weights",
            "positive and summing to 1",
            self.weights,
        )
        for row in self.variances:
            require(len(row) == self.length, "variances", "the same number of tokens in every atom", row)
            require(all(g > 0 for g in row), "sigma", "> 0 (every token variance positive)", row)

    def parameters(self) -> dict[str, float]:
        """``{"sigma": sigma}`` if every token has the variance ``sigma^2`` in one spectral atom
        (``Sigma_l = sigma^2 I``), else the named constants of :meth:`constants`."""
        if len(self.variances) == 1 and len(set(self.variances[0])) == 1:
            return {"sigma": float(self.variances[0][0]) ** 0.5}
        return self.constants()

    def covariance_classes(self) -> tuple[int, ...]:
        """Class index of each token: tokens with identical spectra share a class."""
        columns = [tuple(row[token] for row in self.variances) for token in range(self.length)]
        distinct: list[tuple[float, ...]] = []
        for column in columns:
            if column not in distinct:
                distinct.append(column)
        return tuple(distinct.index(column) for column in columns)

    def constants(self) -> dict[str, float]:
        """The atom weights ``w_a`` and the variance ``gamma_a_c`` of each covariance class in each atom."""
        classes = self.covariance_classes()
        values: dict[str, float] = {}
        for a, row in enumerate(self.variances):
            values[f"w_{a + 1}"] = float(self.weights[a])
            for token, cls_ in enumerate(classes):
                values[f"gamma_{a + 1}_{cls_ + 1}"] = float(row[token])
        return values


@dataclass(frozen=True)
class PositionalEncodings:
    """``p_l = sum_k coefficients[l][k] u_k`` with orthonormal unit directions ``u_k``.

    Each direction lies in the eigenspace of one spectral atom (``atoms[k]``, default 0).
    The paper's ``p_1 = -p_2 = 1_d/sqrt(d)`` is ``coefficients=((1.0,), (-1.0,))``.
    The positional overlaps are ``m_l = p_l^T Q / sqrt(d) = sum_k coefficients[l][k] mu_k``,
    so linear relations among the encodings become relations among the ``m_l``.
    """

    coefficients: tuple[tuple[float, ...], ...]
    atoms: tuple[int, ...] | None = None

    @property
    def directions(self) -> int:
        """The number of orthonormal directions ``u_k`` the encodings are built from."""
        return len(self.coefficients[0]) if self.coefficients else 0

    def atom_of(self, k: int) -> int:
        """The spectral atom whose eigenspace holds the direction ``u_k``."""
        return 0 if self.atoms is None else self.atoms[k]

    def validate(self, length: int, n_atoms: int) -> None:
        """One row per token, rows of equal length, and existing atoms."""
        require(len(self.coefficients) == length, "positions", f"one row per token ({length})", self.coefficients)
        require(
            all(len(row) == self.directions for row in self.coefficients),
            "positions",
            "rows of equal length (one coefficient per direction)",
            self.coefficients,
        )
        if self.atoms is not None:
            require(len(self.atoms) == self.directions, "positions.atoms", "one atom per direction", self.atoms)
            require(all(0 <= a < n_atoms for a in self.atoms), "positions.atoms", f"in [0, {n_atoms - 1}]", self.atoms)

    def coefficient_matrix(self) -> sp.Matrix:
        """The L x K matrix ``P`` of ``p_l = sum_k P_lk u_k`` with exact (rational) entries."""
        return sp.Matrix(len(self.coefficients), self.directions, lambda i, j: sp.nsimplify(self.coefficients[i][j]))


@dataclass(frozen=True)
class Ridge:
    """``R(Q) = strength/2 ||Q||_F^2`` (THEORY.md sec. 3); ``g(w) = strength/2 |w|^2``."""

    strength: float

    def validate(self) -> None:
        """``lambda >= 0``."""
        require(self.strength >= 0, "lambda", ">= 0", self.strength)

    def constants(self) -> dict[str, float]:
        """The strength as the named constant ``lambda``."""
        return {"lambda": float(self.strength)}

    def entropic_potential(self, a_matrix: sp.Matrix, second_moment: sp.Matrix, lam: sp.Symbol) -> sp.Expr:
        """``E_b[-min_w {g(w) + w^T A w/2 - w.b}] = tr[(lam I + A)^{-1} E[b b^T]] / 2``."""
        inverse = (lam * sp.eye(a_matrix.rows) + a_matrix).inv()
        return sp.Rational(1, 2) * (inverse * second_moment).trace()


@dataclass(frozen=True)
class AttentionModel:
    """The whole declaration: tokens, positions, teacher, student, loss, regulariser.

    ``rank`` is the student rank r, ``teacher_rank`` the teacher rank t. Weights are tied
    (the field of token l is ``h_l = (x_l + p_l)^T Q / sqrt(d)``); the loss is the square
    loss of THEORY.md sec. 1 with ``Sigma_tilde = diag(tr Sigma_l / d)``.
    """

    tokens: GaussianTokens
    positions: PositionalEncodings
    teacher: MixedPositionalTeacher
    student: DotProductAttention
    regulariser: Ridge
    rank: int = 1
    teacher_rank: int = 1

    def __post_init__(self) -> None:
        self.validate()

    @property
    def length(self) -> int:
        """The number of tokens L."""
        return self.tokens.length

    def validate(self) -> None:
        """Validate every component against the others (raises :class:`DeclarationError`)."""
        require(self.rank >= 1, "rank", ">= 1", self.rank)
        require(self.teacher_rank >= 1, "teacher_rank", ">= 1", self.teacher_rank)
        self.tokens.validate()
        require(self.length >= 2, "L", ">= 2 tokens", self.length)
        self.positions.validate(self.length, len(self.tokens.variances))
        self.teacher.validate(self.length)
        self.student.validate(self.length)
        self.regulariser.validate()

    def constants(self) -> dict[str, float]:
        """Numerical value of every named constant of the derived equations."""
        values: dict[str, float] = {}
        for part in (self.tokens, self.teacher, self.student, self.regulariser):
            values.update(part.constants())
        return values

    def parameters(self) -> dict[str, float]:
        """The declaration's numbers under the names a researcher uses, for tables and titles:
        the teacher's and the regulariser's named constants (``omega``, ``A_i_j``, ``lambda``) and
        ``sigma`` for isotropic tokens (THEORY.md sec. 6), else the spectral constants
        ``gamma_a_c``, ``w_a`` (sec. 1)."""
        values = dict(self.teacher.constants())
        values.update(self.tokens.parameters())
        for part in (self.student, self.regulariser):
            values.update(part.constants())
        return values

    def record(self) -> dict[str, object]:
        """The whole declaration as JSON-ready data (each component with its class name), as
        written next to results: two records are equal exactly when the declarations are."""
        return _record(self)

    def structure(self) -> tuple:
        """What the symbolic derivation depends on (values of the constants excluded)."""
        return (
            type(self.teacher).__name__,
            type(self.student).__name__,
            type(self.regulariser).__name__,
            self.length,
            self.rank,
            self.teacher_rank,
            len(self.tokens.variances),
            self.tokens.covariance_classes(),
            self.positions.coefficients,
            self.positions.atoms,
        )


def _record(value: object) -> object:
    if is_dataclass(value) and not isinstance(value, type):
        return {"type": type(value).__name__} | {f.name: _record(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple | list):
        return [_record(v) for v in value]
    return value


def paper_model(
    omega: float = 0.3,
    sigma: float = 0.5,
    lam: float = 0.01,
    A: Sequence[Sequence[float]] = ((0.6, 0.4), (0.4, 0.6)),
) -> AttentionModel:
    """The paper's instance (THEORY.md sec. 6): ``L = 2``, ``r = t = 1``, ``Sigma_l = sigma^2 I``,
    ``p_1 = -p_2``, dot-product student, ridge of strength ``lam`` (lambda), and the target
    ``T(h*) = (1 - omega) softmax(h* h*^T) + omega A``. ``A`` is any row-stochastic 2 x 2 matrix
    (nested sequences or an array); the paper's second example is ``((0.3, 0.7), (0.8, 0.2))``."""
    return AttentionModel(
        tokens=GaussianTokens.isotropic(2, sigma),
        positions=PositionalEncodings(coefficients=((1.0,), (-1.0,))),
        teacher=MixedPositionalTeacher(omega=omega, positional=tuple(tuple(map(float, r)) for r in A)),
        student=DotProductAttention(),
        regulariser=Ridge(lam),
    )
