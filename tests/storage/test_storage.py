"""Storage: guild settings, ledger, jobs and transactions on both engines; SQLite's own parts.

SQLite alone: migrations from every earlier version, its connections, its query plans.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import replace
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.exc import OperationalError

from bot.clock import ManualClock
from bot.domain import (
    UNSET,
    Charge,
    ConstraintError,
    GuildSettings,
    Job,
    JobStatus,
    Kind,
    NewJob,
    SchemaTooNewError,
    StorageUnavailableError,
)
from bot.storage import Database, engine
from bot.storage.database import Database as SqliteDatabase
from bot.storage.migrations import legacy, revisions
from bot.storage.migrations.legacy import LegacyMigration, split_statements
from bot.storage.repos.credits import BalanceSpend
from bot.storage.repos.jobs import (
    CLAIM_CANDIDATES,
    DUE_DELIVERIES,
    DUE_JOBS,
    JOBS_LISTING,
    NEXT_DELIVERY,
    NEXT_DUE,
    PENDING_VIDEOS,
)
from bot.storage.repos.ledger import Settlement
from bot.storage.sql import compile_for
from bot.wiring import open_database
from tests.support.jobs import new_job
from tests.support.settings import make_settings

GUILD = 100
LATEST = len(revisions())
LEGACY = len(legacy.load("sqlite"))


def load_migrations() -> list[LegacyMigration]:
    return legacy.load("sqlite")


async def query_plan(store: SqliteDatabase, stmt: Any) -> list[str]:
    """SQLite's plan of one of the jobs repository's named statements (with its parameters)."""
    return await store.query_plan(*compile_for("sqlite", stmt))


@pytest.fixture
async def sqlite_store(tmp_path: Path, clock: ManualClock) -> AsyncIterator[SqliteDatabase]:
    """SQLite only: for its connections and its query plans."""
    opened = await SqliteDatabase.open_sqlite(tmp_path / "bot.db", clock=clock)
    yield opened
    await opened.close()


def charge(
    *,
    task_id: str | None = None,
    cost: int = 10,
    kind: Kind = Kind.TEXT,
    model: str = "acme/chat",
    user: int = 1,
    guild: int = GUILD,
    at: float = 1_767_225_600.0,
    remaining: int = 5000,
    key: str = "fp-default",
) -> Charge:
    return Charge(guild, 7, user, kind, model, task_id, cost, remaining, key, at)


async def settle(
    store: SqliteDatabase, reservation_id: int | None, paid: Charge, job: NewJob | None = None
) -> Job | None:
    """Replace a reservation by its charge and store the job, in one transaction (as billing)."""
    async with store.transaction() as tx:
        if reservation_id is not None:
            await tx.ledger.delete_reservation(reservation_id)
        await tx.ledger.insert_charge(paid)
        return None if job is None else await tx.jobs.insert(job)


def build_db_at(path: Path, version: int) -> None:
    """Create a database as the code of schema ``version`` would have left it."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        for migration in load_migrations()[:version]:
            for statement in split_statements(migration.sql):
                conn.execute(statement)
        conn.execute(f"PRAGMA user_version = {version}")
    finally:
        conn.close()


def schema_of(path: Path) -> dict[str, Any]:
    """Tables' columns and indexes' definitions, comparable between two databases."""
    conn = sqlite3.connect(path)
    try:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"
            )
        ]
        return {
            "tables": {t: conn.execute(f"PRAGMA table_xinfo({t})").fetchall() for t in tables},
            "indexes": conn.execute(
                "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' ORDER BY name"
            ).fetchall(),
        }
    finally:
        conn.close()


# -- opening and migrations ----------------------------------------------------------------------


async def test_open_creates_directory_and_sets_pragmas(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "nested" / "dir" / "bot.db"
    store = await SqliteDatabase.open_sqlite(path, clock=clock)
    try:
        assert path.exists()
        assert store.schema_version == LATEST
        for pragma, value in (
            ("journal_mode", "wal"),
            ("foreign_keys", 1),
            ("busy_timeout", engine.BUSY_TIMEOUT_MS),
            ("synchronous", 2),  # FULL
        ):
            assert (
                await store.engines.run_read(
                    lambda c, p=pragma: c.exec_driver_sql(f"PRAGMA {p}").scalar()
                )
                == value
            )
        assert await store.meta.get("migration.0001") == "initial applied 2026-01-01T00:00:00+00:00"
        assert (await store.meta.get("migration.0002") or "").startswith("job_schedule applied")
    finally:
        await store.close()
    with sqlite3.connect(path) as conn:
        # Each revision after the baseline moves the legacy mark past the legacy head, so the
        # release before Alembic refuses a schema it does not know.
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LEGACY + LATEST - 1
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (revisions()[-1],)
        ]


async def test_database_busy_timeout_seconds_is_every_connections_wait_for_a_lock(
    tmp_path: Path, clock: ManualClock
) -> None:
    settings = make_settings(database_path=tmp_path / "bot.db", database_busy_timeout_seconds=0.25)
    store = await open_database(settings, clock)
    pragma = "PRAGMA busy_timeout"
    try:
        assert await store.engines.run_read(lambda c: c.exec_driver_sql(pragma).scalar()) == 250
        assert (
            await store.engines.run_read(lambda c: c.exec_driver_sql(pragma).scalar(), report=True)
            == 250
        )
        assert (
            await store.engines.run_in_transaction(lambda c: c.exec_driver_sql(pragma).scalar())
            == 250
        )
    finally:
        await store.close()
    assert make_settings().database_busy_timeout_seconds == engine.BUSY_TIMEOUT_MS / 1000 == 5.0


