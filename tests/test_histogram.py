"""The histogram task (THEORY.md sec. 9, paper App. A): data, frozen masks, training and the command."""

from __future__ import annotations

import inspect
import json
from collections import Counter

import pandas as pd
import pytest
import torch
import typer
from typer.testing import CliRunner

from attnphase.experiments.cli import app, histogram
from attnphase.experiments.histogram import (
    HistogramSettings,
    HistogramTransformer,
    evaluate,
    histogram_data,
    histogram_loss,
    run_histogram,
    train_epochs,
)

WIDTH = 64
HALF = WIDTH // 2
TINY = HistogramSettings(n_train=256, n_test=128, adam_epochs=1, sgd_epochs=1, batch_size=64)


@pytest.fixture(autouse=True)
def _one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _model(solution: str, seed: int = 0) -> HistogramTransformer:
    model = HistogramTransformer(solution)
    model.reset_parameters(torch.Generator().manual_seed(seed))
    return model


def _adam_steps(model: HistogramTransformer, steps: int = 5) -> None:
    tokens, counts = histogram_data(32 * steps, generator=torch.Generator().manual_seed(1))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    train_epochs(model, optimizer, tokens, counts, 1, 32, torch.Generator().manual_seed(2))


def _frozen_blocks(model: HistogramTransformer, solution: str, grad: bool = False) -> list[torch.Tensor]:
    """The weight blocks (or their gradients) that must be zero in frozen training, indexed by hand:
    token embedding on the positional half, positional embedding on the token half, query/key rows
    acting on the ignored half."""
    ignored = slice(0, HALF) if solution == "positional" else slice(HALF, WIDTH)
    token, position, query, key = (
        p.grad if grad else p for p in (model.token_embedding, model.position_embedding, model.query, model.key)
    )
    return [token[:, HALF:], position[:, :HALF], query[ignored], key[ignored]]


def test_counts_are_the_number_of_occurrences():
    tokens, counts = histogram_data(300, length=10, alphabet=15, generator=torch.Generator().manual_seed(3))
    assert tokens.dtype == counts.dtype == torch.long
    assert tokens.shape == counts.shape == (300, 10)
    assert int(tokens.min()) >= 0 and int(tokens.max()) <= 14
    assert int(counts.min()) >= 1 and int(counts.max()) <= 10
    for row, row_counts in zip(tokens.tolist(), counts.tolist(), strict=True):
        occurrences = Counter(row)
        assert row_counts == [occurrences[token] for token in row]
    assert counts.sum(dim=1).tolist() == [sum(c * c for c in Counter(row).values()) for row in tokens.tolist()]


def test_data_are_reproducible_from_the_seed():
    first = histogram_data(50, generator=torch.Generator().manual_seed(7))
    again = histogram_data(50, generator=torch.Generator().manual_seed(7))
    other = histogram_data(50, generator=torch.Generator().manual_seed(8))
    assert torch.equal(first[0], again[0]) and torch.equal(first[1], again[1])
    assert not torch.equal(first[0], other[0])


@pytest.mark.parametrize("solution", ["positional", "semantic"])
def test_frozen_blocks_are_zero_before_and_after_training(solution):
    model = _model(solution)
    trained = [p.detach().clone() for p in model.parameters()]
    for block in _frozen_blocks(model, solution):
        assert torch.count_nonzero(block) == 0
    _adam_steps(model)
    for block in _frozen_blocks(model, solution):
        assert torch.count_nonzero(block) == 0
    free = model.query[slice(HALF, WIDTH) if solution == "positional" else slice(0, HALF)]
    assert torch.count_nonzero(free) == free.numel()
    assert all(not torch.equal(p, q) for p, q in zip(model.parameters(), trained, strict=True))


def test_positional_attention_does_not_depend_on_the_tokens():
    model = _model("positional")
    _adam_steps(model)
    generator = torch.Generator().manual_seed(4)
    first, second = (torch.randint(0, 15, (20, 10), generator=generator) for _ in range(2))
    with torch.no_grad():
        attention = model.attention(first)
        assert torch.equal(attention, model.attention(second))
        assert torch.allclose(attention.sum(dim=-1), torch.ones(20, 10))
        assert not torch.allclose(attention[0, 0], attention[0, 1])
        semantic = _model("semantic")
        assert not torch.allclose(semantic.attention(first), semantic.attention(second))


