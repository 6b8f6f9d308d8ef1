"""A benchmark's results file: indented JSON under ``benchmarks/results/``."""

from __future__ import annotations

import json
from pathlib import Path


def write_results(results: object, path: Path) -> str:
    """Write ``results`` to ``path`` as indented JSON (creating its directory); return the text."""
    text = json.dumps(results, indent=2) + "\n"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return text
