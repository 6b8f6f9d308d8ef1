"""Finite-d simulations of a declared attention model, to set against the replica theory.

The data, teacher, student and regulariser are built from the same declaration the theory derives
its equations from (:class:`~attnphase.experiments.finite_model.FiniteModel`, THEORY.md sec. 1-2);
training is the authors' (THEORY.md sec. 11), for every declaration:

* noise tokens ``z_l ~ N(0, Sigma_l)``; the student sees ``x = z + p``;
* teacher ``Q* ~ N(0, I)`` (``d x t``), drawn once per seed; target ``y = T(h*) z`` with the teacher
  fields ``h* = z Q*/sqrt(d)`` (the teacher does not see the encodings);
* student ``f_Q(x) = S(h) x`` with ``h = x Q/sqrt(d)`` (``Q`` is ``d x r``);
* objective (ERM, eq. 3): ``E(Q) = sum_mu ||y^mu - f_Q(x^mu)||_F^2/(2d) + sum_i g(Q_i)`` over
  ``n = round(alpha d)`` samples, ``g(w) = l1 |w|_1 + l2/2 |w|^2`` (ridge: ``l1 = 0``).

Measured per run (THEORY.md sec. 2, 5): ``eps_t = E(Q_hat)/d``; ``eps_g = (1/(dL)) E||y - f||^2``
estimated on ``n_test`` fresh samples; and the declaration's reduced order parameters under the
theory's names (for the paper's model ``q = sigma^2 ||Q||^2/d``, ``m = 1_d . Q/d`` and
``theta = sigma^2 Q* . Q/d``).

Speed. The loss of one sample depends on ``Q`` only through its fields ``h`` and, writing
``G_ab = a b^T`` for the ``L x L`` Gram matrices of a sample::

    ||T z - S x||_F^2 = tr(T G_zz T^T) - 2 tr(T G_zx S^T) + tr(S G_xx S^T),

so the Gram matrices (``T`` is fixed by the teacher) are computed once and a training step costs
one batched matrix product ``h = x Q/sqrt(d)`` and its transpose in the backward pass: no loop
over samples, and all seeds of one ``(alpha, init)`` block train together (``Q`` has shape
``(seeds, d, r)``, the data ``(seeds, n, L, d)``). The test error is computed directly from the
residual ``T z - S x`` on fresh samples, in chunks.

Reproducibility: every random draw comes from a ``torch.Generator`` seeded from
``(seed, d, stream)`` for the teacher and the random initialisation, and from
``(seed, d, alpha, stream)`` for the training and test data, so one run can be recomputed alone.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np
import pandas as pd
import torch
from scipy.stats import chi

from attnphase.experiments.families import family_labels, family_norms
from attnphase.experiments.finite_model import FiniteModel
from attnphase.experiments.run_context import RunContext
from attnphase.experiments.storage import CorruptResultsError, read_table, write_table
from attnphase.replica.declaration import OVERLAP_FAMILIES, AttentionModel, paper_model

INITS = ("positional", "semantic", "random")
OPTIMISERS = ("gd", "lbfgs", "adam")
DEFAULT_LR = {"gd": 0.15, "lbfgs": 1.0, "adam": 0.01}
DTYPES = {"float64": torch.float64, "float32": torch.float32}
TEST_CHUNK = 4096
#: Columns of every simulation table; the measured order parameters follow ``test_error``
#: (:meth:`SimulationSettings.columns`).
LEADING = ("alpha", "d", "n", "seed", "init", "optimiser", "train_loss", "test_error")
TRAILING = ("grad_norm", "steps", "converged", "seconds")
#: Scale of the random initialisation, and of the columns an informed one does not set.
RANDOM_SCALE = 0.1

# streams of random numbers, one per use
_TEACHER, _TRAIN, _TEST, _INIT = 1, 2, 3, 4


@dataclass(frozen=True)
class SimulationSettings:
    """What to simulate and how to train (defaults: the paper's instance, THEORY.md sec. 6 and 11).

    ``model`` is the declaration simulated (any :class:`~attnphase.replica.declaration.AttentionModel`).
    ``seeds`` is a count (seeds ``0 .. seeds-1``) or an explicit list of seeds. ``lr = None``
    takes the optimiser's default (GD 0.15 and Adam 0.01 as the authors; L-BFGS 1.0).
    Training stops for a run once ``||grad E(Q)|| <= tolerance`` or after ``max_steps`` steps.
    A regulariser with an l1 term (:class:`~attnphase.replica.declaration.ElasticNet`) is trained by
    proximal gradient descent (``gd``: a gradient step on the smooth part, then soft-thresholding),
    whose stopping test is on the gradient mapping ``(Q - Q_next) / lr``, zero exactly at a minimiser.
    """

    d: int = 400
    alphas: tuple[float, ...] = (0.4, 0.8, 1.2, 1.6, 2.0, 2.4)
    seeds: int | tuple[int, ...] = 4
    inits: tuple[str, ...] = ("positional", "semantic")
    optimiser: str = "gd"
    lr: float | None = None
    max_steps: int = 5000
    tolerance: float = 1e-6
    n_test: int = 10_000
    dtype: str = "float64"
    model: AttentionModel = field(default_factory=paper_model)

    def validate(self) -> SimulationSettings:
        """Raise ``ValueError`` naming the first parameter out of its allowed range; return ``self``.

        The ranges are those of :mod:`attnphase.experiments.parsing` (shared with the command line's
        help) and :mod:`attnphase.saddle.validation` (alpha, seeds); the model's numbers were checked
        when it was declared. The data a block holds (``seeds x n x L x d`` numbers at the largest
        alpha) and one chunk of test samples must fit in ``MAX_SIMULATION_BYTES``.
        """
        from attnphase.experiments import parsing as ranges  # torch-free ranges, shared with the command line
        from attnphase.replica.declaration import InputTypeError, shown
        from attnphase.saddle.validation import ALPHA, SEED, ParameterError, check, check_choice

        if not isinstance(self.model, AttentionModel):
            raise InputTypeError(f"model must be an AttentionModel; got {shown(self.model)}")
        d = check(self.d, "d", ranges.DIMENSION)
        alphas = ALPHA.check_each(self.alphas, "alpha", ParameterError)
        if not alphas or len(set(np.round(alphas, 10).tolist())) != len(alphas):
            raise ParameterError(f"alphas must be a non-empty list of distinct numbers {ALPHA}; got {self.alphas!r}")
        if min(self.samples(alpha) for alpha in alphas) < 1:
            raise ParameterError(f"alpha * d must be >= 1 (at least one sample); got alphas {self.alphas!r} at d={d}")
        if ranges.SEED_COUNT.admits_type(self.seeds):
            check(self.seeds, "seeds", ranges.SEED_COUNT)
        else:
            allowed = (
                f"a count ({ranges.SEED_COUNT}) or a list of at most {ranges.SEED_COUNT.high:g} distinct seeds, "
                f"each {SEED}; got {shown(self.seeds)}"
            )
            try:
                seeds = SEED.check_each(self.seeds, "seeds", ParameterError)
            except InputTypeError:
                raise InputTypeError(f"seeds must be {allowed}") from None
            if not seeds or len(set(seeds)) != len(seeds) or len(seeds) > ranges.SEED_COUNT.high:
                raise ParameterError(f"seeds must be {allowed}")
        if not self.inits or any(i not in INITS for i in self.inits) or len(set(self.inits)) != len(self.inits):
            raise ParameterError(f"inits must be distinct values among {', '.join(INITS)}; got {self.inits!r}")
        check_choice(self.optimiser, "optimiser", OPTIMISERS)
        if self.lr is not None:
            check(self.lr, "lr", ranges.LEARNING_RATE)
        check(self.max_steps, "max_steps", ranges.STEPS)
        check(self.tolerance, "tolerance", ranges.TOLERANCE)
        check(self.n_test, "n_test", ranges.TEST_SAMPLES)
        check_choice(self.dtype, "dtype", DTYPES)
        short = self.finite.too_small()
        if short:
            raise ParameterError(f"d must give {short}; got d = {d}")
        if self.l1 and self.optimiser != "gd":
            raise ParameterError(
                f"optimiser must be gd with an l1 term (proximal gradient descent); got {self.optimiser!r}"
            )
        n = max(self.samples(alpha) for alpha in alphas)
        length = self.model.length
        data = self.torch_dtype.itemsize * length * d * max(len(self.seed_list) * n, min(TEST_CHUNK, self.n_test))
        if data > ranges.MAX_SIMULATION_BYTES:
            raise ParameterError(
                f"d = {d} with {len(self.seed_list)} seeds and n = {n} samples needs "
                f"{data / 2**30:.3g} GiB of data (seeds x n x L x d numbers), above the limit of "
                f"{ranges.MAX_SIMULATION_BYTES / 2**30:g} GiB (experiments.parsing.MAX_SIMULATION_BYTES); "
                "use a smaller d or alpha, or fewer seeds"
            )
        return self

    @classmethod
    def of_model(cls, model: AttentionModel, **training: object) -> SimulationSettings:
        """Settings that simulate ``model`` with the ``training`` options (not validated yet)."""
        return cls(model=model, **training)

    @cached_property
    def finite(self) -> FiniteModel:
        """The model at this ``d`` and dtype."""
        return FiniteModel(self.model, self.d, self.torch_dtype)

    @property
    def l1(self) -> float:
        """The regulariser's l1 weight (zero for ridge)."""
        return self.model.regulariser.separable_weights()[0]

    @property
    def l2(self) -> float:
        """The regulariser's l2 weight (``lambda`` for ridge)."""
        return self.model.regulariser.separable_weights()[1]

    def columns(self) -> tuple[str, ...]:
        """The columns of this simulation's table: ``LEADING``, the measured order parameters, ``TRAILING``."""
        return (*LEADING, *self.finite.measured_names(), *TRAILING)

    @property
    def seed_list(self) -> list[int]:
        """The seeds as a list (``0 .. seeds-1`` for a count)."""
        return list(range(self.seeds)) if isinstance(self.seeds, int) else list(self.seeds)

    @property
    def learning_rate(self) -> float:
        """``lr``, or the optimiser's default when ``lr`` is ``None``."""
        return DEFAULT_LR[self.optimiser] if self.lr is None else self.lr

    @property
    def torch_dtype(self) -> torch.dtype:
        """The torch dtype named by ``dtype``."""
        return DTYPES[self.dtype]

    def samples(self, alpha: float) -> int:
        """``n = round(alpha d)``."""
        return int(round(alpha * self.d))

    def as_dict(self) -> dict[str, object]:
        """JSON-ready settings (seeds expanded, the model as its record), as written next to the results."""
        data = {f: getattr(self, f) for f in self.__dataclass_fields__ if f != "model"}
        data["alphas"] = [float(a) for a in self.alphas]
        data["seeds"] = self.seed_list
        data["inits"] = list(self.inits)
        data["lr"] = self.learning_rate
        data["model"] = self.model.record()
        return data


# ---------------------------------------------------------------- data


def generator(seed: int, d: int, stream: int, alpha: float | None = None) -> torch.Generator:
    """A generator whose state is a function of ``(seed, d, stream[, alpha])`` only."""
    key = [seed, d, stream] + ([] if alpha is None else [int(round(alpha * 1e8))])
    state = np.random.SeedSequence(key).generate_state(2, dtype=np.uint32)
    return torch.Generator().manual_seed(int(state[0]) << 31 ^ int(state[1]))


def teacher(seed: int, settings: SimulationSettings) -> torch.Tensor:
    """``Q* ~ N(0, I)``, shape ``(d, t)``, one per seed (shared by every alpha and initialisation)."""
    return settings.finite.teacher_weights(generator(seed, settings.d, _TEACHER))


@dataclass
class TrainingData:
    """One ``(alpha, seeds)`` block of training data, reduced to what the objective needs.

    ``x``: ``(S, n L, d)`` student inputs; ``c0 = tr(T G_zz T^T)``: ``(S, n)``;
    ``b = T G_zx``: ``(S, n, L, L)``; ``g_xx = G_xx``: ``(S, n, L, L)``; ``teachers``: ``(S, d, t)``.
    """

    x: torch.Tensor
    c0: torch.Tensor
    b: torch.Tensor
    g_xx: torch.Tensor
    teachers: torch.Tensor

    @property
    def n(self) -> int:
        """The number of samples per run."""
        return self.c0.shape[1]

    def run(self, s: int) -> TrainingData:
        """The data of run ``s`` alone (a block of one)."""
        return TrainingData(*(t[s : s + 1] for t in (self.x, self.c0, self.b, self.g_xx, self.teachers)))


def training_data(alpha: float, seeds: Sequence[int], settings: SimulationSettings) -> TrainingData:
    """Draw the training set of each seed and precompute its Gram matrices (see the module docstring)."""
    n, d, model = settings.samples(alpha), settings.d, settings.finite
    xs, c0s, bs, gs, teachers = [], [], [], [], []
    for seed in seeds:
        q_star = teacher(seed, settings)
        z = model.tokens(generator(seed, d, _TRAIN, alpha), n)
        t = model.teacher_attention(z @ q_star / math.sqrt(d))
        x = z + model.positions
        g_zz = z @ z.transpose(1, 2)
        g_zx = z @ x.transpose(1, 2)
        c0s.append(torch.einsum("nab,nbc,nac->n", t, g_zz, t))
        bs.append(t @ g_zx)
        gs.append(x @ x.transpose(1, 2))
        xs.append(x.reshape(n * model.length, d))
        teachers.append(q_star)
    return TrainingData(torch.stack(xs), torch.stack(c0s), torch.stack(bs), torch.stack(gs), torch.stack(teachers))


# ---------------------------------------------------------------- objective


def objective(q: torch.Tensor, data: TrainingData, settings: SimulationSettings) -> torch.Tensor:
    """The smooth part of the ERM objective ``E(Q_s)`` of every run, shape ``(S,)``, for ``q`` of shape
    ``(S, d, r)``: ``sum_mu [c0 - 2 <B, S> + <S G_xx, S>]/(2d) + (l2/2)||Q||^2``, the Gram form of
    ``sum_mu ||T z - S x||_F^2/(2d) + (l2/2)||Q||^2`` with the declaration's ``S(h)``; the l1 term
    is :func:`l1_penalty`."""
    d = q.shape[1]
    length = data.g_xx.shape[-1]
    h = torch.bmm(data.x, q).reshape(q.shape[0], data.n, length, q.shape[2]) / math.sqrt(d)
    s = settings.finite.student_attention(h)
    per_sample = data.c0 - 2 * (data.b * s).sum((-1, -2)) + ((s @ data.g_xx) * s).sum((-1, -2))
    return per_sample.sum(-1) / (2 * d) + 0.5 * settings.l2 * (q * q).sum((-1, -2))


def objective_and_gradient(
    q: torch.Tensor, data: TrainingData, settings: SimulationSettings
) -> tuple[torch.Tensor, torch.Tensor]:
    """The smooth objective and its gradient of every run (by reverse-mode differentiation);
    shapes ``(S,)``, ``(S, d, r)``."""
    q = q.detach().requires_grad_(True)
    with torch.enable_grad():
        value = objective(q, data, settings)
        (grad,) = torch.autograd.grad(value.sum(), q)
    return value.detach(), grad


def norms(q: torch.Tensor) -> torch.Tensor:
    """The Frobenius norm of each run's ``(d, r)`` matrix, shape ``(S,)``."""
    return q.flatten(1).norm(dim=-1)


# ---------------------------------------------------------------- initialisation and training


def initial_weights(init: str, seeds: Sequence[int], data: TrainingData, settings: SimulationSettings) -> torch.Tensor:
    """Starting ``Q`` per run, shape ``(S, d, r)`` (THEORY.md sec. 11). ``positional``: every column along
    the first positional direction ``u_1`` (the paper's ``1_d/sqrt(d)``, ``m = 1/sqrt(d)``); ``semantic``:
    column ``j`` equal to the teacher's column ``j mod t`` (the paper's ``Q = Q*``); ``random``: every
    entry ``0.1 N(0, 1)``. At rank ``r > 1`` the informed starts add that random matrix (drawn from the
    seed's own stream), so that no symmetry of the map holds the columns equal."""
    model, dtype = settings.finite, settings.torch_dtype
    d, r = settings.d, model.rank
    noise = torch.stack(
        [RANDOM_SCALE * torch.randn((d, r), generator=generator(s, d, _INIT), dtype=dtype) for s in seeds]
    )
    if init == "random":
        return noise
    if init == "positional":
        informed = model.directions[0][None, :, None].expand(len(seeds), d, r)
    else:
        informed = data.teachers[:, :, [j % model.teacher_rank for j in range(r)]]
    return informed.clone() if r == 1 else informed + noise


@dataclass
class TrainingResult:
    """Final weights ``(S, d, r)``, objective ``(S,)``, gradient norm ``(S,)`` and steps ``(S,)`` per run."""

    q: torch.Tensor
    value: torch.Tensor
    grad_norm: torch.Tensor
    steps: torch.Tensor


def train(q0: torch.Tensor, data: TrainingData, settings: SimulationSettings) -> TrainingResult:
    """Minimise ``E`` from ``q0`` for every run with the chosen optimiser."""
    if settings.optimiser == "lbfgs":
        return _train_lbfgs(q0, data, settings)
    return _train_first_order(q0, data, settings)


def _train_first_order(q0: torch.Tensor, data: TrainingData, settings: SimulationSettings) -> TrainingResult:
    """Full-batch GD ``Q <- Q - lr grad E`` or Adam, all runs at once; a run stops moving once its
    gradient norm is ``<= tolerance`` (the objective is a sum over runs, so runs do not interact)."""
    lr, tol = settings.learning_rate, settings.tolerance
    q = q0.clone()
    steps = torch.zeros(q.shape[0], dtype=torch.long)
    first, second = torch.zeros_like(q), torch.zeros_like(q)
    beta1, beta2, eps = 0.9, 0.999, 1e-8
    value, grad = objective_and_gradient(q, data, settings)
    grad = gradient_mapping(q, grad, settings)
    for _ in range(settings.max_steps):
        active = norms(grad) > tol
        if not bool(active.any()):
            break
        moving = active[:, None, None]
        if settings.optimiser == "gd":
            update = lr * grad
        else:
            first = torch.where(moving, beta1 * first + (1 - beta1) * grad, first)
            second = torch.where(moving, beta2 * second + (1 - beta2) * grad * grad, second)
            t = (steps + 1).to(q.dtype)[:, None, None]
            update = lr * (first / (1 - beta1**t)) / ((second / (1 - beta2**t)).sqrt() + eps)
        q = torch.where(moving, q - update, q)
        steps += active.long()
        value, grad = objective_and_gradient(q, data, settings)
        grad = gradient_mapping(q, grad, settings)
    return TrainingResult(q, value + l1_penalty(q, settings), norms(grad), steps)


def l1_penalty(q: torch.Tensor, settings: SimulationSettings) -> torch.Tensor:
    """``l1 |Q_s|_1`` of every run (zero without an l1 term)."""
    return settings.l1 * q.abs().sum((-1, -2)) if settings.l1 else torch.zeros(q.shape[0], dtype=q.dtype)


def gradient_mapping(q: torch.Tensor, grad: torch.Tensor, settings: SimulationSettings) -> torch.Tensor:
    """``(Q - prox(Q - lr grad)) / lr`` with the prox of ``lr l1 |.|_1`` (soft-thresholding): the
    proximal gradient step is ``Q - lr G``, and ``G = 0`` exactly at a minimiser of the smooth part
    plus the l1 term; the gradient itself without an l1 term."""
    if not settings.l1:
        return grad
    lr = settings.learning_rate
    moved = q - lr * grad
    return (q - torch.sign(moved) * torch.clamp(moved.abs() - lr * settings.l1, min=0.0)) / lr


def _train_lbfgs(q0: torch.Tensor, data: TrainingData, settings: SimulationSettings) -> TrainingResult:
    """``torch.optim.LBFGS`` with strong-Wolfe line search, one run at a time (the line search
    would couple runs if they shared one optimiser)."""
    results = []
    for s in range(q0.shape[0]):
        run = data.run(s)
        q = q0[s : s + 1].clone().requires_grad_(True)
        optimiser = torch.optim.LBFGS(
            [q],
            lr=settings.learning_rate,
            max_iter=settings.max_steps,
            history_size=20,
            tolerance_grad=settings.tolerance / math.sqrt(settings.d * settings.model.rank),
            tolerance_change=0.0,
            line_search_fn="strong_wolfe",
        )

        def closure(q: torch.Tensor = q, run: TrainingData = run, optimiser: torch.optim.LBFGS = optimiser):
            optimiser.zero_grad()
            value = objective(q, run, settings).sum()
            value.backward()
            return value

        with torch.enable_grad():
            optimiser.step(closure)
        steps = optimiser.state[optimiser._params[0]].get("n_iter", 0)
        value, grad = objective_and_gradient(q.detach(), run, settings)
        results.append((q.detach()[0], value[0], norms(grad)[0], steps))
    qs, values, grad_norms, steps = zip(*results, strict=True)
    return TrainingResult(torch.stack(qs), torch.stack(values), torch.stack(grad_norms), torch.tensor(steps))


# ---------------------------------------------------------------- measurements


def test_error(q: torch.Tensor, q_star: torch.Tensor, seed: int, alpha: float, settings: SimulationSettings) -> float:
    """``eps_g = (1/(dL)) mean_mu ||T(h*) z - S(h) x||_F^2`` over ``n_test`` fresh samples of one run
    (``q``: ``(d, r)``, ``q_star``: ``(d, t)``)."""
    d, model = settings.d, settings.finite
    gen = generator(seed, d, _TEST, alpha)
    total, remaining = 0.0, settings.n_test
    while remaining > 0:
        chunk = min(TEST_CHUNK, remaining)
        z = model.tokens(gen, chunk)
        x = z + model.positions
        target = model.teacher_attention(z @ q_star / math.sqrt(d)) @ z
        residual = target - model.student_attention(x @ q / math.sqrt(d)) @ x
        total += float((residual * residual).sum())
        remaining -= chunk
    return total / (settings.n_test * d * model.length)


def simulate_block(
    alpha: float, init: str, settings: SimulationSettings, data: TrainingData | None = None
) -> pd.DataFrame:
    """Train every seed at one ``(alpha, init)``; one row per run (columns :meth:`SimulationSettings.columns`)."""
    seeds = settings.seed_list
    started = time.perf_counter()
    data = training_data(alpha, seeds, settings) if data is None else data
    result = train(initial_weights(init, seeds, data, settings), data, settings)
    d, model = settings.d, settings.finite
    seconds = (time.perf_counter() - started) / len(seeds)
    rows = []
    for s, seed in enumerate(seeds):
        q = result.q[s]
        rows.append(
            {
                "alpha": float(alpha),
                "d": d,
                "n": data.n,
                "seed": seed,
                "init": init,
                "optimiser": settings.optimiser,
                "train_loss": float(result.value[s]) / d,
                "test_error": test_error(q, data.teachers[s], seed, alpha, settings),
                **model.order_parameters(q, data.teachers[s]),
                "grad_norm": float(result.grad_norm[s]),
                "steps": int(result.steps[s]),
                "converged": bool(result.grad_norm[s] <= settings.tolerance),
                "seconds": seconds,
            }
        )
    return pd.DataFrame(rows, columns=list(settings.columns()))


def simulate(
    settings: SimulationSettings,
    progress: Callable[[pd.DataFrame], None] | None = None,
    skip: Callable[[float, str], bool] | None = None,
) -> pd.DataFrame:
    """Every ``(alpha, init)`` block of ``settings`` (blocks for which ``skip(alpha, init)`` is true are
    left out); ``progress`` is called with the rows of each finished block. Writes nothing."""
    settings.validate()
    frames = []
    with torch.no_grad():
        for alpha in settings.alphas:
            todo = [init for init in settings.inits if skip is None or not skip(float(alpha), init)]
            if not todo:
                continue
            data = training_data(alpha, settings.seed_list, settings)
            for init in todo:
                block = simulate_block(alpha, init, settings, data)
                frames.append(block)
                if progress is not None:
                    progress(block)
            del data
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(settings.columns()))


