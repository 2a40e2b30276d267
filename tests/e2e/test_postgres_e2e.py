"""The real bot process on PostgreSQL (``DATABASE_URL``): a video is paid, delivered, counted.

The session's PostgreSQL server (tests/support/pg_server.py) holds a fresh database owned by a role
with a password; the bot logs in with it, migrates the schema at start-up and never writes the
password anywhere.
"""

from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio

from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world
from tests.support.e2e.videos import video_for
from tests.support.pg_server import PgServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

PASSWORD = "pg-secret-4e1f0c"


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(
    tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer
) -> AsyncIterator[World]:
    admin = await asyncpg.connect(pg_server.url())
    try:
        await admin.execute(f"CREATE ROLE genbot LOGIN PASSWORD '{PASSWORD}'")
        await admin.execute("CREATE DATABASE genbot_e2e OWNER genbot")
    finally:
        await admin.close()
    url = f"postgresql://genbot:{PASSWORD}@127.0.0.1:{pg_server.port}/genbot_e2e"
    opened = await open_world(
        Path(tmp_path_factory.mktemp("e2e-pg")), overrides={"DATABASE_URL": url}
    )
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert "database: PostgreSQL at postgresql://genbot:[redacted]@127.0.0.1" in log
    for secret in (PASSWORD, opened.key, BOT_TOKEN):
        assert secret not in log
    assert "Traceback" not in log
    pg_server.drop_database(pg_server.url("genbot_e2e"))


async def ledger(world: World, sql: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(world.bot.env["DATABASE_URL"])
    try:
        return list(await conn.fetch(sql))
    finally:
        await conn.close()


async def test_a_video_on_postgresql_is_delivered_once_and_its_charge_is_exact(
    world: World,
) -> None:
    balance = world.api.balance(world.key)
    world.api.report_next_costs(Decimal("0.35"))
    task_id, _ = await video_for(world, "an elephant writing to postgres")
    assert world.api.balance(world.key) == balance - Decimal("0.35")
    rows = await ledger(world, f"SELECT cost_micro FROM ledger WHERE task_id = '{task_id}'")
    assert [r["cost_micro"] for r in rows] == [350_000]
    jobs = await ledger(world, f"SELECT status, announced_at FROM jobs WHERE task_id = '{task_id}'")
    assert [r["status"] for r in jobs] == ["completed"]
    assert jobs[0]["announced_at"] is not None
    usage = await world.answer(await world.command("usage", {}))
    assert "$0.0035" in usage.text
