"""The SQLite engine's connection and transaction layer, and its migrations.

One database file, opened twice: a *writer* connection whose transactions are serialised by an
:class:`asyncio.Lock` and ``BEGIN IMMEDIATE`` (so a check-then-write such as a budget reservation
is atomic, also against another process on the same file), and a ``query_only`` *reader*
connection that, thanks to WAL, sees only committed data and never waits for the writer.

Repositories run their SQL through an :class:`Executor`: bound to a transaction, it runs
everything there; unbound, it reads on the reader connection and gives each write method its
own transaction (:meth:`Executor.write`). So each write is written once, whichever way it is
called.

Migrations are ``migrations/NNNN_name.sql``, applied in order at :meth:`SqliteDatabase.open`,
each in its own transaction together with the ``PRAGMA user_version`` bump, so a crash leaves
the database at the previous version, never in between.
"""

from __future__ import annotations

import asyncio
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from decimal import Decimal
from importlib import resources
from pathlib import Path
from typing import Any, Final

import aiosqlite

from bot.clock import Clock, utc_datetime
from bot.storage.money import from_micro
from bot.storage.repositories import ConstraintError, SchemaTooNewError, StorageUnavailableError

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 5000
"""How long a connection waits for another one's write lock before failing, milliseconds."""

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema step: ``version`` is the ``user_version`` after it is applied."""

    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """Return the packaged SQLite migrations in order.

    Raises:
        RuntimeError: if the files are not numbered 1, 2, 3... without gaps (a packaging bug).
    """
    found: list[Migration] = []
    for entry in resources.files("bot.storage.sqlite").joinpath("migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return found


def split_statements(script: str) -> list[str]:
    """Split an SQL script into statements.

    ``sqlite3.complete_statement`` decides where a statement ends, so semicolons inside
    strings, comments or trigger bodies do not split. We run statements one by one rather
    than with ``executescript`` because that commits any open transaction first, and a
    migration must share one transaction with its ``user_version`` bump.
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


async def _connect(path: Path, *, query_only: bool) -> aiosqlite.Connection:
    # isolation_level=None: the sqlite3 module opens no implicit transactions; we issue
    # BEGIN IMMEDIATE / COMMIT ourselves.
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
            row = await cursor.fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise RuntimeError(f"cannot put {path} in WAL mode (got {row and row[0]!r})")
        # FULL, not NORMAL: a reported charge must survive a power cut once committed.
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
        if query_only:
            await conn.execute("PRAGMA query_only = ON")
    except BaseException:
        await conn.close()
        raise
    return conn


async def _user_version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("PRAGMA user_version") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def _rollback(conn: aiosqlite.Connection) -> None:
    # Unconditional: a cancelled BEGIN may still be queued in aiosqlite's thread and run just
    # before this; the queue keeps the order, so this ROLLBACK undoes it. "No transaction is
    # active" is then the harmless outcome of an error that SQLite already rolled back.
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            raise


async def _migrate(conn: aiosqlite.Connection, clock: Clock) -> int:
    migrations = load_migrations()
    supported = len(migrations)
    current = await _user_version(conn)
    if current > supported:
        raise SchemaTooNewError(current, supported)
    for migration in migrations[current:]:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the write lock.
            if await _user_version(conn) >= migration.version:
                await conn.execute("ROLLBACK")
                continue
            for statement in split_statements(migration.sql):
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {migration.version:d}")
            await conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (
                    f"migration.{migration.version:04d}",
                    f"{migration.name} applied {utc_datetime(clock.time()).isoformat()}",
                ),
            )
            await conn.execute("COMMIT")
        except BaseException:
            await _rollback(conn)
            raise
        log.info("database migrated to version %d (%s)", migration.version, migration.name)
    return supported