def simulate_to(
    run: RunContext | None,
    settings: SimulationSettings | Sequence[SimulationSettings],
    progress: Callable[[pd.DataFrame], None] | None = None,
    table: str = "simulations.csv",
) -> pd.DataFrame:
    """``simulate`` for every settings in ``settings`` (one, or several differing e.g. in ``d``), writing
    ``<table>`` into the ``run``'s directory after each block; resumable (without a run or its directory,
    nothing is written).

    A rerun of the same identity (:class:`~attnphase.experiments.run_context.RunContext`, compared by
    value) skips the blocks (``d``, alpha, init) whose every seed is in the table (the rows of an
    incomplete block are computed again); the run context refuses other settings, or a table that cannot
    be read back, unless it overwrites.
    """
    several = not isinstance(settings, SimulationSettings)
    every = tuple(settings) if several else (settings,)
    for one in every:
        one.validate()
    path = None if run is None else run.path(table)
    if path is None:
        frames = [simulate(one, progress=progress) for one in every]
        return pd.concat(frames, ignore_index=True)
    columns = list(every[0].columns())
    if any(list(one.columns()) != columns for one in every):
        raise ValueError("settings written to one table must measure the same order parameters (one model)")
    texts = ("init", "optimiser")
    numbers = tuple(c for c in columns if c not in (*texts, "converged"))

    def load() -> pd.DataFrame:
        if not path.exists():
            return pd.DataFrame(columns=columns)
        runs = read_table(path, numbers, ("converged",), texts)
        if runs[["d", "alpha", "seed"]].isna().to_numpy().any():
            raise CorruptResultsError(path, "a run lacks its d, its alpha or its seed")
        return runs[columns]

    def block(d: float, alpha: float, init: str) -> tuple[int, float, str]:
        return int(d), round(float(alpha), 10), init

    frame = run.resume(load)
    frame = pd.DataFrame(columns=columns) if frame is None else frame
    seeds: dict[tuple[int, float, str], set[int]] = {}
    for d, alpha, init, seed in zip(frame["d"], frame["alpha"], frame["init"], frame["seed"], strict=True):
        seeds.setdefault(block(d, alpha, init), set()).add(int(seed))
    wanted = {one.d: set(one.seed_list) for one in every}
    done = {key for key, found in seeds.items() if key[0] in wanted and found >= wanted[key[0]]}
    keys = zip(frame["d"], frame["alpha"], frame["init"], strict=True)
    frame = frame[[block(*key) in done for key in keys]].reset_index(drop=True)

    def save(rows: pd.DataFrame) -> None:
        nonlocal frame
        frame = rows if frame.empty else pd.concat([frame, rows], ignore_index=True)
        write_table(path, frame)
        if progress is not None:
            progress(rows)

    for one in every:
        simulate(one, progress=save, skip=lambda alpha, init, d=one.d: block(d, alpha, init) in done)
    schedule = {block(one.d, a, i): k for k, (one, a, i) in enumerate(_blocks(every))}
    keys = zip(frame["d"], frame["alpha"], frame["init"], strict=True)
    rank = [schedule.get(block(*key), len(schedule)) for key in keys]
    ordered = frame.assign(_rank=rank).sort_values(["_rank", "seed"], kind="stable").drop(columns="_rank")
    moved = not ordered.index.equals(frame.index)
    frame = ordered.reset_index(drop=True)  # as an uninterrupted run orders it, however it was resumed
    if moved:
        write_table(path, frame)
    return frame


