"""An outage longer than JOB_TIMEOUT_SECONDS: every video finished meanwhile is still shown.

The poller once failed a job from its age before polling it, so a restart after
more than the timeout threw away results the service had finished (and charged for). The
timeout is scaled down to a few seconds for this bot process.
"""

import asyncio
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from bot.sandbox.catalogue import catalogue_json
from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world

pytestmark = pytest.mark.asyncio(loop_scope="module")

TIMEOUT = 5.0
"""JOB_TIMEOUT_SECONDS of this bot process."""

PROMPTS = ("a harbour at night", "a kite over the dunes")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    opened = await open_world(
        Path(tmp_path_factory.mktemp("outage")),
        # /jobs re-checks an unwatched job on every listing here, right after the poller's last
        # check; the interval between re-checks is tested in tests/services/test_jobs_recheck.py.
        overrides={"JOB_TIMEOUT_SECONDS": str(TIMEOUT), "JOBS_RECHECK_SECONDS": "0"},
    )
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert opened.key not in log
    assert BOT_TOKEN not in log
    assert "Traceback" not in log


async def test_every_job_pending_through_a_long_outage_is_shown_none_failed(world: World) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.api.set_task_duration(lambda model, body: 2.0)
    placeholders = []
    for prompt in PROMPTS:
        handle = await world.command(
            "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
        )
        await world.answer(handle)
        placeholders.append(
            await world.discord.wait_for_message(
                lambda m, p=prompt: p in m.text, include_existing=True
            )
        )
    # Down before the first poll (a new model's first poll waits 10 s), and for longer than
    # the timeout: the service finishes every task meanwhile.
    await world.bot.kill()
    await asyncio.sleep(TIMEOUT + 3)
    assert all("/files/" not in p.text for p in world.discord.messages.values())

    await world.bot.start()
    for placeholder in placeholders:
        done = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text or "ailed" in m.text, 60
        )
        assert "/files/" in done.text, f"not shown: {done.embeds}"
        assert "ailed" not in done.text
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        statuses = [r[0] for r in db.execute("SELECT status FROM jobs").fetchall()]
    assert statuses == ["completed"] * len(PROMPTS)


async def test_a_job_no_longer_watched_is_checked_again_by_jobs_and_shown(world: World) -> None:
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    world.api.set_task_duration(lambda model, body: 3600.0)  # still processing when unwatched
    handle = await world.command(
        "video", {"prompt": "a lantern festival", "model": model["id"], "duration": 5}
    )
    await world.answer(handle)
    placeholder = await world.discord.wait_for_message(
        lambda m: "a lantern festival" in m.text, include_existing=True
    )
    # Polled past the timeout while still processing: not failed, no longer watched.
    await world.discord.wait_for_edit(
        placeholder.id, lambda m: "stopped checking" in m.text, timeout=60
    )
    assert "ailed" not in world.discord.messages[placeholder.id].text
    (task,) = [
        t for t in world.api.tasks.values() if t.request.get("prompt") == "a lantern festival"
    ]
    world.api.complete_task_now(task.task_id)

    listing = await world.answer(await world.command("jobs", {}))
    assert listing.ephemeral
    assert "Completed" in listing.text
    done = await world.discord.wait_for_edit(
        placeholder.id, lambda m: "/files/" in m.text, timeout=30
    )
    assert "ailed" not in done.text