class Executor:
    """Runs a repository's SQL: inside one transaction, or each write method on its own.

    Args:
        conn: the connection reads run on (the writer inside a transaction, else the reader).
        begin: opens a write transaction and yields its executor; None when this executor is
            bound to a transaction already (writes then run in it).
    """

    def __init__(
        self,
        conn: aiosqlite.Connection,
        begin: Callable[[], AbstractAsyncContextManager[Executor]] | None = None,
    ) -> None:
        self._conn = conn
        self._begin = begin

    def write(self) -> AbstractAsyncContextManager[Executor]:
        """Yield an executor bound to a write transaction: this one's, or a new one.

        A new transaction commits when the block exits and rolls back when it raises, so a
        write method with several statements is all-or-nothing however it is called.
        """
        return self._begin() if self._begin is not None else _Here(self)

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        """Return every row of a query."""
        return list(await self._conn.execute_fetchall(sql, params))

    async def one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        """Return the first row of a query, or None."""
        async with self._conn.execute(sql, params) as cursor:
            row: sqlite3.Row | None = await cursor.fetchone()
        return row

    async def integer(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Return an aggregate written so that it always has one row (``COUNT``, ``COALESCE``)."""
        row = await self.one(sql, params)
        assert row is not None
        return int(row[0])

    async def cents(self, sql: str, params: Sequence[Any] = ()) -> Decimal:
        """Return a ``COALESCE(SUM(<micro-cent column>), 0)`` as Decimal cents."""
        return from_micro(await self.integer(sql, params))

    async def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one write (in its own transaction when unbound); return the rows changed.

        Raises:
            ConstraintError: the write broke a constraint.
        """
        async with self.write() as tx:
            return await tx._execute(sql, params)

    async def insert(self, sql: str, params: Sequence[Any]) -> int:
        """Execute one INSERT (in its own transaction when unbound); return the new row id.

        Raises:
            ConstraintError: the row broke a constraint.
        """
        async with self.write() as tx:
            try:
                async with tx._conn.execute(sql, params) as cursor:
                    rowid = cursor.lastrowid
            except sqlite3.IntegrityError as exc:
                raise ConstraintError(str(exc)) from exc
        assert rowid is not None
        return rowid

    async def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Execute one write statement for each of ``rows``, in one transaction.

        Returns:
            The rows changed, all statements together.

        Raises:
            ConstraintError: a row broke a constraint (none is kept).
        """
        async with self.write() as tx:
            try:
                async with tx._conn.executemany(sql, rows) as cursor:
                    changed: int = cursor.rowcount
            except sqlite3.IntegrityError as exc:
                raise ConstraintError(str(exc)) from exc
        return changed

    async def query_plan(self, sql: str, params: Sequence[Any] = ()) -> list[str]:
        """Return the ``EXPLAIN QUERY PLAN`` details of ``sql`` (for tests and diagnostics)."""
        rows = await self.all(f"EXPLAIN QUERY PLAN {sql}", params)
        return [str(r["detail"]) for r in rows]

    async def _execute(self, sql: str, params: Sequence[Any]) -> int:
        try:
            async with self._conn.execute(sql, params) as cursor:
                return cursor.rowcount
        except sqlite3.IntegrityError as exc:
            raise ConstraintError(str(exc)) from exc


class _Here:
    """The "transaction" of an executor already bound to one: it yields that executor."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    async def __aenter__(self) -> Executor:
        return self._executor

    async def __aexit__(self, *exc: object) -> None:
        return None


class SqliteConnections:
    """The two connections of one database file, and its write transactions.

    Build it with :meth:`open`; release it with :meth:`close`.
    """

    def __init__(
        self, writer: aiosqlite.Connection, reader: aiosqlite.Connection, schema_version: int
    ) -> None:
        self._writer = writer
        self._reader = reader
        self._write_lock = asyncio.Lock()
        self.schema_version = schema_version
        self.executor = Executor(reader, self.transaction)
        """Runs reads on the reader; each write method opens its own transaction."""

    @classmethod
    async def open(cls, path: Path, *, clock: Clock) -> SqliteConnections:
        """Open (creating if needed) the file at ``path`` and migrate it to the latest schema.

        Args:
            path: the database file; its parent directory is created if missing.
            clock: stamps the migration records in ``meta``.

        Raises:
            SchemaTooNewError: the database was written by a newer version of the bot.
            sqlite3.Error: the file cannot be opened or a migration failed (nothing of that
                migration is kept).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await _connect(path, query_only=False)
        try:
            version = await _migrate(writer, clock)
            reader = await _connect(path, query_only=True)
        except BaseException:
            await writer.close()
            raise
        return cls(writer, reader, version)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        """Run the block as one ``BEGIN IMMEDIATE`` transaction, one writer at a time.

        Commits when the block exits normally; rolls back (leaving nothing half-written) when it
        raises or is cancelled. Not re-entrant: a block must not open another transaction.

        Yields:
            The executor bound to the transaction.
        """
        async with self._write_lock:
            try:
                await self._writer.execute("BEGIN IMMEDIATE")
                yield Executor(self._writer)
                await self._writer.execute("COMMIT")
            except BaseException:
                await _rollback(self._writer)
                raise

    async def ping(self) -> None:
        """Run a trivial query on the reader connection.

        Raises:
            StorageUnavailableError: the connection is closed or the file unreadable.
        """
        try:
            await self.executor.integer("SELECT 1")
        except (sqlite3.Error, ValueError) as exc:  # aiosqlite: ValueError once closed
            raise StorageUnavailableError(f"SQLite did not answer: {exc}") from exc

    async def close(self) -> None:
        """Close both connections (waits for a write in progress to finish)."""
        async with self._write_lock:
            await self._reader.close()
            await self._writer.close()
