"""Shared fixtures: the services of the bot on a manual clock, against the sandbox emulator.

Everything is real but Discord: the emulator over loopback HTTP, a SQLite file in tmp_path. The
emulator and the bot read the same manual clock, so task durations, rate windows and budgets'
days pass without sleeping.
"""

import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

import httpx2 as httpx
import pytest
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.config import Settings
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.ops.logs import HANDLER_NAME
from bot.sandbox import GenApiEmulator
from bot.services.billing import Billing
from bot.services.generation import GenerationService, KeyProblem, Requester
from bot.services.keys import KeyResolver
from bot.services.schedule import PollSchedule
from bot.storage import Database
from bot.wiring import Services, assemble_services, open_database
from tests.support.pg_server import SKIP_REASON as PG_SKIP_REASON
from tests.support.pg_server import PgServer, find_bin_dir

GENERATION_TIMEOUT = httpx.Timeout(5.0, read=1.0)
"""The emulator answers in milliseconds; a short read timeout lets tests provoke one."""


def make_settings(**overrides: Any) -> Settings:
    values: dict[str, Any] = {"discord_token": SecretStr("test-token")}
    values.update(overrides)
    return Settings(_env_file=None, **values)


@dataclass
class Stack:
    """The bot's services, built by ``bot.wiring`` as ``python -m bot`` builds them."""

    clock: ManualClock
    api: GenApiEmulator
    key: str
    services: Services
    notices: list[tuple[int, int, KeyProblem]] = field(default_factory=list)

    @property
    def db(self) -> Database:
        return self.services.db

    @property
    def client(self) -> GenAPIClient:
        return self.services.client

    @property
    def billing(self) -> Billing:
        return self.services.billing

    @property
    def keys(self) -> KeyResolver:
        return self.services.keys

    @property
    def schedule(self) -> PollSchedule:
        return self.services.schedule

    @property
    def catalogue(self) -> CatalogueCache:
        return self.services.catalogue

    @property
    def generation(self) -> GenerationService:
        return self.services.generation

    def posts(self) -> int:
        return sum(1 for r in self.api.requests if r.method == "POST")


@pytest.fixture(params=["sqlite", "postgresql"])
def engine_settings(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, Any]:
    """The settings that choose each storage engine in turn: every service test runs on both.

    PostgreSQL gets a fresh schema of the session server's shared database (skipped without
    one): as isolated as a database for these tests, and about four times quicker to make.
    """
    settings: dict[str, Any] = {"database_path": tmp_path / "bot.db"}
    if request.param == "postgresql":
        settings["database_url"] = request.getfixturevalue("pg_schema_url")
    return settings


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


@contextlib.asynccontextmanager
async def services_on_emulator(
    clock: ManualClock, **settings: Any
) -> AsyncIterator[tuple[Services, GenApiEmulator, str]]:
    """Services as ``python -m bot`` builds them (``assemble_services``), on the API emulator.

    Yields the services, the emulator and the default key (100,000 cents of credit); the
    database is closed on the way out. ``settings`` are passed to :func:`make_settings`.
    """
    async with GenApiEmulator(clock=clock.monotonic) as api, httpx.AsyncClient() as http:
        key = api.create_key(balance_cents=100_000)
        made = make_settings(genapi_api_key=key, genapi_base_url=api.base_url, **settings)
        db = await open_database(made, clock)
        client = GenAPIClient(
            api.base_url,
            http=http,
            limiter=RateLimiter(clock),
            clock=clock,
            generation_timeout=GENERATION_TIMEOUT,
        )
        try:
            yield assemble_services(made, clock, db, client, SecretStr(key)), api, key
        finally:
            await db.close()


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


# -- PostgreSQL: one server per session (tests/support/pg_server.py), a fresh database per test


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test's tier (``e2e``, ``pg``, ``proc``, and ``slow`` for any of them).

    The marks come from where a test lives and what it uses, never from the test file, so a
    new test is put in its tier by itself: ``pytest -m "not slow"`` is the fast tier
    (docs/testing.md). Without PostgreSQL's binaries, its tests are also marked skipped (-ra
    folds them per file).
    """
    pg_missing = find_bin_dir() is None
    for item in items:
        tiers = _tiers(item)
        for tier in tiers:
            item.add_marker(tier)
        if tiers:
            item.add_marker("slow")
        if pg_missing and "pg" in tiers:
            item.add_marker(pytest.mark.skip(reason=PG_SKIP_REASON))


E2E_DIR = Path(__file__).parent / "e2e"

PG_FIXTURES = frozenset({"pg_server", "pg_url", "pg_schema_url"})

SPAWNING_NAMES = frozenset({"subprocess", "create_subprocess_exec", "BotProcess", "open_world"})
"""Names whose use in a test (or in a helper of the tests it calls) mean a process starts."""


def _tiers(item: pytest.Item) -> list[str]:
    """The tiers of ``item``: ``e2e`` (under tests/e2e), ``pg`` (a PostgreSQL server: one of
    its fixtures, or a parameter naming the engine "postgresql") and ``proc`` (it starts a
    process: ``python -m bot``, the sandbox, the server's tools)."""
    tiers = []
    if E2E_DIR in Path(str(item.path)).parents:
        tiers.append("e2e")
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec is not None else {}
    engines = {value for value in params.values() if value in ("sqlite", "postgresql")}
    uses_pg = bool(PG_FIXTURES & set(getattr(item, "fixturenames", ())))
    if "postgresql" in engines or (uses_pg and not engines):
        tiers.append("pg")
    function = getattr(item, "function", None)
    if function is not None and _spawns(function.__code__, function.__globals__, set()):
        tiers.append("proc")
    return tiers


def _spawns(code: CodeType, module: dict[str, Any], seen: set[CodeType]) -> bool:
    """Whether ``code`` names something that starts a process, itself, in a nested function
    or in a helper of the tests that it calls (``run_bot``, ``open_world``...)."""
    if code in seen:
        return False
    seen.add(code)
    if SPAWNING_NAMES & set(code.co_names):
        return True
    for const in code.co_consts:
        if isinstance(const, CodeType) and _spawns(const, module, seen):
            return True
    for name in code.co_names:
        helper = module.get(name)
        helper_code = getattr(helper, "__code__", None)
        if (
            isinstance(helper_code, CodeType)
            and str(getattr(helper, "__module__", "")).startswith("tests.")
            and _spawns(helper_code, module, seen)
        ):
            return True
    return False


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
def pg_schema_url(pg_server: PgServer) -> Iterator[str]:
    """A URL whose ``search_path`` is a new, empty schema, dropped after the test."""
    url = pg_server.create_schema()
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
