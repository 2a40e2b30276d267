"""The schemas of the releases before Alembic: each engine's numbered SQL files, as data.

Before Alembic each engine had its own migration numbering: SQLite ``sqlite/0001``-``0013``
(the version in ``PRAGMA user_version``), PostgreSQL ``postgresql/0001``-``0008`` (the rows of
``schema_migrations``). Revision ``0001_baseline`` applies what a database still lacks of its
engine's files, exactly as those releases did (the same statements, the same records in
``meta``, ``user_version`` and ``schema_migrations``), so that a database of any earlier
release, or an empty one, reaches the schema the baseline stands for.
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from importlib import resources
from typing import Final

from sqlalchemy import Connection, text
from sqlalchemy.util import await_

from bot.clock import utc_datetime
from bot.storage.sql import DialectName

_NAME: Final = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class LegacyMigration:
    """One numbered schema step of an engine's legacy sequence.

    Attributes:
        version: the engine's legacy version once it is applied.
        name: the file's name without its number.
        sql: the file's statements.
    """

    version: int
    name: str
    sql: str


def load(engine: DialectName) -> list[LegacyMigration]:
    """Return ``engine``'s legacy migrations in order.

    Raises:
        RuntimeError: the files are not numbered 1, 2, 3... without gaps (a packaging bug).
    """
    found: list[LegacyMigration] = []
    for entry in resources.files(__name__).joinpath(engine).iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(
                LegacyMigration(int(match[1]), match[2], entry.read_text(encoding="utf-8"))
            )
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return found


def split_statements(script: str) -> list[str]:
    """Split an SQLite script into statements.

    ``sqlite3.complete_statement`` decides where a statement ends, so semicolons inside
    strings, comments or trigger bodies do not split. Statements run one by one rather than
    with ``executescript``, which would commit the open transaction first.
    """
    statements: list[str] = []
    pending = ""
    *pieces, tail = script.split(";")
    for piece in pieces:
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    # Text after the last complete statement: whitespace, a comment, or an unterminated
    # statement that SQLite will then report.
    pending += tail
    if pending.strip():
        statements.append(pending.strip())
    return statements


def version(conn: Connection) -> int:
    """The database's legacy version (0: empty, or never migrated by a legacy release)."""
    if conn.dialect.name == "sqlite":
        return int(conn.exec_driver_sql("PRAGMA user_version").scalar_one())
    if not conn.execute(text("SELECT to_regclass('schema_migrations') IS NOT NULL")).scalar_one():
        return 0
    found = conn.execute(text("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"))
    return int(found.scalar_one())


def mark(conn: Connection, legacy_version: int, name: str, at: float) -> None:
    """Record ``legacy_version`` where the legacy releases look for it (and stamp ``meta``).

    SQLite: ``PRAGMA user_version``; PostgreSQL: a row of ``schema_migrations``. A release of
    before Alembic refuses a database whose version it does not know, so a revision after the
    baseline moves this mark past the legacy head (see ``bot.storage.migrate``).
    """
    stamp = f"{name} applied {utc_datetime(at).isoformat()}"
    key = f"migration.{legacy_version:04d}"
    if conn.dialect.name == "sqlite":
        conn.exec_driver_sql(f"PRAGMA user_version = {legacy_version:d}")
        conn.execute(
            text("INSERT OR REPLACE INTO meta (key, value) VALUES (:key, :value)"),
            {"key": key, "value": stamp},
        )
        return
    conn.execute(
        text(
            "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
            " name text NOT NULL, applied_at double precision NOT NULL)"
        )
    )
    conn.execute(
        text(
            "INSERT INTO schema_migrations (version, name, applied_at) VALUES (:v, :n, :at)"
            " ON CONFLICT (version) DO NOTHING"
        ),
        {"v": legacy_version, "n": name, "at": at},
    )
    conn.execute(
        text(
            "INSERT INTO meta (key, value) VALUES (:key, :value)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value"
        ),
        {"key": key, "value": stamp},
    )


def upgrade(conn: Connection, at: float) -> list[LegacyMigration]:
    """Apply the legacy migrations ``conn``'s database lacks, in the open transaction.

    Args:
        conn: a connection in the migration's write transaction.
        at: UTC epoch seconds, the stamp of each migration's record.

    Returns:
        The migrations applied (none when the database was at the legacy head).
    """
    engine: DialectName = "sqlite" if conn.dialect.name == "sqlite" else "postgresql"
    current = version(conn)
    missing = load(engine)[current:]
    for migration in missing:
        if engine == "sqlite":
            for statement in split_statements(migration.sql):
                conn.exec_driver_sql(statement)
        else:
            # A file holds several statements (and DO blocks): asyncpg's simple query protocol
            # runs it whole, on the transaction's connection, as the legacy engine did.
            driver = conn.connection.driver_connection
            assert driver is not None
            await_(driver.execute(migration.sql))
        mark(conn, migration.version, migration.name, at)
    return missing
