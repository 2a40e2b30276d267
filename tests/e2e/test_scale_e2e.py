"""Several processes on one database: two gateway processes (shards 0 and 1
of 2, ``POLLER_ENABLED=false``) and two ``python -m bot worker`` processes, against both
emulators; 20 videos from servers on both shards; one worker killed with ``kill -9`` mid-run.

On SQLite (processes of one machine) and on PostgreSQL: every video is announced exactly
once, no poll of a job overlaps another poll of it, no key ever sees more requests than the
limit in any rolling window (the API emulator's own log; the window is scaled to 6 s), and the
ledger equals the emulator's charges. Every process serves ``/readyz`` and ``/metrics``
(``METRICS_PORT=0``): each worker is ready and exports its polls and deliveries.
"""

from __future__ import annotations

import asyncio
import itertools
import re
import sqlite3
from collections import defaultdict
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx2 as httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from bot.storage.money import from_micro
from tests.support.discord_emulator import DiscordEmulator
from tests.support.discord_emulator.models import Channel, Guild, Message
from tests.support.e2e.harness import (
    BOT_TOKEN,
    MEMBER_PERMISSIONS,
    RATE_WINDOW,
    BotProcess,
    OffsetClock,
    bot_env,
)
from tests.support.pg_server import PgServer

pytestmark = pytest.mark.asyncio(loop_scope="module")

VIDEOS = 20
LIMIT = 30


class Cluster:
    def __init__(self, discord: DiscordEmulator, api: GenApiEmulator, key: str) -> None:
        self.discord = discord
        self.api = api
        self.key = key
        self.channels: dict[int, list[tuple[Guild, Channel]]] = {0: [], 1: []}
        self.gateways: list[BotProcess] = []
        self.workers: list[BotProcess] = []
        self.db_path = Path()
        self.db_url: str | None = None

    async def query(self, sql: str) -> list[tuple[object, ...]]:
        """Rows of ``sql`` from the shared database, whichever engine it is."""
        if self.db_url is None:
            with sqlite3.connect(f"file:{self.db_path}?mode=ro", uri=True) as db:
                return db.execute(sql).fetchall()
        conn = await asyncpg.connect(self.db_url)
        try:
            return [tuple(row) for row in await conn.fetch(sql)]
        finally:
            await conn.close()

    @property
    def processes(self) -> list[BotProcess]:
        return [*self.gateways, *self.workers]


async def claims_of(worker: BotProcess) -> dict[int, int]:
    """Wait for the worker to claim jobs; return its latest claim: job id -> fencing token."""
    for _ in range(600):
        lines = [line for line in worker.log().splitlines() if "bot.jobs.poller: claimed " in line]
        if lines:
            found = re.findall(r"job (\d+) token (\d+)", lines[-1])
            return {int(job): int(token) for job, token in found}
        await asyncio.sleep(0.05)
    raise TimeoutError("the worker claimed no job")


async def health_url(process: BotProcess) -> str:
    """The base URL of the process's /metrics and health checks (``METRICS_PORT=0``)."""
    for _ in range(600):
        found = re.search(r"metrics and health checks at (http://\S+)", process.log())
        if found:
            return found.group(1)
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no metrics URL in the log:\n{process.log()}")


async def ready(process: BotProcess) -> httpx.Response:
    """``/readyz`` of the process once it answers 200 (or its last answer after 30 s)."""
    async with httpx.AsyncClient(base_url=await health_url(process), timeout=10) as http:
        for _ in range(300):
            answer = await http.get("/readyz")
            if answer.status_code == 200:
                break
            await asyncio.sleep(0.1)
    return answer


async def scrape(process: BotProcess) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample of the process's ``/metrics``: (name, labels) -> value."""
    async with httpx.AsyncClient(timeout=10) as http:
        answer = await http.get(f"{await health_url(process)}/metrics")
    assert answer.status_code == 200
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(answer.text)
        for sample in family.samples
    }


def total(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str) -> float:
    """The sum of ``name``'s samples over all their labels."""
    return sum(value for (sample, _), value in samples.items() if sample == name)


