"""One migration sequence: databases made by the releases before Alembic upgrade in
place, with their money, jobs and settings intact; a fresh database of either engine has the
tables of ``bot.storage.schema``.

The old databases are built as those releases built them (tests/support/legacy_db.py), at the newest
legacy version of each engine and at an older one, and filled with rows through SQL of that
schema version; the new code then opens them as ``python -m bot`` would.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import Connection, inspect

from bot.clock import ManualClock
from bot.domain import Charge, JobStatus, Kind, NewJob, Persona, SchemaTooNewError
from bot.storage import migrations
from bot.storage.database import Database
from bot.storage.migrations import revisions
from bot.storage.schema import metadata
from tests.support.legacy_db import (
    GUILD,
    MEMBER_ROW,
    POSTGRES_HEAD,
    ROWS,
    SQLITE_HEAD,
    build_postgres_at,
    build_sqlite_at,
)

HEAD = len(revisions())


async def assert_intact(db: Database, *, members: bool) -> None:
    """The rows of :data:`ROWS` read back through the repositories, exactly."""
    assert db.schema_version == HEAD
    settings = await db.guilds.settings(GUILD)
    assert (settings.monthly_budget_cents, settings.admin_channel_id) == (5000, 42)
    assert settings.allowed_channel_ids == {7}
    assert await db.ledger.total(GUILD) == Decimal("12.850001")
    assert await db.ledger.reserved_cents(GUILD, 200.0) == 50
    done = await db.jobs.by_task("fp", Kind.VIDEO, "done")
    assert done is not None
    assert (done.status, done.outputs, done.announced_at) == (
        JobStatus.COMPLETED,
        ("https://x/v.mp4",),
        200.0,
    )
    assert done.cost_cents == Decimal("12.500001")
    assert [j.task_id for j in await db.jobs.due(1000.0, 10)] == ["busy"]
    assert await db.meta.get("operator.note") == "kept"
    if members:
        member = await db.members.get(1)
        assert (member.video_model, member.prompt_suffix, member.private) == (
            "vid/t2v",
            "in watercolour",
            True,
        )


@pytest.mark.parametrize("version", [5, SQLITE_HEAD])
async def test_a_sqlite_database_of_a_legacy_release_upgrades_with_its_data(
    tmp_path: Path, version: int
) -> None:
    path = tmp_path / "bot.db"
    build_sqlite_at(path, version)
    with sqlite3.connect(path) as conn:
        for row in ROWS:
            conn.execute(row)
        if version >= 13:
            conn.execute(MEMBER_ROW)

    db = await Database.open_sqlite(path, clock=ManualClock())
    try:
        await assert_intact(db, members=version >= 13)
    finally:
        await db.close()
    with sqlite3.connect(path) as conn:
        assert conn.execute("SELECT version_num FROM alembic_version").fetchall() == [
            (revisions()[-1],)
        ]
        assert conn.execute("PRAGMA user_version").fetchone()[0] == SQLITE_HEAD + HEAD - 1
        # The stamps of the legacy releases stay; the baseline added the missing ones, and
        # each revision past it one more.
        stamps = dict(conn.execute("SELECT key, value FROM meta WHERE key LIKE 'migration.%'"))
    assert len(stamps) == SQLITE_HEAD + HEAD - 1
    assert f"migration.{SQLITE_HEAD + HEAD - 1:04d}" in stamps
    assert stamps["migration.0001"].endswith("applied 2025-12-01T00:00:00+00:00")


@pytest.mark.parametrize("version", [3, POSTGRES_HEAD])
async def test_a_postgres_database_of_a_legacy_release_upgrades_with_its_data(
    pg_url: str, version: int
) -> None:
    await build_postgres_at(pg_url, version)
    conn = await asyncpg.connect(pg_url)
    try:
        for row in ROWS:
            await conn.execute(row)
        if version >= 8:
            await conn.execute(MEMBER_ROW)
    finally:
        await conn.close()

    db = await Database.open_postgresql(pg_url, clock=ManualClock())
    try:
        await assert_intact(db, members=version >= 8)
    finally:
        await db.close()
    conn = await asyncpg.connect(pg_url)
    try:
        assert await conn.fetchval("SELECT version_num FROM alembic_version") == revisions()[-1]
        assert [r[0] for r in await conn.fetch("SELECT version FROM schema_migrations")] == list(
            range(1, POSTGRES_HEAD + HEAD)
        )
        # Ids go on after the copied ones (the identity columns were not disturbed).
        assert await conn.fetchval("SELECT max(id) FROM jobs") == 2
    finally:
        await conn.close()


async def test_a_second_opening_applies_nothing(tmp_path: Path) -> None:
    path = tmp_path / "bot.db"
    build_sqlite_at(path, 5)
    clock = ManualClock()
    first = await Database.open_sqlite(path, clock=clock)
    await first.close()
    clock.advance(86400)
    again = await Database.open_sqlite(path, clock=clock)
    try:
        assert again.schema_version == HEAD
        # Applied once, at the first opening's time.
        assert await again.meta.get("migration.0006") == (
            "delivery applied 2026-01-01T00:00:00+00:00"
        )
    finally:
        await again.close()


def _tables(conn: Connection) -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    inspector = inspect(conn)
    for table in inspector.get_table_names():
        if table in ("alembic_version", "schema_migrations"):
            continue
        key = sorted(inspector.get_pk_constraint(table)["constrained_columns"])
        found[table] = {
            # SQLite reports its rowid alias (INTEGER PRIMARY KEY) nullable; it never is.
            "columns": {
                c["name"]: c["nullable"] and c["name"] not in key
                for c in inspector.get_columns(table)
            },
            "primary_key": key,
        }
    return found


def _declared() -> dict[str, dict[str, Any]]:
    return {
        table.name: {
            "columns": {c.name: c.nullable for c in table.columns},
            "primary_key": sorted(c.name for c in table.primary_key.columns),
        }
        for table in metadata.sorted_tables
    }


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_a_fresh_database_has_the_tables_and_columns_of_the_schema_module(
    engine: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
) -> None:
    opener: Callable[[], Awaitable[Database]]
    if engine == "sqlite":

        def opener() -> Awaitable[Database]:
            return Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    else:
        url = request.getfixturevalue("pg_url")

        def opener() -> Awaitable[Database]:
            return Database.open_postgresql(url, clock=ManualClock())

    db = await opener()
    try:
        assert db.schema_version == HEAD
        found = await db.engines.run_read(_tables)
    finally:
        await db.close()
    assert found == _declared()


PROBE = f"{HEAD + 1:04d}_probe"
"""A revision one past this release's head."""