async def test_reopening_applies_nothing_twice(tmp_path: Path, clock: ManualClock) -> None:
    path = tmp_path / "bot.db"
    first = await SqliteDatabase.open_sqlite(path, clock=clock)
    await first.meta.set("k", "v")
    await first.close()
    clock.advance(3600)
    again = await SqliteDatabase.open_sqlite(path, clock=clock)
    try:
        assert again.schema_version == LATEST
        assert await again.meta.get("k") == "v"
        # The stamp is from the first open: the migration did not run again.
        assert await again.meta.get("migration.0001") == "initial applied 2026-01-01T00:00:00+00:00"
    finally:
        await again.close()


def test_migrations_are_numbered_without_gaps() -> None:
    found = [(m.version, m.name) for m in load_migrations()]
    assert [version for version, _ in found] == list(range(1, len(found) + 1))
    assert found[:8] == [
        (1, "initial"),
        (2, "job_schedule"),
        (3, "jobs_listing"),
        (4, "retired_keys"),
        (5, "exact_money"),
        (6, "delivery"),
        (7, "cards"),
        (8, "policy"),
    ]


@pytest.mark.parametrize("start", range(LEGACY))
async def test_upgrade_from_every_earlier_version_matches_a_fresh_database(
    tmp_path: Path, clock: ManualClock, start: int
) -> None:
    old = tmp_path / "old.db"
    build_db_at(old, start)
    upgraded = await SqliteDatabase.open_sqlite(old, clock=clock)
    fresh = await SqliteDatabase.open_sqlite(tmp_path / "fresh.db", clock=clock)
    await upgraded.close()
    await fresh.close()
    assert schema_of(old) == schema_of(tmp_path / "fresh.db")
    assert upgraded.schema_version == LATEST


async def test_upgrade_of_a_v1_database_keeps_data_and_does_not_reannounce(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "v1.db"
    build_db_at(path, 1)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO guild_settings (guild_id, monthly_budget_cents, admin_channel_id)"
            " VALUES (?, 5000, 42)",
            (GUILD,),
        )
        conn.execute("INSERT INTO allowed_channels VALUES (?, 7)", (GUILD,))
        conn.execute(
            "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id, cost_cents,"
            " remaining_credits_cents, key_fingerprint, at)"
            " VALUES (?, 7, 1, 'video', 'vid/t2v', 'done', 250, 9750, 'fp', 100.0)",
            (GUILD,),
        )
        for task_id, status, finished in (("done", "completed", 200.0), ("busy", "pending", None)):
            conn.execute(
                "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
                " user_id, prompt_summary, cost_cents, key_fingerprint, status, created_at,"
                " next_poll_at, finished_at, outputs)"
                " VALUES (?, 'alpha', '/p', 'video', 'vid/t2v', ?, 7, 1, 'cat', 250, 'fp', ?,"
                " 100.0, 150.0, ?, ?)",
                (task_id, GUILD, status, finished, '["https://x/v.mp4"]' if finished else "[]"),
            )

    store = await SqliteDatabase.open_sqlite(path, clock=clock)
    try:
        assert store.schema_version == LATEST
        settings = await store.guilds.settings(GUILD)
        assert settings.monthly_budget_cents == 5000
        assert settings.admin_channel_id == 42
        assert settings.allowed_channel_ids == {7}
        assert await store.ledger.total(GUILD) == 250
        done = await store.jobs.by_task("fp", Kind.VIDEO, "done")
        assert done is not None
        assert done.announced_at == 200.0
        assert done.outputs == ("https://x/v.mp4",)
        assert await store.jobs.due_deliveries(1e12, 10) == []
        assert [j.task_id for j in await store.jobs.due(1000.0, 10)] == ["busy"]
    finally:
        await store.close()


async def test_a_database_newer_than_the_code_stops_start_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    path = tmp_path / "bot.db"
    store = await SqliteDatabase.open_sqlite(path, clock=clock)
    await store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE alembic_version SET version_num = '0099_from_the_future'")
    with pytest.raises(SchemaTooNewError) as info:
        await SqliteDatabase.open_sqlite(path, clock=clock)
    assert (info.value.found, info.value.supported) == (99, LATEST)
    assert "schema version 99" in str(info.value)
    assert "newer release" in str(info.value)
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            ("0099_from_the_future",)
        ]


async def test_a_legacy_version_newer_than_the_legacy_head_stops_start_up(
    tmp_path: Path, clock: ManualClock
) -> None:
    """Only a release of the one sequence moves the legacy mark past the legacy head."""
    path = tmp_path / "bot.db"
    build_db_at(path, LEGACY)
    with sqlite3.connect(path) as conn:
        conn.execute(f"PRAGMA user_version = {LEGACY + 1}")
    with pytest.raises(SchemaTooNewError) as info:
        await SqliteDatabase.open_sqlite(path, clock=clock)
    assert (info.value.found, info.value.supported) == (2, LATEST)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LEGACY + 1