def shards_ready(discord: DiscordEmulator) -> bool | None:
    sessions = [discord.hub.shard_sessions.get(shard) for shard in (0, 1)]
    ok = all(s is not None and s.ready_seq and s.sent_seq >= s.ready_seq for s in sessions)
    return True if ok else None


@pytest_asyncio.fixture(loop_scope="module", scope="module", params=["sqlite", "postgresql"])
async def cluster(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Cluster]:
    """The four processes on one database: a SQLite file, then a PostgreSQL database."""
    world_dir = Path(tmp_path_factory.mktemp("scale"))
    pg: PgServer | None = None
    if request.param == "postgresql":
        pg = request.getfixturevalue("pg_server")  # skipped without PostgreSQL's binaries
    discord = DiscordEmulator(bot_token=BOT_TOKEN, clock=OffsetClock())
    discord.hub.shard_count = 2
    await discord.start()
    api = GenApiEmulator(rate_window=RATE_WINDOW)
    await api.start()
    api.set_task_duration(lambda model, body: 6.0)
    key = api.create_key(balance_cents=10_000_000)
    cluster = Cluster(discord, api, key)
    owner = discord.add_user("owner")
    while min(len(c) for c in cluster.channels.values()) < 2:
        guild = discord.add_guild(f"Guild {len(discord.world.guilds)}", owner_id=owner.id)
        channel = discord.add_channel(guild.id, "generate")
        cluster.channels[discord.hub.shard_of(guild.id)].append((guild, channel))
        await asyncio.sleep(0.005)  # the next snowflake's timestamp may pick the other shard
    env = bot_env(world_dir, discord, api, key)
    env.update(
        SHARD_COUNT="2",
        POLLER_ENABLED="false",
        POLL_LEASE_SECONDS="8",
        DELIVERY_LEASE_SECONDS="15",
        LOG_LEVEL="DEBUG",  # the workers' claims: "claimed job 3 token 1 ..."
        DEFAULT_MAX_PENDING_VIDEOS_PER_USER="20",
        METRICS_PORT="0",  # each process picks a free port and logs it
    )
    cluster.db_path = Path(env["DATABASE_PATH"])
    if pg is not None:
        cluster.db_url = env["DATABASE_URL"] = pg.create_database()
    for shard in (0, 1):
        process = BotProcess({**env, "SHARD_IDS": str(shard)}, world_dir / f"gateway-{shard}.log")
        cluster.gateways.append(process)
        await process.start()
    await discord.signal.wait_for(lambda: shards_ready(discord), 90, "both shards READY")
    await discord.wait_commands_synced(timeout=60)
    for number in (0, 1):
        process = BotProcess(dict(env), world_dir / f"worker-{number}.log", ("worker",))
        cluster.workers.append(process)
        await process.start()
    yield cluster
    for process in cluster.processes:
        await process.stop()
    await api.stop()
    await discord.stop()
    if pg is not None and cluster.db_url is not None:
        pg.drop_database(cluster.db_url)
    for process in cluster.processes:
        log = process.log()
        assert key not in log and BOT_TOKEN not in log


async def test_every_process_answers_readyz_and_says_its_role(cluster: Cluster) -> None:
    for process, role in [
        *((gateway, "gateway") for gateway in cluster.gateways),
        *((worker, "worker") for worker in cluster.workers),
    ]:
        answer = await ready(process)
        assert answer.status_code == 200, (role, answer.text)
        assert answer.json() == {"status": "ready"}
        samples = await scrape(process)
        assert samples[("genbot_process_info", frozenset({("role", role)}))] == 1
        assert samples[("genbot_ready", frozenset())] == 1
        if role == "worker":
            assert samples[("genbot_poller_last_pass_timestamp_seconds", frozenset())] > 0


