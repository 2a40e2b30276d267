"""``python -m bench guard``: the spend guard's CPU per charge over a big ledger.

One server with 1,000,000 charges over 120 days (``--quick``: a tenth), seeded as ``python -m
bench dashboard`` seeds it, on SQLite and on PostgreSQL (``tests/support/pg_server.py``'s
Debian binaries; skipped without them). Then charges are recorded one after another as
billing records them (``LedgerStore.insert_charge``, not timed) and the guard's checks run on
each (``SpendGuard.after_charge``: the hourly and balance writes, the month's sums from
``ledger_daily``, the runway, the anomaly's baseline, the alert INSERTs; timed). CPU is the
process's (``time.process_time``: the event loop and the driver's threads) plus, on
PostgreSQL, the server's processes (psutil).

Goal (issue 38, docs/guard.md): the guard adds at most 0.2 ms of CPU per charge, with no scan
of the ledger.
"""

from __future__ import annotations

import asyncio
import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
from pydantic import SecretStr

from bench.dashboard import (
    DAYS,
    GUILD,
    NOW,
    _Executor,
    _seed_postgresql,
    _seed_sqlite,
    _settings,
)
from bench.report import Table
from bot.clock import ManualClock
from bot.config import Settings
from bot.domain import Actor, Charge, Kind
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.storage.repos.dashboard import rebuild_daily
from bot.wiring import assemble_services, open_database
from tests.support.pg_server import SKIP_REASON, PgServer, find_bin_dir

CHARGES = 2_000
"""Charges timed per engine (``--quick``: 500)."""


def _server_cpu(data: Path | None) -> float:
    """CPU seconds of the PostgreSQL server's processes so far (0 without a server)."""
    if data is None:
        return 0.0
    pid = int((data / "postmaster.pid").read_text().split()[0])
    main = psutil.Process(pid)
    total = 0.0
    for proc in [main, *main.children(recursive=True)]:
        try:
            times = proc.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


async def _measure(
    engine: str, settings: Settings, count: int, table: Table, data: Path | None = None
) -> None:
    clock = ManualClock(NOW + 3600)
    db = await open_database(settings, clock)
    await rebuild_daily(db.of(_Executor))
    async with httpx.AsyncClient() as http_client:
        client = GenAPIClient(
            "http://127.0.0.1:9/api/v1", http=http_client, limiter=RateLimiter(clock), clock=clock
        )
        services = assemble_services(settings, clock, db, client, SecretStr("bench-key"))
        try:
            # A budget far above the ledger's month (thresholds read every charge, none fires)
            # and a member allowance: every check the guard has runs.
            await services.guild_config.set_budgets(
                GUILD, monthly=10**12, daily_per_user=10**11, actor=Actor(0)
            )
            await services.guard.update(GUILD, member_10min_cents=10**9)
            guard = services.guard
            charge_cpu = guard_cpu = 0.0
            for n in range(count):
                clock.advance(1.0)
                charge = Charge(
                    guild_id=GUILD,
                    channel_id=5,
                    user_id=1_000 + n % 200,
                    kind=Kind.IMAGE,
                    model="flux-schnell",
                    task_id=f"bench-{n}",
                    cost_cents=Decimal(3),
                    remaining_credits_cents=Decimal(10**9 - 3 * n),
                    key_fingerprint="fp",
                    at=clock.time(),
                )
                began, server = time.process_time(), _server_cpu(data)
                await db.ledger.insert_charge(charge)
                middle, server_middle = time.process_time(), _server_cpu(data)
                await guard.after_charge(charge, (10**11, None))
                ended, server_end = time.process_time(), _server_cpu(data)
                charge_cpu += (middle - began) + (server_middle - server)
                guard_cpu += (ended - middle) + (server_end - server_middle)
            await guard.idle()
        finally:
            await db.close()
    table.add(
        f"{engine}: guard CPU per charge",
        f"{guard_cpu / count * 1000:.3f} ms",
        "goal <= 0.2 ms",
    )
    table.add(
        f"{engine}: the charge's own INSERT, CPU", f"{charge_cpu / count * 1000:.3f} ms", "context"
    )


async def run(workdir: Path, *, quick: bool = False, **_: Any) -> Table:
    """Seed each engine with the dashboard's big ledger, then time the guard per charge."""
    charges = 100_000 if quick else 1_000_000
    count = 500 if quick else CHARGES
    table = Table(f"guard: one server, {charges:,} charges over {DAYS} days; {count} timed")
    path = workdir / "guard.db"
    path.unlink(missing_ok=True)
    settings = _settings(database_path=path)
    db = await open_database(settings, ManualClock())
    await db.close()
    await asyncio.to_thread(_seed_sqlite, path, charges, charges // 5)
    await _measure("SQLite", settings, count, table)
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
        await _seed_postgresql(url, charges, charges // 5)
        await _measure("PostgreSQL", settings, count, table, server.data)
    finally:
        server.stop()
    return table
