"""The key's window and queue with the real bot process.

Right after start-up nothing was sent, so a burst is served at once; after ``kill -9`` the
restarted bot knows what the killed one sent (no 429); servers sharing a key take turns, and a
member sees the queue.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.interactions import InteractionHandle
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world

QUEUED = re.compile(r"Queued: \d+\w\w on this key, about (\d+) (s|min)")
"""A queue status (bot.discord.queue_status.queue_text): the wait shown, and its unit."""


@pytest.fixture
async def worlds(tmp_path: Path) -> AsyncIterator[list[World]]:
    """Worlds a test opens (one each); closed and checked as the shared fixture does."""
    opened: list[World] = []
    yield opened
    for world in opened:
        await close_world(world)
        assert world.discord.unhandled == []
        assert world.discord.server_errors == []
        log = world.bot.log()
        assert world.key not in log
        assert BOT_TOKEN not in log
        assert "Traceback" not in log


def posts(world: World, path_part: str) -> list[str]:
    """Prompts of the generation POSTs the API received, in arrival order."""
    return [
        str((r.json or {}).get("prompt"))
        for r in world.api.requests
        if r.method == "POST" and path_part in r.path
    ]


async def final_answer(world: World, handle: InteractionHandle, timeout: float) -> Message:
    """The response once it is no longer a queue status (the command's own answer)."""

    def check() -> Message | None:
        original = handle.original()
        if handle.followups:
            return handle.followups[-1]
        if original is None or original.loading or original.deleted:
            return None
        if original.text.startswith(("Queued:", "Your turn")):
            return None
        return original

    return await world.discord.signal.wait_for(check, timeout, f"the answer to {handle.id}")


async def test_ten_videos_in_the_first_second_after_start_up_are_all_submitted(
    tmp_path: Path, worlds: list[World]
) -> None:
    world = await open_world(tmp_path, rate_window=60.0)  # the spec's own minute
    worlds.append(world)
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    members = [world.discord.add_user(f"member{i}") for i in range(10)]
    handles = await asyncio.gather(
        *(
            world.command(
                "video",
                {"prompt": f"scene {i}", "model": model["id"], "duration": model["durations"][0]},
                user_id=member.id,
            )
            for i, member in enumerate(members)
        )
    )
    answers = [await final_answer(world, handle, 30) for handle in handles]
    assert all("on its way" in answer.text for answer in answers), [a.text for a in answers]
    assert len(posts(world, "/video/generate")) == 10
    assert world.api.rate_limited_count(world.key) == 0
    assert world.api.max_requests_in_window(world.key, 60.0) <= 30


async def test_kill_9_during_a_burst_then_an_immediate_restart_sends_no_429(
    tmp_path: Path, worlds: list[World]
) -> None:
    window = 20.0  # long enough that the restart happens well inside it
    world = await open_world(tmp_path, rate_window=window)
    worlds.append(world)
    members = [world.discord.add_user(f"member{i}") for i in range(10)]
    for i in range(30):
        world.handles.append(
            await world.discord.invoke(
                "text",
                {"prompt": f"burst {i}"},
                guild_id=world.guild.id,
                channel_id=world.channel.id,
                user_id=members[i % 10].id,
            )
        )
    await world.discord.signal.wait_for(
        lambda: True if len(posts(world, "/text/generate")) >= 20 else None, 30, "20 POSTs"
    )
    await world.bot.kill()
    await world.bot.start()  # at once: the killed bot's requests are still in the window
    await world.discord.signal.wait_for(
        lambda: True if sum(1 for e in world.discord.gateway_received if e.op == 2) >= 2 else None,
        60,
        "a second IDENTIFY",
    )
    await world.discord.wait_ready(timeout=60)
    after = [await world.command("text", {"prompt": f"after {i}"}) for i in range(5)]
    for handle in after:
        answer = await final_answer(world, handle, 3 * window)
        assert "Sandbox reply to: after" in answer.text, answer.text
    assert world.api.rate_limited_count(world.key) == 0
    assert world.api.max_requests_in_window(world.key, window) <= 30


async def test_a_servers_single_request_goes_before_another_servers_31st(
    tmp_path: Path, worlds: list[World]
) -> None:
    # A 30 s window: the burst's last ten wait about that long, time enough for a member to see
    # their place and press Cancel before their turn, even on a loaded machine.
    world = await open_world(tmp_path, rate_window=30.0)
    worlds.append(world)
    other_guild = world.discord.add_guild("Other Guild", owner_id=world.admin.id)
    other_channel = world.discord.add_channel(other_guild.id, "generate")
    members = [world.discord.add_user(f"member{i}") for i in range(8)]
    burst = [
        await world.discord.invoke(
            "text",
            {"prompt": f"a {i}"},
            guild_id=world.guild.id,
            channel_id=world.channel.id,
            user_id=members[i % 8].id,
        )
        for i in range(40)
    ]
    single = await world.discord.invoke(
        "text",
        {"prompt": "b 0"},
        guild_id=other_guild.id,
        channel_id=other_channel.id,
        user_id=world.member.id,
    )

    # A member of the burst's tail gives up while queued: Cancel costs nothing. The one told
    # the longest wait, once a wait of 10 s or more is shown: its turn is then far enough off
    # for the press to come first (on a loaded machine the bot may reach the burst's very last
    # ones only after the window has moved on, and they then never wait).
    def shows_place() -> tuple[int, Message] | None:
        waits = []
        for index, handle in enumerate(burst):
            original = handle.original()
            shown = QUEUED.match(original.text) if original is not None else None
            if original is not None and shown is not None:
                seconds = int(shown[1]) * (60 if shown[2] == "min" else 1)
                waits.append((seconds, index, original))
        longest = max(waits, key=lambda wait: wait[0], default=None)
        return (longest[1], longest[2]) if longest is not None and longest[0] >= 10 else None

    gives_up, queued = await world.discord.signal.wait_for(
        shows_place, 30, "a wait of 10 s or more shown to one of the burst"
    )
    cancel = next(c for c in queued.all_components if c.get("label") == "Cancel")
    await world.discord.press_button(
        queued.id, cancel["custom_id"], user_id=members[gives_up % 8].id
    )
    cancelled = await final_answer(world, burst[gives_up], 30)
    assert "Cancelled; nothing was sent or charged." in cancelled.text
    served = [h for i, h in enumerate(burst) if i != gives_up]
    answers = [await final_answer(world, h, 60) for h in [*served, single]]
    assert all("Sandbox reply to:" in a.text for a in answers), [a.text for a in answers]
    order = posts(world, "/text/generate")
    assert f"a {gives_up}" not in order
    firsts = [p for p in order if p.startswith("a ")]
    assert order.index("b 0") < order.index(firsts[30])
    assert world.api.rate_limited_count(world.key) == 0
    # The members who waited saw their place, with a Cancel button, until their turn came.
    shown = [
        version
        for handle in burst
        if (original := handle.original()) is not None
        for version in original.history
        if str(version.get("text", "")).startswith("Queued: ")
    ]
    assert shown, "no waiting member was shown the queue"
