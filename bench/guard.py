"""``python -m bench guard``: the spend guard's CPU per charge over a big ledger.

One server with 1,000,000 charges over 120 days (``--quick``: a tenth), seeded by
:mod:`bench.ledger` (as ``python -m bench dashboard`` is) on SQLite and on PostgreSQL
(``tests/support/pg_server.py``'s Debian binaries; skipped without them), its hours summed into
``guard_hourly``. Then charges
are recorded one after another as billing records them (``LedgerStore.insert_charge``) and the
guard's checks run on each (``SpendGuard.after_charge``). The guard's hourly write is part of
the charge's own transaction (``add_to_hours``), so its cost is measured as a difference:
charges alternate between the guarded path (``insert_charge`` with its hours, then
``after_charge``) and a baseline whose ``insert_charge`` skips the hours and runs no check.
The guard's CPU per charge is the guarded charge's CPU less the baseline's. The first 300
charges (every member's first, whose sums are read once) are not timed. CPU is the process's
(``time.process_time``: the event loop and the driver's threads) plus, on PostgreSQL, the
server's processes (psutil).

Goal (issue 38, docs/guard.md): the guard adds at most 0.2 ms of CPU per charge, with no scan
of the ledger.
"""

from __future__ import annotations

import time
from decimal import Decimal
from pathlib import Path
from typing import Any

import httpx2 as httpx
import psutil
from pydantic import SecretStr
from sqlalchemy import text

from bench.ledger import DAYS, GUILD, NOW, Seeded, seed_each_engine
from bench.report import Table
from bot.clock import ManualClock
from bot.config import Settings
from bot.domain import Actor, Charge, Kind
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.storage.repos import ledger as ledger_module
from bot.storage.repos.dashboard import rebuild_daily
from bot.storage.repos.guard import add_to_hours
from bot.wiring import assemble_services, open_database

CHARGES = 4_000
"""Charges timed per engine, half guarded, half the baseline (``--quick``: 1,000)."""

WARM_UP = 300
"""Charges before the timed ones (each of the 200 members seen once: their sums read)."""


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
    await rebuild_daily(db.sql)
    await _backfill_hours(db)
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
            cpu = {True: 0.0, False: 0.0}
            checks = 0.0
            for n in range(WARM_UP + count):
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
                guarded = n < WARM_UP or n % 2 == 0
                ledger_module.add_to_hours = add_to_hours if guarded else _no_hours
                began, server = time.process_time(), _server_cpu(data)
                await db.ledger.insert_charge(charge)
                middle = time.process_time()
                if guarded:
                    await guard.after_charge(charge, (10**11, None))
                ended, server_end = time.process_time(), _server_cpu(data)
                if n >= WARM_UP:
                    cpu[guarded] += (ended - began) + (server_end - server)
                    checks += ended - middle if guarded else 0.0
            ledger_module.add_to_hours = add_to_hours
            await guard.idle()
        finally:
            await db.close()
    half = count / 2
    table.add(
        f"{engine}: guard CPU per charge",
        f"{(cpu[True] - cpu[False]) / half * 1000:.3f} ms",
        "goal <= 0.2 ms",
    )
    table.add(
        f"{engine}: of which after_charge (process CPU)",
        f"{checks / half * 1000:.3f} ms",
        "context",
    )
    table.add(
        f"{engine}: the charge without the guard, CPU",
        f"{cpu[False] / half * 1000:.3f} ms",
        "context",
    )


async def _no_hours(sql: Any, **_: Any) -> None:
    """The baseline's ``add_to_hours``: no hours written."""


async def _backfill_hours(db: Any) -> None:
    """Sum the seeded ledger into ``guard_hourly`` (as the charges' own writes would have)."""
    executor = db.sql
    if executor.dialect == "postgresql":
        hour = "CAST(floor(at / 3600) AS BIGINT) * 3600"
    else:
        hour = "CAST(at / 3600 AS INTEGER) * 3600"
    for scope in ("'g' || CAST(guild_id AS TEXT)", "'k' || key_fingerprint"):
        await executor.run(
            text(
                f"INSERT INTO guard_hourly (scope, hour, micro) SELECT {scope}, {hour},"
                f" SUM(cost_micro) FROM ledger WHERE key_fingerprint IS NOT NULL"
                f" GROUP BY {scope}, {hour}"
            )
        )


async def run(workdir: Path, *, quick: bool = False, **_: Any) -> Table:
    """Seed each engine with the dashboard's big ledger, then time the guard per charge."""
    charges = 100_000 if quick else 1_000_000
    count = 1_000 if quick else CHARGES
    table = Table(f"guard: one server, {charges:,} charges over {DAYS} days; {count} timed")

    async def measure(seeded: Seeded) -> None:
        await _measure(seeded.engine, seeded.settings, count, table, seeded.data)

    await seed_each_engine(workdir, "guard", table, measure, charges=charges, jobs=charges // 5)
    return table
