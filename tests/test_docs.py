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


# -- The service's interface: docs/genapi.md, and only it, is what the code cites

GENAPI = ROOT / "docs" / "genapi.md"
CITATION = re.compile(r"docs/genapi\.md((?:,? (?:and )?§\d+(?:\.\d+)?)+)")
"""A citation of sections of docs/genapi.md: ``docs/genapi.md §4.2`` or ``... §4.2, §4.4``."""

SECTION = re.compile(r"§(\d+(?:\.\d+)?)")
HEADING = re.compile(r"^#{2,3} (\d+(?:\.\d+)?)\.? ", re.MULTILINE)
"""A numbered heading of docs/genapi.md: ``## 3. Jobs`` is §3, ``### 3.2 Polling`` is §3.2."""

OUTSIDE_SPEC = re.compile(
    r"generation-api-v1|\bspec(?:'s)?\s+(?:part\s+)?§?\s*\d|\bspec\s+part\b", re.IGNORECASE
)
"""A citation of the upstream document the repository does not hold (``spec 4.2``,
``spec part 8``, its file name)."""

CITING = ("bot", "cogs", "tests", "bench", "docs", "tools")
SUFFIXES = {".py", ".md", ".sql", ".html", ".txt", ".toml"}


def citing_files() -> list[Path]:
    """Every source, test, benchmark, tool and guide that may cite docs/genapi.md."""
    found = [ROOT / "README.md"]
    for top in CITING:
        found += [p for p in sorted((ROOT / top).rglob("*")) if p.suffix in SUFFIXES]
    return [p for p in found if p.is_file() and ".venv" not in p.parts]


def genapi_sections() -> set[str]:
    return set(HEADING.findall(GENAPI.read_text("utf-8")))


def test_every_cited_section_of_genapi_exists() -> None:
    sections = genapi_sections()
    missing = []
    for path in citing_files():
        text = path.read_text("utf-8")
        cited = [s for m in CITATION.finditer(text) for s in SECTION.findall(m.group(1))]
        if path == GENAPI:  # the page cites its own sections bare: "§4.2"
            cited += SECTION.findall(text)
        missing += [f"{path.relative_to(ROOT)}: §{s}" for s in cited if s not in sections]
    assert missing == []


def test_nothing_cites_the_outside_spec() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in citing_files()
        if path != Path(__file__).resolve()
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if OUTSIDE_SPEC.search(line)
    ]
    assert found == []


def test_the_citation_patterns_find_what_they_check() -> None:
    text = "(docs/genapi.md §4.2, §4.4) and docs/genapi.md §8.1; spec 4.2, spec part 8"
    cited = [s for m in CITATION.finditer(text) for s in SECTION.findall(m.group(1))]
    assert cited == ["4.2", "4.4", "8.1"]
    assert len(OUTSIDE_SPEC.findall(text)) == 2
    assert {"3", "3.2", "8.1"} <= genapi_sections()


# -- docs/architecture.md's module list and the tree

ARCHITECTURE = ROOT / "docs" / "architecture.md"
MODULE = re.compile(r"^- `((?:bot|cogs)/[\w/]+\.py)` — ", re.MULTILINE)
"""An entry of docs/architecture.md's "Modules": ``- `bot/jobs/poller.py` — what it holds``."""


def tree_modules() -> set[str]:
    """Every module of ``bot/`` and ``cogs/``, ``__init__.py`` and Alembic's revisions aside."""
    return {
        p.relative_to(ROOT).as_posix()
        for top in ("bot", "cogs")
        for p in (ROOT / top).rglob("*.py")
        if p.name != "__init__.py" and "versions" not in p.relative_to(ROOT).parts
    }


def test_architecture_lists_every_module_of_the_tree() -> None:
    listed = set(MODULE.findall(ARCHITECTURE.read_text("utf-8")))
    assert sorted(tree_modules() - listed) == [], "add a line for each to docs/architecture.md"
    assert sorted(listed - tree_modules()) == [], "remove or rename these in docs/architecture.md"