async def test_a_failing_migration_leaves_the_previous_version_intact(
    tmp_path: Path, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "bot.db"
    build_db_at(path, LEGACY - 1)
    real = load_migrations()
    broken = LegacyMigration(
        LEGACY,
        "broken",
        "CREATE TABLE half (x INTEGER);\nINSERT INTO no_such_table VALUES (1);",
    )
    monkeypatch.setattr(legacy, "load", lambda engine: [*real[:-1], broken])
    with pytest.raises(OperationalError, match="no_such_table"):
        await SqliteDatabase.open_sqlite(path, clock=clock)
    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] == LEGACY - 1
        assert conn.execute("SELECT name FROM sqlite_master WHERE name = 'half'").fetchall() == []
        assert (
            conn.execute("SELECT name FROM sqlite_master WHERE name = 'alembic_version'").fetchall()
            == []
        )


def test_split_statements_respects_strings_and_trigger_bodies() -> None:
    script = """
        CREATE TABLE t (x TEXT); -- a comment; with a semicolon
        INSERT INTO t VALUES ('a;b');
        CREATE TRIGGER tr AFTER INSERT ON t BEGIN
            INSERT INTO t VALUES ('c'); INSERT INTO t VALUES ('d');
        END;
    """
    statements = split_statements(script)
    assert len(statements) == 3
    assert statements[1].endswith("INSERT INTO t VALUES ('a;b');")
    assert statements[2].startswith("CREATE TRIGGER")
    assert statements[2].endswith("END;")


# -- transactions ------------------------------------------------------------------------------


async def test_a_failing_write_block_leaves_nothing(store: SqliteDatabase) -> None:
    async def crash_midway() -> None:
        async with store.transaction() as tx:
            await tx.meta.set("a", "1")
            await tx.guilds.set_api_key(GUILD, b"cipher", "abcd")
            raise RuntimeError("crash in the middle")

    with pytest.raises(RuntimeError, match="crash"):
        await crash_midway()
    assert await store.meta.get("a") is None
    assert await store.guilds.settings(GUILD) == GuildSettings.default(GUILD)
    await store.meta.set("a", "2")  # the store is still usable
    assert await store.meta.get("a") == "2"


async def test_a_cancelled_write_block_is_rolled_back(store: SqliteDatabase) -> None:
    entered = asyncio.Event()

    async def slow_writer() -> None:
        async with store.transaction() as tx:
            await tx.meta.set("a", "1")
            entered.set()
            await asyncio.Event().wait()  # never returns: cancelled here

    task = asyncio.create_task(slow_writer())
    await entered.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await store.meta.get("a") is None
    await store.meta.set("b", "2")
    assert await store.meta.get("b") == "2"


async def test_readers_see_only_committed_writes(store: SqliteDatabase) -> None:
    async with store.transaction() as tx:
        await tx.meta.set("k", "new")
        assert await tx.meta.get("k") == "new"  # the transaction sees its own write
        assert await store.meta.get("k") is None  # the reader does not, yet
    assert await store.meta.get("k") == "new"


async def test_a_repository_is_reached_by_its_class_in_either_scope(store: Database) -> None:
    # A new concern's service reaches its repository by class, on the database or in one
    # transaction, with no attribute added to the database for it.
    await store.meta.set("k", "one")

    async def crash_midway() -> None:
        async with store.transaction() as tx:
            await tx.meta.set("k", "two")
            assert await tx.meta.get("k") == "two"
            raise RuntimeError("crash in the middle")

    with pytest.raises(RuntimeError, match="crash"):
        await crash_midway()
    assert await store.meta.get("k") == "one"
    async with store.transaction() as tx:
        await tx.meta.set("k", "three")
    assert await store.meta.get("k") == "three"


async def test_the_reader_connection_cannot_write(sqlite_store: SqliteDatabase) -> None:
    with pytest.raises(OperationalError, match="readonly"):
        await sqlite_store.engines.run_read(lambda c: c.exec_driver_sql("DELETE FROM meta"))


# -- guild settings --------------------------------------------------------------------------


async def test_a_guild_without_a_row_gets_defaults(store: SqliteDatabase) -> None:
    assert await store.guilds.settings(5) == GuildSettings(
        guild_id=5,
        api_key_ciphertext=None,
        api_key_last4=None,
        monthly_budget_cents=None,
        user_daily_budget_cents=None,
        max_pending_videos_per_user=None,
        max_pending_videos_per_guild=None,
        allowed_channel_ids=frozenset(),
        admin_channel_id=None,
        notified_problem=None,
    )


async def test_update_limits_leaves_unset_values_and_resets_none(store: SqliteDatabase) -> None:
    await store.guilds.update_limits(
        GUILD, monthly_budget_cents=5000, max_pending_videos_per_user=2
    )
    await store.guilds.update_limits(GUILD, user_daily_budget_cents=300)
    s = await store.guilds.settings(GUILD)
    assert (s.monthly_budget_cents, s.user_daily_budget_cents) == (5000, 300)
    assert (s.max_pending_videos_per_user, s.max_pending_videos_per_guild) == (2, None)
    await store.guilds.update_limits(
        GUILD, monthly_budget_cents=None, user_daily_budget_cents=UNSET
    )
    s = await store.guilds.settings(GUILD)
    assert (s.monthly_budget_cents, s.user_daily_budget_cents) == (None, 300)


async def test_limits_are_checked_by_the_schema(store: SqliteDatabase) -> None:
    with pytest.raises(ConstraintError):
        await store.guilds.update_limits(GUILD, monthly_budget_cents=-1)
    with pytest.raises(ConstraintError):
        await store.guilds.update_limits(GUILD, max_pending_videos_per_guild=0)
    assert await store.guilds.settings(GUILD) == GuildSettings.default(GUILD)


