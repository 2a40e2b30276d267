"""The PostgreSQL engine on a real server (tests/support/pg_server.py): what only it can get wrong.

Migrations under concurrent start-ups, a newer schema refused, budgets held by two pools (two
processes, as far as the server can tell) at once, the exact ledger, and the password of
``DATABASE_URL`` kept out of every message. The behaviour both engines share is tested on both
by the engine-parametrised fixtures of conftest.py.
"""

import asyncio
import logging
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest

from bot.__main__ import main
from bot.clock import ManualClock
from bot.config import SettingsError, load_settings, redact_database_url
from bot.domain import (
    Charge,
    ConstraintError,
    Kind,
    SchemaTooNewError,
    StorageUnavailableError,
)
from bot.storage.database import Database as PostgresDatabase
from bot.storage.engine import DatabaseUnavailable
from bot.storage.migrations import legacy, revisions
from tests.support.jobs import exact_job
from tests.support.legacy_db import build_postgres_at

GUILD = 1


def charge(task_id: str | None, cents: str, *, at: float = 1000.0, user_id: int = 100) -> Charge:
    return Charge(
        guild_id=GUILD,
        channel_id=10,
        user_id=user_id,
        kind=Kind.VIDEO,
        model="veo",
        task_id=task_id,
        cost_cents=Decimal(cents),
        remaining_credits_cents=Decimal("5000"),
        key_fingerprint="fp",
        at=at,
    )


async def test_a_new_database_gets_the_whole_schema_once_even_when_processes_start_together(
    pg_url: str,
) -> None:
    clock = ManualClock()
    first, second, third = await asyncio.gather(
        *(PostgresDatabase.open_postgresql(pg_url, clock=clock) for _ in range(3))
    )
    try:
        assert {db.schema_version for db in (first, second, third)} == {len(revisions())}
        conn = await asyncpg.connect(pg_url)
        try:
            versions = await conn.fetch("SELECT version FROM schema_migrations ORDER BY version")
            heads = await conn.fetch("SELECT version_num FROM alembic_version")
        finally:
            await conn.close()
        # The legacy versions once each, then one mark per revision past the baseline.
        legacy_head = len(legacy.load("postgresql"))
        assert [r["version"] for r in versions] == list(range(1, legacy_head + len(revisions())))
        assert [r["version_num"] for r in heads] == [revisions()[-1]]
        assert await first.meta.get("migration.0001") is not None
    finally:
        for db in (first, second, third):
            await db.close()


async def test_a_database_from_a_newer_release_is_refused_with_one_line(pg_url: str) -> None:
    db = await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    await db.close()
    newer = len(revisions()) + 1
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute("UPDATE alembic_version SET version_num = $1", f"{newer:04d}_future")
    finally:
        await conn.close()

    with pytest.raises(SchemaTooNewError) as raised:
        await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    assert raised.value.found == newer
    assert "\n" not in str(raised.value)


async def test_the_ledger_is_exact_and_counts_a_task_once(pg_url: str) -> None:
    db = await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    try:
        assert await db.ledger.insert_charge(charge("t1", "0.35"))
        assert not await db.ledger.insert_charge(charge("t1", "0.35"))  # the same task again
        assert await db.ledger.insert_charge(charge(None, "1234.000001"))
        assert await db.ledger.insert_charge(charge(None, "0.0000001"))  # rounded up
        assert await db.ledger.total(GUILD) == Decimal("1234.350002")
        # Another constraint never passes for "already recorded".
        with pytest.raises(ConstraintError):
            await db.ledger.insert_charge(charge("t2", "-1"))
        assert await db.ledger.total(GUILD) == Decimal("1234.350002")
    finally:
        await db.close()