def test_semantic_attention_does_not_depend_on_the_positions():
    model = _model("semantic")
    _adam_steps(model)
    tokens = torch.randint(0, 15, (20, 10), generator=torch.Generator().manual_seed(5))
    order = torch.randperm(10, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        attention = model.attention(tokens)
        permuted = model.attention(tokens[:, order])
        assert torch.allclose(permuted, attention[:, order][:, :, order], atol=1e-6, rtol=0)
        # equal tokens receive equal attention from any query
        same = torch.tensor([[3, 3, 5, 7, 3, 1, 5, 0, 2, 4]])
        row = model.attention(same)[0, 0]
        assert torch.allclose(row[[0, 1, 4]], row[0].expand(3)) and torch.allclose(row[2], row[6])
        positional = _model("positional").attention(tokens[:, order])
        assert not torch.allclose(positional, _model("positional").attention(tokens)[:, order][:, :, order])


@pytest.mark.parametrize("solution", ["positional", "semantic"])
def test_unfreezing_makes_the_frozen_blocks_trainable(solution):
    model = _model(solution)
    tokens, counts = histogram_data(64, generator=torch.Generator().manual_seed(9))
    histogram_loss(model, tokens, counts).backward()
    assert all(torch.count_nonzero(g) == 0 for g in _frozen_blocks(model, solution, grad=True))
    model.zero_grad()
    model.unfreeze()
    histogram_loss(model, tokens, counts).backward()
    assert all(torch.count_nonzero(g) > 0 for g in _frozen_blocks(model, solution, grad=True))
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    assert all(torch.count_nonzero(block) > 0 for block in _frozen_blocks(model, solution))


def test_a_short_training_run_reduces_the_loss():
    generator = torch.Generator().manual_seed(10)
    tokens, counts = histogram_data(2048, generator=generator)
    test_tokens, test_counts = histogram_data(512, generator=generator)
    model = _model("semantic")
    start = evaluate(model, test_tokens, test_counts)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    train_epochs(model, optimizer, tokens, counts, 3, 32, generator)
    end = evaluate(model, test_tokens, test_counts)
    assert end["loss"] < 0.8 * start["loss"]
    assert end["accuracy"] > start["accuracy"] + 0.1


def test_run_is_reproducible_and_unperturbed_unfreezing_changes_nothing():
    first, again = run_histogram(TINY), run_histogram(TINY)
    pd.testing.assert_frame_equal(first.table, again.table)
    assert list(first.table["solution"]) == ["positional", "positional", "semantic", "semantic"]
    assert list(first.table["stage"]) == ["frozen", "unfrozen", "frozen", "unfrozen"]
    assert (first.table["relative_weight_change"] > 0).tolist() == [False, True, False, True]
    for example_maps in first.attention.values():
        assert example_maps.shape == (len(TINY.examples), 10, 10)
    still = run_histogram(HistogramSettings(n_train=256, n_test=128, adam_epochs=1, sgd_epochs=0, noise=0.0))
    frozen, unfrozen = (
        still.table[still.table["stage"] == stage].reset_index(drop=True) for stage in ("frozen", "unfrozen")
    )
    assert (unfrozen["relative_weight_change"] == 0).all()
    pd.testing.assert_series_equal(frozen["test_accuracy"], unfrozen["test_accuracy"])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"n_train": 0}, "n_train must be an integer in [1, 1000000]; got 0"),
        ({"batch_size": 2.5}, "batch_size must be an integer in [1, 1000000]; got 2.5"),
        ({"sgd_epochs": -1}, "sgd_epochs must be an integer in [0, 10000]; got -1"),
        ({"adam_lr": 0.0}, "adam_lr must be in (0, 1]; got 0.0"),
        ({"noise": float("nan")}, "noise must be in [0, 1]; got nan"),
        ({"width": 63}, "width must be an integer in [2, 4096] and even; got 63"),
        ({"alphabet": 30}, "alphabet must be an integer in [2, 26]; got 30"),
        ({"examples": ("ABC",)}, "examples must be 10 letters from A-O each; got 'ABC'"),
        ({"examples": ("ABCDEFGHIZ",)}, "examples must be 10 letters from A-O each"),
    ],
)
def test_bad_settings_name_the_parameter_and_its_range(change, message):
    settings = HistogramSettings(**change)
    with pytest.raises(ValueError, match="^" + message.replace("[", r"\[").replace("(", r"\(")):
        settings.validate()
    with pytest.raises(ValueError):
        run_histogram(settings)


def _app() -> typer.Typer:
    return app


def test_command_defaults_match_the_settings_defaults():
    defaults = HistogramSettings()
    names = {"n_train": "n_train", "n_test": "n_test", "epochs": "adam_epochs", "sgd_epochs": "sgd_epochs"}
    names |= {"batch_size": "batch_size", "adam_lr": "adam_lr", "sgd_lr": "sgd_lr", "noise": "noise", "seed": "seed"}
    parameters = inspect.signature(histogram).parameters
    for option, field in names.items():
        assert parameters[option].default == getattr(defaults, field), option


@pytest.mark.slow
def test_command_writes_table_figure_and_run_record(tmp_path):
    out = tmp_path / "run"
    arguments = ["histogram", "--out", str(out), "--seed", "3", "--n-train", "256", "--n-test", "128"]
    arguments += ["--epochs", "1", "--sgd-epochs", "1", "--batch-size", "64", "--threads", "1"]
    result = CliRunner().invoke(_app(), arguments)
    assert result.exit_code == 0, result.output
    table = pd.read_csv(out / "histogram.csv")
    assert len(table) == 4 and set(table["seed"]) == {3}
    assert {"solution", "stage", "train_loss", "test_accuracy", "relative_weight_change"} <= set(table.columns)
    assert table["test_accuracy"].between(0, 1).all()
    assert (out / "attention.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (out / "attention.pdf").read_bytes()[:5] == b"%PDF-"
    record = json.loads((out / "run.json").read_text())
    assert record["seed"] == 3 and record["settings"]["n_train"] == 256 and record["settings"]["adam_epochs"] == 1
    assert record["seconds"] > 0 and "torch" in record["versions"]


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--n-train", "0", "n_train must be an integer in [1, 1000000]; got 0"), ("--threads", "0", "threads must be")],
)
def test_command_rejects_bad_input_in_one_line(tmp_path, option, value, message):
    out = tmp_path / "x"
    result = CliRunner().invoke(_app(), ["histogram", "--out", str(out), option, value])
    assert result.exit_code == 2
    assert f"error: {message}" in result.output
    assert "Traceback" not in result.output
    assert not out.exists()
