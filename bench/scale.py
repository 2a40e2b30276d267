"""Scenario 3: 10,000 pending jobs across 1,000 guilds and 200 keys, resumed after a restart.

The counts are the defaults (earlier figures used them); ``--jobs``, ``--guilds`` and ``--keys``
change them (with 200 keys the spec's capacity of 24 background polls a minute per key,
80 polls a second, caps the run before the processes do).

The database is seeded before the bot starts, as a previous run would have left it: 1,000
guilds each with its own (encrypted) key among 200, and 10,000 pending videos whose tasks exist
in the API emulator and run for an hour, all overdue. Then the bot is started and measured:
time to resume, time until every job was polled once, then a steady window of polling
(CPU, RSS, polls a minute), and the database's size.

Each configuration is one engine and a number of workers: ``0`` workers is the
single process (``python -m bot``, gateway plus poller); ``N`` workers is one gateway process
with ``POLLER_ENABLED=false`` plus ``N`` ``python -m bot worker`` processes on one database.
PostgreSQL is a throwaway server on loopback started with the tests' helper
(``tests/support/pg_server.py``: the Debian ``postgresql`` binaries), one fresh database per
configuration. On PostgreSQL the server's statements in the steady window are profiled
(:mod:`bench.pgstat`: ``pg_stat_statements``) and its CPU per poll shown beside the bot's.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

import psutil
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bench.pgstat import Profiler, profile_table
from bench.report import Table, secs
from bench.world import BENCH_ENV, new_discord, wait_for_log
from bot.clock import SystemClock
from bot.domain import Kind, NewJob
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from bot.services.keys import KeyVault, fingerprint
from bot.storage.database import Database as SqlDatabase
from tests.support.e2e.harness import BotProcess, bot_env
from tests.support.pg_server import SKIP_REASON, PgServer, find_bin_dir

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


async def _seed(api: GenApiEmulator, db: Path, url: str | None, kek: str, size: ScaleSize) -> None:
    rng = random.Random(3)
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    keys = [api.create_key(balance_cents=10**9) for _ in range(size.keys)]
    vault = KeyVault(SecretStr(kek))
    guilds = [10**17 + g for g in range(size.guilds)]
    guild_key = {g: keys[i % size.keys] for i, g in enumerate(guilds)}
    now = time.time()
    store: SqlDatabase
    if url is None:
        store = await SqlDatabase.open_sqlite(db, clock=SystemClock())
    else:
        store = await SqlDatabase.open_postgresql(url, clock=SystemClock())
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


@dataclass(frozen=True)
class Config:
    """One run: an engine and a number of ``python -m bot worker`` processes (0: one process)."""

    engine: str
    workers: int

    @property
    def label(self) -> str:
        shape = "1 process" if self.workers == 0 else f"gw + {self.workers} worker"
        return f"{self.engine}, {shape}{'s' if self.workers > 1 else ''}"


@dataclass
class Cluster:
    """The bot processes of one configuration and what the measure needs to know of them."""

    processes: list[BotProcess]
    pollers: list[BotProcess]
    """The processes that poll: the single process, or the workers."""
    pollers_started_at: float
    """``time.monotonic()`` just before the polling processes were spawned."""
    pollers_started_wall: float
    db: Path
    url: str | None
    pg_pid: int | None
    profiler: Profiler | None = None
    """Profiles the PostgreSQL server's statements in the steady window (None on SQLite)."""
    profile: Table | None = None


def configs(engines: list[str], workers: list[int] | None) -> list[Config]:
    """The runs for ``--engine`` and ``--workers``.

    Without ``--workers`` SQLite runs the single process (the figures of earlier runs) and
    PostgreSQL runs the single process and 1, 2 and 4 workers.
    """
    default = {"sqlite": [0], "postgresql": [0, 1, 2, 4]}
    return [Config(e, n) for e in engines for n in (workers if workers is not None else default[e])]


