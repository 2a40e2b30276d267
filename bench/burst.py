"""Scenario 1: a burst of slash commands and autocompletes; how fast is each acknowledged?

Two parts, on one bot process each:

- **ack burst**: 20 ``/models`` and 20 ``/text`` from 10 members of one
  server, in their own languages, dispatched at once; the figure is the p50 and p99 of their
  acknowledgement. Several rounds (the first on a freshly started bot), a few seconds apart.
- **mix**: 200 interactions (commands and autocompletes) from 50 users in 10 servers, spread
  over 2 s.

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

from bench.report import Table, load_average, ms, percentile
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


ACK_LOCALES = ("en-US", "fr", "de", "ja", "es-ES", "pt-BR", "en-GB", "es-419", "fr", "ja")
"""The ack burst's members' client languages: every shipped catalogue, English and regional
variants, as a server's members have them."""


@dataclass(frozen=True)
class AckBurst:
    """The acknowledgement burst (docs/benchmarks.md, "The acknowledgement first"), each round
    dispatched at once."""

    members: int = 10
    models: int = 20
    texts: int = 20
    rounds: int = 5
    pause: float = 3.0
    """Seconds between rounds (the previous round's answers may still be under way)."""
    rate_limit: int = 300
    """Requests a key may make a minute, on the API emulator and in the bot
    (``GENAPI_RATE_LIMIT``): every round as the first, whose 20 ``/text`` fit the real 30,
    rather than later rounds' ``/text`` waiting in the key's queue (its status edits are
    another benchmark's: ``rate``, ``batch``)."""


async def _ack_round(
    discord: DiscordEmulator,
    size: AckBurst,
    where: tuple[int, int],
    members: list[int],
    text_model: str,
) -> list[float]:
    """Dispatch one round (``/models`` and ``/text`` interleaved, members in turn) at once, in
    ``where`` (guild id, channel id); return each interaction's acknowledgement latency
    (seconds), once every one is acknowledged (or 10 s passed)."""
    guild, channel = where
    calls: list[tuple[str, dict[str, Any]]] = []
    for i in range(max(size.models, size.texts)):
        if i < size.models:
            calls.append(("models", {"type": ("text", "image", "video")[i % 3]}))
        if i < size.texts:
            calls.append(("text", {"prompt": f"a haiku about queues, {i}", "model": text_model}))
    handles = await asyncio.gather(
        *(
            discord.invoke(
                name,
                options,
                guild_id=guild,
                channel_id=channel,
                user_id=members[i % len(members)],
                permissions=MEMBER_PERMISSIONS,
            )
            for i, (name, options) in enumerate(calls)
        )
    )
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and not all(h.state.callbacks for h in handles):
        await asyncio.sleep(0.05)
    return [h.state.callbacks[0].latency for h in handles if h.state.callbacks]


async def run_ack(workdir: Path, *, quick: bool) -> Table:
    """The ack burst: p50 and p99 of each round's acknowledgements, and of all rounds."""
    size = AckBurst(rounds=1) if quick else AckBurst()
    workdir.mkdir(parents=True, exist_ok=True)
    api = GenApiEmulator(rate_limit=size.rate_limit)
    await api.start()
    rows: list[tuple[str, list[float], str]] = []
    try:
        key = api.create_key(balance_cents=10_000_000)
        text_model = catalogue_json()["models"]["text"][0]["id"]
        async with new_discord() as discord:
            guild = discord.add_guild("Ack burst")
            channel = discord.add_channel(guild.id, "generate")
            members = [
                discord.add_user(f"member{u}", locale=ACK_LOCALES[u % len(ACK_LOCALES)]).id
                for u in range(size.members)
            ]
            env = {"GENAPI_RATE_LIMIT": str(size.rate_limit)}
            async with running_bot(workdir, discord, api, key, env):
                await asyncio.sleep(1.0)  # the start-up's own work settles
                for r in range(size.rounds):
                    load = load_average()
                    latencies = await _ack_round(
                        discord, size, (guild.id, channel.id), members, text_model
                    )
                    rows.append((f"round {r + 1}", latencies, load))
                    await asyncio.sleep(size.pause)
    finally:
        with contextlib.suppress(Exception):
            await api.stop()
    table = Table(
        f"ack burst: {size.models} /models + {size.texts} /text from {size.members} members "
        f"at once, {size.rounds} round(s)",
        header=("round", "acknowledged", "p50", "p99", "max", "load average at its start"),
    )
    expected = size.models + size.texts
    everything: list[float] = []
    for label, latencies, load in rows:
        everything += latencies
        table.add(
            label,
            f"{len(latencies)} / {expected}",
            ms(percentile(latencies, 50)),
            ms(percentile(latencies, 99)),
            ms(max(latencies, default=float("nan"))),
            load,
        )
    if len(rows) > 1:
        table.add(
            "all rounds",
            f"{len(everything)} / {expected * len(rows)}",
            ms(percentile(everything, 50)),
            ms(percentile(everything, 99)),
            ms(max(everything, default=float("nan"))),
        )
    table.notes.append("goal: p99 <= 50 ms on a quiet 2-core machine")
    return table


async def run(workdir: Path, *, quick: bool) -> list[Table]:
    """The ack burst (:func:`run_ack`), then the mix (:func:`run_mix`), each on its own bot."""
    ack = await run_ack(workdir / "ack", quick=quick)
    mix = await run_mix(workdir / "mix", quick=quick)
    return [ack, mix]


async def run_mix(workdir: Path, *, quick: bool) -> Table:
    """200 interactions (100 with ``quick``) of every kind, spread over 2 s."""
    size = BurstSize(interactions=100, users=25) if quick else BurstSize()
    workdir.mkdir(parents=True, exist_ok=True)
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
