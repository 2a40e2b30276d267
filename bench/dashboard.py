"""``python -m bench dashboard``: the web dashboard's pages over a big server's ledger.

One server with 1,000,000 charges and 200,000 jobs (``--quick``: a tenth) over 120 days, on
SQLite and on PostgreSQL (``tests/support/pg_server.py``'s Debian binaries; skipped without them).
The dashboard is served in-process as ``python -m bot`` serves it (aiohttp, the real
services, templates and queries); only Discord is replaced, by a directory that says the
member is the server's admin. Each page is asked for repeatedly over loopback HTTP and its
latency taken end to end (p50, p95); the CSV export of the whole ledger is streamed once,
timed in rows a second, with the process's resident memory sampled while it runs.

Goals (``docs/dashboard.md``): Overview, Spend (90 days) and a Ledger page each within
150 ms p95; the export at 50,000 rows a second or more, memory flat.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import sqlite3
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx2 as httpx
import psutil
from pydantic import SecretStr

from bench.report import Table, ms, percentile
from bot.clock import ManualClock
from bot.config import Settings
from bot.dashboard.app import Dashboard
from bot.dashboard.editing import add_all_pages
from bot.domain import GuildRef, MemberAccess, MemberProfile
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.storage.repos.dashboard import rebuild_daily
from bot.storage.sql import Sql
from bot.wiring import assemble_services, open_database
from tests.support.pg_server import SKIP_REASON, PgServer, find_bin_dir

GUILD = 111_111_111_111_111_111
ADMIN = 222_222_222_222_222_222
NOW = 1_767_225_600.0 + 119 * 86_400.0  # 2026-04-30, the ledger's last day
DAYS = 120
MODELS = ("flux-schnell", "sdxl", "kling", "aurora-lite", "gpt-mini", "claude-mini")
KINDS = ("image", "image", "image", "text", "video")
REQUESTS = 40


def _Executor(sql: Sql) -> Sql:  # a "repository" that is the executor itself
    return sql


class AdminDirectory:
    """Discord replaced: the member is the server's admin; no names, no files."""

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        return MemberAccess("Big Server", 1 << 5, frozenset())

    async def member_profile(self, guild_id: int, user_id: int) -> MemberProfile | None:
        return None

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        return []


def _rows(charges: int, jobs: int, seed: int = 7) -> Iterator[tuple[dict[str, Any], Any]]:
    """Yield ``(ledger row, job row or None)``, oldest first, ``jobs`` of them with a job."""
    rng = random.Random(seed)
    start = NOW - DAYS * 86_400.0
    step = DAYS * 86_400.0 / charges
    every = charges // jobs
    for n in range(charges):
        at = start + n * step
        with_job = n % every == 0 and n // every < jobs
        kind = "video" if with_job else rng.choice(KINDS[:4])
        model = rng.choice(MODELS)
        user = 1_000 + rng.randrange(200)
        micro = rng.randrange(100, 50_000_000)
        task = f"t{n}" if kind != "text" else None
        ledger = {
            "guild_id": GUILD, "channel_id": 5, "user_id": user, "kind": kind, "model": model,
            "task_id": task, "at": at, "key_fingerprint": "fp", "cost_micro": micro,
            "remaining_credits_micro": None, "tier_role_id": None if n % 3 else 77,
        }  # fmt: skip
        job = None
        if with_job:
            job = {
                "task_id": task, "provider": "p", "poll_url": "", "kind": "video",
                "model": model, "guild_id": GUILD, "channel_id": 5, "message_id": None,
                "user_id": user, "prompt_summary": f"prompt {n} =1+1", "details": "{}",
                "key_fingerprint": "fp", "status": "completed", "created_at": at + 0.001,
                "next_poll_at": at + 10, "finished_at": at + 60,
                "outputs": json.dumps([f"https://files.example/{n}.mp4"]), "error": None,
                "poll_count": 3, "last_progress_at": None, "announced_at": at + 61,
                "cost_micro": micro, "unwatched_at": None, "delivery_route": "placeholder",
                "delivery_attempts": 0, "next_delivery_at": None, "delivery_error": None,
                "poll_token": 1, "delivery_token": 1,
            }  # fmt: skip
        yield ledger, job


def _seed_sqlite(path: Path, charges: int, jobs: int) -> None:
    db = sqlite3.connect(path)
    ledger: list[dict[str, Any]] = []
    job_rows: list[dict[str, Any]] = []

    def flush() -> None:
        if ledger:
            cols = list(ledger[0])
            db.executemany(
                f"INSERT INTO ledger ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r[c] for c in cols) for r in ledger],
            )
        if job_rows:
            cols = list(job_rows[0])
            db.executemany(
                f"INSERT INTO jobs ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                [tuple(r[c] for c in cols) for r in job_rows],
            )
        ledger.clear()
        job_rows.clear()

    for row, job in _rows(charges, jobs):
        ledger.append(row)
        if job is not None:
            job_rows.append(job)
        if len(ledger) >= 50_000:
            flush()
    flush()
    db.commit()
    db.execute("ANALYZE")
    db.commit()
    db.close()


