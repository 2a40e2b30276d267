"""``python -m bot copy-db --to URL``: a SQLite deployment moves to PostgreSQL, verified.

The source is a real SQLite database migrated by the bot's SQLite engine and filled with what a
running bot leaves behind (settings, keys, a retired key, charges of two servers down to the
micro-cent, an anomaly, a reservation, jobs pending and delivered); the target a real,
empty PostgreSQL database on the session's server.
"""

import asyncio
import sqlite3
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from bot.__main__ import main
from bot.clock import ManualClock
from bot.domain import DeliveryRoute, JobStatus, Kind
from bot.storage.copy_db import NOT_COPIED, TABLES
from bot.storage.database import Database
from bot.storage.schema import metadata
from tests.support.jobs import exact_job

LEDGER = [
    # guild, task, micro-cents
    (1, "v1", 350_000),
    (1, None, 1_234_000_001),
    (1, "v2", 1),
    (2, "i1", 7_000_000),
]


async def make_source(path: Path) -> None:
    """A SQLite database at the newest schema, as the bot's SQLite engine makes it."""
    store = await Database.open_sqlite(path, clock=ManualClock())
    await store.close()
    db = sqlite3.connect(path)
    with db:
        db.execute("INSERT INTO meta (key, value) VALUES ('commands.hash', 'abc')")
        db.execute(
            "INSERT INTO guild_settings (guild_id, api_key_ciphertext, api_key_last4,"
            " monthly_budget_cents, max_pending_videos_per_user, admin_channel_id)"
            " VALUES (1, ?, 'WXYZ', 5000, 2, 77)",
            (b"\x00ciphertext\xff",),
        )
        db.executemany(
            "INSERT INTO allowed_channels (guild_id, channel_id) VALUES (1, ?)", [(10,), (11,)]
        )
        db.execute(
            "INSERT INTO retired_keys (guild_id, fingerprint, ciphertext, last4, retired_at)"
            " VALUES (1, 'old', ?, 'ABCD', 900.5)",
            (b"old-ciphertext",),
        )
        for guild, task, micro in LEDGER:
            db.execute(
                "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id,"
                " cost_micro, remaining_credits_micro, key_fingerprint, at)"
                " VALUES (?, 10, 100, 'video', 'veo', ?, ?, 99000000, 'fp', 1000.25)",
                (guild, task, micro),
            )
        db.execute(
            "INSERT INTO charge_anomalies (guild_id, channel_id, user_id, kind, model, task_id,"
            " reported_cost, reported_remaining, reason, key_fingerprint, at)"
            " VALUES (1, 10, 100, 'video', 'veo', 'v3', '-1', '5', 'negative', 'fp', 1001.0)"
        )
        db.execute(
            "INSERT INTO reservations (guild_id, user_id, kind, model, amount_micro, created_at,"
            " expires_at, key_fingerprint)"
            " VALUES (1, 100, 'video', 'veo', 25000000, 1000.0, 1300.0, 'fp')"
        )
        db.execute(
            "INSERT INTO jobs (id, task_id, provider, poll_url, kind, model, guild_id, channel_id,"
            " message_id, user_id, prompt_summary, details, cost_micro, key_fingerprint,"
            " created_at, next_poll_at) VALUES (7, 'v1', 'p', '/t/v1', 'video', 'veo', 1, 10,"
            " 555, 100, 'a cat', '{\"seconds\": 4}', 350000, 'old', 1000.0, 1010.0)"
        )
        db.execute(
            "INSERT INTO jobs (id, task_id, provider, poll_url, kind, model, guild_id, channel_id,"
            " message_id, user_id, prompt_summary, details, cost_micro, key_fingerprint,"
            " created_at, next_poll_at, status, finished_at, outputs, announced_at,"
            " delivery_route) VALUES (9, 'i1', 'p', '/t/i1', 'image', 'img', 2, 20, NULL, 200,"
            " 'a dog', '{}', 7000000, 'fp', 1000.0, 1010.0, 'completed', 1020.0,"
            " '[\"https://cdn/1.png\", \"https://cdn/2.png\"]', 1021.0, 'dm')"
        )
    db.close()


def run_main(monkeypatch: pytest.MonkeyPatch, source: Path, *argv: str) -> int:
    monkeypatch.setenv("DISCORD_TOKEN", "test-token")
    monkeypatch.setenv("DATABASE_PATH", str(source))
    monkeypatch.delenv("DATABASE_URL", raising=False)
    return main(list(argv))


