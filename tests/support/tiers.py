"""The tiers of a test (``e2e``, ``pg``, ``proc``), read from where it lives and what it uses.

``tests/conftest.py`` marks every collected test with them (and ``slow`` for any), so a new test
lands in its tier by itself: ``pytest -m "not slow"`` is the fast tier (docs/testing.md).
"""

from pathlib import Path
from types import CodeType
from typing import Any

import pytest

E2E_DIR = Path(__file__).parents[1] / "e2e"

PG_FIXTURES = frozenset({"pg_server", "pg_url", "pg_migrated_url"})

SPAWNING_NAMES = frozenset({"subprocess", "create_subprocess_exec", "BotProcess", "open_world"})
"""Names whose use in a test (or in a helper of the tests it calls) mean a process starts."""


def tiers(item: pytest.Item) -> list[str]:
    """The tiers of ``item``: ``e2e`` (under tests/e2e), ``pg`` (a PostgreSQL server: one of
    its fixtures, or a parameter naming the engine "postgresql") and ``proc`` (it starts a
    process: ``python -m bot``, the sandbox, the server's tools)."""
    found = []
    if E2E_DIR in Path(str(item.path)).parents:
        found.append("e2e")
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    engines = {value for value in params.values() if value in ("sqlite", "postgresql")}
    uses_pg = bool(PG_FIXTURES & set(getattr(item, "fixturenames", ())))
    if "postgresql" in engines or (uses_pg and not engines):
        found.append("pg")
    function = getattr(item, "function", None)
    if function is not None and spawns(function.__code__, function.__globals__, set()):
        found.append("proc")
    return found


def spawns(code: CodeType, module: dict[str, Any], seen: set[CodeType]) -> bool:
    """Whether ``code`` names something that starts a process, itself, in a nested function
    or in a helper of the tests that it calls (``run_bot``, ``open_world``...).

    A helper is read with its own module's names, so a helper in ``tests/support`` that calls
    another one of its module is followed wherever the test imported it from.
    """
    if code in seen:
        return False
    seen.add(code)
    if SPAWNING_NAMES & set(code.co_names):
        return True
    for const in code.co_consts:
        if isinstance(const, CodeType) and spawns(const, module, seen):
            return True
    for name in code.co_names:
        helper = module.get(name)
        helper_code = getattr(helper, "__code__", None)
        if (
            isinstance(helper_code, CodeType)
            and str(getattr(helper, "__module__", "")).startswith("tests.")
            and spawns(helper_code, getattr(helper, "__globals__", module), seen)
        ):
            return True
    return False
