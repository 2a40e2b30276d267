"""``python -m bench dashboard``: the web dashboard's pages over a big server's ledger.

One server with 1,000,000 charges and 200,000 jobs (``--quick``: a tenth) over 120 days, seeded
by :mod:`bench.ledger` on SQLite and on PostgreSQL (``tests/support/pg_server.py``'s Debian
binaries; skipped without them).
The dashboard is served in-process as ``python -m bot`` serves it (aiohttp, the real
services, templates and queries); only Discord is replaced, by a directory that says the
member is the server's admin. Each page is asked for repeatedly over loopback HTTP and its
latency taken end to end (p50, p95); the CSV export of the whole ledger is streamed once,
timed in rows a second, with the process's resident memory sampled while it runs.

Goals (``docs/dashboard.md``): Overview, Spend (90 days) and a Ledger page each within
150 ms p95; the export at 50,000 rows a second or more, memory flat.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import aiohttp
import httpx2 as httpx
import psutil
from pydantic import SecretStr

from bench.ledger import DAYS, GUILD, NOW, Seeded, seed_each_engine
from bench.report import Table, ms, percentile
from bot.clock import ManualClock
from bot.config import Settings
from bot.dashboard.app import Dashboard
from bot.dashboard.editing import add_all_pages
from bot.dashboard.limits import ADDRESS_BUDGET, SESSION_BUDGET, RequestBuckets
from bot.domain import GuildRef, MemberAccess, MemberProfile
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.storage.repos.dashboard import rebuild_daily
from bot.storage.sql import Sql
from bot.wiring import assemble_services, open_database

ADMIN = 222_222_222_222_222_222
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
                        # The bench is one address and one member: their budgets start afresh.
                        dashboard.by_address = RequestBuckets(ADDRESS_BUDGET, clock.monotonic)
                        dashboard.by_member = RequestBuckets(SESSION_BUDGET, clock.monotonic)
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


async def run(workdir: Path, *, quick: bool = False, **_: Any) -> Table:
    """Seed each engine, then time the pages and the export."""
    charges, jobs = (100_000, 20_000) if quick else (1_000_000, 200_000)
    table = Table(f"dashboard: one server, {charges:,} charges and {jobs:,} jobs over {DAYS} days")

    async def measure(seeded: Seeded) -> None:
        await _measure(seeded.engine, seeded.settings, charges, table)

    await seed_each_engine(workdir, "dashboard", table, measure, charges=charges, jobs=jobs)
    return table
