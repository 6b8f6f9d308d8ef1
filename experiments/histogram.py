"""The histogram task: a transformer with a positional and a semantic local minimum (THEORY.md sec. 9, paper App. A).

Sequences ``x`` of ``L`` tokens drawn iid uniformly from an alphabet of ``T`` symbols; the target at
position ``i`` is the number of occurrences of ``x_i`` in the sequence, ``y_i = sum_j 1[x_j = x_i]``,
a class in ``1..L`` (``L + 1`` logits per position, class 0 is never a target).

The model follows the authors' code (github.com/SPOC-group/positional-and-semantic-attention): a
width-``d`` representation ``h_i = E_tok[x_i] + E_pos[i]``, one dot-product attention layer
``A = softmax(h F W_Q (h F W_K)^T / sqrt(d))`` with output ``A h W_V``, a LayerNorm of that output
(no residual connection, as in the authors' code), then ``Linear(d, p) -> ReLU -> Linear(p, L + 1)``.
Training minimises the cross entropy averaged over all output tokens.

Frozen training (App. A.4) restricts the model with fixed 0/1 masks: the token embedding lives
in the first half of the ``d`` coordinates and the positional embedding in the second half (so
``h = [token | position]``), and ``F = diag(mask)`` keeps only the positional half (positional
solution) or only the semantic half (semantic solution) in the query and key. The masks multiply
the parameters in ``forward``, so the masked entries receive zero gradient, and
``reset_parameters`` sets those entries to zero, so they stay exactly zero under Adam. Unfreezing (App. A.5)
sets every mask to one, adds iid Gaussian noise to every parameter and continues with SGD.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from matplotlib.figure import Figure
from torch import nn
from torch.nn import functional

from attnphase.experiments.run_context import RunContext
from attnphase.experiments.study import StudyResult, progress_bar, versions
from attnphase.replica.declaration import Interval
from attnphase.saddle.validation import check

SOLUTIONS = ("positional", "semantic")
STAGES = ("frozen", "unfrozen")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def histogram_data(
    n: int, length: int = 10, alphabet: int = 15, generator: torch.Generator | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """``n`` sequences of ``length`` iid uniform tokens in ``0..alphabet-1`` and their histograms.

    Returns ``(tokens, counts)``, both LongTensors of shape ``(n, length)``, with
    ``counts[s, i] = #{j : tokens[s, j] = tokens[s, i]}`` (paper App. A.2).
    """
    tokens = torch.randint(0, alphabet, (n, length), generator=generator)
    counts = (tokens[:, :, None] == tokens[:, None, :]).sum(dim=-1)
    return tokens, counts


def encode(sequence: str) -> torch.Tensor:
    """Letters ``A, B, C, ...`` as token indices ``0, 1, 2, ...`` (a LongTensor of shape ``(len,)``)."""
    return torch.tensor([LETTERS.index(letter) for letter in sequence], dtype=torch.long)


def _halves(width: int) -> tuple[torch.Tensor, torch.Tensor]:
    """0/1 masks of the token (first) and positional (second) half of the ``width`` coordinates."""
    token = torch.zeros(width)
    token[: width // 2] = 1.0
    return token, 1.0 - token


class HistogramTransformer(nn.Module):
    """One dot-product attention layer with learned token and positional embeddings (paper App. A.3).

    ``solution`` is ``"positional"`` or ``"semantic"``: which half of the representation the
    query and key see during frozen training. The buffers ``token_mask``, ``position_mask`` and
    ``query_key_mask`` (0/1 vectors of length ``width``) define the frozen entries; ``unfreeze``
    sets them to one.
    """

    token_mask: torch.Tensor
    position_mask: torch.Tensor
    query_key_mask: torch.Tensor

    def __init__(self, solution: str, length: int = 10, alphabet: int = 15, width: int = 64, hidden: int = 128) -> None:
        super().__init__()
        if solution not in SOLUTIONS:
            raise ValueError(f"solution must be one of {', '.join(SOLUTIONS)}; got {solution!r}")
        self.solution = solution
        self.width = width
        self.token_embedding = nn.Parameter(torch.empty(alphabet, width))
        self.position_embedding = nn.Parameter(torch.empty(length, width))
        self.query = nn.Parameter(torch.empty(width, width))
        self.key = nn.Parameter(torch.empty(width, width))
        self.value = nn.Parameter(torch.empty(width, width))
        self.norm = nn.LayerNorm(width)
        self.hidden = nn.Linear(width, hidden)
        self.readout = nn.Linear(hidden, length + 1)
        token, position = _halves(width)
        self.register_buffer("token_mask", token)
        self.register_buffer("position_mask", position)
        self.register_buffer("query_key_mask", position.clone() if solution == "positional" else token.clone())

    def reset_parameters(self, generator: torch.Generator) -> None:
        """PyTorch's default initialisation drawn from ``generator``, then the frozen entries set to zero.

        Embeddings ~ N(0, 1); ``W_Q, W_K, W_V`` and the linear layers uniform in
        ``+-1/sqrt(fan_in)`` (``nn.Linear``'s default); LayerNorm weight 1 and bias 0.
        """
        with torch.no_grad():
            for embedding in (self.token_embedding, self.position_embedding):
                embedding.normal_(generator=generator)
            for weight in (self.query, self.key, self.value, self.hidden.weight, self.readout.weight):
                nn.init.kaiming_uniform_(weight, a=math.sqrt(5), generator=generator)
            for layer in (self.hidden, self.readout):
                bound = 1.0 / math.sqrt(layer.in_features)
                layer.bias.uniform_(-bound, bound, generator=generator)
            self.norm.reset_parameters()
            self.token_embedding.mul_(self.token_mask)
            self.position_embedding.mul_(self.position_mask)
            self.query.mul_(self.query_key_mask[:, None])
            self.key.mul_(self.query_key_mask[:, None])

    def unfreeze(self) -> None:
        """Make every parameter entry trainable (all masks set to one)."""
        for mask in (self.token_mask, self.position_mask, self.query_key_mask):
            mask.fill_(1.0)

    def frozen_entries(self) -> dict[str, torch.Tensor]:
        """The stored parameter entries currently frozen at zero, by parameter name (flattened)."""
        off_query_key = self.query_key_mask == 0
        return {
            "token_embedding": self.token_embedding[:, self.token_mask == 0].flatten(),
            "position_embedding": self.position_embedding[:, self.position_mask == 0].flatten(),
            "query": self.query[off_query_key].flatten(),
            "key": self.key[off_query_key].flatten(),
        }

    def embed(self, tokens: torch.Tensor) -> torch.Tensor:
        """``h_i = E_tok[x_i] * token_mask + E_pos[i] * position_mask``, shape ``(batch, L, width)``."""
        return self.token_embedding[tokens] * self.token_mask + self.position_embedding * self.position_mask

    def _attention(self, h: torch.Tensor) -> torch.Tensor:
        mask = self.query_key_mask[:, None]
        scores = (h @ (mask * self.query)) @ (h @ (mask * self.key)).transpose(-2, -1) / math.sqrt(self.width)
        return torch.softmax(scores, dim=-1)

    def attention(self, tokens: torch.Tensor) -> torch.Tensor:
        """Attention matrices ``A[s, i, j]`` (query position ``i``, key position ``j``), shape ``(batch, L, L)``."""
        return self._attention(self.embed(tokens))

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape ``(batch, L, L + 1)`` for token indices of shape ``(batch, L)``."""
        h = self.embed(tokens)
        mixed = self._attention(h) @ (h @ self.value)
        return self.readout(torch.relu(self.hidden(self.norm(mixed))))


def histogram_loss(model: HistogramTransformer, tokens: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Cross entropy averaged over all output tokens of the batch (paper eq. 25)."""
    logits = model(tokens)
    return functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), counts.reshape(-1))


def _batches(n: int, batch_size: int, generator: torch.Generator) -> Iterator[torch.Tensor]:
    order = torch.randperm(n, generator=generator)
    yield from order.split(batch_size)


def train_epochs(
    model: HistogramTransformer,
    optimizer: torch.optim.Optimizer,
    tokens: torch.Tensor,
    counts: torch.Tensor,
    epochs: int,
    batch_size: int,
    generator: torch.Generator,
    progress: Callable[[int], None] | None = None,
    final_lr_fraction: float = 1.0,
) -> None:
    """``epochs`` passes of minibatch training over the shuffled data (shuffling drawn from ``generator``).

    The learning rate follows a cosine from its initial value down to ``final_lr_fraction`` times
    it at the last step (constant for 1.0), starting from the optimizer's current rate (use a fresh
    optimizer for every call); ``progress(1)`` is called after every epoch.
    """
    steps = epochs * math.ceil(len(tokens) / batch_size)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(
        optimizer, T_max=max(steps, 1), eta_min=final_lr_fraction * optimizer.param_groups[0]["lr"]
    )
    model.train()
    for _ in range(epochs):
        for batch in _batches(len(tokens), batch_size, generator):
            optimizer.zero_grad()
            histogram_loss(model, tokens[batch], counts[batch]).backward()
            optimizer.step()
            schedule.step()
        if progress is not None:
            progress(1)


@torch.no_grad()
def evaluate(model: HistogramTransformer, tokens: torch.Tensor, counts: torch.Tensor) -> dict[str, float]:
    """Mean cross entropy per output token, fraction of tokens and of whole sequences predicted right."""
    model.eval()
    logits = model(tokens)
    right = logits.argmax(dim=-1) == counts
    return {
        "loss": functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), counts.reshape(-1)).item(),
        "accuracy": right.float().mean().item(),
        "sequence_accuracy": right.all(dim=-1).float().mean().item(),
    }


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """All parameters of ``model`` as one detached vector (in ``named_parameters`` order)."""
    return torch.cat([p.detach().flatten() for p in model.parameters()])


def off_block_fraction(model: HistogramTransformer, solution: str) -> float:
    """``||(1 - m) [W_Q, W_K]|| / ||[W_Q, W_K]||`` for the rows ``m`` the ``solution`` froze at zero:
    how much of the query/key weight acts on the half of the representation the frozen model ignored."""
    token, position = _halves(model.width)
    outside = (token if solution == "positional" else position)[:, None]
    weights = torch.cat([model.query.detach(), model.key.detach()], dim=1)
    return ((outside * weights).norm() / weights.norm()).item()


@dataclass(frozen=True)
class HistogramSettings:
    """Data, model and training budget of the histogram experiment (paper App. A).

    The authors train on about 35 000 sequences with batch 32 and Adam (lr 1e-3, betas
    (0.9, 0.98), eps 1e-9) for 200 epochs, then add noise of scale 1e-3 and run SGD (lr 1e-3)
    for 100 epochs. The defaults keep the architecture, the batch size, the Adam betas, the noise
    and the SGD rate, with a budget that fits in a few CPU minutes: 20 000 sequences, 20 Adam
    epochs at lr 5e-4 with a cosine decay to ``adam_final_lr_fraction`` of it, and 5 SGD epochs.
    (At this short budget Adam at lr 1e-3 sometimes ended the semantic training with two tokens
    indistinguishable to the attention, about 96 % test accuracy; lr 5e-4 did not.)
    """

    seed: int = 0
    length: int = 10
    alphabet: int = 15
    width: int = 64
    hidden: int = 128
    n_train: int = 20_000
    n_test: int = 5_000
    batch_size: int = 32
    adam_epochs: int = 20
    adam_lr: float = 5e-4
    adam_final_lr_fraction: float = 0.1
    noise: float = 1e-3
    sgd_epochs: int = 5
    sgd_lr: float = 1e-3
    examples: tuple[str, ...] = field(default=("ABCDABCAAB", "KLKMNOKLMK", "ABCDEFGHIJ"))

    def validate(self) -> HistogramSettings:
        """Raise ``ValueError`` naming the first parameter outside its allowed range; return ``self``.

        The ranges are :data:`attnphase.experiments.parsing.HISTOGRAM_RANGES` (shared with the command
        line's help); ``width`` must also be even and the examples words of the alphabet.
        """
        from attnphase.experiments.parsing import HISTOGRAM_RANGES  # torch-free, shared with the command line
        from attnphase.saddle.validation import ParameterError, check

        for name, interval in HISTOGRAM_RANGES.items():
            check(getattr(self, name), name, interval)
        if self.width % 2:
            raise ParameterError(f"width must be {HISTOGRAM_RANGES['width']} and even; got {self.width}")
        allowed = LETTERS[: self.alphabet]
        if not self.examples:
            raise ParameterError("examples must hold at least one sequence; got none")
        for example in self.examples:
            if not isinstance(example, str) or len(example) != self.length or not set(example) <= set(allowed):
                raise ParameterError(
                    f"examples must be {self.length} letters from {allowed[0]}-{allowed[-1]} each; got {example!r}"
                )
        return self

    @property
    def total_epochs(self) -> int:
        """Epochs over both solutions and both stages (the length of the progress count)."""
        return len(SOLUTIONS) * (self.adam_epochs + self.sgd_epochs)


@dataclass(frozen=True, eq=False)
class HistogramResult(StudyResult):
    """One row per solution and stage in ``table`` (the paper's Table 1); ``attention[(solution, stage)]``
    holds the attention matrices of ``examples``, an array of shape ``(len(examples), L, L)``."""

    settings: HistogramSettings
    table: pd.DataFrame
    attention: dict[tuple[str, str], np.ndarray]
    examples: tuple[str, ...]
    seconds: float = 0.0
    threads: int = 1
    provenance: dict[str, str] = field(default_factory=versions)

    figure_name = "attention"
    table_names = ("histogram",)
    figure_dpi = 200

    @property
    def tables(self) -> dict[str, pd.DataFrame]:
        return {"histogram": self.table}

    @property
    def record(self) -> dict[str, object]:
        return {
            "command": "histogram",
            "settings": settings_dict(self.settings),
            "status": "complete",
            "seed": self.settings.seed,
            "threads": self.threads,
            "versions": self.provenance,
            "seconds": round(self.seconds, 3),
        }

    def plot(self) -> Figure:
        """Attention maps of the example sequences for both solutions, frozen and unfrozen."""
        return attention_figure(self)


def _generator(seed: int, stream: int) -> torch.Generator:
    """An independent random stream ``stream`` of the experiment's ``seed``."""
    state = np.random.SeedSequence([seed, stream]).generate_state(1, dtype=np.uint64)[0]
    return torch.Generator().manual_seed(int(state))


@torch.no_grad()
def _attention_maps(model: HistogramTransformer, examples: torch.Tensor) -> np.ndarray:
    return model.attention(examples).numpy()


def _row(
    model: HistogramTransformer,
    stage: str,
    before: torch.Tensor,
    perturbed: torch.Tensor,
    settings: HistogramSettings,
    train_tokens: torch.Tensor,
    train_counts: torch.Tensor,
    test_tokens: torch.Tensor,
    test_counts: torch.Tensor,
) -> dict[str, object]:
    """One table row: losses and accuracies of ``model`` and its weight change since ``before``."""
    after = flat_parameters(model)
    train, test = evaluate(model, train_tokens, train_counts), evaluate(model, test_tokens, test_counts)
    return {
        "solution": model.solution,
        "stage": stage,
        "train_loss": train["loss"],
        "train_accuracy": train["accuracy"],
        "test_loss": test["loss"],
        "test_accuracy": test["accuracy"],
        "test_sequence_accuracy": test["sequence_accuracy"],
        "relative_weight_change": ((after - before).norm() / before.norm()).item(),
        "relative_sgd_change": ((after - perturbed).norm() / before.norm()).item(),
        "off_block_fraction": off_block_fraction(model, model.solution),
        "seed": settings.seed,
    }


def run_histogram(settings: HistogramSettings, progress: Callable[[int], None] | None = None) -> HistogramResult:
    """Train the positional and the semantic solution frozen (Adam), then unfrozen (noise + SGD).

    Both solutions share the data and the initial parameters (before masking). Each row of the
    table reports the training loss, test loss and accuracies after a stage; unfrozen rows also
    report ``relative_weight_change = ||w_after - w_before|| / ||w_before||`` over all parameters,
    ``w_before`` being the frozen solution before the noise (paper Table 1), and
    ``relative_sgd_change = ||w_after - w_perturbed|| / ||w_before||``, the part moved by SGD alone
    (0 for frozen rows). ``off_block_fraction``
    is the share of the query/key weights acting on the half the frozen solution ignored.
    ``progress(1)`` is called after every epoch (``settings.total_epochs`` calls in all).
    """
    settings.validate()
    s = settings
    data = _generator(s.seed, 0)
    train_tokens, train_counts = histogram_data(s.n_train, s.length, s.alphabet, data)
    test_tokens, test_counts = histogram_data(s.n_test, s.length, s.alphabet, data)
    examples = torch.stack([encode(example) for example in s.examples])
    rows: list[dict[str, object]] = []
    attention: dict[tuple[str, str], np.ndarray] = {}
    for solution in SOLUTIONS:
        model = HistogramTransformer(solution, s.length, s.alphabet, s.width, s.hidden)
        model.reset_parameters(_generator(s.seed, 1))
        shuffle = _generator(s.seed, 2)
        adam = torch.optim.Adam(model.parameters(), lr=s.adam_lr, betas=(0.9, 0.98), eps=1e-9)
        train_epochs(
            model,
            adam,
            train_tokens,
            train_counts,
            s.adam_epochs,
            s.batch_size,
            shuffle,
            progress,
            s.adam_final_lr_fraction,
        )
        before = flat_parameters(model)
        rows.append(_row(model, "frozen", before, before, s, train_tokens, train_counts, test_tokens, test_counts))
        attention[(solution, "frozen")] = _attention_maps(model, examples)
        model.unfreeze()
        noise = _generator(s.seed, 3)
        with torch.no_grad():
            for parameter in model.parameters():
                parameter.add_(s.noise * torch.randn(parameter.shape, generator=noise))
        perturbed = flat_parameters(model)
        sgd = torch.optim.SGD(model.parameters(), lr=s.sgd_lr)
        train_epochs(model, sgd, train_tokens, train_counts, s.sgd_epochs, s.batch_size, shuffle, progress)
        rows.append(_row(model, "unfrozen", before, perturbed, s, train_tokens, train_counts, test_tokens, test_counts))
        attention[(solution, "unfrozen")] = _attention_maps(model, examples)
    return HistogramResult(settings=s, table=pd.DataFrame(rows), attention=attention, examples=s.examples)


#: Torch CPU threads of the histogram task.
THREADS = Interval(1, 256, integer=True)


def histogram(
    *,
    seed: int = 0,
    n_train: int = 20_000,
    n_test: int = 5_000,
    epochs: int = 20,
    sgd_epochs: int = 5,
    batch_size: int = 32,
    adam_lr: float = 5e-4,
    sgd_lr: float = 1e-3,
    noise: float = 1e-3,
    threads: int = 1,
    out: str | Path | None = None,
    overwrite: bool = False,
    progress: bool | None = True,
) -> HistogramResult:
    """The positional and the semantic solution of the histogram task, frozen then unfrozen
    (THEORY.md sec. 9, paper App. A; :func:`run_histogram` states what is trained and measured).

    ``epochs`` of frozen Adam training (initial rate ``adam_lr``, cosine decay) on ``n_train``
    sequences, then ``sgd_epochs`` of unfrozen SGD (``sgd_lr``) after Gaussian noise of standard
    deviation ``noise``; minibatches of ``batch_size``; ``threads`` torch CPU threads; every random
    draw from ``seed``. With ``out``, the directory is held for the whole call (another run into it is
    refused at once) and the result is saved there, each file atomically; a directory holding a run
    with other settings is refused unless ``overwrite``, which first removes every file of that run.
    (The training is one piece: an interrupted run starts again from the beginning.)
    """
    check(threads, "threads", THREADS)
    settings = HistogramSettings(
        seed=seed,
        n_train=n_train,
        n_test=n_test,
        adam_epochs=epochs,
        sgd_epochs=sgd_epochs,
        batch_size=batch_size,
        adam_lr=adam_lr,
        sgd_lr=sgd_lr,
        noise=noise,
    ).validate()
    with RunContext(out, {"settings": settings_dict(settings)}, HistogramResult.outputs(), overwrite) as run:
        run.resume()
        torch.set_num_threads(threads)
        started = time.perf_counter()
        with progress_bar(settings.total_epochs, "histogram", "epoch", progress) as bar:
            trained = run_histogram(settings, progress=bar.update)
        result = replace(trained, seconds=time.perf_counter() - started, threads=threads)
        run.save(result)
    return result


def settings_dict(settings: HistogramSettings) -> dict[str, object]:
    """The settings as a JSON-ready dictionary."""
    values = asdict(settings)
    values["examples"] = list(settings.examples)
    return values


def attention_figure(result: HistogramResult) -> Figure:
    """Attention matrices of the example sequences (paper Fig. 1, 4-6).

    Rows: positional/semantic solution x frozen/unfrozen stage; columns: the example sequences.
    Entry ``(i, j)`` of a panel is the attention of query token ``i`` on key token ``j``; all panels
    share one colour scale from 0 to the largest attention weight shown.
    """
    keys = [(solution, stage) for solution in SOLUTIONS for stage in STAGES]
    n_rows, n_cols = len(keys), len(result.examples)
    fig = Figure(figsize=(2.3 * n_cols + 1.2, 2.3 * n_rows), layout="constrained")
    axes = fig.subplots(n_rows, n_cols, squeeze=False)
    top = max(float(maps.max()) for maps in result.attention.values())
    image = None
    for row, key in enumerate(keys):
        for col, example in enumerate(result.examples):
            ax = axes[row, col]
            image = ax.imshow(result.attention[key][col], vmin=0.0, vmax=top, cmap="viridis")
            ticks = range(len(example))
            ax.set_xticks(ticks, list(example), fontsize=7)
            ax.set_yticks(ticks, list(example), fontsize=7)
            ax.tick_params(length=0)
            if row == 0:
                ax.set_title(example, fontsize=9, family="monospace")
            if row == n_rows - 1:
                ax.set_xlabel("key token", fontsize=8)
            if col == 0:
                ax.set_ylabel(f"{key[0]}, {key[1]}\nquery token", fontsize=8)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    return fig
