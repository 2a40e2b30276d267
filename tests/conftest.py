"""The tests' fixtures: the services of the bot on a manual clock, both engines, PostgreSQL.

The helpers behind them live in ``tests/support`` (the services' ``Stack``, settings, the
PostgreSQL server, the tiers); this file holds fixtures and pytest's hooks only.
"""

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.ops.logs import HANDLER_NAME
from bot.services.generation import KeyProblem, Requester
from bot.storage import Database
from bot.wiring import open_database
from tests.support.migrated import copy_sqlite, migrate_postgresql, migrated_sqlite
from tests.support.ordering import longest_first, no_reordering
from tests.support.pg_server import SKIP_REASON as PG_SKIP_REASON
from tests.support.pg_server import PgServer, find_bin_dir
from tests.support.settings import make_settings
from tests.support.stack import Stack, services_on_emulator
from tests.support.tiers import tiers


@pytest.fixture(params=["sqlite", "postgresql"])
def engine_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The settings that choose each storage engine in turn: every service test runs on both.

    Each starts at the newest migration, copied from the session's template
    (``tests/support/migrated.py``): SQLite a copy of its file; PostgreSQL a fresh schema of
    the session server's shared database (skipped without one), as isolated as a database for
    these tests and quicker to make.
    """
    settings: dict[str, Any] = {"database_path": tmp_path / "bot.db"}
    if request.param == "postgresql":
        settings["database_url"] = request.getfixturevalue("pg_migrated_url")
    else:
        copy_sqlite(request.getfixturevalue("sqlite_template"), settings["database_path"])
    return settings


@pytest.fixture(scope="session")
def sqlite_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at the newest migration, copied by ``engine_settings``."""
    return migrated_sqlite(tmp_path_factory.mktemp("migrated"))


@pytest.fixture
def open_db(engine_settings: dict[str, Any]) -> Callable[[ManualClock], Awaitable[Database]]:
    """Open (and migrate) the database of this test's engine, as ``python -m bot`` would."""

    async def opener(clock: ManualClock) -> Database:
        return await open_database(make_settings(**engine_settings), clock)

    return opener


@pytest.fixture
def clock() -> ManualClock:
    """The tests' time (a module may override it to start elsewhere)."""
    return ManualClock()


@pytest.fixture
async def store(
    open_db: Callable[[ManualClock], Awaitable[Database]], clock: ManualClock
) -> AsyncIterator[Database]:
    """The database of each engine in turn (``engine_settings``), on ``clock``."""
    opened = await open_db(clock)
    yield opened
    await opened.close()


@pytest.fixture
def stack_overrides() -> dict[str, Any]:
    """Settings of the ``stack`` fixture beyond the defaults (parametrize it to change them)."""
    return {}


@pytest.fixture
async def stack(
    engine_settings: dict[str, Any], stack_overrides: dict[str, Any]
) -> AsyncIterator[Stack]:
    clock = ManualClock()
    async with services_on_emulator(clock, **engine_settings, **stack_overrides) as (
        services,
        api,
        key,
    ):
        notices: list[tuple[int, int, KeyProblem]] = []

        async def notify(guild_id: int, channel_id: int, problem: KeyProblem) -> None:
            notices.append((guild_id, channel_id, problem))

        services.generation.set_admin_notifier(notify)
        yield Stack(clock, api, key, services, notices)


@pytest.fixture
def who() -> Requester:
    return Requester(guild_id=1, channel_id=10, user_id=100)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test's tier (``e2e``, ``pg``, ``proc``, and ``slow`` for any of them).

    The marks come from where a test lives and what it uses, never from the test file, so a
    new test is put in its tier by itself: ``pytest -m "not slow"`` is the fast tier
    (docs/testing.md). Without PostgreSQL's binaries, its tests are also marked skipped (-ra
    folds them per file).
    """
    pg_missing = find_bin_dir() is None
    for item in items:
        found = tiers(item)
        for tier in found:
            item.add_marker(tier)
        if found:
            item.add_marker("slow")
        if pg_missing and "pg" in found:
            item.add_marker(pytest.mark.skip(reason=PG_SKIP_REASON))
    longest_first(items)


def pytest_configure(config: pytest.Config) -> None:
    """Hand the modules to xdist's workers in collection order (``longest_first``)."""
    no_reordering(config)


# -- PostgreSQL: one server per session (tests/support/pg_server.py), a fresh database per test


@pytest.fixture(scope="session")
def pg_server() -> Iterator[PgServer]:
    bin_dir = find_bin_dir()
    if bin_dir is None:
        pytest.skip(PG_SKIP_REASON)
    server = PgServer.start(bin_dir)
    yield server
    server.stop()


@pytest.fixture
def pg_url(pg_server: PgServer) -> Iterator[str]:
    """The URL of a new, empty database, dropped after the test."""
    url = pg_server.create_database()
    yield url
    pg_server.drop_database(url)


@pytest.fixture
def pg_migrated_url(pg_server: PgServer) -> Iterator[str]:
    """A URL whose ``search_path`` is a new schema at the newest migration, dropped after the
    test."""
    url = pg_server.create_migrated_schema(migrate_postgresql)
    yield url
    pg_server.drop_schema(url)


@pytest.fixture(autouse=True)
def _remove_the_bots_log_handler() -> Iterator[None]:
    """Undo ``setup_logging`` after a test that ran ``python -m bot``'s ``main()`` in-process.

    Its handler writes to the stderr of the test that installed it, which pytest closes
    afterwards: left in place, every later log line would be a "Logging error". It also sets
    library loggers' levels (``quiet_library_loggers``), which later tests must not inherit.
    """
    manager = logging.Logger.manager
    levels = {
        name: logger.level
        for name, logger in manager.loggerDict.items()
        if isinstance(logger, logging.Logger)
    }
    yield
    for name, logger in manager.loggerDict.items():
        if isinstance(logger, logging.Logger):
            logger.setLevel(levels.get(name, logging.NOTSET))
    root = logging.getLogger()
    for handler in list(root.handlers):
        if handler.get_name() == HANDLER_NAME:
            root.removeHandler(handler)