async def _seed_postgresql(url: str, charges: int, jobs: int) -> None:
    conn = await asyncpg.connect(url)
    try:
        ledger: list[dict[str, Any]] = []
        job_rows: list[dict[str, Any]] = []

        async def flush() -> None:
            if ledger:
                cols = list(ledger[0])
                await conn.copy_records_to_table(
                    "ledger", records=[tuple(r[c] for c in cols) for r in ledger], columns=cols
                )
            if job_rows:
                cols = list(job_rows[0])
                await conn.copy_records_to_table(
                    "jobs", records=[tuple(r[c] for c in cols) for r in job_rows], columns=cols
                )
            ledger.clear()
            job_rows.clear()

        for row, job in _rows(charges, jobs):
            ledger.append(row)
            if job is not None:
                job_rows.append(job)
            if len(ledger) >= 50_000:
                await flush()
        await flush()
        # A table after autovacuum's pass: its statistics, and the visibility map that lets
        # PostgreSQL answer from an index alone.
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def _measure(engine: str, settings: Settings, charges: int, table: Table) -> None:
    clock = ManualClock(NOW + 3600)
    db = await open_database(settings, clock)
    began = time.perf_counter()
    await rebuild_daily(db.sql)  # the bulk load went around insert_charge
    table.notes.append(f"{engine}: ledger_daily rebuilt in {time.perf_counter() - began:.1f} s")
    async with httpx.AsyncClient() as http_client:
        client = GenAPIClient(
            "http://127.0.0.1:9/api/v1", http=http_client, limiter=RateLimiter(clock), clock=clock
        )
        services = assemble_services(settings, clock, db, client, SecretStr("bench-key"))
        dashboard = Dashboard(
            settings,
            services,
            AdminDirectory(),
            application_id=1,
            clock=clock,
            pages=add_all_pages,
        )
        try:
            await dashboard.start()
            token = await services.dashboard.open_session(
                ADMIN, "admin", [GuildRef(GUILD, "Big Server", 1 << 5)]
            )
            base = f"http://127.0.0.1:{settings.dashboard_listen_port}"
            cookies = {dashboard.session_cookie: token}
            async with aiohttp.ClientSession(cookies=cookies) as http:
                pages = {
                    "Overview": f"/servers/{GUILD}",
                    "Spend, 90 days": f"/servers/{GUILD}/spend?days=90",
                    "Ledger, first page": f"/servers/{GUILD}/ledger",
                    "Ledger, one model and kind": f"/servers/{GUILD}/ledger?model=sdxl&kind=image",
                    "Ledger, a member": f"/servers/{GUILD}/ledger?member=1042",
                }
                for label, path in pages.items():
                    times = []
                    for i in range(REQUESTS + 2):
                        began = time.perf_counter()
                        async with http.get(base + path) as response:
                            await response.read()
                            assert response.status == 200, (path, response.status)
                        if i >= 2:  # the first two warm the caches
                            times.append(time.perf_counter() - began)
                    table.add(
                        f"{engine}: {label}",
                        f"p50 {ms(percentile(times, 50))}, p95 {ms(percentile(times, 95))}",
                        "p95 <= 150 ms",
                    )
                process = psutil.Process(os.getpid())
                peak = before = process.memory_info().rss
                rows = 0
                began = time.perf_counter()
                async with http.get(f"{base}/servers/{GUILD}/ledger.csv") as response:
                    # Newlines counted in chunks: the bench's prompts have none inside.
                    async for chunk in response.content.iter_chunked(1 << 16):
                        rows += chunk.count(b"\n")
                        peak = max(peak, process.memory_info().rss)
                took = time.perf_counter() - began
                rows -= 1  # the header
                assert rows == charges, (rows, charges)
                table.add(
                    f"{engine}: CSV export",
                    f"{rows / took:,.0f} rows/s ({rows:,} rows in {took:.1f} s)",
                    ">= 50,000 rows/s",
                )
                table.add(
                    f"{engine}: CSV export memory",
                    f"RSS +{(peak - before) / 2**20:.1f} MiB over the export",
                    "flat",
                )
        finally:
            await dashboard.stop()
            await db.close()


def _settings(**values: Any) -> Settings:
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        discord_token=SecretStr("bench"),
        dashboard_public_url="http://127.0.0.1:18089",
        discord_client_secret=SecretStr("bench"),
        **values,
    )


async def run(workdir: Path, *, quick: bool = False, **_: Any) -> Table:
    """Seed each engine, then time the pages and the export."""
    charges, jobs = (100_000, 20_000) if quick else (1_000_000, 200_000)
    table = Table(f"dashboard: one server, {charges:,} charges and {jobs:,} jobs over {DAYS} days")
    # SQLite.
    path = workdir / "dashboard.db"
    path.unlink(missing_ok=True)
    settings = _settings(database_path=path)
    db = await open_database(settings, ManualClock())
    await db.close()
    began = time.perf_counter()
    await asyncio.to_thread(_seed_sqlite, path, charges, jobs)
    table.notes.append(f"SQLite seeded in {time.perf_counter() - began:.0f} s")
    await _measure("SQLite", settings, charges, table)
    # PostgreSQL.
    bin_dir = find_bin_dir()
    if bin_dir is None:
        table.notes.append(SKIP_REASON.replace("tests", "PostgreSQL runs"))
        return table
    server = PgServer.start(bin_dir)
    try:
        url = server.create_database()
        settings = _settings(database_url=SecretStr(url))
        db = await open_database(settings, ManualClock())
        await db.close()
        began = time.perf_counter()
        await _seed_postgresql(url, charges, jobs)
        table.notes.append(f"PostgreSQL seeded in {time.perf_counter() - began:.0f} s")
        await _measure("PostgreSQL", settings, charges, table)
    finally:
        server.stop()
    return table