async def test_channels_api_key_and_admin_channel(store: SqliteDatabase) -> None:
    await store.guilds.set_allowed_channels(GUILD, [1, 2, 2, 3])
    await store.guilds.set_allowed_channels(GUILD, [3, 4])
    await store.guilds.set_admin_channel(GUILD, 9)
    await store.guilds.set_api_key(GUILD, b"\x00cipher", "wxyz")
    s = await store.guilds.settings(GUILD)
    assert s.allowed_channel_ids == {3, 4}
    assert s.admin_channel_id == 9
    assert (s.api_key_ciphertext, s.api_key_last4) == (b"\x00cipher", "wxyz")
    await store.guilds.clear_api_key(GUILD)
    await store.guilds.set_admin_channel(GUILD, None)
    await store.guilds.set_allowed_channels(GUILD, [])
    s = await store.guilds.settings(GUILD)
    assert (s.api_key_ciphertext, s.api_key_last4, s.admin_channel_id) == (None, None, None)
    assert s.allowed_channel_ids == frozenset()


async def test_a_key_retired_twice_is_kept_once_with_its_latest_copy(store: Database) -> None:
    await store.guilds.set_api_key(GUILD, b"key A", "aaaa")
    await store.jobs.insert(new_job("on-a", key="fp-a"))  # keeps key A while pending
    await store.guilds.replace_api_key(
        GUILD, (b"key B", "bbbb"), retire=True, old_fingerprint="fp-a", at=10.0
    )
    # A comes back (B had no job: not kept), then is replaced again, re-encrypted meanwhile.
    await store.guilds.replace_api_key(
        GUILD, (b"key A again", "aaaa"), retire=True, old_fingerprint="fp-b", at=20.0
    )
    await store.guilds.replace_api_key(
        GUILD, (b"key C", "cccc"), retire=True, old_fingerprint="fp-a", at=30.0
    )
    (kept,) = await store.guilds.retired_keys(GUILD)
    assert (kept.fingerprint, kept.ciphertext, kept.retired_at) == ("fp-a", b"key A again", 30.0)

    # C is removed while it cannot be decrypted (fingerprint unknown), then turns out to be A:
    # the copy is dropped, the row already holding A stays.
    await store.guilds.replace_api_key(GUILD, None, retire=True, old_fingerprint=None, at=40.0)
    unknown, _ = await store.guilds.retired_keys(GUILD)
    assert unknown.fingerprint is None
    await store.guilds.set_retired_fingerprint(unknown.id, "fp-a")
    assert [k.id for k in await store.guilds.retired_keys(GUILD)] == [kept.id]
    assert (await store.guilds.settings(GUILD)).api_key_ciphertext is None


async def test_notified_problem_reports_a_change_once(store: SqliteDatabase) -> None:
    assert await store.guilds.set_notified_problem(GUILD, None) is False
    assert await store.guilds.set_notified_problem(GUILD, "unauthorized") is True
    assert await store.guilds.set_notified_problem(GUILD, "unauthorized") is False
    assert await store.guilds.set_notified_problem(GUILD, "out of credits") is True
    assert await store.guilds.set_notified_problem(GUILD, None) is True
    assert await store.guilds.set_notified_problem(GUILD, None) is False


async def test_meta_round_trip(store: SqliteDatabase) -> None:
    assert await store.meta.get("tree_hash") is None
    await store.meta.set("tree_hash", "abc")
    await store.meta.set("tree_hash", "def")
    assert await store.meta.get("tree_hash") == "def"


# -- ledger ------------------------------------------------------------------------------------


async def test_a_task_is_charged_once_per_kind(store: SqliteDatabase) -> None:
    await store.ledger.insert_charge(charge(task_id="t1", cost=100, kind=Kind.VIDEO))
    await store.ledger.insert_charge(charge(task_id="t1", cost=100, kind=Kind.VIDEO))
    await store.ledger.insert_charge(charge(task_id="t1", cost=30, kind=Kind.IMAGE))
    await store.ledger.insert_charge(charge(task_id=None, cost=5))
    await store.ledger.insert_charge(charge(task_id=None, cost=5))
    assert await store.ledger.total(GUILD) == 100 + 30 + 5 + 5


async def test_a_task_is_identified_by_its_key_kind_id_and_time(store: SqliteDatabase) -> None:
    """A task id is unique only within its key: the same id under another key, or under the
    same key at another time (the service gave it again), is another charge and another job,
    and either is a clash with the task stored before."""
    first = charge(task_id="t1", cost=100, kind=Kind.VIDEO, at=100.0)
    assert not await store.ledger.task_given_before("fp-default", Kind.VIDEO, "t1", 100.0)
    assert await store.ledger.insert_charge(first)
    assert not await store.ledger.insert_charge(first)  # the very same charge again
    assert not await store.ledger.task_given_before("fp-default", Kind.VIDEO, "t1", 100.0)
    # Another key's task of the same id: its own charge, and a clash with the first.
    theirs = charge(task_id="t1", cost=40, kind=Kind.VIDEO, at=100.0, key="fp-b", guild=GUILD + 1)
    assert await store.ledger.task_given_before("fp-b", Kind.VIDEO, "t1", 100.0)
    assert await store.ledger.insert_charge(theirs)
    # The same key given the id again later: charged too, and known as given before.
    assert await store.ledger.task_given_before("fp-default", Kind.VIDEO, "t1", 200.0)
    assert await store.ledger.insert_charge(replace(first, at=200.0, guild_id=GUILD + 2))
    assert await store.ledger.total(GUILD) == 100
    assert await store.ledger.total(GUILD + 1) == 40
    assert await store.ledger.total(GUILD + 2) == 100

    mine = await store.jobs.insert(new_job("t1", created_at=100.0))
    assert await store.jobs.insert(new_job("t1", created_at=100.0)) == mine  # idempotent
    other = await store.jobs.insert(new_job("t1", created_at=100.0, key="fp-b", guild=GUILD + 1))
    later = await store.jobs.insert(new_job("t1", created_at=200.0, guild=GUILD + 2))
    assert len({mine.id, other.id, later.id}) == 3
    assert (other.guild_id, later.guild_id) == (GUILD + 1, GUILD + 2)
    found = await store.jobs.by_task("fp-default", Kind.VIDEO, "t1")
    assert found is not None and found.id == later.id  # the newest of that key's
    assert await store.jobs.by_task("fp-default", Kind.IMAGE, "t1") is None


