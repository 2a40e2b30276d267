"""``python -m bench.storage_core [--quick]``: CPU per statement, SQLAlchemy Core vs raw drivers.

Storage runs on SQLAlchemy Core; the rule is that Core must not cost more than
0.3 ms of CPU per poll on the hot path. This measures the poller's typical statements on each
engine, run the way the repositories run them:

- ``claim read``: the claim's candidates, 50 rows of 4 columns from 10,000 pending jobs
  (an unbound read);
- ``job by id``: one job, every column (an unbound read);
- ``schedule write``: one job's next poll, an UPDATE in a transaction of its own;
- ``write in tx``: the same UPDATE inside an open transaction (write-behind's per-row cost).

``raw`` is what the executors before SQLAlchemy Core did (aiosqlite: a reader connection, and a
writer connection behind an ``asyncio.Lock`` with ``BEGIN IMMEDIATE``/``COMMIT``; asyncpg: a pool,
``fetch`` and ``execute`` in a transaction). ``core`` is :class:`bot.storage.engine.CoreSql`
with statements built once at module level and given their values at execution (``params`` of
a read, the one row of ``run(stmt, rows)`` of a write; Core has no ``.params()`` for DML);
``core, .params()`` gives a read's values with ``stmt.params(...)`` (a new statement each call),
``core, built per call`` builds the statement for each call (``select(...).where(col <= v)``).
CPU is this process's (``time.process_time``: the event loop, the drivers' threads), per
statement, in microseconds; the database server's own CPU is not in it.
"""

from __future__ import annotations

import argparse
import asyncio
import sqlite3
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiosqlite
import asyncpg
from sqlalchemy import bindparam, select, update

from bot.clock import ManualClock
from bot.storage.database import Database
from bot.storage.engine import CoreSql
from bot.storage.schema import jobs

JOBS = 10_000
NOW = 1_000_000.0

CLAIM_SQL = {
    "sqlite": "SELECT id, key_fingerprint, guild_id, next_poll_at FROM jobs"
    " WHERE status = 'pending' AND next_poll_at <= ? AND unwatched_at IS NULL"
    " ORDER BY next_poll_at LIMIT ?",
    "postgresql": "SELECT id, key_fingerprint, guild_id, next_poll_at FROM jobs"
    " WHERE status = 'pending' AND next_poll_at <= $1 AND unwatched_at IS NULL"
    " ORDER BY next_poll_at LIMIT $2",
}
BY_ID_SQL = {
    "sqlite": "SELECT * FROM jobs WHERE id = ?",
    "postgresql": "SELECT * FROM jobs WHERE id = $1",
}
SCHEDULE_SQL = {
    "sqlite": "UPDATE jobs SET next_poll_at = ?, poll_count = ?"
    " WHERE id = ? AND status = 'pending'",
    "postgresql": "UPDATE jobs SET next_poll_at = $1, poll_count = $2"
    " WHERE id = $3 AND status = 'pending'",
}

CLAIM = (
    select(jobs.c.id, jobs.c.key_fingerprint, jobs.c.guild_id, jobs.c.next_poll_at)
    .where(
        jobs.c.status == "pending",
        jobs.c.next_poll_at <= bindparam("now"),
        jobs.c.unwatched_at.is_(None),
    )
    .order_by(jobs.c.next_poll_at)
    .limit(bindparam("limit", type_=jobs.c.poll_count.type))
)
BY_ID = select(jobs).where(jobs.c.id == bindparam("job_id"))
SCHEDULE = (
    update(jobs)
    .where(jobs.c.id == bindparam("job_id"), jobs.c.status == "pending")
    .values(next_poll_at=bindparam("at"), poll_count=bindparam("n"))
)


def _built_claim() -> Any:
    return (
        select(jobs.c.id, jobs.c.key_fingerprint, jobs.c.guild_id, jobs.c.next_poll_at)
        .where(
            jobs.c.status == "pending", jobs.c.next_poll_at <= NOW, jobs.c.unwatched_at.is_(None)
        )
        .order_by(jobs.c.next_poll_at)
        .limit(50)
    )


