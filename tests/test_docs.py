"""The README and the documentation pages as a reader meets them: short, their links resolving, every
script they name present (the Sphinx build with warnings as errors checks the rest)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(p for p in (ROOT / "docs").rglob("*.md") if "_build" not in p.parts)
#: A Markdown link or image: ``[text](target)``.
LINK = re.compile(r"\]\(([^)\s]+)\)")
#: A script a page tells the reader to run: ``python benchmarks/name.py`` or ``python docs/validation/name.py``.
SCRIPT = re.compile(r"python3? ((?:benchmarks|docs/validation|examples)/[a-z0-9_/]+\.py)")


def _local_targets(page: Path) -> list[str]:
    targets = (t.split("#")[0] for t in LINK.findall(page.read_text(encoding="utf-8")))
    return [t for t in targets if t and not t.startswith(("http://", "https://", "mailto:"))]


def test_the_readme_opens_with_the_two_set_up_commands_and_stays_short():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```bash\n(.*?)\n```", text, flags=re.S)
    title, first, second = text.split("\n\n")[:3]
    assert title == "# attnphase" and first.startswith("```bash") and second.startswith("```bash")
    assert "attnphase scan" in blocks[0] and "pip install -e ." in blocks[0]
    assert "python -m pytest -q" in blocks[1] and 'pip install -e ".[test]"' in blocks[1]
    assert len(text.encode()) < 8 * 1024


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_resolves(page):
    missing = [t for t in _local_targets(page) if not (page.parent / t).exists()]
    assert not missing, f"{page.relative_to(ROOT)} links to missing {missing}"


@pytest.mark.parametrize("page", [ROOT / "README.md", *PAGES], ids=lambda p: str(p.relative_to(ROOT)))
def test_every_script_a_page_names_is_there(page):
    missing = [s for s in SCRIPT.findall(page.read_text(encoding="utf-8")) if not (ROOT / s).is_file()]
    assert not missing, f"{page.relative_to(ROOT)} names missing scripts {missing}"
