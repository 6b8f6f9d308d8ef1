"""The shipped variants: named families of declarations with their parameters and defaults.

A variant is a function from a few named numbers to an :class:`~attnphase.replica.declaration.AttentionModel`
(THEORY.md sec. 1, 3, 6, 8); the command line's ``--model NAME --set k=v`` and ``attnphase models`` read
this registry, and a researcher's own variant is a declaration written in Python, never a string parsed
here. Parameters are numbers, or square matrices (``A``) given row by row.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace

from attnphase.replica.declaration import (
    SIGMA,
    AttentionModel,
    DeclarationError,
    DotProductAttention,
    ElasticNet,
    GaussianMixtureTokens,
    GaussianTokens,
    Interval,
    MixedPositionalTeacher,
    PositionalEncodings,
    Ridge,
    UntiedDotProductAttention,
    paper_model,
)

Value = float | tuple[tuple[float, ...], ...]
#: A share of the coordinates strictly between none and all.
SHARE = Interval(0.0, 1.0, low_open=True, high_open=True)


@dataclass(frozen=True)
class Parameter:
    """One named number (or square matrix) of a variant, with its default and meaning."""

    name: str
    default: Value
    meaning: str

    @property
    def is_matrix(self) -> bool:
        """Whether the parameter is a matrix (given row by row)."""
        return isinstance(self.default, tuple)


@dataclass(frozen=True)
class Variant:
    """A named family of declarations: ``build(**values)`` with every parameter of ``parameters``."""

    name: str
    summary: str
    parameters: tuple[Parameter, ...]
    build: Callable[..., AttentionModel]

    def defaults(self) -> dict[str, Value]:
        """Every parameter at its default."""
        return {p.name: p.default for p in self.parameters}

    def parameter(self, name: str) -> Parameter:
        """The parameter called ``name``; :class:`DeclarationError` naming the allowed ones otherwise."""
        for p in self.parameters:
            if p.name == name:
                return p
        allowed = ", ".join(p.name for p in self.parameters)
        raise DeclarationError(f"parameter must be one of {allowed} for the model {self.name!r}; got {name!r}")

    def model(self, values: Mapping[str, Value] | None = None) -> AttentionModel:
        """The declaration at the defaults overridden by ``values`` (each name checked, each number
        checked by the declaration it enters)."""
        chosen = self.defaults()
        for name, value in (values or {}).items():
            chosen[self.parameter(name).name] = value
        return self.build(**chosen)


def _elastic(omega: float, sigma: float, lambda_1: float, lambda_2: float, A: Value) -> AttentionModel:
    return replace(paper_model(omega, sigma, 0.0, A), regulariser=ElasticNet(lambda_1, lambda_2))


def _lasso(omega: float, sigma: float, lambda_1: float, A: Value) -> AttentionModel:
    return _elastic(omega, sigma, lambda_1, 0.0, A)


def _three_tokens(omega: float, sigma: float, lam: float, A: Value) -> AttentionModel:
    return AttentionModel(
        tokens=GaussianTokens.isotropic(3, sigma),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (0.0, 1.0), (-1.0, -1.0))),
        teacher=MixedPositionalTeacher(omega=omega, positional=A),
        student=DotProductAttention(),
        regulariser=Ridge(lam),
    )


def _spectrum(omega: float, sigma_1: float, sigma_2: float, weight_1: float, lam: float, A: Value) -> AttentionModel:
    variances = tuple((SIGMA.check(s, name) ** 2,) * 2 for s, name in ((sigma_1, "sigma_1"), (sigma_2, "sigma_2")))
    weight_1 = SHARE.check(weight_1, "weight_1")
    return replace(
        paper_model(omega, 0.5, lam, A),
        tokens=GaussianTokens(variances=variances, weights=(weight_1, 1.0 - weight_1)),
    )


CORRELATION = Interval(-1.0, 1.0, low_open=True, high_open=True)


def _mixture(
    omega: float,
    sigma_1: float,
    sigma_2: float,
    mean: float,
    share_1: float,
    correlation: float,
    lam: float,
    A: Value,
) -> AttentionModel:
    s1, s2 = SIGMA.check(sigma_1, "sigma_1") ** 2, SIGMA.check(sigma_2, "sigma_2") ** 2
    share = SHARE.check(share_1, "share_1")
    c = CORRELATION.check(correlation, "correlation")
    # each token in cluster 1 with probability share, the two labels with correlation c
    cross = share * (1.0 - share) * (1.0 - c)
    both_first, both_second = share - cross, 1.0 - share - cross
    lowest = -min(share / (1.0 - share), (1.0 - share) / share)
    if min(both_first, both_second) <= 0.0:
        raise DeclarationError(f"correlation must be above {lowest:g} at share_1 = {share:g}; got {c:g}")
    return replace(
        paper_model(omega, 0.5, lam, A),
        tokens=GaussianMixtureTokens(
            variances=((s1, s2), (s2, s1)),
            weights=(0.5, 0.5),
            means=((0.0, mean), (0.0, -mean)),
            label_law=(((0, 0), both_first), ((0, 1), cross), ((1, 0), cross), ((1, 1), both_second)),
        ),
        positions=PositionalEncodings(coefficients=((1.0, 0.0), (-1.0, 0.0))),
    )


def _paper(omega: float, sigma: float, lam: float, A: Value) -> AttentionModel:
    return paper_model(omega, sigma, lam, A)


def _untied(omega: float, sigma: float, lam: float, A: Value) -> AttentionModel:
    return replace(paper_model(omega, sigma, lam, A), student=UntiedDotProductAttention(), rank=2)


def _rank_two(omega: float, sigma: float, lam: float, A: Value) -> AttentionModel:
    return replace(paper_model(omega, sigma, lam, A), rank=2)


OMEGA_ = Parameter("omega", 0.3, "positional share of the target, T = (1 - omega) softmax(h* h*^T) + omega A")
SIGMA_ = Parameter("sigma", 0.5, "token standard deviation (Sigma_l = sigma^2 I)")
LAMBDA_ = Parameter("lambda", 0.01, "ridge strength")
A2 = Parameter("A", ((0.6, 0.4), (0.4, 0.6)), "row-stochastic positional target (2 x 2)")
A3 = Parameter("A", ((0.6, 0.2, 0.2), (0.2, 0.6, 0.2), (0.2, 0.2, 0.6)), "row-stochastic positional target (3 x 3)")


def _renamed(function: Callable[..., AttentionModel]) -> Callable[..., AttentionModel]:
    """``function`` called with ``lambda`` passed as ``lam`` (``lambda`` is a Python keyword)."""

    def build(**values: Value) -> AttentionModel:
        if "lambda" in values:
            values["lam"] = values.pop("lambda")
        return function(**values)

    return build


VARIANTS: dict[str, Variant] = {
    v.name: v
    for v in (
        Variant(
            "paper",
            "the paper's instance: L = 2, r = t = 1, p_1 = -p_2, isotropic tokens, ridge (THEORY.md sec. 6)",
            (OMEGA_, SIGMA_, LAMBDA_, A2),
            _renamed(_paper),
        ),
        Variant(
            "elastic-net",
            "the paper's instance with g(w) = lambda_1 |w| + lambda_2/2 w^2 (THEORY.md sec. 3)",
            (
                OMEGA_,
                SIGMA_,
                Parameter("lambda_1", 0.005, "l1 strength"),
                Parameter("lambda_2", 0.01, "l2 strength"),
                A2,
            ),
            _elastic,
        ),
        Variant(
            "l1",
            "the paper's instance with the lasso g(w) = lambda_1 |w| (THEORY.md sec. 3)",
            (OMEGA_, SIGMA_, Parameter("lambda_1", 0.005, "l1 strength"), A2),
            _lasso,
        ),
        Variant(
            "untied",
            "the paper's instance with untied key and query, W = [Q, K], S = softmax(hQ hK^T) (THEORY.md sec. 8)",
            (OMEGA_, SIGMA_, LAMBDA_, A2),
            _renamed(_untied),
        ),
        Variant(
            "rank2",
            "the paper's instance with a student of rank r = 2 (W in R^{d x 2}, S = softmax(h W W^T h^T)) and the "
            "teacher of rank t = 1 (the paper's App. E.3); its fixed points are orbits of the rotations W -> W R, "
            "fixed by a gauge (THEORY.md sec. 2, 8)",
            (OMEGA_, SIGMA_, LAMBDA_, A2),
            _renamed(_rank_two),
        ),
        Variant(
            "L3",
            "three tokens, p_1 = u_1, p_2 = u_2, p_3 = -(u_1 + u_2), isotropic tokens, ridge (THEORY.md sec. 1)",
            (OMEGA_, SIGMA_, LAMBDA_, A3),
            _renamed(_three_tokens),
        ),
        Variant(
            "spectrum",
            "the paper's instance with a two-atom covariance spectrum: a share weight_1 of the directions has "
            "variance sigma_1^2, the rest sigma_2^2; p_1 = -p_2 in the first atom (THEORY.md sec. 1)",
            (
                OMEGA_,
                Parameter("sigma_1", 0.5, "standard deviation in the first atom"),
                Parameter("sigma_2", 0.8, "standard deviation in the second atom"),
                Parameter("weight_1", 0.5, "share of the directions in the first atom, in (0, 1)"),
                LAMBDA_,
                A2,
            ),
            _renamed(_spectrum),
        ),
        Variant(
            "mixture",
            "the paper's instance with Gaussian-mixture tokens (THEORY.md sec. 8): two clusters of means "
            "+-mean u_2 (u_2 orthogonal to p_1 = -p_2 = u_1), cluster 1 of variance sigma_1^2 on half of the "
            "directions and sigma_2^2 on the other half, cluster 2 the reverse; each token in cluster 1 with "
            "probability share_1, the two tokens' labels with the given correlation",
            (
                OMEGA_,
                Parameter("sigma_1", 0.4, "standard deviation of cluster 1 in the first half of the directions"),
                Parameter("sigma_2", 0.6, "standard deviation of cluster 1 in the second half (cluster 2: swapped)"),
                Parameter("mean", 0.5, "norm of the cluster means +-mean u_2"),
                Parameter("share_1", 0.6, "probability of cluster 1 for each token, in (0, 1)"),
                Parameter("correlation", 0.5, "correlation of the two tokens' cluster labels, in (-1, 1)"),
                LAMBDA_,
                A2,
            ),
            _renamed(_mixture),
        ),
    )
}


def variant(name: str) -> Variant:
    """The shipped variant called ``name``; :class:`DeclarationError` listing the names otherwise."""
    if name not in VARIANTS:
        raise DeclarationError(f"model must be one of {', '.join(VARIANTS)}; got {name!r}")
    return VARIANTS[name]
