"""What a shutdown may and may not do, with the real processes.

A gateway process (``POLLER_ENABLED=false``) and ``python -m bot worker`` processes on one
database, against both emulators:

- "Worker stop": a worker stopped with SIGTERM while it polls a job hands the job over at
  once: another worker shows the result long before the job's lease (600 s here) would end.
- The admission guard: during the gateway's shutdown grace, forms (``/video-advanced``,
  Animate) and views (a price confirmation) opened before it are refused politely
  ("restarting", ephemeral) and make no generation request, while the command already
  running still records its charge.
"""

from __future__ import annotations

import asyncio
import signal
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import (
    BOT_TOKEN,
    MEMBER_PERMISSIONS,
    BotProcess,
    World,
    action_buttons,
    close_world,
    open_world,
)

pytestmark = pytest.mark.asyncio(loop_scope="module")

LEASE = 600.0
"""POLL_LEASE_SECONDS and DELIVERY_LEASE_SECONDS here: far longer than any wait below."""

IMAGE_MODEL = "black-forest-labs/flux-schnell"
EXPENSIVE_VIDEO = "zenith-ultra/text-to-video"  # 150 c per 5 s: 6 s cost $1.80


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    overrides = {
        "POLLER_ENABLED": "false",
        "POLL_LEASE_SECONDS": str(LEASE),
        "DELIVERY_LEASE_SECONDS": str(LEASE),
    }
    opened = await open_world(Path(tmp_path_factory.mktemp("shutdown")), overrides=overrides)
    yield opened
    await close_world(opened)
    assert opened.discord.unhandled == []
    assert opened.discord.server_errors == []
    log = opened.bot.log()
    assert opened.key not in log and BOT_TOKEN not in log
    assert "Traceback" not in log


async def until(check: Any, timeout: float, what: str) -> None:
    async with asyncio.timeout(timeout):
        while not check():
            await asyncio.sleep(0.05)


def requests_to(world: World, method: str, path_part: str) -> int:
    return sum(1 for r in world.api.requests if r.method == method and path_part in r.path)


def generations(world: World) -> int:
    return sum(world.posts_to(f"/{kind}/generate") for kind in ("text", "image", "video"))


async def start_worker(world: World, name: str) -> BotProcess:
    env = {**world.bot.env, "SHUTDOWN_GRACE_SECONDS": "1"}
    worker = BotProcess(env, world.bot.log_path.parent / f"{name}.log", ("worker",))
    await worker.start()
    await until(lambda: "worker started" in worker.log(), 60, f"{name} to start")
    return worker


async def test_a_worker_stopped_with_sigterm_hands_its_job_over_at_once(world: World) -> None:
    first = await start_worker(world, "worker-0")
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    prompt = "a lighthouse while the worker is stopped"
    await world.answer(
        await world.command(
            "video", {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
        )
    )
    placeholder = await world.discord.wait_for_message(
        lambda m: prompt in m.text, include_existing=True
    )
    polls = requests_to(world, "GET", "/video/")
    # The worker's next request, its first poll, is answered two minutes late: it is under way
    # (leased for 600 s) when the worker is stopped.
    world.api.inject_fault("slow", 1, delay=120.0)
    await until(lambda: requests_to(world, "GET", "/video/") > polls, 90, "the first poll")

    process = first.process
    assert process is not None
    process.send_signal(signal.SIGTERM)
    assert await asyncio.wait_for(process.wait(), 20) == 0
    assert "released 1 leases" in first.log(), first.log()[-2000:]

    second = await start_worker(world, "worker-1")
    try:
        # Shown by the other worker now, not once the stopped worker's lease (600 s) ends.
        shown = await world.discord.wait_for_edit(
            placeholder.id, lambda m: "/files/" in m.text, timeout=60
        )
        assert "/files/" in shown.text
    finally:
        await second.stop()
    for worker in (first, second):
        assert "Traceback" not in worker.log() and world.key not in worker.log()


def ledger_kinds(world: World) -> list[str]:
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        return [str(kind) for (kind,) in db.execute("SELECT kind FROM ledger ORDER BY id")]


def buttons(message: Message) -> dict[str, str]:
    return {item["label"].split(" ")[0]: item["custom_id"] for item in action_buttons(message)}


async def test_forms_and_views_opened_before_a_shutdown_start_nothing_during_it(
    world: World,
) -> None:
    # Last in this module: it stops the gateway process.
    opened = await world.command("video-advanced")
    await opened.wait_callback()
    form = opened.modal
    assert form is not None
    image = await world.answer(
        await world.command("image", {"prompt": "a red kite", "model": IMAGE_MODEL})
    )
    pressed = await world.discord.press_button(
        image.id, buttons(image)["Animate"], user_id=world.member.id, permissions=MEMBER_PERMISSIONS
    )
    await pressed.wait_callback()
    animate = pressed.modal
    assert animate is not None
    await world.answer(
        await world.command("config", {"dollars": "1.00"}, admin=True, subcommand="confirm-above")
    )
    ask = await world.answer(
        await world.command("video", {"prompt": "a storm", "model": EXPENSIVE_VIDEO, "duration": 6})
    )
    confirm = {i["label"]: i["custom_id"] for row in ask.components for i in row["components"]}

    calls, before = generations(world), len(ledger_kinds(world))
    world.api.inject_fault("slow", 1, delay=5.0)  # processed and charged, answered late
    slow = await world.command("text", {"prompt": "a slow answer"})
    await until(lambda: world.posts_to("/text/") > 0, 15, "the slow /text to reach the service")
    process = world.bot.process
    assert process is not None
    process.send_signal(signal.SIGTERM)
    await until(lambda: "SIGTERM received" in world.bot.log(), 15, "the shutdown to begin")

    by_label = {row["label"]: row["component"] for row in form["components"]}
    refused = [
        await world.discord.submit_modal(
            form["custom_id"], {by_label["Prompt"]["custom_id"]: "a fox in the snow"}
        ),
        await world.discord.submit_modal(
            animate["custom_id"],
            {animate["components"][0]["components"][0]["custom_id"]: "the kite climbs"},
        ),
        await world.discord.press_button(
            ask.id,
            confirm["Generate · $1.80"],
            user_id=world.member.id,
            permissions=MEMBER_PERMISSIONS,
        ),
    ]
    for handle in refused:
        answer = await world.answer(handle)
        assert answer.ephemeral and "restarting" in answer.content, answer.content

    assert (await world.answer(slow)).text  # the command already running still answers
    assert await asyncio.wait_for(process.wait(), 30) == 0
    assert generations(world) == calls + 1  # the slow /text alone reached the service
    assert ledger_kinds(world)[before:] == ["text"]  # its charge recorded, nothing else