async def test_a_retired_key_is_released_when_its_last_pending_job_ends(pg_url: str) -> None:
    db = await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    try:
        await db.guilds.set_api_key(GUILD, b"old-ciphertext", "1234")
        job = await db.jobs.insert(exact_job("t1", fingerprint="old"))
        await db.guilds.replace_api_key(
            GUILD, (b"new-ciphertext", "5678"), retire=True, old_fingerprint="old", at=1.0
        )
        assert [k.last4 for k in await db.guilds.retired_keys(GUILD)] == ["1234"]

        assert await db.jobs.finish(job.id, job.status.COMPLETED, ["https://x/1"], None, 2.0)

        assert await db.guilds.retired_keys(GUILD) == []
        assert (await db.guilds.settings(GUILD)).api_key_last4 == "5678"
    finally:
        await db.close()


async def reserve_if_it_fits(db: PostgresDatabase, budget: Decimal, amount: Decimal) -> bool:
    """The budget check of bot.services.billing: lock the guild, sum, reserve if it fits."""
    async with db.transaction() as tx:
        await tx.guilds.lock(GUILD)
        await tx.guilds.settings(GUILD)
        spent = await tx.ledger.spent_since(GUILD, 0.0)
        held = await tx.ledger.reserved_cents(GUILD, 0.0)
        await asyncio.sleep(0)  # let the other pool's transaction run in between, if it can
        if spent + held + amount > budget:
            return False
        await tx.ledger.add_reservation(
            guild_id=GUILD,
            user_id=100,
            kind=Kind.VIDEO,
            model="veo",
            amount_cents=amount,
            created_at=0.0,
            expires_at=10_000.0,
        )
        return True


async def test_two_pools_never_both_pass_a_budget_that_fits_one(pg_url: str) -> None:
    clock = ManualClock()
    one = await PostgresDatabase.open_postgresql(pg_url, clock=clock)
    two = await PostgresDatabase.open_postgresql(pg_url, clock=clock)
    try:
        budget, amount = Decimal(100), Decimal(30)
        results = await asyncio.gather(
            *(reserve_if_it_fits(db, budget, amount) for _ in range(10) for db in (one, two))
        )
        assert results.count(True) == 3  # 90 of 100: a fourth would overrun
        assert await one.ledger.reserved_cents(GUILD, 0.0) == Decimal(90)
    finally:
        await one.close()
        await two.close()


async def test_a_job_finishes_and_is_delivered_once_whichever_pool_tries(pg_url: str) -> None:
    clock = ManualClock()
    one = await PostgresDatabase.open_postgresql(pg_url, clock=clock)
    two = await PostgresDatabase.open_postgresql(pg_url, clock=clock)
    try:
        job = await one.jobs.insert(exact_job("t1"))
        finished = await asyncio.gather(
            *(db.jobs.finish(job.id, job.status.COMPLETED, ["u"], None, 5.0) for db in (one, two))
        )
        delivered = await asyncio.gather(
            *(db.jobs.mark_announced(job.id, 6.0) for db in (one, two))
        )
        assert sorted(finished) == [False, True]
        assert sorted(delivered) == [False, True]
    finally:
        await one.close()
        await two.close()


def test_the_url_password_never_appears_in_a_settings_error() -> None:
    with pytest.raises(SettingsError) as raised:
        load_settings(
            _env_file=None, discord_token="t", database_url="mysql://bot:hunter2@db:5432/genbot"
        )
    assert str(raised.value).startswith("DATABASE_URL: ")
    assert "hunter2" not in str(raised.value)
    with pytest.raises(SettingsError) as raised:
        load_settings(
            _env_file=None, discord_token="t", database_url="postgresql://bot:hunter2@db:99999/x"
        )
    assert "hunter2" not in str(raised.value)

    settings = load_settings(
        _env_file=None, discord_token="t", database_url="postgresql://bot:hunter2@db:5432/genbot"
    )
    assert "hunter2" not in repr(settings)
    assert "hunter2" not in str(settings)
    url = settings.database_url
    assert url is not None
    assert (
        redact_database_url(url.get_secret_value()) == "postgresql://bot:[redacted]@db:5432/genbot"
    )


