r"""The PostgreSQL engine's connection and transaction layer, and its migrations.

A pool of asyncpg connections. Used directly, a repository reads on the pool (committed data)
and each write method runs in a transaction of its own; :meth:`PgConnections.transaction`
binds an :class:`Executor` to one connection and one transaction (READ COMMITTED).

What must be atomic across processes is made so with locks, not retries:

- a guild's budget check-and-reserve, and every write that changes what it sums (a charge, a
  pending job): :meth:`Executor.lock_guild` (``GuildRepository.lock``) takes the guild's
  transaction-scoped advisory lock, ``pg_advisory_xact_lock(guild_id)``; the ledger and job
  writes take it themselves too. Two processes can never both pass a budget that fits one, and
  a check never sees a reservation gone before the charge that replaces it;
- exactly-once transitions (finish a job, mark it delivered) are conditional updates
  (``WHERE status = 'pending'``), which PostgreSQL re-checks after waiting for a row lock.

Migrations are ``postgres/migrations/NNNN_name.sql``, numbered on their own (the SQLite ones are
another sequence). :meth:`PgConnections.open` applies the missing ones in one transaction under
an advisory lock, so processes starting together migrate once; ``schema_migrations`` records
the version.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from decimal import Decimal
from importlib import resources
from typing import Any, Final, TypeAlias
from urllib.parse import urlsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy

from bot.clock import Clock, utc_datetime
from bot.config import redact_database_url
from bot.redaction import REDACTED
from bot.storage.money import from_micro
from bot.storage.repositories import ConstraintError, SchemaTooNewError, StorageUnavailableError

log = logging.getLogger(__name__)

MIGRATION_LOCK: Final = (0x67656E62, 1)
"""The advisory lock of migrations (two-int key space, apart from the guilds' bigint keys)."""

POOL_MAX_SIZE: Final = 10
"""Connections per process: one per transaction or read in flight."""

_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")

Connection: TypeAlias = "asyncpg.Connection[asyncpg.Record] | PoolConnectionProxy[asyncpg.Record]"
"""A connection of its own or one borrowed from a pool."""


class DatabaseUnavailable(StorageUnavailableError):
    """The server cannot be reached or refused the login; the message never has the password."""


class Migration:
    """One numbered schema step: ``version`` is the schema version after it is applied."""

    def __init__(self, version: int, name: str, sql: str) -> None:
        self.version = version
        self.name = name
        self.sql = sql


def load_migrations() -> list[Migration]:
    """Return the packaged PostgreSQL migrations in order.

    Raises:
        RuntimeError: if the files are not numbered 1, 2, 3... without gaps (a packaging bug).
    """
    found: list[Migration] = []
    for entry in resources.files("bot.storage.postgres").joinpath("migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return found


async def schema_version(conn: Connection) -> int:
    """Return the database's schema version (0: never migrated)."""
    if not await conn.fetchval("SELECT to_regclass('schema_migrations') IS NOT NULL"):
        return 0
    return int(await conn.fetchval("SELECT COALESCE(MAX(version), 0) FROM schema_migrations"))


async def migrate(conn: Connection, clock: Clock) -> int:
    """Bring the database to the newest schema in one transaction; return its version.

    Under the advisory lock :data:`MIGRATION_LOCK`: a second process starting at the same time
    waits, then finds nothing left to do. DDL is transactional in PostgreSQL, so a failed
    migration leaves the previous version intact.

    Raises:
        SchemaTooNewError: the database has a version this code does not know.
    """
    migrations = load_migrations()
    supported = len(migrations)
    async with conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1, $2)", *MIGRATION_LOCK)
        current = await schema_version(conn)
        if current > supported:
            raise SchemaTooNewError(current, supported)
        if current < supported:
            await conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations (version integer PRIMARY KEY,"
                " name text NOT NULL, applied_at double precision NOT NULL)"
            )
        for migration in migrations[current:]:
            await conn.execute(migration.sql)
            await conn.execute(
                "INSERT INTO schema_migrations (version, name, applied_at) VALUES ($1, $2, $3)",
                migration.version,
                migration.name,
                clock.time(),
            )
            await conn.execute(
                "INSERT INTO meta (key, value) VALUES ($1, $2)"
                " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
                f"migration.{migration.version:04d}",
                f"{migration.name} applied {utc_datetime(clock.time()).isoformat()}",
            )
            log.info("database migrated to version %d (%s)", migration.version, migration.name)
    return supported


def safe_reason(exc: BaseException, url: str) -> str:
    """The type and first line of ``exc``, with the URL's password and query redacted."""
    reason = (str(exc).strip().splitlines() or [""])[0]
    parts = urlsplit(url)
    for secret in (url, parts.password, parts.query):
        if secret:
            reason = reason.replace(secret, REDACTED)
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__


class Executor:
    """Runs a repository's SQL: inside one transaction, or each write method on its own.

    Args:
        target: the pool (unbound: reads see committed data) or the transaction's connection.
        begin: opens a transaction and yields its executor; None when bound to one already.
    """

    def __init__(
        self,
        target: asyncpg.Pool | Connection,
        begin: Callable[[], AbstractAsyncContextManager[Executor]] | None = None,
    ) -> None:
        self._target = target
        self._begin = begin
        self._locked: set[int] = set()

    @property
    def connection(self) -> Connection:
        """The transaction's connection, for bulk work (``copy_records_to_table``).

        Raises:
            RuntimeError: this executor is not bound to a transaction.
        """
        if self._begin is not None or isinstance(self._target, asyncpg.Pool):
            raise RuntimeError("not bound to a transaction")
        return self._target

    def write(self) -> AbstractAsyncContextManager[Executor]:
        """Yield an executor bound to a transaction: this one's, or a new one (all or nothing)."""
        return self._begin() if self._begin is not None else _Here(self)

    async def lock_guild(self, guild_id: int) -> None:
        """Hold the guild's advisory lock until the transaction ends; unbound: nothing to hold."""
        if self._begin is None and guild_id not in self._locked:
            await self._target.execute("SELECT pg_advisory_xact_lock($1)", guild_id)
            self._locked.add(guild_id)

    async def all(self, sql: str, *params: Any) -> list[asyncpg.Record]:
        """Return every row of a query."""
        return list(await self._target.fetch(sql, *params))

    async def one(self, sql: str, *params: Any) -> asyncpg.Record | None:
        """Return the first row of a query, or None."""
        row: asyncpg.Record | None = await self._target.fetchrow(sql, *params)
        return row

    async def value(self, sql: str, *params: Any) -> Any:
        """Return the first column of the first row, or None."""
        return await self._target.fetchval(sql, *params)

    async def integer(self, sql: str, *params: Any) -> int:
        """Return an aggregate written so that it always has one row (``COUNT``, ``COALESCE``)."""
        return int(await self._target.fetchval(sql, *params))

    async def cents(self, sql: str, *params: Any) -> Decimal:
        """Return a ``COALESCE(SUM(<micro-cent column>), 0)`` as Decimal cents.

        ``SUM(bigint)`` is ``numeric`` in PostgreSQL: exact, made an int before the conversion.
        """
        return from_micro(await self.integer(sql, *params))

    async def run(self, sql: str, *params: Any) -> int:
        """Execute one write (in its own transaction when unbound); return the rows changed.

        Raises:
            ConstraintError: the write broke a constraint.
        """
        async with self.write() as tx:
            try:
                status = await tx._target.execute(sql, *params)
            except asyncpg.IntegrityConstraintViolationError as exc:
                raise ConstraintError(exc.message) from exc
        # The command tag: "UPDATE 3", "DELETE 0", "INSERT 0 1".
        return int(status.rsplit(" ", 1)[-1])

    async def returning(self, sql: str, *params: Any) -> Any:
        """Execute one write with ``RETURNING`` (own transaction when unbound); its first value.

        Returns None when no row was written (``ON CONFLICT ... DO NOTHING``).

        Raises:
            ConstraintError: the write broke a constraint.
        """
        async with self.write() as tx:
            try:
                return await tx._target.fetchval(sql, *params)
            except asyncpg.IntegrityConstraintViolationError as exc:
                raise ConstraintError(exc.message) from exc

    async def query_plan(self, sql: str, *params: Any) -> list[str]:
        """Return the ``EXPLAIN`` lines of ``sql`` (for tests and diagnostics)."""
        return [str(r[0]) for r in await self.all(f"EXPLAIN {sql}", *params)]


class _Here:
    """The "transaction" of an executor already bound to one: it yields that executor."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor

    async def __aenter__(self) -> Executor:
        return self._executor

    async def __aexit__(self, *exc: object) -> None:
        return None


class PgConnections:
    """The pool of one PostgreSQL database, and its transactions.

    Build it with :meth:`open`; release it with :meth:`close`.
    """

    def __init__(self, pool: asyncpg.Pool, schema_version: int) -> None:
        self._pool = pool
        self.schema_version = schema_version
        self.executor = Executor(pool, self.transaction)
        """Reads on the pool; each write method opens its own transaction."""

    @classmethod
    async def open(cls, url: str, *, clock: Clock, max_size: int = POOL_MAX_SIZE) -> PgConnections:
        """Connect to ``url`` and migrate the database to the latest schema.

        Args:
            url: ``postgresql://user:password@host:port/dbname``; a secret.
            clock: stamps the migration records.
            max_size: the pool's most connections.

        Raises:
            SchemaTooNewError: the database was written by a newer version of the bot.
            DatabaseUnavailable: the server is unreachable or refused the login (one line; the
                URL shown without its password).
        """
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=max_size)
        except Exception as exc:
            raise DatabaseUnavailable(
                f"DATABASE_URL: cannot connect to {redact_database_url(url)}: "
                f"{safe_reason(exc, url)}"
            ) from None
        try:
            async with pool.acquire() as conn:
                version = await migrate(conn, clock)
        except BaseException:
            await pool.close()
            raise
        return cls(pool, version)

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Executor]:
        """Run the block as one transaction on one pooled connection.

        Commits when the block exits normally; rolls back when it raises or is cancelled.

        Yields:
            The executor bound to the transaction.
        """
        async with self._pool.acquire() as conn, conn.transaction():
            yield Executor(conn)

    async def ping(self) -> None:
        """Run a trivial query.

        Raises:
            StorageUnavailableError: the server did not answer or the pool is closed.
        """
        try:
            await self._pool.fetchval("SELECT 1")
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            raise StorageUnavailableError(f"PostgreSQL did not answer: {exc}") from exc

    async def close(self) -> None:
        """Close the pool (waits for the connections in use to be released)."""
        await self._pool.close()
