"""Every path the README and ``docs/`` name exists, so a moved file cannot leave a guide stale."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

PATH = re.compile(r"(?<![\w/.-])((?:bot|cogs|tests|docs|bench|\.ci)/[\w./-]*\w)")
"""A repository path as the guides write it: from a top-level folder, without a glob."""

PLACEHOLDERS = ("NNNN",)
"""Parts of a path that stand for any name (``versions/NNNN_name.py``)."""


def guides() -> list[Path]:
    """The README and every Markdown file of ``docs/``."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]


def test_every_path_the_guides_name_exists() -> None:
    missing = sorted(
        f"{guide.relative_to(ROOT)}: {path}"
        for guide in guides()
        for path in {m.group(1).rstrip(".") for m in PATH.finditer(guide.read_text("utf-8"))}
        if not any(p in path for p in PLACEHOLDERS) and not (ROOT / path).exists()
    )
    assert missing == []


def test_the_pattern_finds_the_paths_it_checks() -> None:
    found = [m.group(1) for m in PATH.finditer("see `bot/storage/schema.py`, tests/e2e/.")]
    assert found == ["bot/storage/schema.py", "tests/e2e"]
