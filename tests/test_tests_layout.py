"""The tests' own layout: helpers shared across modules live in tests/support, tests in test_*.py.

A test module that imports another one runs that module's code (and, under pytest, can collect
its tests twice or mark them by the wrong file's tiers); a helper in a conftest.py cannot be
imported without loading pytest's plugin machinery. So: no module under ``tests/`` imports a
test module or a conftest, every module that is neither lives in ``tests/support``, and the
conftest files hold fixtures and pytest's hooks only. Read with ``ast``, nothing is imported.

Comments and docstrings say why a test exists, not which ticket asked for it: a ticket's number
tells a reader nothing once the ticket is closed.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SUPPORT = TESTS / "support"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(path): path for path in sorted(TESTS.rglob("*.py"))}


def is_test_module(name: str) -> bool:
    """A module pytest collects or loads as a plugin: ``test_*.py`` or ``conftest.py``."""
    last = name.rpartition(".")[2]
    return last.startswith("test_") or last == "conftest"


def imported(path: Path) -> Iterator[tuple[str, int]]:
    """Every module of ``tests`` that ``path`` imports (``from a import b``: ``a.b`` if that
    is a module, else ``a``), with its line; relative imports resolved."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text("utf-8"), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                full = f"{base}.{alias.name}"
                yield (full if full in MODULES else base), node.lineno


def test_no_module_imports_a_test_module_or_a_conftest() -> None:
    found = sorted(
        f"{path.relative_to(ROOT)}:{line}: {name}"
        for path in MODULES.values()
        for name, line in imported(path)
        if name.split(".")[0] == "tests" and is_test_module(name)
    )
    assert found == []


def test_helpers_live_in_tests_support() -> None:
    """Every module under tests/ is a test module, a conftest, a package's ``__init__`` or a
    helper under tests/support; tests/support holds no tests."""
    misplaced = sorted(
        str(path.relative_to(ROOT))
        for name, path in MODULES.items()
        if not is_test_module(name) and path.name != "__init__.py" and SUPPORT not in path.parents
    )
    tests_in_support = sorted(
        str(path.relative_to(ROOT))
        for path in SUPPORT.rglob("*.py")
        if is_test_module(module_name(path))
    )
    assert misplaced == []
    assert tests_in_support == []


def is_fixture(decorator: ast.expr) -> bool:
    """``@pytest.fixture``, ``@pytest_asyncio.fixture``, called or not."""
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    return isinstance(target, ast.Attribute) and target.attr == "fixture"


def test_conftest_files_hold_fixtures_and_hooks_only() -> None:
    """Their functions are fixtures or ``pytest_*`` hooks; no class, no constant to import."""
    extra = []
    for path in sorted(TESTS.rglob("conftest.py")):
        for node in ast.parse(path.read_text("utf-8")).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not (
                    node.name.startswith("pytest_") or any(map(is_fixture, node.decorator_list))
                ):
                    extra.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.name}")
            elif not isinstance(node, (ast.Import, ast.ImportFrom, ast.Expr)):
                extra.append(f"{path.relative_to(ROOT)}:{node.lineno}: {ast.unparse(node)[:40]}")
    assert extra == []


TICKET = re.compile(r"[Ii]ssues? ?#?[0-9]+|\b[ES][0-9]{1,2}\b|\bitems? [0-9]")
"""An issue's number (``issue 18``, ``Issue 23``), a review item's code (``E10``, ``S1``) or an
item of a list kept elsewhere (``item 3``)."""


def test_no_comment_names_an_issue_or_a_review_item() -> None:
    """Every module under tests/ but this one, whose examples are tickets' names."""
    found = sorted(
        f"{path.relative_to(ROOT)}:{number}: {match.group(0)}"
        for path in MODULES.values()
        if path != Path(__file__).resolve()
        for number, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        for match in TICKET.finditer(line)
    )
    assert found == []


def test_the_rules_see_the_code() -> None:
    """The readers find what is there: a conftest's import of the harness, a package's relative
    imports, and the tests of a folder as tests."""
    e2e_conftest = dict(imported(TESTS / "e2e" / "conftest.py"))
    assert "tests.support.e2e.harness" in e2e_conftest
    emulator = SUPPORT / "discord_emulator" / "emulator.py"
    assert "tests.support.discord_emulator.permissions" in dict(imported(emulator))
    assert is_test_module("tests.e2e.test_chat_e2e")
    assert is_test_module("tests.conftest")
    assert not is_test_module("tests.support.poller")
    for ticket in ("(issue 18)", "Issue 23, E18:", "S1", "item 3"):
        assert TICKET.search(ticket), ticket
    for fine in ("issues/341", "E2E_DIR", "E501", "item's"):
        assert not TICKET.search(fine), fine
