"""Declarations of solvable attention models (THEORY.md sec. 1, 6, 8).

A model is declared in Python with frozen dataclasses; nothing here is parsed from text.
Numbers in a declaration (variances, strengths, mixing weights) become named sympy symbols
in the derived equations, so one derivation serves every value of them: see
:meth:`AttentionModel.constants`. The *structure* of a declaration (L, r, t, which tokens
share a covariance, the positional coefficient matrix, the attention maps) is what the
derivation depends on, and what its cache is keyed on (:meth:`AttentionModel.structure`).
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from itertools import combinations, product

import sympy as sp

from attnphase.replica.order_parameters import ReducedParameters


class DeclarationError(ValueError):
    """A declaration parameter is outside its allowed range."""


class InputTypeError(TypeError, ValueError):
    """A parameter of the wrong type (a string or ``None`` where a number belongs, a float where an
    integer belongs): a :class:`TypeError`, and a :class:`ValueError` too, so that every bad input
    is caught as one kind (the command line reports it in one line)."""


def require(condition: bool, parameter: str, allowed: str, value: object) -> None:
    """Raise :class:`DeclarationError` naming ``parameter`` and its allowed range."""
    if not condition:
        raise DeclarationError(f"{parameter} must be {allowed}; got {shown(value)}")


def shown(value: object, limit: int = 80) -> str:
    """``value`` as an error message quotes it: numbers (numpy's too) as plain Python numbers, at most
    ``limit`` characters."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        text = repr(int(value))
    elif isinstance(value, numbers.Real) and not isinstance(value, bool):
        text = repr(float(value))
    elif isinstance(value, tuple | list):
        text = "(" + ", ".join(shown(v, limit) for v in value) + ("," if len(value) == 1 else "") + ")"
    else:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _bound(x: float) -> str:
    """A range's end as text: integral values in full (``4294967295``), others in ``%g`` form."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e10 else f"{x:g}"


@dataclass(frozen=True)
class Interval:
    """The allowed range of a numeric parameter: finite ends, each closed or open, integers or reals.

    ``str(interval)`` is how error messages, ``--help`` texts and the README state the range
    (``in [0.001, 1000]``, ``in (0, 10]``, ``an integer in [2, 64]``); :meth:`check` is the one
    check of a value against it, used by every layer (declarations, quadrature, solver settings,
    simulations, command-line parsing).
    """

    low: float
    high: float
    low_open: bool = False
    high_open: bool = False
    integer: bool = False

    def __str__(self) -> str:
        left, right = "(" if self.low_open else "[", ")" if self.high_open else "]"
        return f"{'an integer ' if self.integer else ''}in {left}{_bound(self.low)}, {_bound(self.high)}{right}"

    def __contains__(self, value: object) -> bool:
        if not self.admits_type(value):
            return False
        try:
            x = int(value) if self.integer else float(value)  # type: ignore[call-overload]
        except (OverflowError, ValueError):  # beyond any float: outside every finite range
            return False
        above = x > self.low if self.low_open else x >= self.low
        below = x < self.high if self.high_open else x <= self.high
        return above and below

    def admits_type(self, value: object) -> bool:
        """Whether ``value`` has a type the range allows: an integer (Python's or numpy's) for an
        integer range, any real number for a real one; ``bool`` never."""
        kind = numbers.Integral if self.integer else numbers.Real
        return isinstance(value, kind) and not isinstance(value, bool)

    def check(self, value: object, parameter: str, error: type[ValueError] = DeclarationError) -> float:
        """``value`` as a Python ``int`` (integer range) or ``float`` if it lies in the range.

        Raises :class:`InputTypeError` for a value of the wrong type and ``error`` for one outside
        the range (NaN included), both as ``"<parameter> must be <range>; got <value>"``.
        """
        message = f"{parameter} must be {self}; got {shown(value)}"
        if not self.admits_type(value):
            raise InputTypeError(message)
        if value not in self:
            raise error(message)
        return int(value) if self.integer else float(value)  # type: ignore[arg-type]

    def check_rows(
        self, value: object, parameter: str, error: type[ValueError] = DeclarationError
    ) -> tuple[tuple[float, ...], ...]:
        """A matrix given as nested sequences or a 2-D array, as a tuple of rows of checked numbers."""
        allowed = f"a sequence of rows of numbers, each {self}"
        rows = _items(value, parameter, allowed)
        return tuple(tuple(self.check(x, parameter, error) for x in _items(row, parameter, allowed)) for row in rows)

    def check_each(self, value: object, parameter: str, error: type[ValueError] = DeclarationError) -> tuple:
        """A sequence (or 1-D array) of numbers, as a tuple of checked numbers."""
        allowed = f"a sequence of numbers, each {self}"
        return tuple(self.check(x, parameter, error) for x in _items(value, parameter, allowed))


def _items(value: object, parameter: str, allowed: str) -> list:
    """The items of a sequence or array (not of a string), else :class:`InputTypeError`."""
    if isinstance(value, str | bytes) or not isinstance(value, Iterable):
        raise InputTypeError(f"{parameter} must be {allowed}; got {shown(value)}")
    return list(value)


#: The ranges of a declaration's numbers (THEORY.md sec. 1, 6): physically meaningful and numerically
#: safe (every variance and field of the compiled integrands stays far from overflow and underflow).
OMEGA = Interval(0.0, 1.0)
SIGMA = Interval(1e-3, 1e3)
VARIANCE = Interval(1e-6, 1e6)  # sigma^2 for sigma in SIGMA
WEIGHT = Interval(0.0, 1.0, low_open=True)
LAMBDA = Interval(0.0, 1e3)
TARGET_ENTRY = Interval(0.0, 1.0)  # entries of a row-stochastic A
COEFFICIENT = Interval(-1e3, 1e3)
#: Tokens per sequence L, spectral atoms, student and teacher ranks: the derivation and the
#: quadrature grow with them (the Gaussian integrals are over L (r + t) variables).
MAX_TOKENS = 16
MAX_ATOMS = 16
MAX_RANK = 4
TOKENS = Interval(2, MAX_TOKENS, integer=True)
ATOMS = Interval(1, MAX_ATOMS, integer=True)
ATOM_INDEX = Interval(0, MAX_ATOMS - 1, integer=True)
RANK = Interval(1, MAX_RANK, integer=True)
#: How a token variance is named in messages: the paper's symbol and the field.
VARIANCES = "sigma^2 (variances)"


def _set(instance: object, name: str, value: object) -> None:
    """Store a normalised field value on a frozen dataclass during ``__post_init__``."""
    object.__setattr__(instance, name, value)


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

    def validate(self, length: int, rank: int = 1) -> None:
        """Every sequence length and rank is allowed."""
        return None

    def rotations(self, rank: int) -> tuple[sp.Matrix, ...]:
        """Generators of the rotations ``W -> W exp(s G)`` that leave ``h h^T``, hence the scores, unchanged:
        ``G = E_ij - E_ji`` for every pair of the ``rank`` columns (the Lie algebra of ``O(r)``)."""
        return tuple(_rotation(rank, i, j) for i, j in combinations(range(rank), 2))


@dataclass(frozen=True)
class UntiedDotProductAttention:
    """Untied key and query, ``S(h)_lk = softmax_k(hQ_l^T hK_k)`` (THEORY.md sec. 8).

    The student's weights ``W = [Q, K]`` have ``2r`` columns and its fields
    ``h_l = (x_l + p_l)^T W / sqrt(d)`` split as ``(hQ_l, hK_l)``. The declaration's ``rank`` is the
    width ``2r`` of ``W``, so the theory is that of rank ``2r`` with this map (its order parameters
    are ``2r x 2r`` blocks: ``q`` holds ``Q^T Sigma Q``, ``Q^T Sigma K`` and ``K^T Sigma K``)."""

    def expression(self, fields: sp.Matrix, constants: dict[str, sp.Symbol]) -> sp.Matrix:
        """``softmax_row(hQ hK^T)`` of the L x 2r field matrix ``h = [hQ, hK]``."""
        half = fields.cols // 2
        return softmax_rows_stable(fields[:, :half] * fields[:, half:].T)

    def constants(self) -> dict[str, float]:
        """No named constants: the map has no parameters."""
        return {}

    def validate(self, length: int, rank: int = 2) -> None:
        """An even rank (``W = [Q, K]``, each with half of the columns)."""
        require(rank % 2 == 0, "rank", "even with untied key and query (W = [Q, K], 2r columns)", rank)

    def rotations(self, rank: int) -> tuple[sp.Matrix, ...]:
        """Generators of the rotations that leave ``hQ hK^T`` unchanged: the same rotation of the ``r``
        columns of ``Q`` and of ``K``, ``G = diag(E_ij - E_ji, E_ij - E_ji)`` (``rank = 2r``)."""
        half = rank // 2
        return tuple(sp.diag(_rotation(half, i, j), _rotation(half, i, j)) for i, j in combinations(range(half), 2))


def _rotation(size: int, i: int, j: int) -> sp.Matrix:
    """The generator ``E_ij - E_ji`` of the rotations in the plane of columns ``i`` and ``j``."""
    generator = sp.zeros(size, size)
    generator[i, j], generator[j, i] = 1, -1
    return generator


@dataclass(frozen=True)
class MixedPositionalTeacher:
    """``T(h) = (1 - omega) semantic(h) + omega A`` (THEORY.md sec. 6).

    ``omega`` in [0, 1] interpolates between a purely semantic (0) and purely positional (1)
    target; ``A`` is a row-stochastic L x L matrix.
    """

    omega: float
    positional: tuple[tuple[float, ...], ...]
    semantic: DotProductAttention = field(default_factory=DotProductAttention)

    def __post_init__(self) -> None:
        _set(self, "omega", OMEGA.check(self.omega, "omega"))
        a = TARGET_ENTRY.check_rows(self.positional, "A")
        _set(self, "positional", a)
        require(all(len(row) == len(a) for row in a), "A", "a square matrix (one row and column per token)", a)
        for i, row in enumerate(a):
            require(
                abs(sum(row) - 1.0) < 1e-9,
                "A",
                f"row-stochastic (entries >= 0, every row summing to 1; row {i + 1} sums to {sum(row):g})",
                a,
            )

    def validate(self, length: int) -> None:
        """``A`` of size ``length`` x ``length`` (its entries, squareness and row sums, and ``omega``,
        are checked at construction)."""
        require(
            len(self.positional) == length,
            "A",
            f"a {length} x {length} matrix (one row and column per token)",
            self.positional,
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


def _covariance_classes(variances: tuple[tuple[float, ...], ...]) -> tuple[int, ...]:
    """Class index of each column of ``variances`` (atoms x clusters): clusters with identical spectra
    share a class, numbered in order of first appearance."""
    columns = [tuple(row[j] for row in variances) for j in range(len(variances[0]))]
    distinct: list[tuple[float, ...]] = []
    for column in columns:
        if column not in distinct:
            distinct.append(column)
    return tuple(distinct.index(column) for column in columns)


def _spectral_constants(variances: tuple[tuple[float, ...], ...], weights: tuple[float, ...]) -> dict[str, float]:
    """The atom weights ``w_a`` and the variance ``gamma_a_c`` of each covariance class ``c`` in each atom."""
    classes = _covariance_classes(variances)
    values: dict[str, float] = {}
    for a, row in enumerate(variances):
        values[f"w_{a + 1}"] = float(weights[a])
        for cluster, class_ in enumerate(classes):
            values[f"gamma_{a + 1}_{class_ + 1}"] = float(row[cluster])
    return values


def _check_spectrum(variances: tuple[tuple[float, ...], ...], weights: tuple[float, ...], columns: str) -> None:
    """1 to ``MAX_ATOMS`` atoms (rows of ``variances``), rows of equal length (one variance per
    ``columns``), one weight per atom, the weights summing to one."""
    require(len(variances) in ATOMS, "variances", f"1 to {MAX_ATOMS} rows (spectral atoms)", variances)
    for row in variances:
        require(len(row) == len(variances[0]), "variances", f"rows of equal length (one variance per {columns})", row)
    require(len(weights) == len(variances), "weights", "one weight per spectral atom", weights)
    require(abs(sum(weights) - 1.0) < 1e-9, "weights", "numbers summing to 1", weights)


@dataclass(frozen=True)
class GaussianTokens:
    """Independent Gaussian tokens ``x_l ~ N(0, Sigma_l)`` with jointly diagonal covariances.

    The limiting joint spectral law is a finite mixture of atoms: with probability
    ``weights[a]`` an eigen-direction carries the variances ``variances[a][l]`` for the
    tokens ``l = 0..L-1`` (THEORY.md sec. 1 and Assumption 4.1 of the paper).
    Tokens whose variance columns coincide share their order parameters. In the terms of
    :class:`GaussianMixtureTokens`, each token is a cluster of its own, of mean zero, and the
    labels are ``(0, 1, ..., L - 1)`` with probability one.
    """

    variances: tuple[tuple[float, ...], ...]
    weights: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        _set(self, "variances", VARIANCE.check_rows(self.variances, VARIANCES))
        _set(self, "weights", WEIGHT.check_each(self.weights, "weights"))
        self.validate()

    @classmethod
    def isotropic(cls, length: int, sigma: float) -> GaussianTokens:
        """``Sigma_l = sigma^2 I`` for every token (the paper's instance)."""
        sigma = SIGMA.check(sigma, "sigma")
        return cls(variances=((sigma**2,) * TOKENS.check(length, "L"),))

    @property
    def length(self) -> int:
        """The number of tokens L."""
        return len(self.variances[0])

    def validate(self) -> None:
        """1 to ``MAX_ATOMS`` atoms of ``L`` variances each (``L`` in ``TOKENS``), one weight per atom,
        the weights summing to one (each variance and weight is checked at construction)."""
        _check_spectrum(self.variances, self.weights, "token")
        require(self.length in TOKENS, "L", f"{TOKENS} (the length of each row of variances)", self.length)

    def validate_directions(self, directions: int) -> None:
        """Nothing to check: the tokens have mean zero."""
        return None

    def parameters(self) -> dict[str, float]:
        """``{"sigma": sigma}`` if every token has the variance ``sigma^2`` in one spectral atom
        (``Sigma_l = sigma^2 I``), else the named constants of :meth:`constants`."""
        if len(self.variances) == 1 and len(set(self.variances[0])) == 1:
            return {"sigma": float(self.variances[0][0]) ** 0.5}
        return self.constants()

    def covariance_classes(self) -> tuple[int, ...]:
        """Class index of each token (each cluster): tokens with identical spectra share a class."""
        return _covariance_classes(self.variances)

    def cluster_means(self, directions: int) -> tuple[tuple[float, ...], ...]:
        """The mean of each cluster (token) on the ``directions`` positional directions: zero."""
        return ((0.0,) * directions,) * self.length

    def configurations(self) -> tuple[tuple[tuple[int, ...], float], ...]:
        """Token ``l`` is in cluster ``l``, with probability one."""
        return ((tuple(range(self.length)), 1.0),)

    def constants(self) -> dict[str, float]:
        """The atom weights ``w_a`` and the variance ``gamma_a_c`` of each covariance class in each atom."""
        return _spectral_constants(self.variances, self.weights)

    def structure(self) -> tuple:
        """Nothing beyond the shape of the declaration: the tokens' numbers are named constants."""
        return ()


#: The probability of a label configuration, and the mean of a cluster on a positional direction.
PROBABILITY = Interval(0.0, 1.0, low_open=True)
MAX_CLUSTERS = 8
CLUSTER = Interval(0, MAX_CLUSTERS - 1, integer=True)


@dataclass(frozen=True)
class GaussianMixtureTokens:
    """Gaussian-mixture tokens with jointly drawn cluster labels (THEORY.md sec. 8):
    ``x_l | c_l ~ N(mu_{c_l}, Sigma_{c_l})`` with labels ``(c_1, ..., c_L) ~ P_c``.

    ``variances[a][j]``: the variance of cluster ``j`` on the eigen-directions of spectral atom ``a``
    (of share ``weights[a]``), so ``Sigma_j = sum_a variances[a][j] (projector on atom a)``;
    ``means[j][k]``: the coefficient of ``mu_j`` on the ``k``-th unit direction ``u_k`` of the
    :class:`PositionalEncodings` (``mu_j = sum_k means[j][k] u_k``, ``|mu_j| = O(1)``, so the student's
    overlap with a cluster mean is an overlap ``mu_k`` like a positional one);
    ``label_law``: the joint law of the labels, as pairs ``((c_1, ..., c_L), probability)`` over the
    configurations of positive probability (correlated labels make correlated tokens).
    The order parameters ``q, V, theta`` are per covariance class (clusters of equal spectra share
    one); ``Psi_out`` is the exact sum over the configurations, weighted by their probability.
    """

    variances: tuple[tuple[float, ...], ...]
    means: tuple[tuple[float, ...], ...]
    label_law: tuple[tuple[tuple[int, ...], float], ...]
    weights: tuple[float, ...] = (1.0,)

    def __post_init__(self) -> None:
        _set(self, "variances", VARIANCE.check_rows(self.variances, VARIANCES))
        _set(self, "weights", WEIGHT.check_each(self.weights, "weights"))
        _set(self, "means", COEFFICIENT.check_rows(self.means, "means"))
        allowed = "pairs ((c_1, ..., c_L), probability)"
        pairs = _items(self.label_law, "label_law", allowed)
        require(len(pairs) >= 1, "label_law", f"at least one of {allowed}", self.label_law)
        law = []
        for pair in pairs:
            items = _items(pair, "label_law", allowed)
            require(len(items) == 2, "label_law", allowed, pair)
            law.append((CLUSTER.check_each(items[0], "label_law"), PROBABILITY.check(items[1], "label probability")))
        _set(self, "label_law", tuple(law))
        self.validate()

    @classmethod
    def independent(
        cls,
        length: int,
        variances: tuple[tuple[float, ...], ...],
        means: tuple[tuple[float, ...], ...],
        cluster_weights: tuple[float, ...],
        weights: tuple[float, ...] = (1.0,),
    ) -> GaussianMixtureTokens:
        """Labels drawn independently for each of ``length`` tokens, cluster ``j`` with probability
        ``cluster_weights[j]`` (every configuration, with the product of its clusters' weights)."""
        length = TOKENS.check(length, "L")
        shares = PROBABILITY.check_each(cluster_weights, "cluster_weights")
        require(abs(sum(shares) - 1.0) < 1e-9, "cluster_weights", "numbers summing to 1", shares)
        law = []
        for labels in product(range(len(shares)), repeat=length):
            probability = 1.0
            for c in labels:
                probability *= shares[c]
            law.append((labels, probability))
        return cls(variances=variances, means=means, label_law=tuple(law), weights=weights)

    @property
    def length(self) -> int:
        """The number of tokens L (the length of every label configuration)."""
        return len(self.label_law[0][0])

    @property
    def clusters(self) -> int:
        """The number of clusters (columns of ``variances``)."""
        return len(self.variances[0])

    def validate(self) -> None:
        """The spectrum (as :class:`GaussianTokens`), one mean per cluster, label configurations of one
        length ``L`` in ``TOKENS`` naming existing clusters, each at most once, probabilities summing to
        one (each number is checked at construction)."""
        _check_spectrum(self.variances, self.weights, "cluster")
        require(
            self.clusters <= MAX_CLUSTERS, "variances", f"at most {MAX_CLUSTERS} columns (clusters)", self.variances
        )
        require(len(self.means) == self.clusters, "means", f"one row per cluster ({self.clusters})", self.means)
        require(self.length in TOKENS, "label_law", f"configurations of L labels with L {TOKENS}", self.length)
        configurations = [labels for labels, _ in self.label_law]
        for labels in configurations:
            require(len(labels) == self.length, "label_law", f"configurations of one length L = {self.length}", labels)
            require(
                all(c < self.clusters for c in labels),
                "label_law",
                f"cluster indices in [0, {self.clusters - 1}] (one per column of variances)",
                labels,
            )
        require(len(set(configurations)) == len(configurations), "label_law", "distinct configurations", configurations)
        total = sum(p for _, p in self.label_law)
        require(
            abs(total - 1.0) < 1e-9, "label_law", f"probabilities summing to 1 (they sum to {total:g})", self.label_law
        )

    def validate_directions(self, directions: int) -> None:
        """One mean coefficient per positional direction."""
        require(
            all(len(row) == directions for row in self.means),
            "means",
            f"rows of {directions} coefficients (one per direction u_k of the positional encodings)",
            self.means,
        )

    def parameters(self) -> dict[str, float]:
        """The named constants (:meth:`constants`)."""
        return self.constants()

    def covariance_classes(self) -> tuple[int, ...]:
        """Class index of each cluster: clusters with identical spectra share a class."""
        return _covariance_classes(self.variances)

    def cluster_means(self, directions: int) -> tuple[tuple[float, ...], ...]:
        """The coefficients of each cluster's mean on the ``directions`` positional directions."""
        return self.means

    def configurations(self) -> tuple[tuple[tuple[int, ...], float], ...]:
        """The label configurations of positive probability, with their probabilities."""
        return self.label_law

    def constants(self) -> dict[str, float]:
        """The atom weights ``w_a`` and the variance ``gamma_a_c`` of each covariance class in each atom."""
        return _spectral_constants(self.variances, self.weights)

    def structure(self) -> tuple:
        """What the derivation depends on beyond the declaration's shape: the means (coefficients of
        the fields, as the positional ones) and which configurations have positive probability (their
        probabilities weight the quadrature rule, not the equations)."""
        return (self.means, tuple(labels for labels, _ in self.label_law))


Tokens = GaussianTokens | GaussianMixtureTokens


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

    def __post_init__(self) -> None:
        _set(self, "coefficients", COEFFICIENT.check_rows(self.coefficients, "coefficients"))
        require(
            all(len(row) == self.directions for row in self.coefficients),
            "coefficients",
            "rows of equal length (one coefficient per direction)",
            self.coefficients,
        )
        if self.atoms is not None:
            _set(self, "atoms", ATOM_INDEX.check_each(self.atoms, "atoms"))
            require(len(self.atoms) == self.directions, "atoms", "one atom per direction", self.atoms)

    @property
    def directions(self) -> int:
        """The number of orthonormal directions ``u_k`` the encodings are built from."""
        return len(self.coefficients[0]) if self.coefficients else 0

    def atom_of(self, k: int) -> int:
        """The spectral atom whose eigenspace holds the direction ``u_k``."""
        return 0 if self.atoms is None else self.atoms[k]

    def validate(self, length: int, n_atoms: int) -> None:
        """One row per token and existing atoms (the entries are checked at construction)."""
        require(len(self.coefficients) == length, "coefficients", f"one row per token ({length})", self.coefficients)
        if self.atoms is not None:
            require(all(a < n_atoms for a in self.atoms), "atoms", f"in [0, {n_atoms - 1}]", self.atoms)

    def coefficient_matrix(self) -> sp.Matrix:
        """The L x K matrix ``P`` of ``p_l = sum_k P_lk u_k`` with exact (rational) entries."""
        return sp.Matrix(len(self.coefficients), self.directions, lambda i, j: sp.nsimplify(self.coefficients[i][j]))


@dataclass(frozen=True)
class FieldLaw:
    """The law of the field ``b`` over one spectral atom's coordinates in ``Psi_w`` (THEORY.md sec. 3),
    in the symbols of a derivation: ``b = G + sum_k s_k muhat_k / sqrt(weight)`` with
    ``G ~ N(0, covariance)`` and independent uniform signs ``s_k = +-1``, one per positional direction
    in the atom. ``a_matrix`` is ``A = sum_c gamma_c Vhat_c``; ``covariance`` is
    ``sum_c gamma_c qhat_c + thetahat_sum^T thetahat_sum`` (the teacher's iid Gaussian entries);
    ``weight`` is the atom's share of the coordinates. The encodings are flat over their atom's
    coordinates (``sqrt(d) |u_k,i| = 1 / sqrt(weight)``, as ``p = 1_d / sqrt(d)``) with balanced sign
    patterns; a regulariser whose potential is quadratic in ``b`` (ridge) needs only their second
    moments, ``muhat_k muhat_k^T`` in all."""

    a_matrix: sp.Matrix
    covariance: sp.Matrix
    weight: sp.Expr
    directions: tuple[sp.Matrix, ...]


@dataclass(frozen=True)
class Ridge:
    """``R(Q) = strength/2 ||Q||_F^2`` (THEORY.md sec. 3); ``g(w) = strength/2 |w|^2``."""

    strength: float

    def __post_init__(self) -> None:
        _set(self, "strength", LAMBDA.check(self.strength, "lambda"))

    def validate(self, rank: int) -> None:
        """Every rank is allowed (``lambda`` in ``LAMBDA`` is checked at construction)."""
        return None

    #: ``||W R||_F = ||W||_F`` for every orthogonal ``R``: the student's rotations are symmetries of the loss.
    rotation_invariant = True

    def constants(self) -> dict[str, float]:
        """The strength as the named constant ``lambda``."""
        return {"lambda": float(self.strength)}

    def separable_weights(self) -> tuple[float, float]:
        """``(l1, l2) = (0, lambda)`` of ``g(w) = l1 |w|_1 + l2/2 |w|^2``, as a simulation trains it."""
        return 0.0, float(self.strength)

    def slope_at_zero(self, strengths: dict[str, sp.Symbol]) -> sp.Expr:
        """``min_{|u| = 1} g'(0; u) = 0``: the ridge is differentiable at ``w = 0``, with zero gradient."""
        return sp.Integer(0)

    def entropic_potential(self, law: FieldLaw, strengths: dict[str, sp.Symbol]) -> sp.Expr:
        """``weight E_b[-min_w {g(w) + w^T A w/2 - w.b}] = tr[(lam I + A)^{-1} E[b b^T]] weight / 2``,
        with ``weight E[b b^T] = weight covariance + sum_k muhat_k muhat_k^T`` (:class:`FieldLaw`)."""
        inverse = (strengths["lambda"] * sp.eye(law.a_matrix.rows) + law.a_matrix).inv()

        def half_trace(second_moment: sp.Matrix) -> sp.Expr:
            return sp.Rational(1, 2) * (inverse * second_moment).trace()

        return law.weight * half_trace(law.covariance) + sum(half_trace(mu * mu.T) for mu in law.directions)


@dataclass(frozen=True)
class ElasticNet:
    """``R(Q) = sum_i g(Q_i)`` with ``g(w) = l1 |w| + l2/2 w^2`` (THEORY.md sec. 3), the lasso at
    ``l2 = 0``; for rank ``r = 1`` (the prox of ``g`` with ``A`` a scalar is soft-thresholding:
    ``w* = sign(b) (|b| - l1)_+ / (A + l2)``). Its constants are ``lambda_1`` and ``lambda_2``."""

    l1: float
    l2: float = 0.0

    def __post_init__(self) -> None:
        _set(self, "l1", LAMBDA.check(self.l1, "lambda_1"))
        _set(self, "l2", LAMBDA.check(self.l2, "lambda_2"))

    def validate(self, rank: int) -> None:
        """Rank 1: the closed-form prox is scalar soft-thresholding."""
        require(rank == 1, "rank", "1 with the elastic net (its prox is scalar soft-thresholding)", rank)

    #: ``sum_i |w_i|`` changes under rotations of the columns (and the elastic net is declared at rank 1).
    rotation_invariant = False

    def constants(self) -> dict[str, float]:
        """The strengths as the named constants ``lambda_1`` (l1) and ``lambda_2`` (l2)."""
        return {"lambda_1": float(self.l1), "lambda_2": float(self.l2)}

    def separable_weights(self) -> tuple[float, float]:
        """``(l1, l2)`` of ``g(w) = l1 |w|_1 + l2/2 |w|^2``, as a simulation trains it."""
        return float(self.l1), float(self.l2)

    def slope_at_zero(self, strengths: dict[str, sp.Symbol]) -> sp.Expr:
        """``min_{|u| = 1} g'(0; u) = l1``: ``g`` grows from ``w = 0`` at least as fast as ``l1 |w|``."""
        return strengths["lambda_1"]

    def entropic_potential(self, law: FieldLaw, strengths: dict[str, sp.Symbol]) -> sp.Expr:
        """``weight E_b[-min_w {g(w) + A w^2/2 - w b}] = weight E_b[(|b| - l1)_+^2] / (2 (A + l2))``,
        averaged over the sign patterns of the means (:class:`FieldLaw`; the moment is even in the
        mean, so the patterns with ``s_1 = +1`` suffice)."""
        l1, l2 = strengths["lambda_1"], strengths["lambda_2"]
        spread = sp.sqrt(law.covariance[0, 0])
        count = len(law.directions)
        patterns = [(1, *rest) for rest in product((1, -1), repeat=count - 1)] if count else [()]
        moments = [
            soft_threshold_moment(
                sum((sign * mu[0, 0] for sign, mu in zip(signs, law.directions, strict=True)), sp.Integer(0))
                / sp.sqrt(law.weight),
                spread,
                l1,
            )
            for signs in patterns
        ]
        return law.weight * sp.Add(*moments) / len(patterns) / (2 * (law.a_matrix[0, 0] + l2))


def soft_threshold_moment(mean: sp.Expr, spread: sp.Expr, threshold: sp.Expr) -> sp.Expr:
    """``E[(|b| - threshold)_+^2]`` for ``b ~ N(mean, spread^2)``: the two tails,
    ``(c^2 + spread^2) Phi(c / spread) + c spread phi(c / spread)`` at ``c = +-mean - threshold``."""

    def tail(c: sp.Expr) -> sp.Expr:
        x = c / spread
        cdf = (1 + sp.erf(x / sp.sqrt(2))) / 2
        pdf = sp.exp(-(x**2) / 2) / sp.sqrt(2 * sp.pi)
        return (c**2 + spread**2) * cdf + c * spread * pdf

    return tail(mean - threshold) + tail(-mean - threshold)


Regulariser = Ridge | ElasticNet


# --------------------------------------------------------------------------- naming fixed points

#: The overlap families a fixed point can hold at zero (THEORY.md sec. 6): ``m`` (the student's
#: overlap with the positional encodings) flips sign under ``Q -> -Q``, ``theta`` (its overlap with
#: the teacher) under ``Q* -> -Q*``; ``q`` and ``V`` do not vanish.
OVERLAP_FAMILIES = ("m", "theta")


@dataclass(frozen=True)
class BranchLabels:
    """What a declaration's overlap families mean, and so how its fixed points are named (THEORY.md sec. 6).

    A fixed point is labelled by which overlap families are non-zero at it: ``none`` if none is,
    the family's meaning (``meanings``: pairs family, label) if exactly one is, ``several`` if more
    are. ``critical``: the change of global minimum, from the first label to the second, whose alpha
    is reported as ``alpha_c``. The defaults are the paper's names: ``m`` positional, ``theta``
    semantic, ``agnostic`` and ``mixed``, and alpha_c from positional to semantic.
    """

    meanings: tuple[tuple[str, str], ...] = (("m", "positional"), ("theta", "semantic"))
    none: str = "agnostic"
    several: str = "mixed"
    critical: tuple[str, str] = ("positional", "semantic")

    def __post_init__(self) -> None:
        try:
            meanings = tuple((str(family), str(label)) for family, label in self.meanings)
        except (TypeError, ValueError):
            raise InputTypeError(f"meanings must be pairs (family, label); got {shown(self.meanings)}") from None
        _set(self, "meanings", meanings)
        families = [family for family, _ in meanings]
        require(
            set(families) <= set(OVERLAP_FAMILIES) and len(set(families)) == len(families),
            "meanings",
            f"one pair per overlap family among {', '.join(OVERLAP_FAMILIES)}",
            meanings,
        )
        labels = [label for _, label in meanings] + [self.none, self.several]
        for label in labels:
            named = isinstance(label, str) and label.strip() != "" and "," not in label
            require(named, "labels", "non-empty names without commas", label)
        require(len(set(labels)) == len(labels), "labels", "distinct names", tuple(labels))
        critical = tuple(self.critical)
        require(
            len(critical) == 2 and set(critical) <= set(labels) and critical[0] != critical[1],
            "critical",
            f"two distinct labels among {', '.join(labels)}",
            critical,
        )
        _set(self, "critical", critical)

    def label(self, nonzero: Iterable[str]) -> str:
        """The label of a fixed point at which exactly the overlap families ``nonzero`` do not vanish."""
        present = set(nonzero)
        if not present:
            return self.none
        if len(present) > 1:
            return self.several
        (family,) = present
        return dict(self.meanings).get(family, f"{family} non-zero")

    def labels(self) -> tuple[str, ...]:
        """Every label, the most symmetric (``none``) first and ``several`` last."""
        return (self.none, *(label for _, label in self.meanings), self.several)


@dataclass(frozen=True)
class AttentionModel:
    """The whole declaration: tokens, positions, teacher, student, loss, regulariser.

    ``rank`` is the student rank r, ``teacher_rank`` the teacher rank t; ``labels`` names the
    fixed points by their non-zero overlap families (:class:`BranchLabels`). Weights are tied
    (the field of token l is ``h_l = (x_l + p_l)^T Q / sqrt(d)``); the loss is the square
    loss of THEORY.md sec. 1 with ``Sigma_tilde = diag(tr Sigma_l / d)``.
    """

    tokens: Tokens
    positions: PositionalEncodings
    teacher: MixedPositionalTeacher
    student: DotProductAttention | UntiedDotProductAttention
    regulariser: Regulariser
    rank: int = 1
    teacher_rank: int = 1
    labels: BranchLabels = field(default_factory=BranchLabels)

    def __post_init__(self) -> None:
        kinds = {"tokens": (GaussianTokens, GaussianMixtureTokens), "positions": (PositionalEncodings,)}
        for name, kind in kinds.items():
            if not isinstance(getattr(self, name), kind):
                allowed = " or ".join(k.__name__ for k in kind)
                raise InputTypeError(f"{name} must be a {allowed}; got {shown(getattr(self, name))}")
        for name in ("teacher", "student", "regulariser"):
            part = getattr(self, name)
            if not all(callable(getattr(part, method, None)) for method in ("validate", "constants")):
                raise InputTypeError(f"{name} must be a declaration with validate() and constants(); got {part!r}")
        if not isinstance(self.labels, BranchLabels):
            raise InputTypeError(f"labels must be a BranchLabels; got {shown(self.labels)}")
        _set(self, "rank", RANK.check(self.rank, "rank"))
        _set(self, "teacher_rank", RANK.check(self.teacher_rank, "teacher_rank"))
        self.validate()

    @property
    def length(self) -> int:
        """The number of tokens L."""
        return self.tokens.length

    def gaussian_dimension(self) -> int:
        """``L (r + t)``: the Gaussian variables of the energetic integrals (THEORY.md sec. 2), which set
        the size of a quadrature rule (the default rule per dimension: :mod:`attnphase.saddle.tuning`)."""
        return self.length * (self.rank + self.teacher_rank)

    def validate(self) -> None:
        """Validate the components against each other (raises :class:`DeclarationError`); each
        component has checked its own numbers at construction."""
        self.positions.validate(self.length, len(self.tokens.variances))
        self.tokens.validate_directions(self.positions.directions)
        self.teacher.validate(self.length)
        self.student.validate(self.length, self.rank)
        self.regulariser.validate(self.rank)

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

    def rotations(self) -> tuple[sp.Matrix, ...]:
        """Generators ``G`` (``rank x rank``, antisymmetric) of the continuous symmetry ``W -> W exp(s G)``
        of the training loss (THEORY.md sec. 1, 3): the student's rotations that leave its scores unchanged
        (``student.rotations(rank)``), where the regulariser is rotation invariant. Tokens, encodings and
        teacher act on ``W`` from the left and never break them. Each one turns the fixed points into a
        continuum (``q -> R^T q R``, ``m -> R^T m``, ``theta -> theta R``), fixed by a gauge
        (:meth:`~attnphase.replica.saddle_equations.ReplicaSystem.gauge`). A student or regulariser without
        the declaration (``rotations``, ``rotation_invariant``) is taken to have none."""
        student = getattr(self.student, "rotations", None)
        if student is None or not getattr(self.regulariser, "rotation_invariant", False):
            return ()
        return tuple(student(self.rank))

    def independent_classes(self) -> tuple[int, ...]:
        """The covariance classes that carry order parameters of their own (THEORY.md sec. 2, 8): those
        whose spectra (columns of the tokens' variances over the atoms) are linearly independent of the
        classes before them. ``Sigma_c = sum_a gamma_a_c P_a`` (``P_a`` the projector on atom ``a``), so
        ``q_c = sum_a gamma_a_c Q^T P_a Q / d`` and likewise ``theta_c`` and ``V_c``: a class whose spectrum
        is a combination of others' (tokens of proportional covariances in one atom) has the same
        combination of their order parameters, and giving it parameters of its own would make the saddle
        point degenerate."""
        classes = self.tokens.covariance_classes()
        columns = [[float(row[classes.index(c)]) for row in self.tokens.variances] for c in range(max(classes) + 1)]
        basis: list[int] = []
        orthonormal: list[list[float]] = []
        for c, column in enumerate(columns):
            residual = list(column)
            for u in orthonormal:
                dot = sum(a * b for a, b in zip(u, residual, strict=True))
                residual = [a - dot * b for a, b in zip(residual, u, strict=True)]
            size = sum(a * a for a in residual) ** 0.5
            if size > 1e-9 * sum(a * a for a in column) ** 0.5:
                basis.append(c)
                orthonormal.append([a / size for a in residual])
        return tuple(basis)

    def reduced_parameters(self) -> ReducedParameters:
        """The reduced order parameters and their conjugates (THEORY.md sec. 2): ``q``, ``V``, ``theta``
        per independent covariance class (:meth:`independent_classes`), ``mu`` (printed ``m``) per
        positional direction."""
        groups = len(self.independent_classes())
        return ReducedParameters.build(groups, self.positions.directions, self.rank, self.teacher_rank)

    def record(self) -> dict[str, object]:
        """The whole declaration as JSON-ready data (each component with its class name), as
        written next to results: two records are equal exactly when the declarations are."""
        return _record(self)

    def structure(self) -> tuple:
        """What the symbolic derivation depends on (values of the constants excluded): every
        component's class and non-numeric fields, nested (:func:`_form`), and the numbers that are
        structural (L, r, t, which tokens share a covariance, the positional coefficients and atoms)."""
        return (
            _form(self.teacher),
            _form(self.student),
            _form(self.regulariser),
            _form(self.tokens),
            self.length,
            self.rank,
            self.teacher_rank,
            len(self.tokens.variances),
            self.tokens.covariance_classes(),
            self.independent_classes(),
            self.positions.coefficients,
            self.positions.atoms,
            self.tokens.structure(),
        )


def _form(value: object) -> object:
    """``value`` with every number replaced by its kind: the shape of a declaration component (its
    class, nested components and the lengths of its tuples), what a derivation is keyed on."""
    if is_dataclass(value) and not isinstance(value, type):
        return (type(value).__module__, type(value).__qualname__) + tuple(
            (f.name, _form(getattr(value, f.name))) for f in fields(value)
        )
    if isinstance(value, tuple | list):
        return tuple(_form(v) for v in value)
    if isinstance(value, numbers.Number):
        return "number"
    return value


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
        teacher=MixedPositionalTeacher(omega=omega, positional=A),
        student=DotProductAttention(),
        regulariser=Ridge(lam),
    )