def _seed_rows() -> list[tuple[Any, ...]]:
    return [
        (i, f"task-{i}", "alpha", f"/tasks/{i}", "video", "veo", i % 1000, 10, 100, "a cat",
         "{}", f"fp{i % 200}", "pending", 0.0, float(i), "[]", 0, 12_500_000, "placeholder", 0,
         0, 0)
        for i in range(1, JOBS + 1)
    ]  # fmt: skip


SEED_COLUMNS = (
    "id, task_id, provider, poll_url, kind, model, guild_id, channel_id, user_id,"
    " prompt_summary, details, key_fingerprint, status, created_at, next_poll_at, outputs,"
    " poll_count, cost_micro, delivery_route, delivery_attempts, poll_token, delivery_token"
)


async def _cpu(label: str, n: int, call: Callable[[int], Awaitable[Any]]) -> tuple[str, float]:
    for i in range(50):  # warm caches (prepared statements, compiled forms)
        await call(i)
    began = time.process_time()
    for i in range(n):
        await call(i)
    return label, (time.process_time() - began) / n * 1e6


class RawSqlite:
    """The pre-SQLAlchemy SQLite executors' way: a reader, a locked writer, BEGIN IMMEDIATE."""

    def __init__(self, reader: aiosqlite.Connection, writer: aiosqlite.Connection) -> None:
        self.reader, self.writer, self.lock = reader, writer, asyncio.Lock()

    @classmethod
    async def open(cls, path: Path) -> RawSqlite:
        conns = []
        for query_only in (True, False):
            conn = await aiosqlite.connect(path, isolation_level=None)
            conn.row_factory = sqlite3.Row
            for pragma in ("busy_timeout = 5000", "journal_mode = WAL", "synchronous = FULL"):
                await conn.execute(f"PRAGMA {pragma}")
            if query_only:
                await conn.execute("PRAGMA query_only = ON")
            conns.append(conn)
        return cls(conns[0], conns[1])

    async def all(self, sql: str, *params: Any) -> list[Any]:
        return list(await self.reader.execute_fetchall(sql, params))

    async def write(self, sql: str, *params: Any) -> int:
        async with self.lock:
            await self.writer.execute("BEGIN IMMEDIATE")
            async with self.writer.execute(sql, params) as cursor:
                count = cursor.rowcount
            await self.writer.execute("COMMIT")
        return count

    async def close(self) -> None:
        await self.reader.close()
        await self.writer.close()


