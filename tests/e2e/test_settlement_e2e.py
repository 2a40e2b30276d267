"""A charge the database cannot take: spooled, the member answered, recorded once after kill -9.

And a video charged just as a SIGTERM meets the locked database: spooled before the
settlement's retries wait, so the next start records it once and delivers the video.

The real bot on SQLite; the test holds the database's write lock (as an operator's ``sqlite3``
session or a long ``VACUUM`` would) from the moment the service charged a ``/text`` until the
settlement has given up retrying.
"""

import asyncio
import signal
import sqlite3
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest
import pytest_asyncio

from bot.sandbox.catalogue import catalogue_json
from tests.support.e2e.harness import World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

BUSY_TIMEOUT = 0.5
"""``DATABASE_BUSY_TIMEOUT_SECONDS``: each locked try fails after half a second, not five (what
is asserted does not depend on how long the retries take)."""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(
        Path(tmp_path_factory.mktemp("settlement")),
        overrides={"DATABASE_BUSY_TIMEOUT_SECONDS": str(BUSY_TIMEOUT)},
    )
    yield opened
    await close_world(opened)


async def until(predicate: Callable[[], bool], what: str, timeout: float = 60.0) -> None:
    """Poll ``predicate`` (files and the API emulator signal nothing to Discord's emulator)."""
    for _ in range(int(timeout / 0.05)):
        if predicate():
            return
        await asyncio.sleep(0.05)
    raise TimeoutError(f"waited {timeout} s for {what}")


def text_charges(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger WHERE kind = 'text'").fetchone()[0])


async def test_a_charge_spooled_while_the_database_is_locked_is_recorded_once_after_kill_9(
    world: World,
) -> None:
    db = Path(world.bot.env["DATABASE_PATH"])
    spool = db.with_name("bot.settlements.jsonl")
    first = await world.answer(await world.command("text", {"prompt": "warm up"}))
    assert "warm up" in first.text
    assert text_charges(db) == 1

    # Charged at once, answered 3 s later; three, in case a catalogue refresh comes first.
    world.api.inject_fault("slow", count=3, delay=3.0)
    posts = world.posts_to("/text/generate")
    handle = await world.command("text", {"prompt": "a paid answer"})
    await until(lambda: world.posts_to("/text/generate") > posts, "the POST")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # every write of the bot now finds it locked
    try:
        # Retried six times with backoff (about 11 s with the 0.5 s busy timeout; 40 s at the
        # default 5 s), then spooled: the member reads the answer, never a failure.
        answer = await world.answer(handle, timeout=120)
        assert "a paid answer" in answer.text
        assert "wrong" not in answer.text
        assert spool.read_text().count("\n") == 1
        await world.bot.kill()
    finally:
        holder.rollback()
        holder.close()
    assert text_charges(db) == 1  # not recorded yet: only in the spool
    saved = spool.read_text()

    await world.bot.start()
    await world.discord.wait_ready(timeout=60)
    await until(lambda: spool.read_text() == "", "the spool replayed")
    assert text_charges(db) == 2
    # As if killed after the replay's commit, before the spool was rewritten: the next start
    # replays the entry again and records nothing twice.
    await world.bot.kill()
    spool.write_text(saved)
    await world.bot.start()
    await until(lambda: spool.read_text() == "", "the spool replayed again")
    assert text_charges(db) == 2
    assert "spooled" in world.bot.log()


async def restart(world: World) -> None:
    """Start the bot again; return once it is ready (its own log says so)."""
    ready = world.bot.log().count("ready as")
    await world.bot.start()
    await until(lambda: world.bot.log().count("ready as") > ready, "the bot ready")


def video_charges(db: Path) -> int:
    with sqlite3.connect(db) as conn:
        return int(conn.execute("SELECT COUNT(*) FROM ledger WHERE kind = 'video'").fetchone()[0])


async def test_a_video_charged_as_sigterm_meets_a_locked_database_is_kept_and_delivered(
    world: World,
) -> None:
    db = Path(world.bot.env["DATABASE_PATH"])
    spool = db.with_name("bot.settlements.jsonl")
    # A short shutdown grace: the command still settling is cut short (cancelled) by it. Its
    # job has no placeholder (the command was cancelled before posting it): the next start
    # polls it after the placeholder's grace (5 s here, not the default 30 s).
    await world.bot.kill()
    world.bot.env["SHUTDOWN_GRACE_SECONDS"] = "2"
    world.bot.env["PLACEHOLDER_GRACE_SECONDS"] = "5"
    await restart(world)
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    prompt = "a heron kept through a shutdown"
    before = video_charges(db)

    world.api.inject_fault("slow", count=3, delay=3.0)  # charged at once, answered 3 s later
    posts = world.posts_to("/video/generate")
    await world.command(
        "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    )
    retries = world.bot.log().count("trying again")
    await until(lambda: world.posts_to("/video/generate") > posts, "the POST")
    holder = sqlite3.connect(db, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # every write of the bot now finds it locked
    try:
        # Its first try fails (the busy timeout); docker stop, as the retries begin.
        await until(lambda: world.bot.log().count("trying again") > retries, "a retry")
        process = world.bot.process
        assert process is not None
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.wait(), 90)
    finally:
        holder.rollback()
        holder.close()
    assert video_charges(db) == before  # not in the database: only in the spool
    assert spool.read_text().count(prompt) == 1

    await restart(world)
    await until(lambda: spool.read_text() == "", "the spool replayed")
    assert video_charges(db) == before + 1
    shown = await world.discord.wait_for_message(
        lambda m: prompt in m.text and "/files/" in m.text, timeout=90, include_existing=True
    )
    assert shown.channel_id == world.channel.id
    assert video_charges(db) == before + 1
    assert "Traceback" not in world.bot.log()
