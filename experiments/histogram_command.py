"""The ``histogram`` command: positional and semantic solutions of the histogram task (paper App. A)."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from experiments.cli_common import fail, versions
from experiments.storage import write_json, write_table


def histogram(
    out: Annotated[Path, typer.Option(help="Output directory (created if needed).")] = Path("attnphase-histogram"),
    seed: Annotated[int, typer.Option(help="Seed of the data, the initialisation, the shuffling and the noise.")] = 0,
    n_train: Annotated[int, typer.Option(help="Number of training sequences.")] = 20_000,
    n_test: Annotated[int, typer.Option(help="Number of test sequences.")] = 5_000,
    epochs: Annotated[int, typer.Option(help="Epochs of frozen training with Adam.")] = 20,
    sgd_epochs: Annotated[int, typer.Option(help="Epochs of unfrozen training with SGD.")] = 5,
    batch_size: Annotated[int, typer.Option(help="Minibatch size of both stages.")] = 32,
    adam_lr: Annotated[float, typer.Option(help="Initial Adam learning rate (cosine decay).")] = 5e-4,
    sgd_lr: Annotated[float, typer.Option(help="SGD learning rate after unfreezing.")] = 1e-3,
    noise: Annotated[float, typer.Option(help="Standard deviation of the noise added at unfreezing.")] = 1e-3,
    threads: Annotated[int, typer.Option(help="Torch CPU threads, >= 1.")] = 1,
) -> None:
    """Train the positional and the semantic solution of the histogram task, frozen then unfrozen.

    Sequences of 10 tokens from 15 symbols; the target of each token is its number of
    occurrences. The attention's query and key see only the positional (resp. token) half of
    the representation during Adam training; then every weight is unfrozen, perturbed by
    Gaussian noise and trained further with SGD. Writes OUT/histogram.csv (losses, accuracies
    and relative weight changes per solution and stage), OUT/attention.png and .pdf (attention
    maps of example sequences) and OUT/run.json (settings, versions, seconds).
    """
    import torch

    from experiments.histogram import HistogramSettings, attention_figure, run_histogram, settings_dict

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
    )
    try:
        if threads < 1:
            raise ValueError(f"threads must be an integer >= 1; got {threads}")
        settings.validate()
    except ValueError as error:
        fail(error)
    torch.set_num_threads(threads)
    start = time.perf_counter()
    with tqdm(total=settings.total_epochs, unit="epoch", file=sys.stderr, disable=None) as bar:
        result = run_histogram(settings, progress=bar.update)
    seconds = time.perf_counter() - start
    write_table(out / "histogram.csv", result.table)
    attention_figure(result, out / "attention")
    write_json(
        out / "run.json",
        {
            "command": "histogram",
            "settings": settings_dict(settings),
            "seed": seed,
            "threads": threads,
            "versions": versions(),
            "seconds": round(seconds, 3),
        },
    )
    typer.echo(result.table.to_string(index=False, float_format=lambda value: f"{value:.4g}"))
    typer.echo(f"wrote {out}/histogram.csv, attention.png, attention.pdf, run.json ({seconds:.0f} s)")