async def test_ledger_totals_equal_the_reported_charges(store: SqliteDatabase) -> None:
    reported: dict[tuple[Kind, str | None, int], int] = {}
    for i in range(200):
        kind = list(Kind)[i % 3]
        task_id = None if kind is Kind.TEXT else f"task-{i % 50}"
        c = charge(task_id=task_id, cost=(i * 37) % 251, kind=kind, guild=GUILD + i % 2)
        await store.ledger.insert_charge(c)
        # What the service charged: once per task, every text call.
        key = (kind, task_id, i if task_id is None else -1)
        if c.guild_id == GUILD:
            reported.setdefault(key, c.cost_cents)
    assert await store.ledger.total(GUILD) == sum(reported.values())


async def test_usage_groups_by_user_kind_and_model_since_a_time(store: SqliteDatabase) -> None:
    await store.ledger.insert_charge(charge(cost=10, user=1, at=100.0))
    await store.ledger.insert_charge(charge(cost=20, user=1, at=200.0))
    await store.ledger.insert_charge(charge(cost=5, user=2, at=200.0))
    await store.ledger.insert_charge(
        charge(task_id="v", cost=300, user=2, kind=Kind.VIDEO, model="vid/t2v", at=250.0)
    )
    await store.ledger.insert_charge(charge(cost=999, guild=GUILD + 1, at=200.0))
    rows = await store.ledger.usage(GUILD, since=150.0)
    assert [(r.user_id, r.kind, r.model, r.count, r.cents) for r in rows] == [
        (2, Kind.VIDEO, "vid/t2v", 1, 300),
        (1, Kind.TEXT, "acme/chat", 1, 20),
        (2, Kind.TEXT, "acme/chat", 1, 5),
    ]
    mine = await store.ledger.usage(GUILD, since=0.0, user_id=1)
    assert [(r.count, r.cents) for r in mine] == [(2, 30)]
    assert await store.ledger.spent_since(GUILD, 150.0) == 325
    assert await store.ledger.spent_since(GUILD, 150.0, user_id=2) == 305


async def test_last_remaining_credits_and_recent_costs(store: SqliteDatabase) -> None:
    assert await store.ledger.last_remaining_credits("fp-a") is None
    await store.ledger.insert_charge(charge(cost=1, remaining=900, key="fp-a", at=10.0))
    await store.ledger.insert_charge(charge(cost=2, remaining=800, key="fp-a", at=20.0))
    await store.ledger.insert_charge(charge(cost=3, remaining=50, key="fp-b", at=30.0))
    assert await store.ledger.last_remaining_credits("fp-a") == 800
    assert await store.ledger.last_remaining_credits("fp-b") == 50
    assert await store.ledger.recent_costs("acme/chat", limit=2) == [3, 2]


async def test_settle_is_all_or_nothing(store: SqliteDatabase, clock: ManualClock) -> None:
    async with store.transaction() as tx:
        reservation = await tx.ledger.add_reservation(
            guild_id=GUILD,
            user_id=1,
            kind=Kind.VIDEO,
            model="vid/t2v",
            amount_cents=50,
            created_at=clock.time(),
            expires_at=clock.time() + 900,
        )
    bad_job = new_job("t1", cost=-1)  # violates the jobs CHECK: the insert fails last
    with pytest.raises(ConstraintError):
        await settle(store, reservation.id, charge(task_id="t1"), bad_job)
    assert await store.ledger.total(GUILD) == 0
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 50
    assert await store.jobs.by_task("fp-default", Kind.VIDEO, "t1") is None

    job = await settle(
        store, reservation.id, charge(task_id="t1", cost=50, kind=Kind.VIDEO), new_job("t1")
    )
    assert job is not None
    assert job.status is JobStatus.PENDING
    assert await store.ledger.total(GUILD) == 50
    assert await store.ledger.reserved_cents(GUILD, clock.time()) == 0
    # Settling the same task again (a retry after a crash) neither charges nor duplicates.
    again = await settle(store, None, charge(task_id="t1", cost=50, kind=Kind.VIDEO), new_job("t1"))
    assert again == job
    assert await store.ledger.total(GUILD) == 50


async def test_expire_and_release_reservations(store: SqliteDatabase) -> None:
    async with store.transaction() as tx:
        for expires in (100.0, 200.0, 300.0):
            last = await tx.ledger.add_reservation(
                guild_id=GUILD,
                user_id=1,
                kind=Kind.TEXT,
                model="m",
                amount_cents=10,
                created_at=0.0,
                expires_at=expires,
            )
    assert await store.ledger.reserved_cents(GUILD, 150.0) == 20
    assert await store.ledger.expire_reservations(200.0) == 2
    assert await store.ledger.delete_reservation(last.id) is True
    assert await store.ledger.delete_reservation(last.id) is False
    assert await store.ledger.reserved_cents(GUILD, 0.0) == 0