async def test_the_url_password_never_appears_when_the_server_refuses(
    pg_server: object, pg_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    port = pg_url.rsplit(":", 1)[1].split("/", 1)[0]
    unreachable = "postgresql://bot:hunter2@127.0.0.1:1/genbot?password=hunter2"
    missing = f"postgresql://postgres:hunter2@127.0.0.1:{port}/no_such_database"
    for url in (unreachable, missing):
        with pytest.raises(DatabaseUnavailable) as raised:
            await PostgresDatabase.open_postgresql(url, clock=ManualClock())
        message = str(raised.value)
        assert message.startswith("DATABASE_URL: cannot connect to postgresql://")
        assert "hunter2" not in message
        assert "\n" not in message
        assert raised.value.__cause__ is None
    assert "no_such_database" in message  # the reason is still there for the operator
    assert "hunter2" not in caplog.text


@pytest.mark.parametrize("command", [[], ["rotate-keys"], ["backup", "copy.db"]])
async def test_the_bot_refuses_an_unreachable_database_url_in_one_line_without_its_password(
    command: list[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(tmp_path)  # no stray .env
    monkeypatch.setenv("DISCORD_TOKEN", "test-token")
    monkeypatch.setenv("DATABASE_PATH", str(tmp_path / "bot.db"))
    monkeypatch.setenv("DATABASE_URL", "postgresql://bot:hunter2@127.0.0.1:1/genbot")
    monkeypatch.setenv("KEY_ENCRYPTION_KEY", "")

    status = await asyncio.to_thread(main, command)

    captured = capsys.readouterr()
    assert status == 2
    assert captured.err.count("\n") == 1, captured.err
    assert "DATABASE_URL" in captured.err
    assert "hunter2" not in captured.err + captured.out


async def test_ping_answers_while_open_and_raises_once_closed(pg_url: str) -> None:
    db = await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    await db.ping()
    await db.close()
    with pytest.raises(StorageUnavailableError):
        await db.ping()


async def test_upgrade_to_key_holds_keeps_reservations_and_the_keys_they_may_use(
    pg_url: str,
) -> None:
    """0006 on a database at 0005 holding data (built as that release did)."""
    assert [m.name for m in legacy.load("postgresql")][5] == "key_holds"
    await build_postgres_at(pg_url, 5)
    conn = await asyncpg.connect(pg_url)
    try:
        await conn.execute(
            "INSERT INTO guild_settings (guild_id, api_key_ciphertext, api_key_last4)"
            " VALUES ($1, 'old-ciphertext', '1234')",
            GUILD,
        )
        job_id = await conn.fetchval(
            "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
            " user_id, prompt_summary, details, cost_micro, key_fingerprint, created_at,"
            " next_poll_at) VALUES ('t-busy', 'p', '/tasks/t-busy', 'video', 'veo', $1, 10, 100,"
            " 'a cat', '{}', 12500000, 'old', 1000, 1010) RETURNING id",
            GUILD,
        )
        await conn.execute(
            "INSERT INTO reservations (guild_id, user_id, kind, model, amount_micro,"
            " created_at, expires_at) VALUES ($1, 1, 'video', 'veo', 50000000, 100, 700)",
            GUILD,
        )
    finally:
        await conn.close()

    db = await PostgresDatabase.open_postgresql(pg_url, clock=ManualClock())
    try:
        job = await db.jobs.get(job_id)
        assert job is not None
        assert db.schema_version == len(revisions())
        assert await db.ledger.reserved_cents(GUILD, 200.0) == 50
        await db.guilds.replace_api_key(
            GUILD, (b"new-ciphertext", "5678"), retire=True, old_fingerprint="old", at=300.0
        )
        assert [k.last4 for k in await db.guilds.retired_keys(GUILD)] == ["1234"]
        # Its job ends while the old reservation (key unknown) lives: still kept.
        assert await db.jobs.finish(job.id, job.status.COMPLETED, ["https://x/1"], None, 400.0)
        assert len(await db.guilds.retired_keys(GUILD)) == 1
        assert await db.ledger.expire_reservations(800.0) == 1
        assert await db.guilds.delete_released_keys() == 1
        assert await db.guilds.retired_keys(GUILD) == []
        assert await db.guilds.keep_default_key("fp", b"ct", 900.0) == []
        assert await db.guilds.default_key("fp") == b"ct"
    finally:
        await db.close()