async def measure(engine: str, target: str, n: int) -> list[tuple[str, str, float]]:
    """Return (statement, way, µs of CPU per statement) for one engine."""
    clock = ManualClock()
    if engine == "sqlite":
        db = await Database.open_sqlite(Path(target), clock=clock)
        with sqlite3.connect(target) as conn:
            conn.executemany(
                f"INSERT INTO jobs ({SEED_COLUMNS}) VALUES ({', '.join('?' * 22)})", _seed_rows()
            )
        raw: Any = await RawSqlite.open(Path(target))
    else:
        db = await Database.open_postgresql(target, clock=clock)
        pool = await asyncpg.create_pool(target, min_size=1, max_size=10)
        assert pool is not None
        await pool.executemany(
            f"INSERT INTO jobs ({SEED_COLUMNS}) VALUES"
            f" ({', '.join(f'${i}' for i in range(1, 23))})",
            _seed_rows(),
        )
        await pool.execute("ANALYZE jobs")
        raw = pool
    sql: CoreSql = db.engines.sql
    claim, by_id, schedule = CLAIM_SQL[engine], BY_ID_SQL[engine], SCHEDULE_SQL[engine]
    results: list[tuple[str, str, float]] = []

    async def raw_read(sql_text: str, *params: Any) -> Any:
        return await (raw.all if engine == "sqlite" else raw.fetch)(sql_text, *params)

    async def raw_write(i: int) -> Any:
        if engine == "sqlite":
            return await raw.write(schedule, NOW + i, i, 1 + i % JOBS)
        async with raw.acquire() as conn, conn.transaction():
            return await conn.execute(schedule, NOW + i, i, 1 + i % JOBS)

    async def core_in_tx(i: int) -> Any:
        return await tx.run(SCHEDULE, [{"job_id": 1 + i % JOBS, "at": NOW + i, "n": i}])

    async def raw_in_tx(i: int) -> Any:
        if engine == "sqlite":
            return await raw.writer.execute(schedule, (NOW + i, i, 1 + i % JOBS))
        return await raw_conn.execute(schedule, NOW + i, i, 1 + i % JOBS)

    cases: list[tuple[str, str, Callable[[int], Awaitable[Any]]]] = [
        ("claim read (50 rows)", "raw", lambda i: raw_read(claim, NOW, 50)),
        ("claim read (50 rows)", "core", lambda i: sql.all(CLAIM, {"now": NOW, "limit": 50})),
        (
            "claim read (50 rows)",
            "core, .params()",
            lambda i: sql.all(CLAIM.params(now=NOW, limit=50)),
        ),
        ("claim read (50 rows)", "core, built per call", lambda i: sql.all(_built_claim())),
        ("job by id", "raw", lambda i: raw_read(by_id, 1 + i % JOBS)),
        ("job by id", "core", lambda i: sql.one(BY_ID, {"job_id": 1 + i % JOBS})),
        ("job by id", "core, .params()", lambda i: sql.one(BY_ID.params(job_id=1 + i % JOBS))),
        ("schedule write (own tx)", "raw", raw_write),
        (
            "schedule write (own tx)",
            "core",
            lambda i: sql.run(SCHEDULE, [{"job_id": 1 + i % JOBS, "at": NOW + i, "n": i}]),
        ),
    ]
    for statement, way, call in cases:
        label, micros = await _cpu(statement, n, call)
        results.append((label, way, micros))
    async with db.engines.transaction() as tx:
        results.append(("write in tx", "core", (await _cpu("", n, core_in_tx))[1]))
    if engine == "sqlite":
        async with raw.lock:
            await raw.writer.execute("BEGIN IMMEDIATE")
            results.append(("write in tx", "raw", (await _cpu("", n, raw_in_tx))[1]))
            await raw.writer.execute("COMMIT")
        await raw.close()
    else:
        async with raw.acquire() as raw_conn, raw_conn.transaction():
            results.append(("write in tx", "raw", (await _cpu("", n, raw_in_tx))[1]))
        await raw.close()
    await db.close()
    return results


def render(engine: str, results: list[tuple[str, str, float]]) -> str:
    """One Markdown table: statement, way, µs per statement, and Core's extra over raw."""
    raw = {s: us for s, way, us in results if way == "raw"}
    lines = [
        f"{engine}:",
        "",
        "| statement | way | CPU per statement (µs) | over raw (µs) |",
        "|---|---|---:|---:|",
    ]
    for statement, way, micros in results:
        extra = "" if way == "raw" else f"{micros - raw[statement]:+.0f}"
        lines.append(f"| {statement} | {way} | {micros:.0f} | {extra} |")
    return "\n".join(lines)


async def _main(engines: list[str], n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="genbot-core-") as tmp:
        for engine in engines:
            if engine == "sqlite":
                target = str(Path(tmp) / "bench.db")
                print(render(engine, await measure(engine, target, n)), flush=True)
                continue
            from tests.support.pg_server import PgServer, find_bin_dir

            bin_dir = find_bin_dir()
            if bin_dir is None:
                print("postgresql: skipped (no server binaries)")
                continue
            server = PgServer.start(bin_dir)
            try:
                results = await measure(engine, server.create_database(), n)
            finally:
                server.stop()
            print(render(engine, results), flush=True)


QUICK_N = 50
"""Statements per measurement with ``--quick``: a smoke run of about a second per engine."""


def main(argv: list[str] | None = None) -> None:
    """Parse ``--engine``, ``-n`` and ``--quick`` and print one table per engine."""
    parser = argparse.ArgumentParser(prog="python -m bench.storage_core")
    parser.add_argument("--engine", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument("-n", type=int, default=2000, help="statements per measurement")
    parser.add_argument(
        "--quick", action="store_true", help=f"{QUICK_N} statements per measurement (smoke run)"
    )
    args = parser.parse_args(argv)
    engines = ["sqlite", "postgresql"] if args.engine == "both" else [args.engine]
    asyncio.run(_main(engines, QUICK_N if args.quick else args.n))


if __name__ == "__main__":
    main()