def _blocks(every: Sequence[SimulationSettings]) -> list[tuple[SimulationSettings, float, str]]:
    """The blocks of ``every`` settings in the order :func:`simulate` trains them."""
    return [(one, float(a), init) for one in every for a in one.alphas for init in one.inits]


# ---------------------------------------------------------------- basins


def require_both_families(model: AttentionModel, study: str) -> None:
    """Refuse (``ValueError``) a model without both overlap families ``m`` and ``theta``: the ``study``
    sets each informed start against the branch on which its family alone is non-zero."""
    labels = family_labels(model)
    if set(labels) != set(OVERLAP_FAMILIES):
        raise ValueError(
            f"model must have both overlap families m and theta for {study}; got {', '.join(labels) or 'none'}"
        )


def branch_overlaps(
    branches: pd.DataFrame, alphas: Sequence[float], model: AttentionModel | None = None
) -> pd.DataFrame:
    """The theory's overlaps that tell the minima apart, at ``alphas``: the norm of each overlap
    family (:func:`family_norms`) on the branch where that family alone is non-zero (the paper's
    ``|m|`` of the positional branch and ``|theta|`` of the semantic branch, THEORY.md sec. 2, 6), as
    columns ``<family>_<label>``, and of every family on the branch where several are (the paper's
    ``m_mixed`` and ``theta_mixed``), linearly interpolated in alpha between the converged points of a
    scan's ``branches.csv``. Outside the range of a branch's converged points the branch is absent (it
    has ended or merged, or was not scanned there), and its overlap is NaN. ``model``: the declaration
    scanned (default: the paper's)."""
    model = paper_model() if model is None else model
    values: dict[str, np.ndarray] = {"alpha": np.asarray(alphas, dtype=float)}
    labels = family_labels(model)
    several = [(family, model.labels.several) for family in labels] if len(labels) > 1 else []
    for family, label in [*labels.items(), *several]:
        column = f"{family}_{label}"
        rows = branches[(branches["branch"] == label) & branches["converged"].astype(bool)].sort_values("alpha")
        known = rows["alpha"].to_numpy(float)
        if known.size == 0:
            values[column] = np.full(values["alpha"].shape, np.nan)
            continue
        inside = (values["alpha"] >= known[0] - 1e-12) & (values["alpha"] <= known[-1] + 1e-12)
        sizes = family_norms(rows, model)[family]
        values[column] = np.where(inside, np.interp(values["alpha"], known, sizes), np.nan)
    return pd.DataFrame(values)