async def test_a_negative_reservation_is_refused_and_holds_nothing(store: Database) -> None:
    # The schema's CHECK answers as ConstraintError on both engines (LedgerStore), also
    # when the new row's id comes back by RETURNING; a budget check then sees no hold.
    with pytest.raises(ConstraintError):
        await store.ledger.add_reservation(
            guild_id=GUILD,
            user_id=1,
            kind=Kind.VIDEO,
            model="vid/t2v",
            amount_cents=Decimal("-0.5"),
            created_at=0.0,
            expires_at=900.0,
        )
    assert await store.ledger.active_reservations(GUILD, 0.0, kind=Kind.VIDEO) == 0
    assert await store.ledger.reserved_cents(GUILD, 0.0) == 0


# -- jobs --------------------------------------------------------------------------------------


async def test_job_life_cycle(store: SqliteDatabase) -> None:
    job = await store.jobs.insert(new_job("t1", next_poll_at=50.0, created_at=10.0))
    assert job.status is JobStatus.PENDING
    assert job.details == {"duration": 5, "aspect_ratio": "16:9"}
    assert (job.outputs, job.poll_count, job.finished_at, job.announced_at) == ((), 0, None, None)
    assert await store.jobs.next_due_at() == 50.0
    assert await store.jobs.due(49.0, 10) == []

    await store.jobs.set_message(job.id, 555)
    await store.jobs.set_progress_at(job.id, 60.0)
    await store.jobs.schedule_poll(job.id, next_poll_at=80.0, poll_count=1)
    job = await store.jobs.get(job.id)  # type: ignore[assignment]
    assert (job.message_id, job.last_progress_at, job.next_poll_at, job.poll_count) == (
        555,
        60.0,
        80.0,
        1,
    )
    assert await store.jobs.pending_count() == 1

    assert await store.jobs.finish(job.id, JobStatus.COMPLETED, ["https://x/1.mp4"], None, 130.0)
    assert not await store.jobs.finish(job.id, JobStatus.FAILED, [], "late", 140.0)
    done = await store.jobs.get(job.id)
    assert done is not None
    assert (done.status, done.outputs, done.error, done.finished_at) == (
        JobStatus.COMPLETED,
        ("https://x/1.mp4",),
        None,
        130.0,
    )
    assert await store.jobs.next_due_at() is None
    assert await store.jobs.pending_count() == 0
    assert await store.jobs.due_deliveries(129.0, 10) == []
    assert [j.id for j in await store.jobs.due_deliveries(130.0, 10)] == [job.id]
    assert await store.jobs.next_delivery_at() == 130.0
    assert await store.jobs.mark_announced(job.id, 131.0) is True
    assert await store.jobs.mark_announced(job.id, 132.0) is False
    assert await store.jobs.due_deliveries(1e12, 10) == []
    assert await store.jobs.next_delivery_at() is None
    assert await store.jobs.completion_seconds("vid/t2v") == [120.0]


async def test_finish_job_refuses_pending(store: SqliteDatabase) -> None:
    job = await store.jobs.insert(new_job("t1"))
    with pytest.raises(ValueError, match="pending"):
        await store.jobs.finish(job.id, JobStatus.PENDING, [], None, 1.0)


async def test_completion_seconds_takes_the_latest_completed_of_the_model(
    store: SqliteDatabase,
) -> None:
    for i in range(25):
        job = await store.jobs.insert(new_job(f"t{i}", created_at=float(i * 100)))
        await store.jobs.finish(job.id, JobStatus.COMPLETED, [], None, float(i * 100 + i))
    failed = await store.jobs.insert(new_job("f", created_at=0.0))
    await store.jobs.finish(failed.id, JobStatus.FAILED, [], "boom", 99_999.0)
    other = await store.jobs.insert(new_job("o", created_at=0.0, model="vid/other"))
    await store.jobs.finish(other.id, JobStatus.COMPLETED, [], None, 99_999.0)
    assert await store.jobs.completion_seconds("vid/t2v", limit=3) == [24.0, 23.0, 22.0]
    assert len(await store.jobs.completion_seconds("vid/t2v")) == 20


async def test_leased_jobs_and_busy_keys_are_left_out_of_the_due_set(store: SqliteDatabase) -> None:
    now = 1_000_000.0
    busy = [
        await store.jobs.insert(new_job(f"b{i}", next_poll_at=now - 100 + i, key="busy"))
        for i in range(3)
    ]
    calm = await store.jobs.insert(new_job("c", next_poll_at=now - 1, key="calm"))
    assert [j.id for j in await store.jobs.due(now, limit=2)] == [busy[0].id, busy[1].id]
    # A key with no room to poll cannot fill the batch and starve the others.
    assert [j.id for j in await store.jobs.due(now, limit=2, skip_keys=["busy"])] == [calm.id]

    # One claim per key: the earliest busy job and the calm one are leased until now + 30.
    claimed = await store.jobs.claim_due(now, now + 30, limit=10, per_key=1)
    assert sorted(j.id for j in claimed) == sorted([busy[0].id, calm.id])
    assert [j.id for j in await store.jobs.due(now, limit=10)] == [busy[1].id, busy[2].id]
    assert busy[0].id in [j.id for j in await store.jobs.due(now + 30, limit=10)]  # lease over
    await store.jobs.schedule_poll(calm.id, now + 5, 1)  # the poll's own reschedule ends the lease
    assert (await store.jobs.get(calm.id)).next_poll_at == now + 5  # type: ignore[union-attr]


