"""Databases as the releases before Alembic made them, for the upgrade tests.

Each builder does what that release's start-up did, step for step: SQLite applied each file of
``sqlite/NNNN_*.sql`` in its own ``BEGIN IMMEDIATE`` with the ``PRAGMA user_version`` bump and a
``meta`` stamp; PostgreSQL applied the missing files of ``postgresql/NNNN_*.sql`` in one
transaction with a row of ``schema_migrations`` each. The files are the ones those releases
shipped (kept unchanged as the baseline's data).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import asyncpg

from bot.storage.migrations import legacy
from bot.storage.migrations.legacy import split_statements

STAMP = "applied 2025-12-01T00:00:00+00:00"


def build_sqlite_at(path: Path, version: int) -> None:
    """Create (or bring) the SQLite file at ``path`` to legacy ``version`` as a release did."""
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("PRAGMA foreign_keys = ON")
        current = conn.execute("PRAGMA user_version").fetchone()[0]
        for migration in legacy.load("sqlite")[current:version]:
            conn.execute("BEGIN IMMEDIATE")
            for statement in split_statements(migration.sql):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {migration.version:d}")
            conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (f"migration.{migration.version:04d}", f"{migration.name} {STAMP}"),
            )
            conn.execute("COMMIT")
    finally:
        conn.close()


async def build_postgres_at(url: str, version: int) -> None:
    """Bring the PostgreSQL database at ``url`` to legacy ``version`` as a release did."""
    conn = await asyncpg.connect(url)
    try:
        async with conn.transaction():
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at double precision NOT NULL)"
            )
            current = int(
                await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations")
            )
            for migration in legacy.load("postgresql")[current:version]:
                await conn.execute(migration.sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, 0)",
                    migration.version,
                    migration.name,
                )
                await conn.execute(
                    "INSERT INTO meta (key, value) VALUES ($1, $2)"
                    " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                    f"migration.{migration.version:04d}",
                    f"{migration.name} {STAMP}",
                )
    finally:
        await conn.close()


GUILD = 100
"""The guild of the legacy rows."""
SQLITE_HEAD = len(legacy.load("sqlite"))
POSTGRES_HEAD = len(legacy.load("postgresql"))

# Rows of the oldest schema used here (SQLite 0005, PostgreSQL 0001-0003); the columns added
# since have defaults. Money is micro-cents (1 cent = 1,000,000) from SQLite 0005 and PG 0001.
ROWS = [
    "INSERT INTO guild_settings (guild_id, monthly_budget_cents, admin_channel_id)"
    f" VALUES ({GUILD}, 5000, 42)",
    f"INSERT INTO allowed_channels (guild_id, channel_id) VALUES ({GUILD}, 7)",
    "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id, at,"
    " key_fingerprint, cost_micro, remaining_credits_micro)"
    f" VALUES ({GUILD}, 7, 1, 'video', 'vid/t2v', 'done', 100.0, 'fp', 12500001, 975000000)",
    "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id, at,"
    " key_fingerprint, cost_micro, remaining_credits_micro)"
    f" VALUES ({GUILD}, 7, 2, 'image', 'img/x', NULL, 110.0, 'fp', 350000, NULL)",
    "INSERT INTO reservations (guild_id, user_id, kind, model, amount_micro, created_at,"
    f" expires_at) VALUES ({GUILD}, 1, 'video', 'vid/t2v', 50000000, 100.0, 700.0)",
    "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id, user_id,"
    " prompt_summary, cost_micro, key_fingerprint, status, created_at, next_poll_at,"
    " finished_at, outputs, announced_at)"
    f" VALUES ('done', 'alpha', '/p/done', 'video', 'vid/t2v', {GUILD}, 7, 1, 'a cat',"
    " 12500001, 'fp', 'completed', 100.0, 150.0, 200.0, '[\"https://x/v.mp4\"]', 200.0)",
    "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id, user_id,"
    " prompt_summary, cost_micro, key_fingerprint, status, created_at, next_poll_at)"
    f" VALUES ('busy', 'alpha', '/p/busy', 'video', 'vid/t2v', {GUILD}, 7, 1, 'a dog',"
    " 25000000, 'fp', 'pending', 100.0, 150.0)",
    "INSERT INTO meta (key, value) VALUES ('operator.note', 'kept')",
]
MEMBER_ROW = (
    "INSERT INTO member_settings (user_id, video_model, prompt_suffix, private, updated_at)"
    " VALUES (1, 'vid/t2v', 'in watercolour', 1, 100.0)"
)