async def run(
    workdir: Path,
    *,
    quick: bool,
    engines: list[str] | None = None,
    workers: list[int] | None = None,
    touch_cap: float | None = None,
    window: float | None = None,
    jobs: int | None = None,
    guilds: int | None = None,
    keys: int | None = None,
) -> Table:
    """Run every configuration in turn; print each one's table; return the comparison.

    ``touch_cap`` and ``window`` (seconds) shorten the full-size run's phases (see
    :class:`ScaleSize`); ``jobs``, ``guilds`` and ``keys`` replace the size's counts (the
    defaults, or ``--quick``'s). Guild ``g`` uses key ``g mod keys``, job ``j`` guild
    ``j mod guilds``, so more keys than guilds leaves keys unused.
    """
    size = (
        ScaleSize(jobs=1_000, guilds=100, keys=20, touch_cap=60, window=30)
        if quick
        else ScaleSize()
    )
    if touch_cap is not None:
        size = replace(size, touch_cap=touch_cap)
    if window is not None:
        size = replace(size, window=window)
    if jobs is not None:
        size = replace(size, jobs=jobs)
    if guilds is not None:
        size = replace(size, guilds=guilds)
    if keys is not None:
        size = replace(size, keys=keys)
    runs = configs(engines or ["sqlite", "postgresql"], workers)
    pg: PgServer | None = None
    profiler: Profiler | None = None
    if any(c.engine == "postgresql" for c in runs):
        bin_dir = find_bin_dir()
        if bin_dir is None:
            print(SKIP_REASON.replace("tests", "runs"), flush=True)
            runs = [c for c in runs if c.engine != "postgresql"]
        else:
            pg = PgServer.start(bin_dir)
            try:
                profiler = Profiler.enable(pg)
            except BaseException:
                pg.stop()
                raise
    results: list[tuple[Config, dict[str, str]]] = []
    try:
        for config in runs:
            folder = workdir / config.label.replace(", ", "-").replace(" ", "")
            folder.mkdir(parents=True, exist_ok=True)
            print(f"  scale: {config.label}...", flush=True)
            table, figures = await _run_one(folder, size, config, pg, profiler)
            print(table.render(), flush=True)
            results.append((config, figures))
    finally:
        if pg is not None:
            pg.stop()
    summary = Table(
        f"scale, compared: {size.jobs:,} pending jobs, {size.guilds:,} guilds, {size.keys:,} keys",
        header=("metric", *(c.label for c, _ in results)),
    )
    metrics = list(dict.fromkeys(m for _, figures in results for m in figures))
    for metric in metrics:
        summary.add(metric, *(figures.get(metric, "") for _, figures in results))
    summary.notes.append(
        f"poll capacity: {size.keys:,} keys x 30 requests a minute = {size.keys * 30:,}"
        f" ({size.keys / 2:,.0f} a second), less the"
        " slot kept for users (24-28 polls a minute per key are expected)"
    )
    return summary


async def _run_one(
    folder: Path, size: ScaleSize, config: Config, pg: PgServer | None, profiler: Profiler | None
) -> tuple[Table, dict[str, str]]:
    kek = Fernet.generate_key().decode()
    db = folder / "bot.db"
    url = pg.create_database() if pg is not None and config.engine == "postgresql" else None
    api = GenApiEmulator()
    await api.start()
    try:
        default_key = api.create_key()
        began = time.monotonic()
        await _seed(api, db, url, kek, size)
        if profiler is not None and url is not None:
            await profiler.prepare(url)
        seeded_in = time.monotonic() - began
        seeded_size = _db_size(db) if url is None else 0
        env = {"KEY_ENCRYPTION_KEY": kek, "JOB_TIMEOUT_SECONDS": "7200"}
        async with new_discord() as discord:
            variables = bot_env(folder, discord, api, default_key) | BENCH_ENV | env
            if url is not None:
                variables["DATABASE_URL"] = url
            pg_pid = _postmaster_pid(pg) if pg is not None and url is not None else None
            cluster = Cluster([], [], 0.0, 0.0, db, url, pg_pid)
            cluster.profiler = profiler if url is not None else None
            try:
                if config.workers == 0:
                    await _spawn(cluster, BotProcess(variables, folder / "bot.log"), poller=True)
                    await discord.wait_ready(timeout=120)
                    await discord.wait_commands_synced(timeout=60)
                else:
                    gateway = BotProcess(variables | {"POLLER_ENABLED": "false"}, folder / "gw.log")
                    await _spawn(cluster, gateway, poller=False)
                    await discord.wait_ready(timeout=120)
                    await discord.wait_commands_synced(timeout=60)
                    for number in range(config.workers):
                        worker = BotProcess(
                            dict(variables), folder / f"worker-{number}.log", ("worker",)
                        )
                        await _spawn(cluster, worker, poller=True)
                table, figures = await _measure(api, cluster, size, config)
                if cluster.profile is not None:
                    print(cluster.profile.render(), flush=True)
            finally:
                for process in cluster.processes:
                    await process.stop()
    finally:
        await api.stop()
        if pg is not None and url is not None:
            pg.drop_database(url)
    where = f"{seeded_size / 1e6:.1f} MB" if url is None else "PostgreSQL"
    table.add("seeding (bench side, not the bot)", secs(seeded_in), where)
    return table, figures


async def _spawn(cluster: Cluster, process: BotProcess, *, poller: bool) -> None:
    if poller and not cluster.pollers:
        cluster.pollers_started_at, cluster.pollers_started_wall = time.monotonic(), time.time()
    await process.start()
    cluster.processes.append(process)
    if poller:
        cluster.pollers.append(process)


def _pid(process: BotProcess) -> int:
    assert process.process is not None
    return process.process.pid


def _cpu(processes: list[psutil.Process]) -> float:
    total = 0.0
    for process in processes:
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:  # a PostgreSQL backend that ended
            continue
        total += times.user + times.system + times.children_user + times.children_system
    return total