#: The probability of three standard deviations of a Gaussian, ``P(|x| < 3 sigma)``: the share of runs whose
#: vanishing overlap a spread of ``3 sigma`` keeps below it (:func:`norm_spread`).
THREE_SIGMA = math.erf(3.0 / math.sqrt(2.0))


def norm_spread(d: np.ndarray, entries: int) -> np.ndarray:
    """The finite-d spread of the norm of ``entries`` overlaps whose large-d value is 0, each fluctuating
    with standard deviation ``sigma = 1/(3 sqrt(d))``: the ``THREE_SIGMA`` quantile of ``sigma chi_k``,
    ``1/sqrt(d)`` for one entry (three standard deviations), ``1.15/sqrt(d)`` for two, ``1.25/sqrt(d)``
    for three."""
    scale = chi.ppf(THREE_SIGMA, entries) / chi.ppf(THREE_SIGMA, 1)
    return scale / np.sqrt(np.asarray(d, dtype=float))


def classify_basin(
    frame: pd.DataFrame, overlaps: pd.DataFrame, model: AttentionModel | None = None, relative: float = 0.5
) -> pd.DataFrame:
    """``frame`` with a column ``basin`` in :func:`basins`: which of the theory's minima each run ended in.

    For the paper's model (the default), with ``m_P = |m|`` of the positional branch and
    ``theta_S = |theta|`` of the semantic branch at the run's alpha (``overlaps``, from
    :func:`branch_overlaps`), ``r = relative`` and the finite-d spread ``s = 1/sqrt(d)`` (about three
    standard deviations of an overlap whose large-d value is 0: 0.018 at d = 400, see
    ``tests/test_simulation.py``), a run is

    * positional if ``m_P >= s``, ``||m| - m_P| <= r m_P`` and ``|theta| < s``;
    * semantic if ``theta_S >= s``, ``||theta| - theta_S| <= r theta_S`` and ``|m| < min(s, m_P/2)``;
    * mixed, if neither, where the overlaps have a mixed point's columns (``m_M``, ``theta_M``):
      ``m_M >= s``, ``theta_M >= s``, ``||m| - m_M| <= r m_M`` and ``||theta| - theta_M| <= r theta_M``
      (a student of rank 2 fits the positions with one column and the teacher with the other);
    * neither otherwise (an agnostic point, or the theory missing at that alpha).

    Another declaration is classified the same way with its own labels and with the family norms
    (:func:`family_norms`) in place of ``|m|`` and ``|theta|``, the spread of a family of ``k`` entries
    being :func:`norm_spread` (``s`` for one entry): the norm of ``k`` overlaps that vanish at large d
    fluctuates more than one does. A branch whose overlap is below its spread
    cannot be told from 0 at that d (nor from the agnostic point), so no run is put in it; in
    particular no run is semantic where the semantic branch has collapsed to ``theta_S = 0``. Overlaps
    enter as norms: ``S(h) = softmax(h h^T)`` is even in ``Q``, so ``Q`` and ``-Q`` are the same
    minimum. With ``r <= 1/2`` the classes are disjoint (positional needs ``|m| >= m_P/2``, semantic
    ``|m| < m_P/2``).
    """
    model = paper_model() if model is None else model
    labels = family_labels(model)
    if set(labels) != set(OVERLAP_FAMILIES):
        return frame.assign(basin="neither")
    theory = overlaps.assign(alpha=overlaps["alpha"].round(10)).drop_duplicates("alpha")
    merged = frame.assign(alpha_key=frame["alpha"].round(10)).merge(
        theory.rename(columns={"alpha": "alpha_key"}), on="alpha_key", how="left"
    )
    sizes = family_norms(merged, model)
    m, theta = sizes["m"], sizes["theta"]
    m_p, theta_s = (merged[f"{family}_{labels[family]}"].to_numpy(float) for family in ("m", "theta"))
    entries = {family: len(model.reduced_parameters().of_family(family)) for family in OVERLAP_FAMILIES}
    spread = {family: norm_spread(merged["d"].to_numpy(float), k) for family, k in entries.items()}
    s_m, s_theta = spread["m"], spread["theta"]
    positional = (m_p >= s_m) & (np.abs(m - m_p) <= relative * m_p) & (theta < s_theta)
    semantic = (theta_s >= s_theta) & (np.abs(theta - theta_s) <= relative * theta_s) & (m < np.fmin(s_m, m_p / 2))
    mixed = np.ones(len(merged), dtype=bool)
    for family, size in (("m", m), ("theta", theta)):
        column = f"{family}_{model.labels.several}"
        point = merged[column].to_numpy(float) if column in merged else np.full(len(merged), np.nan)
        mixed &= (point >= spread[family]) & (np.abs(size - point) <= relative * point)
    basin = np.where(
        positional,
        labels["m"],
        np.where(semantic, labels["theta"], np.where(mixed, model.labels.several, "neither")),
    )
    return frame.assign(basin=basin)