async def test_due_jobs_among_thousands_use_the_partial_index(
    sqlite_store: SqliteDatabase,
) -> None:
    store = sqlite_store
    now = 1_000_000.0
    due: list[str] = []
    async with store.transaction() as tx:
        for i in range(5000):
            job = await tx.jobs.insert(new_job(f"t{i}", next_poll_at=now - 5000 + i * 2))
            if i % 50 != 0:
                await tx.jobs.finish(job.id, JobStatus.COMPLETED, [], None, now)
                await tx.jobs.mark_announced(job.id, now)
            elif now - 5000 + i * 2 <= now:
                due.append(job.task_id)
    assert len(due) == 51  # pending: every 50th; due: i <= 2500 (next_poll_at <= now)

    got = await store.jobs.due(now, limit=1000)
    assert [j.task_id for j in got] == due
    assert [j.task_id for j in await store.jobs.due(now, limit=3)] == due[:3]
    assert await store.jobs.next_due_at() == now - 5000
    assert await store.jobs.pending_count() == 100

    plan = " | ".join(await query_plan(store, DUE_JOBS.params(p_now=now, p_limit=10)))
    assert "USING INDEX jobs_due" in plan
    assert "SCAN jobs" not in plan
    assert "TEMP B-TREE" not in plan
    # The claim reads its candidates from the index alone, never from the table.
    claim = await query_plan(store, CLAIM_CANDIDATES.params(p_now=now, p_limit=10))
    assert claim == ["SEARCH jobs USING COVERING INDEX jobs_claim (next_poll_at<?)"]
    # A SCAN of a partial index reads only its rows (pending / unannounced jobs): fine.
    assert await query_plan(store, NEXT_DUE) in (
        ["SEARCH jobs USING COVERING INDEX jobs_due"],
        ["SEARCH jobs USING INDEX jobs_due"],
        ["SEARCH jobs USING COVERING INDEX jobs_claim"],  # the watched pending jobs only (0010)
    )
    for stmt in (DUE_DELIVERIES.params(p_now=now, p_limit=10), NEXT_DELIVERY):
        plan = " | ".join(await query_plan(store, stmt))
        assert "USING INDEX jobs_delivery_due" in plan or "USING COVERING INDEX" in plan
        assert "SCAN jobs" not in plan


async def test_recent_jobs_newest_first_per_member_or_server(store: SqliteDatabase) -> None:
    now = 1_767_225_600.0
    async with store.transaction() as tx:
        for i in range(30):
            job = await tx.jobs.insert(
                new_job(f"t{i}", created_at=now + i, user=1 if i % 3 else 2, guild=GUILD)
            )
            if i % 2:
                await tx.jobs.finish(job.id, JobStatus.COMPLETED, ["https://x/v.mp4"], None, now)
        await tx.jobs.insert(new_job("elsewhere", created_at=now + 99, user=1, guild=GUILD + 1))

    mine = await store.jobs.recent(GUILD, user_id=1, limit=100)
    assert [j.task_id for j in mine] == [f"t{i}" for i in reversed(range(30)) if i % 3]
    everyone = await store.jobs.recent(GUILD, user_id=None, limit=25)
    assert [j.task_id for j in everyone] == [f"t{i}" for i in reversed(range(5, 30))]
    assert {j.status for j in everyone} == {JobStatus.PENDING, JobStatus.COMPLETED}

    # Both listings walk an index in order: no scan of every job, no sort (SQLite's plans).
    for user_id in (1, None) if store.engine == "sqlite" else ():
        if user_id is None:
            stmt = JOBS_LISTING[False].params(p_guild=GUILD, p_limit=25)
        else:
            stmt = JOBS_LISTING[True].params(p_guild=GUILD, p_user=user_id, p_limit=25)
        plan = " | ".join(await query_plan(store, stmt))
        assert "USING INDEX jobs_listing" in plan or "USING INDEX jobs_guild_listing" in plan
        assert "TEMP B-TREE" not in plan
        assert "SCAN jobs" not in plan


async def test_pending_videos_leave_out_unwatched_and_finished_jobs(store: SqliteDatabase) -> None:
    watched = await store.jobs.insert(new_job("w", user=1))
    unwatched = await store.jobs.insert(new_job("u", user=1))
    done = await store.jobs.insert(new_job("d", user=2))
    await store.jobs.insert(new_job("i", user=1, kind=Kind.IMAGE))
    await store.jobs.insert(new_job("x", user=1, guild=GUILD + 1))
    assert await store.jobs.pending_videos(GUILD) == 3
    assert await store.jobs.set_unwatched(unwatched.id, 500.0) is True
    await store.jobs.finish(done.id, JobStatus.FAILED, [], "boom", 600.0)
    assert await store.jobs.pending_videos(GUILD) == 1
    assert await store.jobs.pending_videos(GUILD, user_id=1) == 1
    assert await store.jobs.pending_videos(GUILD, user_id=2) == 0
    # Watched again (a late poll found it moving): it counts again.
    assert await store.jobs.set_unwatched(unwatched.id, None) is True
    assert await store.jobs.pending_videos(GUILD, user_id=1) == 2
    assert watched.id != unwatched.id
    for user_id in (1, None) if store.engine == "sqlite" else ():
        params = {"p_guild": GUILD} if user_id is None else {"p_guild": GUILD, "p_user": user_id}
        plan = " | ".join(
            await query_plan(store, PENDING_VIDEOS[user_id is not None].params(**params))
        )
        assert "SCAN jobs" not in plan