async def test_twenty_videos_over_two_shards_and_two_workers_one_killed(
    cluster: Cluster,
) -> None:
    discord, api = cluster.discord, cluster.api
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    user = discord.add_user("member")
    placeholders: list[Message] = []
    for number in range(VIDEOS):
        guild, channel = cluster.channels[number % 2][number // 2 % 2]
        prompt = f"video number {number} of the scale test"
        await discord.invoke(
            "video",
            {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]},
            guild_id=guild.id,
            channel_id=channel.id,
            user_id=user.id,
            permissions=MEMBER_PERMISSIONS,
        )
        placeholders.append(
            await discord.wait_for_message(
                lambda m, p=prompt: p in m.text, include_existing=True, timeout=60
            )
        )
        if number == VIDEOS // 2:
            held = await claims_of(cluster.workers[0])
            await cluster.workers[0].kill()  # mid-run: its polls wait in its limiter, leased
            # The jobs of that claim it had not finished before dying: another process must
            # take them over (the rest it polled to completion in time).
            orphans = {
                job_id
                for job_id, status in await cluster.query("SELECT id, status FROM jobs")
                if job_id in held and status == "pending"
            }

    for placeholder in placeholders:
        await discord.wait_for_edit(placeholder.id, lambda m: "/files/" in m.text, timeout=120)
    await asyncio.sleep(3)  # more passes of the surviving worker: nothing may be shown twice

    # Every video announced exactly once: its result on its placeholder, one ping.
    for placeholder in placeholders:
        assert "/files/" in discord.messages[placeholder.id].text
        replies = [
            m
            for m in discord.messages.values()
            if str((m.message_reference or {}).get("message_id")) == str(placeholder.id)
        ]
        assert len(replies) == 1, "announced more (or less) than once"
        assert replies[0].pinged_user_ids() == {user.id}
    jobs = await cluster.query("SELECT task_id, announced_at FROM jobs")
    ledger = await cluster.query("SELECT cost_micro FROM ledger WHERE kind = 'video'")
    tokens = dict(await cluster.query("SELECT id, poll_token FROM jobs"))
    assert len(jobs) == VIDEOS and all(announced is not None for _, announced in jobs)
    # The jobs the killed worker left pending were claimed again by the other worker (after
    # their leases expired, or after its last poll), under newer fencing tokens.
    assert all(tokens[job_id] > held[job_id] for job_id in orphans), (held, orphans)

    # No poll of a job overlapped another: a poll is answered in milliseconds on loopback and
    # the next one is scheduled at least 3 s later, so two polls of one task closer than 1 s
    # came from two processes at once.
    polls: dict[str, list[float]] = defaultdict(list)
    for request in api.requests:
        if request.method == "GET" and "/video/" in request.path:
            polls[request.path.split("/video/")[1].split("?")[0]].append(request.time)
    assert set(polls) == {task_id for task_id, _ in jobs}
    for times in polls.values():
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert all(gap >= 1.0 for gap in gaps), f"overlapping polls of one job: {gaps}"

    # The key's limit held over all four processes together, by the emulator's own count.
    sent = sorted(r.time for r in api.requests if r.key == cluster.key and r.counted)
    for first, last in zip(sent, sent[LIMIT:], strict=False):
        assert last - first >= RATE_WINDOW, "more than 30 requests in one rolling window"
    assert not [r for r in api.requests if r.status == 429]

    # The ledger equals the emulator's charges, each task once.
    charged = [t.cost_cents for t in api.tasks.values() if t.kind == "video"]
    assert sorted(from_micro(int(str(r[0]))) for r in ledger) == sorted(charged)
    assert len(ledger) == VIDEOS

    # The surviving worker polled, settled and delivered, and its /metrics says so (the
    # gateways poll nothing); it stays ready.
    survivor = cluster.workers[1]
    assert (await ready(survivor)).status_code == 200
    worker = await scrape(survivor)
    assert total(worker, "genbot_poll_lag_seconds_count") > 0
    assert total(worker, "genbot_deliveries_total") > 0
    assert total(worker, "genbot_detection_delay_seconds_count") > 0
    assert total(worker, "genbot_jobs_finished_total") > 0
    assert (
        worker[
            (
                "genbot_upstream_requests_total",
                frozenset({("operation", "status"), ("outcome", "ok")}),
            )
        ]
        > 0
    )
    for gateway in cluster.gateways:
        assert total(await scrape(gateway), "genbot_poll_lag_seconds_count") == 0