def _postmaster_pid(pg: PgServer) -> int | None:
    """The server's main process (its first line of ``postmaster.pid``), to measure its CPU."""
    try:
        return int((pg.data / "postmaster.pid").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _pg_processes(pid: int | None) -> list[psutil.Process]:
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


async def _measure(
    api: GenApiEmulator, cluster: Cluster, size: ScaleSize, config: Config
) -> tuple[Table, dict[str, str]]:
    lines = [await wait_for_log(p, RESUMED, timeout=120) for p in cluster.pollers]
    resumed_after = max(_log_time(line) for line in lines) - cluster.pollers_started_wall
    resumed_at = cluster.pollers_started_at + resumed_after
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

    bots = [psutil.Process(_pid(p)) for p in cluster.processes]
    server = _pg_processes(cluster.pg_pid)
    bench = [psutil.Process()]  # this process: both emulators answer every poll
    bench_before, busy_before = _cpu(bench), psutil.cpu_times()
    cpu_before, pg_before, wall_before = _cpu(bots), _cpu(server), time.monotonic()
    polls_before = len(watch.polls)
    if cluster.profiler is not None and cluster.url is not None:
        await cluster.profiler.begin(cluster.url)
    load_before = psutil.getloadavg()
    await asyncio.sleep(size.window)
    server = [*server, *(p for p in _pg_processes(cluster.pg_pid) if p not in server)]
    cpu_after, pg_after, wall_after = _cpu(bots), _cpu(server), time.monotonic()
    bench_after, busy_after = _cpu(bench), psutil.cpu_times()
    load_after = psutil.getloadavg()
    watch.update()
    polls = len(watch.polls) - polls_before
    if cluster.profiler is not None and cluster.url is not None:
        statements = await cluster.profiler.end(cluster.url)
        cluster.profile = profile_table(config.label, statements, polls, cluster.profiler.mode)
    rss = [p.memory_info().rss for p in bots]
    elapsed = wall_after - wall_before
    cpu, pg_cpu = cpu_after - cpu_before, pg_after - pg_before
    per_key = Counter(r.key for r in api.requests if r.counted)
    busiest = max((api.max_requests_in_window(k, 60.0) for k in per_key if k), default=0)
    rejected = sum(api.rate_limited_count(k) for k in per_key if k)

    table = Table(
        f"scale [{config.label}]: {size.jobs:,} pending jobs, {size.guilds:,} guilds, "
        f"{size.keys:,} keys, tasks of {TASK_SECONDS / 60:g} min"
    )
    figures: dict[str, str] = {}

    def add(metric: str, value: object, note: object = "") -> None:
        table.add(metric, value, note)
        figures[metric] = str(value)

    start = "the process's start" if config.workers == 0 else "the workers' start (last one)"
    add("resume: start to 'poller started'", secs(resumed_after), f"from {start}")
    if touch_all is not None:
        add("every job polled once, after resume", secs(touch_all))
    else:
        rate = touched / observed * 60 if observed > 0 else 0.0
        projected = size.jobs / rate * 60 if rate else float("nan")
        add(
            "jobs polled once within the cap",
            f"{touched:,} / {size.jobs:,}",
            f"in {observed:.0f} s; projected all: {secs(projected)}",
        )
    add("polls a second (steady window)", f"{polls / elapsed:,.1f}", f"{elapsed:.0f} s window")
    add(
        "polls a minute",
        f"{polls / elapsed * 60:,.0f}",
        f"{size.keys:,} keys x 24-28 = {size.keys * 24:,}-{size.keys * 28:,}",
    )
    add(
        "bot CPU (all bot processes)",
        f"{cpu / elapsed * 100:.0f}% of one core",
        f"{len(bots)} process(es)",
    )
    add("bot CPU per poll (sum of processes)", f"{cpu / polls * 1000:.2f} ms" if polls else "n/a")
    if cluster.url is not None:
        add(
            "PostgreSQL server CPU per poll",
            f"{pg_cpu / polls * 1000:.2f} ms" if polls and server else "n/a",
            f"{pg_cpu / elapsed * 100:.0f}% of one core",
        )
    names = ["bot"] if config.workers == 0 else ["gw", *(f"w{i}" for i in range(config.workers))]
    add(
        "RSS per process",
        ", ".join(f"{n} {r / 2**20:.0f}" for n, r in zip(names, rss, strict=True)) + " MiB",
    )
    if cluster.url is None:
        add("SQLite size (db + wal + shm)", f"{_db_size(cluster.db) / 1e6:.1f} MB")
    add("most requests of one key in a rolling 60 s", busiest, "<= 30")
    add("429s received (all keys)", rejected, "0")
    add(
        "emulators' CPU (the bench process)",
        f"{(bench_after - bench_before) / elapsed * 100:.0f}% of one core",
        "what answers the polls: a cap when near 100%",
    )
    idle = (busy_after.idle - busy_before.idle) / (elapsed * (psutil.cpu_count() or 1))
    add("machine CPU busy", f"{(1 - idle) * 100:.0f}%", f"all users, {psutil.cpu_count()} cores")
    add(
        "load average (1 min), window start / end",
        f"{load_before[0]:.2f} / {load_after[0]:.2f}",
        "the machine's, all users",
    )
    return table, figures
