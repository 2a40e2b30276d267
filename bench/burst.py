"""Scenario 1: a burst of slash commands and autocompletes; how fast is each acknowledged?

The acknowledgement latency is the Discord emulator's :attr:`CallbackRecord.latency`: from its
dispatch of INTERACTION_CREATE on the gateway to the bot's first callback POST arriving.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.report import Table, ms, percentile
from bench.world import new_discord, running_bot
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator import DiscordEmulator, InvocationError
from tests.support.discord_emulator.interactions import APPLICATION_COMMAND
from tests.support.e2e.harness import MEMBER_PERMISSIONS


@dataclass(frozen=True)
class BurstSize:
    interactions: int = 200
    users: int = 50
    guilds: int = 10
    spread: float = 2.0


Action = Callable[[DiscordEmulator, int, int, int], Awaitable[Any]]


def _actions() -> list[tuple[str, Action]]:
    """The mix, one entry per kind; the burst cycles through a weighted list of them."""
    models = catalogue_json()["models"]
    text = models["text"][0]["id"]
    image = next(m["id"] for m in models["image"] if not m.get("async"))
    video = next(m for m in models["video"] if "image" not in m["mode"])

    def command(name: str, options: dict[str, Any]) -> Action:
        async def act(discord: DiscordEmulator, guild: int, channel: int, user: int) -> Any:
            return await discord.invoke(
                name,
                options,
                guild_id=guild,
                channel_id=channel,
                user_id=user,
                permissions=MEMBER_PERMISSIONS,
            )

        return act

    def complete(name: str, options: dict[str, Any], focused: str) -> Action:
        async def act(discord: DiscordEmulator, guild: int, channel: int, user: int) -> Any:
            return await discord.autocomplete(
                name,
                options,
                focused,
                guild_id=guild,
                channel_id=channel,
                user_id=user,
                permissions=MEMBER_PERMISSIONS,
                timeout=15,
            )

        return act

    return [
        ("/text", command("text", {"prompt": "a haiku about queues", "model": text})),
        ("/image", command("image", {"prompt": "a red fox", "model": image})),
        (
            "/video",
            command(
                "video",
                {
                    "prompt": "a cat surfing",
                    "model": video["id"],
                    "duration": video["durations"][0],
                },
            ),
        ),
        ("/models", command("models", {"type": "video"})),
        ("autocomplete", complete("video", {"prompt": "x", "model": "n"}, "model")),
        ("autocomplete", complete("text", {"prompt": "x", "model": ""}, "model")),
    ]


# Out of every 10 interactions: 3 /text, 1 /image, 1 /video, 2 /models, 3 autocompletes.
_WEIGHTS = (0, 0, 0, 1, 2, 3, 3, 4, 5, 4)


async def _burst(discord: DiscordEmulator, size: BurstSize) -> Counter[str]:
    guilds = [discord.add_guild(f"Guild {g}") for g in range(size.guilds)]
    channels = [discord.add_channel(g.id, "generate") for g in guilds]
    users = [discord.add_user(f"user{u}") for u in range(size.users)]
    actions = _actions()
    kinds: Counter[str] = Counter()
    tasks: list[asyncio.Task[Any]] = []
    start = time.monotonic() + 0.5
    for i, pick in zip(range(size.interactions), itertools.cycle(_WEIGHTS)):
        label, act = actions[pick]
        g = i % size.guilds
        user = users[(i // size.guilds * size.guilds + g) % size.users]
        await asyncio.sleep(
            max(0.0, start + i * size.spread / size.interactions - time.monotonic())
        )
        tasks.append(asyncio.create_task(act(discord, guilds[g].id, channels[g].id, user.id)))
        kinds[label] += 1
    results = await asyncio.gather(*tasks, return_exceptions=True)
    failures = [r for r in results if isinstance(r, BaseException)]
    for failure in failures:
        if not isinstance(failure, InvocationError | TimeoutError):
            raise failure
    kinds["(autocomplete not answered in 15 s)"] = len(failures)
    return kinds


async def _wait_acknowledged(discord: DiscordEmulator, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if all(state.callbacks for state in discord.interactions.values()):
            return
        await asyncio.sleep(0.1)


async def _wait_answered(discord: DiscordEmulator, timeout: float) -> int:
    """Wait until every command's "thinking…" was replaced (or followed up); return how many."""

    def answered() -> int:
        done = 0
        for state in discord.interactions.values():
            if state.type != APPLICATION_COMMAND:
                continue
            original = discord.messages.get(state.original_id or 0)
            if state.followup_ids or (original is not None and not original.loading):
                done += 1
        return done

    total = sum(1 for s in discord.interactions.values() if s.type == APPLICATION_COMMAND)
    deadline = time.monotonic() + timeout
    while answered() < total and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    return answered()


async def run(workdir: Path, *, quick: bool) -> Table:
    size = BurstSize(interactions=100, users=25) if quick else BurstSize()
    api = GenApiEmulator()
    await api.start()
    try:
        api.set_task_duration(lambda model, body: 10.0)
        key = api.create_key(balance_cents=10_000_000)
        async with new_discord() as discord, running_bot(workdir, discord, api, key):
            kinds = await _burst(discord, size)
            await _wait_acknowledged(discord, timeout=10)
            answered = await _wait_answered(discord, timeout=30)
            states = list(discord.interactions.values())
            latencies = [s.callbacks[0].latency for s in states if s.callbacks]
            late = sum(1 for s in states if s.callbacks and not s.callbacks[0].accepted)
            commands = sum(1 for s in states if s.type == APPLICATION_COMMAND)
    finally:
        with contextlib.suppress(Exception):
            await api.stop()
    table = Table(
        f"burst: {size.interactions} interactions from {size.users} users in {size.guilds} "
        f"guilds within {size.spread:g} s"
    )
    table.add("mix", ", ".join(f"{k} {v}" for k, v in kinds.items() if v))
    table.add("acknowledged", f"{len(latencies)} / {len(states)}", "all")
    table.add("acknowledged after Discord's 3 s", late, "0")
    table.add("ack latency p50", ms(percentile(latencies, 50)))
    table.add("ack latency p95", ms(percentile(latencies, 95)))
    table.add("ack latency p99", ms(percentile(latencies, 99)), "< 100 ms")
    table.add("ack latency max", ms(max(latencies, default=float("nan"))), "< 3 s (hard limit)")
    table.add(
        "commands answered within 30 s", f"{answered} / {commands}", "rate-limited: 'try again'"
    )
    table.add("API requests on the key", sum(1 for r in api.requests if r.key == key))
    table.add("API 429s on the key", api.rate_limited_count(key), "0")
    return table