async def test_copy_db_moves_everything_and_prints_the_verified_totals(
    tmp_path: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    source = tmp_path / "bot.db"
    await make_source(source)

    status = await asyncio.to_thread(run_main, monkeypatch, source, "copy-db", "--to", pg_url)

    out = capsys.readouterr().out
    assert status == 0, out
    assert "ledger: 4 rows" in out
    assert "jobs: 2 rows" in out
    assert "ledger of guild 1: 3 charges, 1234.350002 cents" in out
    assert "ledger of guild 2: 1 charges, 7 cents" in out

    db = await Database.open_postgresql(pg_url, clock=ManualClock())
    try:
        assert await db.ledger.total(1) == Decimal("1234.350002")
        assert await db.ledger.total(2) == Decimal(7)
        assert await db.ledger.last_remaining_credits("fp") == Decimal(99)
        assert [a.reason for a in await db.ledger.anomalies(1, 0.0)] == ["negative"]
        assert await db.ledger.reserved_cents(1, 1100.0) == Decimal(25)
        settings = await db.guilds.settings(1)
        assert settings.api_key_ciphertext == b"\x00ciphertext\xff"
        assert settings.api_key_last4 == "WXYZ"
        assert settings.monthly_budget_cents == 5000
        assert settings.max_pending_videos_per_user == 2
        assert settings.allowed_channel_ids == {10, 11}
        assert settings.admin_channel_id == 77
        assert [(k.fingerprint, k.ciphertext) for k in await db.guilds.retired_keys(1)] == [
            ("old", b"old-ciphertext")
        ]
        assert await db.meta.get("commands.hash") == "abc"
        pending = await db.jobs.get(7)
        assert pending is not None
        assert (pending.status, pending.details, pending.message_id) == (
            JobStatus.PENDING,
            {"seconds": 4},
            555,
        )
        assert pending.cost_cents == Decimal("0.35")
        done = await db.jobs.get(9)
        assert done is not None
        assert done.outputs == ("https://cdn/1.png", "https://cdn/2.png")
        assert (done.kind, done.delivery_route, done.announced_at) == (
            Kind.IMAGE,
            DeliveryRoute.DM,
            1021.0,
        )
        # New rows continue after the copied ids, and the retired-key trigger works on them.
        job = await db.jobs.insert(exact_job("new-task"))
        assert job.id > 9
        assert await db.jobs.finish(7, JobStatus.COMPLETED, ["u"], None, 1100.0)
        assert await db.guilds.retired_keys(1) == []
    finally:
        await db.close()


async def test_copy_db_refuses_a_database_that_is_not_empty(
    tmp_path: Path,
    pg_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "bot.db"
    await make_source(source)
    assert await asyncio.to_thread(run_main, monkeypatch, source, "copy-db", "--to", pg_url) == 0
    capsys.readouterr()

    status = await asyncio.to_thread(run_main, monkeypatch, source, "copy-db", "--to", pg_url)

    err = capsys.readouterr().err
    assert status == 2
    assert err.count("\n") == 1
    assert "not empty" in err
    conn = await asyncpg.connect(pg_url)
    try:
        assert await conn.fetchval("SELECT COUNT(*) FROM ledger") == len(LEDGER)  # not doubled
    finally:
        await conn.close()


async def test_copy_db_never_shows_the_password_of_a_bad_or_unreachable_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    source = tmp_path / "bot.db"
    await make_source(source)
    for url, expected in (
        ("mysql://bot:hunter2@db/genbot", 2),
        ("postgresql://bot:hunter2@127.0.0.1:1/genbot", 1),
    ):
        status = await asyncio.to_thread(run_main, monkeypatch, source, "copy-db", "--to", url)
        captured = capsys.readouterr()
        assert status == expected
        assert "hunter2" not in captured.err + captured.out
        assert captured.err.startswith("genbot: copy-db failed: ")


async def test_both_engines_have_the_same_tables_and_columns(tmp_path: Path, pg_url: str) -> None:
    # A schema change made for one engine only (e.g. a new SQLite migration without its
    # PostgreSQL twin) fails here, before copy-db or a service meets it.
    source = tmp_path / "bot.db"
    await (await Database.open_sqlite(source, clock=ManualClock())).close()
    await (await Database.open_postgresql(pg_url, clock=ManualClock())).close()
    db = sqlite3.connect(source)
    try:
        tables = {
            name: {row[1] for row in db.execute(f"PRAGMA table_info({name})")}
            for (name,) in db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name <> 'alembic_version'"
            )
        }
    finally:
        db.close()
    conn = await asyncpg.connect(pg_url)
    try:
        rows = await conn.fetch(
            "SELECT table_name, column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema()"
            " AND table_name NOT IN ('schema_migrations', 'alembic_version')"
        )
    finally:
        await conn.close()
    pg_tables: dict[str, set[str]] = {}
    for row in rows:
        pg_tables.setdefault(row["table_name"], set()).add(row["column_name"])
    assert pg_tables == tables
    assert set(tables) == set(TABLES) | set(NOT_COPIED)


def test_copy_db_follows_the_schema_s_own_table_order() -> None:
    # A table added to the schema is copied by being there (no list to keep), after the tables
    # its foreign keys name; only a table the schema marks as not copied stays behind.
    assert set(TABLES) | set(NOT_COPIED) == set(metadata.tables)
    assert [t.name for t in metadata.sorted_tables if t.name in TABLES] == list(TABLES)
    position = {name: i for i, name in enumerate(TABLES)}
    for table in metadata.tables.values():
        for key in table.foreign_keys if table.name in position else ():
            assert position[key.column.table.name] < position[table.name]
