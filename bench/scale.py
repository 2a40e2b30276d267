"""Scenario 3: 10,000 pending jobs across 1,000 guilds and 200 keys, resumed after a restart.

The database is seeded before the bot starts, as a previous run would have left it: 1,000
guilds each with its own (encrypted) key among 200, and 10,000 pending videos whose tasks exist
in the API emulator and run for an hour, all overdue. Then the bot is started and measured:
time to resume, time until every job was polled once, then a steady window of polling
(CPU, RSS, polls a minute), and the database's size.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import psutil
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bench.report import Table, secs
from bench.world import Bench, new_discord, running_bot, wait_for_log
from bot.clock import SystemClock
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from bot.services.keys import KeyVault, fingerprint
from bot.storage.models import Kind, NewJob
from bot.storage.sqlite import SqliteDatabase

TASK_SECONDS = 3600.0
RESUMED = "poller started:"


@dataclass(frozen=True)
class ScaleSize:
    jobs: int = 10_000
    guilds: int = 1_000
    keys: int = 200
    touch_cap: float = 240.0
    """Give up waiting for every job's first poll after this many seconds (then project)."""
    window: float = 60.0
    """The steady window over which CPU and polls are measured."""


async def _seed(api: GenApiEmulator, db: Path, kek: str, size: ScaleSize) -> None:
    rng = random.Random(3)
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    keys = [api.create_key(balance_cents=10**9) for _ in range(size.keys)]
    vault = KeyVault(SecretStr(kek))
    guilds = [10**17 + g for g in range(size.guilds)]
    guild_key = {g: keys[i % size.keys] for i, g in enumerate(guilds)}
    now = time.time()
    store = await SqliteDatabase.open(db, clock=SystemClock())
    try:
        async with store.transaction() as tx:
            for guild, key in guild_key.items():
                await tx.guilds.set_api_key(guild, vault.encrypt(key), key[-4:])
            for j in range(size.jobs):
                guild = guilds[j % size.guilds]
                key = guild_key[guild]
                task = api.seed_video_task(key, str(model["id"]), TASK_SECONDS)
                created = now - rng.uniform(30, 600)
                await tx.jobs.insert(
                    NewJob(
                        task_id=task.task_id,
                        provider=task.provider,
                        poll_url=f"/api/v1/video/{task.task_id}?provider={task.provider}",
                        kind=Kind.VIDEO,
                        model=task.model,
                        guild_id=guild,
                        channel_id=guild + 1,
                        message_id=None,
                        user_id=2 * 10**17 + j % 5_000,
                        prompt_summary=f"scale benchmark {j}",
                        details={"duration": 5},
                        cost_cents=task.cost_cents,
                        key_fingerprint=fingerprint(key),
                        created_at=created,
                        next_poll_at=now - rng.uniform(0, 30),
                    )
                )
    finally:
        await store.close()


def _db_size(db: Path) -> int:
    return sum(p.stat().st_size for p in db.parent.glob(db.name + "*"))


def _log_time(line: str) -> float:
    """Wall time of a bot log line (``%(asctime)s`` is local time with milliseconds)."""
    return datetime.strptime(line[:23], "%Y-%m-%d %H:%M:%S,%f").timestamp()


class PollWatch:
    """Follows the emulator's request log: first poll of each task, polls over time."""

    def __init__(self, api: GenApiEmulator) -> None:
        self._api = api
        self._seen = 0
        self.first_poll: dict[str, float] = {}
        self.polls: list[float] = []

    def update(self) -> None:
        requests = self._api.requests
        for record in requests[self._seen :]:
            if record.method == "GET" and record.path.startswith("/api/v1/video/"):
                task_id = record.path.split("/")[4].split("?")[0]
                self.first_poll.setdefault(task_id, record.time)
                self.polls.append(record.time)
        self._seen = len(requests)