NEXT_REVISION = f'''"""A probe revision for the tests: one more table, for both engines."""

import sqlalchemy as sa
from alembic import op

revision = "{PROBE}"
down_revision = "{revisions()[-1]}"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table("probe", sa.Column("id", sa.BigInteger, primary_key=True))


def downgrade() -> None:
    op.drop_table("probe")
'''


@pytest.fixture
def next_revision(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real script directory plus a revision :data:`PROBE` after its head."""
    scripts = tmp_path / "migrations"
    shutil.copytree(
        migrations.SCRIPT_LOCATION, scripts, ignore=shutil.ignore_patterns("__pycache__")
    )
    (scripts / "versions" / f"{PROBE}.py").write_text(NEXT_REVISION, encoding="utf-8")
    monkeypatch.setattr(migrations, "SCRIPT_LOCATION", scripts)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_a_revision_after_the_head_runs_on_both_engines_and_fences_older_releases(
    engine: str,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A legacy database goes through every revision and a next one in one open; its legacy
    mark moves past the legacy head (the release before Alembic then refuses it), and this
    release, which does not know the next revision, refuses it too."""
    path = tmp_path / "bot.db"
    url = request.getfixturevalue("pg_url") if engine == "postgresql" else ""

    async def open_db() -> Database:
        if engine == "sqlite":
            return await Database.open_sqlite(path, clock=ManualClock())
        return await Database.open_postgresql(url, clock=ManualClock())

    if engine == "sqlite":
        build_sqlite_at(path, 5)
    else:
        await build_postgres_at(url, 3)
    real = migrations.SCRIPT_LOCATION
    request.getfixturevalue("next_revision")
    db = await open_db()
    try:
        assert db.schema_version == HEAD + 1
        assert await db.engines.run_read(
            lambda c: inspect(c).has_table("probe")
        )  # the revision ran
        await db.meta.set("k", "v")
    finally:
        await db.close()
    if engine == "sqlite":
        with sqlite3.connect(path) as conn:
            assert conn.execute("PRAGMA user_version").fetchone()[0] == SQLITE_HEAD + HEAD
    else:
        conn = await asyncpg.connect(url)
        try:
            assert await conn.fetchval("SELECT MAX(version) FROM schema_migrations") == (
                POSTGRES_HEAD + HEAD
            )
        finally:
            await conn.close()

    monkeypatch.setattr(migrations, "SCRIPT_LOCATION", real)
    with pytest.raises(SchemaTooNewError) as raised:
        await open_db()
    assert (raised.value.found, raised.value.supported) == (HEAD + 1, HEAD)


PERSONA_ROW = (
    "INSERT INTO personas (guild_id, channel_id, system, model, updated_at)"
    f" VALUES ({GUILD}, 10, 'You are a pirate.', NULL, 1.0)"
)


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_a_persona_set_before_personas_could_be_locked_stays_unlocked(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if engine == "sqlite":
        path = tmp_path / "bot.db"
        build_sqlite_at(path, SQLITE_HEAD)
        with sqlite3.connect(path) as conn:
            conn.execute(PERSONA_ROW)
        db = await Database.open_sqlite(path, clock=ManualClock())
    else:
        url = request.getfixturevalue("pg_url")
        await build_postgres_at(url, POSTGRES_HEAD)
        conn = await asyncpg.connect(url)
        try:
            await conn.execute(PERSONA_ROW)
        finally:
            await conn.close()
        db = await Database.open_postgresql(url, clock=ManualClock())
    try:
        assert await db.conversations.persona(10) == Persona(GUILD, 10, "You are a pirate.")
        await db.conversations.set_persona(Persona(GUILD, 10, "Be terse.", locked=True), 2.0)
        assert await db.conversations.persona(10) == Persona(GUILD, 10, "Be terse.", locked=True)
    finally:
        await db.close()


def _jobs_schema(path: Path) -> tuple[str, set[tuple[str, str]]]:
    """The stored ``CREATE TABLE jobs`` and the (type, name) of its indexes and triggers."""
    with sqlite3.connect(path) as conn:
        (created,) = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'jobs'").fetchone()
        dependents = set(
            conn.execute(
                "SELECT type, name FROM sqlite_master WHERE tbl_name = 'jobs'"
                " AND type IN ('index', 'trigger') AND sql IS NOT NULL"
            )
        )
    return created, dependents


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_a_task_id_stored_before_the_upgrade_is_no_longer_unique_on_its_own(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """After the upgrade, the same task id under another key is another job and another charge;
    the rows kept are intact, and SQLite's rebuilt ``jobs`` keeps STRICT, its checks, indexes
    and trigger."""
    path = tmp_path / "bot.db"
    url = request.getfixturevalue("pg_url") if engine == "postgresql" else ""
    if engine == "sqlite":
        build_sqlite_at(path, SQLITE_HEAD)
        with sqlite3.connect(path) as conn:
            for row in ROWS:
                conn.execute(row)
        before, dependents = _jobs_schema(path)
        db = await Database.open_sqlite(path, clock=ManualClock())
    else:
        await build_postgres_at(url, POSTGRES_HEAD)
        conn = await asyncpg.connect(url)
        try:
            for row in ROWS:
                await conn.execute(row)
        finally:
            await conn.close()
        db = await Database.open_postgresql(url, clock=ManualClock())
    try:
        await assert_intact(db, members=False)
        done = await db.jobs.by_task("fp", Kind.VIDEO, "done")
        assert done is not None
        # Another key's task of the same id: a job and a charge of its own.
        other = await db.jobs.insert(
            NewJob(
                task_id="done",
                provider="alpha",
                poll_url="/p/done",
                kind=Kind.VIDEO,
                model="vid/t2v",
                guild_id=GUILD + 1,
                channel_id=8,
                message_id=None,
                user_id=3,
                prompt_summary="an owl",
                details={},
                cost_cents=Decimal(5),
                key_fingerprint="fp-other",
                created_at=300.0,
                next_poll_at=310.0,
            )
        )
        assert other.id != done.id
        assert other.guild_id == GUILD + 1
        assert await db.ledger.insert_charge(
            Charge(
                GUILD + 1, 8, 3, Kind.VIDEO, "vid/t2v", "done", Decimal(5), None, "fp-other", 300
            )
        )
        assert await db.ledger.total(GUILD + 1) == 5
        assert await db.ledger.total(GUILD) == Decimal("12.850001")
        # A job's status change still releases a retired key's hold (the trigger was kept).
        assert await db.jobs.finish(other.id, JobStatus.FAILED, [], "boom", 320.0)
    finally:
        await db.close()
    if engine == "sqlite":
        after, kept = _jobs_schema(path)
        assert "UNIQUE" in before and "UNIQUE" not in after
        assert after.rstrip().endswith("STRICT") and "json_valid(details)" in after
        # jobs_task is this revision's; jobs_user_listing a later one's (the dashboard's).
        assert kept == dependents | {("index", "jobs_task"), ("index", "jobs_user_listing")}
        # The CHECKs are still there.
        with sqlite3.connect(path) as conn, pytest.raises(sqlite3.IntegrityError):
            conn.execute("UPDATE jobs SET details = 'not json' WHERE task_id = 'busy'")
