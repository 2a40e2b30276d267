"""The ledger's daily sums (``ledger_daily``): always exactly the ledger's, on both engines.

Written with each charge in its transaction, filled from the ledger kept before by the
revision that made it, and computed again by ``rebuild_daily``: three ways that must agree with
``SUM`` over the ledger itself, per server, day and dimension.
"""

from __future__ import annotations

import sqlite3
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy import select

from bot.clock import ManualClock
from bot.domain import Charge, Kind, LedgerFilter
from bot.storage import Database
from bot.storage.repos.dashboard import rebuild_daily
from bot.storage.schema import ledger_daily
from bot.storage.sql import Sql
from tests.support.legacy_db import (
    GUILD,
    POSTGRES_HEAD,
    ROWS,
    SQLITE_HEAD,
    build_postgres_at,
    build_sqlite_at,
)

DAY = 86_400.0


def executor(sql: Sql) -> Sql:
    return sql


async def daily(db: Database) -> dict[tuple[Any, ...], tuple[int, int]]:
    rows = await db.sql.all(select(ledger_daily))
    return {
        (r["guild_id"], r["day"], r["dimension"], r["bucket"]): (int(r["charges"]), int(r["micro"]))
        for r in rows
    }


def charge(n: int, cents: str, *, at: float, tier: int | None = None, user: int = 1) -> Charge:
    return Charge(
        guild_id=5,
        channel_id=6,
        user_id=user,
        kind=Kind.IMAGE if n % 2 else Kind.VIDEO,
        model="flux" if n % 3 else "kling",
        task_id=f"t{n}",
        cost_cents=Decimal(cents),
        remaining_credits_cents=None,
        key_fingerprint="fp",
        at=at,
        tier_role_id=tier,
    )


async def test_each_charge_adds_to_its_day_exactly_once(store: Database) -> None:
    start = 1_767_225_600.0
    charges = [
        charge(1, "0.35", at=start + 10),
        charge(2, "1.000001", at=start + 20, tier=77, user=2),
        charge(3, "12.5", at=start + DAY + 5),
        charge(4, "0.000001", at=start + DAY + 6, user=2),
    ]
    for made in charges:
        assert await store.ledger.insert_charge(made)
    assert not await store.ledger.insert_charge(charges[0])  # recorded again: not summed again
    incremental = await daily(store)
    assert incremental[(5, int(start), "total", "")] == (2, 1_350_001)
    assert incremental[(5, int(start + DAY), "member", "2")] == (1, 1)
    assert incremental[(5, int(start), "tier", "77")] == (1, 1_000_001)
    assert incremental[(5, int(start), "tier", "")] == (1, 350_000)
    views = store.dashboard_views
    assert await views.total(5, LedgerFilter()) == (4, 13_850_002)
    assert await views.total(5, LedgerFilter(since=start + DAY)) == (2, 12_500_001)
    assert await views.total(5, LedgerFilter(user_id=2)) == (2, 1_000_002)
    # The same figures by a scan of the ledger (two filters: the daily sums cannot answer).
    assert await views.total(5, LedgerFilter(user_id=2, model="flux")) == (2, 1_000_002)
    assert await views.total(5, LedgerFilter(user_id=1, model="kling")) == (1, 12_500_000)
    await rebuild_daily(store.sql)
    assert await daily(store) == incremental


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
async def test_the_upgrade_sums_the_ledger_kept_before(
    engine: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    path = tmp_path / "bot.db"
    if engine == "sqlite":
        build_sqlite_at(path, SQLITE_HEAD)
        with sqlite3.connect(path) as conn:
            for row in ROWS:
                conn.execute(row)
        db = await Database.open_sqlite(path, clock=ManualClock())
    else:
        url = request.getfixturevalue("pg_url")
        await build_postgres_at(url, POSTGRES_HEAD)
        conn = await asyncpg.connect(url)
        try:
            for row in ROWS:
                await conn.execute(row)
        finally:
            await conn.close()
        db = await Database.open_postgresql(url, clock=ManualClock())
    try:
        sums = await daily(db)
        assert sums[(GUILD, 0, "total", "")] == (2, 12_850_001)
        assert sums[(GUILD, 0, "kind", "video")] == (1, 12_500_001)
        assert sums[(GUILD, 0, "member", "2")] == (1, 350_000)
        # 0017_draft: no charge before it was a draft's nor a Final's.
        assert sums[(GUILD, 0, "stage", "")] == (2, 12_850_001)
        assert await db.dashboard_views.total(GUILD, LedgerFilter()) == (2, 12_850_001)
    finally:
        await db.close()


async def test_a_filtered_total_never_scans_the_servers_ledger(tmp_path: Path) -> None:
    """Totals the daily sums cannot answer (two filters) read an index narrower than the
    server: its member's or its model's charges (SQLite's plans)."""
    from sqlalchemy import Engine, event

    seen: list[str] = []

    def on_connect(dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.set_trace_callback(seen.append)

    event.listen(Engine, "connect", on_connect)
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        start = 1_767_225_600.0
        for n in range(1, 7):
            assert await db.ledger.insert_charge(charge(n, "1", at=start + n, user=n % 2 + 1))
        views = db.reports.dashboard_views
        for where in (
            LedgerFilter(user_id=2, model="flux"),
            LedgerFilter(model="flux", kind="image"),
            LedgerFilter(user_id=1, kind="video", since=start + 0.5),
            LedgerFilter(model="kling", since=start, until=start + DAY),
        ):
            seen.clear()
            await views.total(5, where)
            (query,) = [s for s in seen if "sum(" in s.lower()]
            plan = " | ".join(await db.query_plan(query))
            assert "SCAN" not in plan, (where, plan)
            assert any(
                index in plan
                for index in ("ledger_guild_user_at", "ledger_guild_model_at", "ledger_daily")
            ), (where, plan)
    finally:
        event.remove(Engine, "connect", on_connect)
        await db.close()
