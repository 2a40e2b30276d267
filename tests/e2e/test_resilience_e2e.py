"""The real bot process through what an operator does to it: a locked database, a SIGTERM."""

import asyncio
import signal
import sqlite3

import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.e2e.harness import World

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUSY_TIMEOUT = 0.5
"""``DATABASE_BUSY_TIMEOUT_SECONDS``: a lock outlives it within a second, not ten."""
BOT_OVERRIDES = {"DATABASE_BUSY_TIMEOUT_SECONDS": str(BUSY_TIMEOUT)}

SHUTDOWN_GRACE = 20.0
"""``bot.discord.bot.SHUTDOWN_GRACE_SECONDS``: the bound on a graceful shutdown."""


def ledger_rows(world: World, kind: str) -> int:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        (count,) = db.execute("SELECT COUNT(*) FROM ledger WHERE kind = ?", (kind,)).fetchone()
    return int(count)


async def wait_until_attached(world: World) -> None:
    """Wait until the last job's placeholder is recorded, so a lock meets only the poller."""

    def attached() -> bool:
        with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
            row = db.execute("SELECT message_id FROM jobs ORDER BY id DESC LIMIT 1").fetchone()
        return row is not None and row[0] is not None

    async with asyncio.timeout(15):
        while not attached():
            await asyncio.sleep(0.1)


async def test_a_database_locked_longer_than_the_busy_timeout_only_delays_the_video(
    world: World,
) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.api.set_task_duration(lambda model, body: 2.0)
    prompt = "a lighthouse while the operator runs VACUUM"
    handle = await world.command(
        "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    )
    await world.answer(handle)
    placeholder = await world.discord.wait_for_message(
        lambda m: prompt in m.text, include_existing=True
    )
    await wait_until_attached(world)

    # An operator's sqlite3 session holds the write lock well past the bot's busy timeout: the
    # video finishes at the service meanwhile, and each of the poller's writes fails.
    operator = sqlite3.connect(world.bot.env["DATABASE_PATH"], isolation_level=None)
    operator.execute("BEGIN IMMEDIATE")
    try:
        async with asyncio.timeout(60):
            while world.bot.log().count("the database is locked") < 2:
                await asyncio.sleep(0.2)
        assert "/files/" not in world.discord.messages[placeholder.id].text
    finally:
        operator.execute("ROLLBACK")
        operator.close()

    await world.discord.wait_for_edit(placeholder.id, lambda m: "/files/" in m.text, timeout=90)


async def test_sigterm_lets_a_running_command_record_its_charge_then_exits_0(
    world: World,
) -> None:
    # Last in this module: it stops the bot.
    before = ledger_rows(world, "text")
    world.api.inject_fault("slow", 1, delay=4.0)  # processed and charged, answered late
    slow = await world.command("text", {"prompt": "a slow answer"})
    async with asyncio.timeout(15):
        while not any(r.method == "POST" and "/text/" in r.path for r in world.api.requests):
            await asyncio.sleep(0.05)
    process = world.bot.process
    assert process is not None
    process.send_signal(signal.SIGTERM)
    async with asyncio.timeout(15):
        while "SIGTERM received" not in world.bot.log():
            await asyncio.sleep(0.05)

    late = await world.command("text", {"prompt": "too late"})
    refused = await world.answer(late)
    assert refused.ephemeral, (refused.content, world.bot.log()[-3000:])
    assert "restarting" in refused.content

    answer = await world.answer(slow)
    assert answer.text  # the user saw the answer they paid for
    exit_code = await asyncio.wait_for(process.wait(), SHUTDOWN_GRACE + 10)
    assert exit_code == 0
    assert ledger_rows(world, "text") == before + 1
    assert world.posts_to("/text/") == 1  # the refused command never reached the service
