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