async def run(workdir: Path, *, quick: bool) -> Table:
    size = (
        ScaleSize(jobs=1_000, guilds=100, keys=20, touch_cap=60, window=30)
        if quick
        else ScaleSize()
    )
    kek = Fernet.generate_key().decode()
    db = workdir / "bot.db"
    api = GenApiEmulator()
    await api.start()
    try:
        default_key = api.create_key()
        began = time.monotonic()
        await _seed(api, db, kek, size)
        seeded_in, seeded_size = time.monotonic() - began, _db_size(db)
        env = {"KEY_ENCRYPTION_KEY": kek, "JOB_TIMEOUT_SECONDS": "7200"}
        async with (
            new_discord() as discord,
            running_bot(workdir, discord, api, default_key, env) as bench,
        ):
            table = await _measure(bench, size, db)
    finally:
        await api.stop()
    table.add("seeding (bench side, not the bot)", secs(seeded_in), f"{seeded_size / 1e6:.1f} MB")
    return table


async def _measure(bench: Bench, size: ScaleSize, db: Path) -> Table:
    api = bench.api
    line = await wait_for_log(bench.bot, RESUMED, timeout=120)
    resumed_after = _log_time(line) - bench.started_wall
    resumed_at = bench.started_at + resumed_after
    watch = PollWatch(api)
    deadline = resumed_at + size.touch_cap
    while time.monotonic() < deadline:
        watch.update()
        if len(watch.first_poll) >= size.jobs:
            break
        await asyncio.sleep(1.0)
    watch.update()
    touched = len(watch.first_poll)
    touch_all = max(watch.first_poll.values()) - resumed_at if touched >= size.jobs else None
    observed = time.monotonic() - resumed_at

    bot = psutil.Process(bench.pid)
    cpu_before, wall_before = bot.cpu_times(), time.monotonic()
    polls_before = len(watch.polls)
    await asyncio.sleep(size.window)
    cpu_after, wall_after = bot.cpu_times(), time.monotonic()
    watch.update()
    rss = bot.memory_info().rss
    elapsed = wall_after - wall_before
    cpu = (cpu_after.user + cpu_after.system) - (cpu_before.user + cpu_before.system)
    polls = len(watch.polls) - polls_before
    per_key = Counter(r.key for r in api.requests if r.counted)
    busiest = max((api.max_requests_in_window(k, 60.0) for k in per_key if k), default=0)
    rejected = sum(api.rate_limited_count(k) for k in per_key if k)

    table = Table(
        f"scale: {size.jobs:,} pending jobs, {size.guilds:,} guilds, {size.keys} keys, "
        f"tasks of {TASK_SECONDS / 60:g} min"
    )
    table.add(
        "resume: process start to 'poller started'",
        secs(resumed_after),
        line.split(": ", 1)[1][:60],
    )
    if touch_all is not None:
        table.add("every job polled once, after resume", secs(touch_all))
    else:
        rate = touched / observed * 60 if observed > 0 else 0.0
        projected = size.jobs / rate * 60 if rate else float("nan")
        table.add(
            f"jobs polled once within {observed:.0f} s of resume",
            f"{touched:,} / {size.jobs:,}",
            f"projected all: {secs(projected)}",
        )
    table.add(
        f"polls a minute (steady {elapsed:.0f} s window)",
        f"{polls / elapsed * 60:,.0f}",
        f"budget {size.keys} keys x 24 = {size.keys * 24:,}",
    )
    table.add(
        "bot CPU time per minute",
        secs(cpu / elapsed * 60),
        f"{cpu / elapsed * 100:.0f}% of one core",
    )
    table.add("bot CPU per poll", f"{cpu / polls * 1000:.2f} ms" if polls else "n/a")
    table.add("bot RSS", f"{rss / 2**20:.0f} MiB")
    table.add("SQLite size (db + wal + shm)", f"{_db_size(db) / 1e6:.1f} MB")
    table.add("most requests of one key in a rolling 60 s", busiest, "<= 30")
    table.add("429s received (all keys)", rejected, "0")
    return table