async def test_a_write_method_outside_a_transaction_is_all_or_nothing(
    store: SqliteDatabase,
) -> None:
    await store.guilds.set_api_key(GUILD, b"one", "0001")
    await store.guilds.set_api_key(GUILD + 1, b"two", "0002")

    def fails_on_the_second(ciphertext: bytes) -> bytes:
        if ciphertext == b"two":
            raise RuntimeError("cannot re-encrypt")
        return ciphertext.upper()

    with pytest.raises(RuntimeError):
        await store.guilds.reencrypt_keys(fails_on_the_second)
    assert (await store.guilds.settings(GUILD)).api_key_ciphertext == b"one"  # undone
    assert await store.guilds.reencrypt_keys(bytes.upper) == 2
    assert (await store.guilds.settings(GUILD + 1)).api_key_ciphertext == b"TWO"


async def test_ping_answers_while_open_and_raises_once_closed(
    tmp_path: Path, clock: ManualClock
) -> None:
    db = await SqliteDatabase.open_sqlite(tmp_path / "bot.db", clock=clock)
    assert db.engine == "sqlite"
    await db.ping()
    await db.close()
    with pytest.raises(StorageUnavailableError):
        await db.ping()


async def test_upgrade_to_key_holds_keeps_reservations_and_the_keys_they_may_use(
    tmp_path: Path, clock: ManualClock
) -> None:
    """0011: a reservation made before it knows no key, so it holds its guild's."""
    path = tmp_path / "v10.db"
    build_db_at(path, 10)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO guild_settings (guild_id, api_key_ciphertext, api_key_last4)"
            " VALUES (?, X'6f6c64', '1234')",
            (GUILD,),
        )
        conn.execute(
            "INSERT INTO reservations (guild_id, user_id, kind, model, amount_micro, created_at,"
            " expires_at) VALUES (?, 1, 'video', 'vid/t2v', 50000000, 100.0, 700.0)",
            (GUILD,),
        )
        conn.execute(
            "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
            " user_id, prompt_summary, cost_micro, key_fingerprint, status, created_at,"
            " next_poll_at) VALUES ('busy', 'alpha', '/p', 'video', 'vid/t2v', ?, 7, 1, 'cat',"
            " 50000000, 'old', 'pending', 100.0, 150.0)",
            (GUILD,),
        )

    store = await SqliteDatabase.open_sqlite(path, clock=clock)
    try:
        assert store.schema_version == LATEST
        assert await store.ledger.reserved_cents(GUILD, 200.0) == 50
        with sqlite3.connect(path) as conn:
            assert conn.execute("SELECT key_fingerprint FROM reservations").fetchall() == [(None,)]
        await store.guilds.replace_api_key(
            GUILD, (b"new", "5678"), retire=True, old_fingerprint="old", at=300.0
        )
        (kept,) = await store.guilds.retired_keys(GUILD)
        assert (kept.fingerprint, kept.ciphertext) == ("old", b"old")
        busy = await store.jobs.by_task("old", Kind.VIDEO, "busy")
        assert busy is not None
        # Its job ends while the old reservation (key unknown) lives: still kept.
        assert await store.jobs.finish(busy.id, JobStatus.COMPLETED, ["u"], None, 400.0)
        assert len(await store.guilds.retired_keys(GUILD)) == 1
        assert await store.ledger.expire_reservations(800.0) == 1
        assert await store.guilds.delete_released_keys() == 1
        assert await store.guilds.retired_keys(GUILD) == []
        # The table of default keys is there.
        assert await store.guilds.keep_default_key("fp", b"ct", 900.0) == []
        assert await store.guilds.default_key("fp") == b"ct"
    finally:
        await store.close()


async def test_a_settlement_is_written_as_one_unit_once(store: SqliteDatabase) -> None:
    at = 1_767_225_600.0

    async def reserve() -> int:
        held = await store.ledger.add_reservation(
            guild_id=GUILD,
            user_id=1,
            kind=Kind.VIDEO,
            model="vid/t2v",
            amount_cents=Decimal(50),
            created_at=at,
            expires_at=at + 600,
        )
        return held.id

    paid = charge(task_id="t-1", cost=40, kind=Kind.VIDEO, model="vid/t2v")
    unit = Settlement(
        GUILD, await reserve(), paid, new_job("t-1"), None, None, BalanceSpend(None, at)
    )

    settled = await store.ledger.settle(unit)

    assert settled.job is not None and settled.job.task_id == "t-1"
    assert not (settled.earlier or settled.duplicate or settled.reused)
    assert await store.ledger.reserved_cents(GUILD, at) == 0
    assert await store.ledger.total(GUILD) == Decimal(40)

    again = await store.ledger.settle(replace(unit, again=True))  # its commit was lost
    assert again.earlier and again.job is not None and again.job.id == settled.job.id
    assert await store.ledger.total(GUILD) == Decimal(40)  # charged once

    broken = replace(
        unit, reservation_id=await reserve(), charge=charge(task_id="t-2", cost=-1), job=None
    )
    with pytest.raises((ConstraintError, ValueError)):
        await store.ledger.settle(broken)
    assert await store.ledger.reserved_cents(GUILD, at) == Decimal(50)  # nothing kept
    assert await store.ledger.total(GUILD) == Decimal(40)
