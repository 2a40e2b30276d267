"""One seeder of the big server's ledger, for the ``dashboard``, ``guard`` and ``thumbs`` benches.

One server (:data:`GUILD`) with ``charges`` ledger rows over :data:`DAYS` days ending at
:data:`NOW`, ``jobs`` of them with a finished video job, bulk-loaded around the bot's own writes
(``executemany`` on SQLite, ``COPY`` on PostgreSQL) into a database the bot's migrations made.
:func:`seed_each_engine` seeds SQLite, then PostgreSQL (``tests/support/pg_server.py``'s Debian
binaries; skipped, with a note, without them), and hands each to the benchmark's measurement.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
from pydantic import SecretStr

from bench.report import Table
from bot.clock import ManualClock
from bot.config import Settings
from bot.wiring import open_database
from tests.support.pg_server import SKIP_REASON, PgServer, find_bin_dir

GUILD = 111_111_111_111_111_111
NOW = 1_767_225_600.0 + 119 * 86_400.0  # 2026-04-30, the ledger's last day
DAYS = 120
MODELS = ("flux-schnell", "sdxl", "kling", "aurora-lite", "gpt-mini", "claude-mini")
KINDS = ("image", "image", "image", "text", "video")
BATCH = 50_000
"""Rows written per bulk statement."""


@dataclass(frozen=True)
class Seeded:
    """One engine's seeded database, as a benchmark measures it.

    Attributes:
        engine: ``"SQLite"`` or ``"PostgreSQL"``, as the tables name it.
        settings: the bot's settings for that database.
        path: the SQLite file (None on PostgreSQL).
        url: the PostgreSQL URL (None on SQLite).
        data: the PostgreSQL server's data directory, for its processes' CPU (None on SQLite).
    """

    engine: str
    settings: Settings
    path: Path | None = None
    url: str | None = None
    data: Path | None = None


def bench_settings(**values: Any) -> Settings:
    """The bot's settings for a benchmark: no ``.env``, a dashboard on loopback."""
    return Settings(
        _env_file=None,  # type: ignore[call-arg]
        discord_token=SecretStr("bench"),
        dashboard_public_url="http://127.0.0.1:18089",
        discord_client_secret=SecretStr("bench"),
        **values,
    )


def rows(charges: int, jobs: int, seed: int = 7) -> Iterator[tuple[dict[str, Any], Any]]:
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


def seed_sqlite(path: Path, charges: int, jobs: int) -> None:
    """Bulk-load :func:`rows` into the SQLite file ``path`` (migrated), then ``ANALYZE``."""
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

    for row, job in rows(charges, jobs):
        ledger.append(row)
        if job is not None:
            job_rows.append(job)
        if len(ledger) >= BATCH:
            flush()
    flush()
    db.commit()
    db.execute("ANALYZE")
    db.commit()
    db.close()


async def seed_postgresql(url: str, charges: int, jobs: int) -> None:
    """Bulk-load :func:`rows` into the PostgreSQL database ``url`` (migrated), then vacuum."""
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

        for row, job in rows(charges, jobs):
            ledger.append(row)
            if job is not None:
                job_rows.append(job)
            if len(ledger) >= BATCH:
                await flush()
        await flush()
        # A table after autovacuum's pass: its statistics, and the visibility map that lets
        # PostgreSQL answer from an index alone.
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def _migrated(settings: Settings) -> None:
    """Create the bot's schema (its migrations), as the bot's first start would."""
    db = await open_database(settings, ManualClock())
    await db.close()


async def seed_each_engine(
    workdir: Path,
    name: str,
    table: Table,
    measure: Callable[[Seeded], Awaitable[None]],
    *,
    charges: int,
    jobs: int,
    settings: Mapping[str, Mapping[str, Any]] | None = None,
) -> None:
    """Seed SQLite (``workdir/<name>.db``), then PostgreSQL, and ``measure`` each in turn.

    Each engine's seeding time is noted in ``table``; without PostgreSQL's binaries the note says
    why it was skipped. The PostgreSQL server is stopped on the way out, whatever happens.

    Args:
        workdir: the benchmark's directory.
        name: the SQLite file's stem.
        table: the benchmark's table, for the notes.
        measure: the benchmark's measurement of one seeded engine.
        charges: ledger rows to seed.
        jobs: how many of them have a finished video job.
        settings: more settings per engine (``{"SQLite": {...}, "PostgreSQL": {...}}``).
    """
    extra = settings or {}
    path = workdir / f"{name}.db"
    path.unlink(missing_ok=True)
    sqlite = bench_settings(database_path=path, **extra.get("SQLite", {}))
    await _migrated(sqlite)
    began = time.perf_counter()
    await asyncio.to_thread(seed_sqlite, path, charges, jobs)
    table.notes.append(f"SQLite seeded in {time.perf_counter() - began:.0f} s")
    await measure(Seeded("SQLite", sqlite, path=path))
    bin_dir = find_bin_dir()
    if bin_dir is None:
        table.notes.append(SKIP_REASON.replace("tests", "PostgreSQL runs"))
        return
    server = PgServer.start(bin_dir)
    try:
        url = server.create_database()
        postgresql = bench_settings(database_url=SecretStr(url), **extra.get("PostgreSQL", {}))
        await _migrated(postgresql)
        began = time.perf_counter()
        await seed_postgresql(url, charges, jobs)
        table.notes.append(f"PostgreSQL seeded in {time.perf_counter() - began:.0f} s")
        await measure(Seeded("PostgreSQL", postgresql, url=url, data=server.data))
    finally:
        server.stop()
