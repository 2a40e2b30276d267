r"""The engines under every repository: SQLAlchemy Core over sqlite3 and asyncpg.

:class:`Engines` holds the connections of one database and opens its write transactions;
:class:`CoreSql` is the :class:`~bot.storage.sql.Sql` every repository runs through, unbound
(reads see committed data, each write method gets a transaction of its own) or bound to one
transaction.

SQLite (``DATABASE_PATH``): one file opened by two connections of the standard library's driver
(SQLAlchemy's ``pysqlite``), each with a thread of its own as aiosqlite would give it. The
*writer*: an :class:`asyncio.Lock` lets one transaction at a time have it, and each
transaction starts with ``BEGIN IMMEDIATE`` (SQLAlchemy's documented pysqlite recipe: the
driver's own transaction handling is off, the ``begin`` event emits our ``BEGIN``), so a
check-then-write such as a budget reservation is atomic, also against another process on the
same file. The *reader* is ``query_only`` and, thanks to WAL, sees only committed data and never
waits for the writer. A read, or a write with its ``BEGIN`` and ``COMMIT``, is one trip to the
connection's thread.

PostgreSQL (``DATABASE_URL``): asyncpg's pool of :data:`POOL_MAX_SIZE` connections for the
repositories; SQLAlchemy's ``postgresql+asyncpg`` engine (no pool kept) for migrations, copy-db
and diagnostics. A transaction is READ COMMITTED on one connection; reads outside one run on
the pool (one round trip, no ``BEGIN``). What must not interleave between processes takes the
guild's transaction-scoped advisory lock (:meth:`CoreSql.lock_guild`); exactly-once transitions
are conditional updates, which PostgreSQL re-checks after waiting for a row lock.

How a statement runs: Core builds it (the repositories) and compiles it, once per structure
(:func:`statement`, Core's own compiled cache); the driver runs the SQL text, sqlite3 in the
connection's thread, asyncpg on the event loop. Core's execution layer (its DBAPI adapters,
result objects) is left out: it cost 0.1-0.2 ms of CPU per statement, 0.5 ms (SQLite) to
2.4 ms (PostgreSQL) per poll at 10,000 jobs (``docs/benchmarks.md``, "Storage on SQLAlchemy
Core"). Rows are the drivers' (``sqlite3.Row``, ``asyncpg.Record``), read by column name.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sqlite3
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, Final, TypeVar, cast
from urllib.parse import urlsplit

import asyncpg
from asyncpg.pool import PoolConnectionProxy
from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine
from sqlalchemy.pool import ConnectionPoolEntry, NullPool, StaticPool
from sqlalchemy.sql import Executable
from sqlalchemy.util import LRUCache, greenlet_spawn

from bot.config import redact_database_url
from bot.domain import ConstraintError, StorageUnavailableError
from bot.redaction import REDACTED
from bot.storage.sql import DialectName, Params, Row, Sql

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 5000
"""How long a SQLite connection waits for another one's write lock before failing, ms (the
default of ``DATABASE_BUSY_TIMEOUT_SECONDS``)."""

POOL_MAX_SIZE: Final = 10
"""PostgreSQL connections per process: one per transaction or read in flight."""

REPORT_READS: Final = 2
"""Reports' reads (the dashboard's ledger, exports, spend) in flight at once per process.

They run on a lane of their own (:attr:`Engines.reports`): on SQLite a third connection, so the
bot's reader never queues behind them; on PostgreSQL at most this many of the pool's
connections, so the poller's and the commands' reads always find one."""

_T = TypeVar("_T")


class DatabaseUnavailable(StorageUnavailableError):
    """The server cannot be reached or refused the login; the message never has the password."""


def safe_reason(exc: BaseException, url: str) -> str:
    """The type and first line of ``exc``, with the URL's password and query redacted."""
    reason = (str(exc).strip().splitlines() or [""])[0]
    parts = urlsplit(url)
    for secret in (url, parts.password, parts.query):
        if secret:
            reason = reason.replace(secret, REDACTED)
    return f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__


# -- SQLite connections ------------------------------------------------------------------------


def _sqlite_pragmas(
    *, query_only: bool, busy_timeout_ms: int = BUSY_TIMEOUT_MS
) -> Callable[[Any, ConnectionPoolEntry], None]:
    """The ``connect`` hook of a SQLite engine: today's pragmas, and no driver transactions.

    ``busy_timeout_ms``: how long a statement waits for another connection's write lock, ms.
    """

    def on_connect(dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        # SQLAlchemy's recipe: the driver opens no transaction of its own (and commits nothing
        # before DDL); the engine's ``begin`` hook emits BEGIN IMMEDIATE instead.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {busy_timeout_ms:d}")
            cursor.execute("PRAGMA journal_mode = WAL")
            row = cursor.fetchone()
            if row is None or str(row[0]).lower() != "wal":
                raise RuntimeError(f"cannot put the database in WAL mode (got {row!r})")
            # FULL, not NORMAL: a reported charge must survive a power cut once committed.
            cursor.execute("PRAGMA synchronous = FULL")
            cursor.execute("PRAGMA foreign_keys = ON")
            if query_only:
                cursor.execute("PRAGMA query_only = ON")
        finally:
            cursor.close()

    return on_connect


def _begin_immediate(conn: Connection) -> None:
    # Take the write lock at BEGIN, not at the first write: a transaction that reads before it
    # writes (check-then-reserve) must not see a state another writer changes under it.
    conn.exec_driver_sql("BEGIN IMMEDIATE")


class _SqliteSide:
    """One SQLite connection with a thread of its own, as aiosqlite gives each connection.

    The standard library's driver (SQLAlchemy's ``pysqlite``) runs in that one thread; a whole
    call (a read, or a write with its ``BEGIN IMMEDIATE`` and ``COMMIT``) is one trip to the
    thread, and the Core connection stays checked out for the engine's life, so no statement
    pays for a pool. (SQLAlchemy's aiosqlite adapter makes four trips per read and seven per
    write: ``docs/benchmarks.md``, "Storage on SQLAlchemy Core".)
    """

    def __init__(
        self,
        path: Path,
        *,
        query_only: bool,
        name: str | None = None,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
    ) -> None:
        self.busy_timeout_ms = busy_timeout_ms
        self.engine = create_engine(
            f"sqlite:///{path}",
            poolclass=StaticPool,  # the one connection, used by the one thread
            # The reader never opens a transaction: nothing to roll back when a read ends.
            skip_autocommit_rollback=query_only,
        )
        event.listen(
            self.engine,
            "connect",
            _sqlite_pragmas(query_only=query_only, busy_timeout_ms=busy_timeout_ms),
        )
        if not query_only:
            event.listen(self.engine, "begin", _begin_immediate)
        self._thread = ThreadPoolExecutor(
            1, thread_name_prefix=name or ("sqlite-reader" if query_only else "sqlite-writer")
        )
        self._conn: Connection | None = None

    def connection(self) -> Connection:
        """The Core connection (opened on first use); call in the side's thread only."""
        if self._conn is None or self._conn.invalidated or self._conn.closed:
            self._conn = self.engine.connect()
        return self._conn

    async def call(self, work: Callable[..., _T], *args: Any) -> _T:
        """Run ``work(*args)`` in the side's thread."""
        return await asyncio.get_running_loop().run_in_executor(self._thread, work, *args)

    def close(self) -> None:
        """Close the connection; call in the side's thread."""
        if self._conn is not None:
            self._conn.close()
        self.engine.dispose()

    def shutdown(self) -> None:
        """Let the thread end once its last call returned."""
        self._thread.shutdown(wait=False)


# -- PostgreSQL connections ----------------------------------------------------------------------


def _postgres_engine(url: str) -> AsyncEngine:
    async def connect() -> asyncpg.Connection[Any]:
        # asyncpg reads the URL itself, as before SQLAlchemy: every libpq-style option
        # (sslmode, search_path, ...) keeps working, and the URL is never re-rendered.
        return await asyncpg.connect(url)

    return create_async_engine(
        "postgresql+asyncpg://",
        async_creator=connect,
        # Migrations, copy-db and diagnostics only: a connection when asked, none kept.
        poolclass=NullPool,
        skip_autocommit_rollback=True,
        # jsonb columns come back as their JSON text, as on SQLite: the repositories decode
        # them (bot.storage.schema types them Text), not the driver.
        json_deserializer=_json_text,
    )


def _json_text(text: str) -> str:
    return text


# -- the engines of one database ---------------------------------------------------------------


class Engines:
    """The connections of one database, and its write transactions.

    Build it with :meth:`open_sqlite` or :meth:`open_postgresql`; release it with :meth:`close`.
    Work is given as synchronous Core functions of a connection; SQLite runs them in the
    connection's thread, PostgreSQL in one greenlet hop over asyncpg (SQLAlchemy's bridge).
    """

    def __init__(
        self,
        dialect: DialectName,
        *,
        sqlite: tuple[_SqliteSide, _SqliteSide] | None = None,
        postgres: AsyncEngine | None = None,
        pool: asyncpg.Pool | None = None,
    ) -> None:
        self.dialect: DialectName = dialect
        self._sqlite = sqlite
        self._postgres = postgres
        self._pool = pool
        if postgres is not None:
            self._pg_writer = postgres.sync_engine
            # Reads outside a transaction: autocommit, one round trip, no BEGIN.
            self._pg_reader = postgres.execution_options(isolation_level="AUTOCOMMIT").sync_engine
        # SQLite: one writer at a time, in arrival order, without a deadline. PostgreSQL:
        # transactions run side by side, each on its own pooled connection.
        self._write_lock: asyncio.Lock | None = asyncio.Lock() if dialect == "sqlite" else None
        self._closed = False
        self._report_gate = asyncio.Semaphore(REPORT_READS)
        self._report_side: _SqliteSide | None = None
        self.sql = CoreSql(self)
        """Reads outside a transaction; each write method opens its own."""
        self.reports = CoreSql(self, reports=True)
        """As :attr:`sql`, but its reads run on the reports' lane (:data:`REPORT_READS`)."""

    @classmethod
    async def open_sqlite(cls, path: Path, *, busy_timeout_ms: int = BUSY_TIMEOUT_MS) -> Engines:
        """Open (creating if needed) the SQLite file at ``path``; its schema is not touched.

        ``busy_timeout_ms``: how long each of its connections waits for another connection's
        write lock before a statement fails with "database is locked", ms
        (``DATABASE_BUSY_TIMEOUT_SECONDS``).

        Raises:
            OSError: the parent directory cannot be created.
            sqlalchemy.exc.DBAPIError: the file cannot be opened in WAL mode.
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        reader = _SqliteSide(path, query_only=True, busy_timeout_ms=busy_timeout_ms)
        writer = _SqliteSide(path, query_only=False, busy_timeout_ms=busy_timeout_ms)
        engines = cls("sqlite", sqlite=(reader, writer))
        try:
            # The writer first: it creates the file and puts it in WAL mode, which a
            # query_only connection could not.
            await writer.call(writer.connection)
            await reader.call(reader.connection)
        except BaseException:
            await engines.close()
            raise
        return engines

    @classmethod
    async def open_postgresql(cls, url: str, *, max_size: int = POOL_MAX_SIZE) -> Engines:
        """Connect to ``url`` (``postgresql://user:password@host:port/dbname``, a secret).

        Raises:
            DatabaseUnavailable: the server is unreachable or refused the login (one line; the
                URL shown without its password).
        """
        try:
            # The repositories' statements run on asyncpg's own pool (docs/benchmarks.md,
            # "Storage on SQLAlchemy Core": SQLAlchemy's asyncpg adapter cost 0.15 ms of CPU per
            # statement more); Core builds and compiles them.
            pool = await asyncpg.create_pool(
                url, min_size=1, max_size=max_size, reset=_keep_session
            )
        except Exception as exc:
            raise DatabaseUnavailable(
                f"DATABASE_URL: cannot connect to {redact_database_url(url)}: "
                f"{safe_reason(exc, url)}"
            ) from None
        engines = cls("postgresql", postgres=_postgres_engine(url), pool=pool)
        try:
            await greenlet_spawn(_touch, engines._pg_writer)
        except Exception as exc:
            await engines.close()
            cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            raise DatabaseUnavailable(
                f"DATABASE_URL: cannot connect to {redact_database_url(url)}: "
                f"{safe_reason(cause, url)}"
            ) from None
        return engines

    async def call_bound(self, work: Callable[..., _T], conn: Connection, *args: Any) -> _T:
        """Run ``work(conn, *args)`` on a transaction's connection (from :meth:`connection`)."""
        if self._sqlite is not None:
            return await self._sqlite[1].call(work, conn, *args)
        return await greenlet_spawn(work, conn, *args)

    @asynccontextmanager
    async def connection(self) -> AsyncIterator[Connection]:
        """Yield the writer's connection in a write transaction (``BEGIN IMMEDIATE`` on SQLite).

        Commits when the block exits normally; rolls back (nothing kept) when it raises or is
        cancelled. Not re-entrant. Run work on the connection with :meth:`call_bound`.
        """
        async with self._locked():
            if self._sqlite is not None:
                writer = self._sqlite[1]
                conn = await writer.call(_begin_held, writer)
                end: Callable[[Connection, bool], None] = _end_held
            else:
                conn = await greenlet_spawn(_begin, self._pg_writer)
                end = _end
            try:
                yield conn
            except BaseException:
                # Shielded: a second cancellation must not leave the transaction open (on
                # SQLite, the only writer connection's).
                await asyncio.shield(self.call_bound(end, conn, False))
                raise
            await asyncio.shield(self.call_bound(end, conn, True))

    def transaction(self) -> AbstractAsyncContextManager[CoreSql]:
        """Run the block as one write transaction; yields a :class:`CoreSql` bound to it."""
        return self._transaction()

    @asynccontextmanager
    async def _transaction(self) -> AsyncIterator[CoreSql]:
        if self._pool is not None:
            if self._closed:
                raise StorageUnavailableError("the database is closed")
            async with self._pool.acquire() as conn, conn.transaction():
                yield CoreSql(self, pg=conn)
            return
        async with self.connection() as sa_conn:
            yield CoreSql(self, sa_conn)

    async def pg_read(self, sql: str, args: Sequence[Any]) -> Sequence[Row]:
        """Run a read on the pool outside a transaction (committed data, one round trip)."""
        if self._pool is None or self._closed:
            raise StorageUnavailableError("the database is closed")
        # asyncpg's records are read by column name, as the Sql surface's rows are.
        return cast("Sequence[Row]", await self._pool.fetch(sql, *args))

    def pg_statement(
        self, stmt: Executable, params: Mapping[str, Any] | None
    ) -> tuple[str, list[Any]]:
        """``stmt`` as asyncpg's SQL text and positional arguments (see :func:`statement`)."""
        assert self._postgres is not None
        return statement(self._postgres.dialect, stmt, params)

    async def run_in_transaction(self, work: Callable[[Connection], _T]) -> _T:
        """Run synchronous Core ``work`` in one write transaction of its own, in one hop."""
        async with self._locked():
            if self._sqlite is not None:
                writer = self._sqlite[1]
                return await writer.call(_in_held_transaction, writer, work)
            return await greenlet_spawn(_in_transaction, self._pg_writer, work)

    async def run_read(self, work: Callable[[Connection], _T], *, report: bool = False) -> _T:
        """Run synchronous Core ``work`` on a reader connection (committed data), in one hop.

        ``report``: on the reports' lane (SQLite: its own ``query_only`` connection and thread,
        opened at first use; at most :data:`REPORT_READS` at once), never before the bot's
        reads.
        """
        if self._closed:
            raise StorageUnavailableError("the database is closed")
        if self._sqlite is not None:
            if report:
                async with self._report_gate:
                    side = self._reports_side()
                    return await side.call(_on_held, side, work)
            reader = self._sqlite[0]
            return await reader.call(_on_held, reader, work)
        if report:
            async with self._report_gate:
                return await greenlet_spawn(_on_reader, self._pg_reader, work)
        return await greenlet_spawn(_on_reader, self._pg_reader, work)

    def _reports_side(self) -> _SqliteSide:
        if self._report_side is None:
            assert self._sqlite is not None
            path = Path(self._sqlite[0].engine.url.database or "")
            self._report_side = _SqliteSide(
                path,
                query_only=True,
                name="sqlite-reports",
                busy_timeout_ms=self._sqlite[0].busy_timeout_ms,
            )
        return self._report_side

    async def pg_report_read(self, sql: str, args: Sequence[Any]) -> Sequence[Row]:
        """:meth:`pg_read` on the reports' lane: at most :data:`REPORT_READS` connections."""
        async with self._report_gate:
            return await self.pg_read(sql, args)

    @asynccontextmanager
    async def _locked(self) -> AsyncIterator[None]:
        if self._closed:
            raise StorageUnavailableError("the database is closed")
        if self._write_lock is None:
            yield
        else:
            async with self._write_lock:
                yield

    async def ping(self) -> None:
        """Run a trivial query on a reader connection.

        Raises:
            StorageUnavailableError: the database did not answer or is closed.
        """
        try:
            await self.sql.scalar(select(1))
        except (DBAPIError, OSError, asyncpg.PostgresError, asyncpg.InterfaceError) as exc:
            name = "SQLite" if self.dialect == "sqlite" else "PostgreSQL"
            cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
            raise StorageUnavailableError(f"{name} did not answer: {cause}") from exc

    async def close(self) -> None:
        """Close every connection (waits for a write transaction in progress to finish)."""
        if self._closed:
            return
        async with self._locked():
            self._closed = True
            if self._pool is not None:
                await self._pool.close()
            if self._postgres is not None:
                await self._postgres.dispose()
            sides = [*(self._sqlite or ()), *([self._report_side] if self._report_side else [])]
            for side in sides:
                try:
                    await side.call(side.close)
                finally:
                    side.shutdown()


async def _keep_session(connection: asyncpg.Connection) -> None:
    """Reset nothing when the pool takes a connection back (asyncpg's ``reset`` hook).

    asyncpg's default runs ``RESET ALL``, ``UNLISTEN *``, ``CLOSE ALL`` and
    ``pg_advisory_unlock_all()``: one round trip per released connection, about one per poll.
    The bot sets nothing at the session level (no ``SET``, ``LISTEN``, cursors or session
    locks; its advisory locks are the transaction's), so there is nothing to reset. asyncpg
    still rolls back a transaction left open before it calls this (``Connection._reset``).
    """


_COMPILED: Final[LRUCache[Any, Any]] = LRUCache(1000)
"""Compiled statements by Core's cache key (their structure), as Core's own execution keeps."""


def statement(
    dialect: Any, stmt: Executable, params: Mapping[str, Any] | None
) -> tuple[str, list[Any]]:
    """``stmt`` as the driver's SQL text and positional arguments, compiled once per structure.

    What SQLAlchemy's execution does before it calls the driver, without its DBAPI layer (about
    0.1 ms of CPU per statement on either engine; docs/benchmarks.md, "Storage on SQLAlchemy
    Core"): the compiled form is cached by Core's cache key; values come from ``params`` and
    from the statement itself (``.params()``, literals); the dialect's bind processors apply;
    expanding (``IN``) parameters are rendered per call.
    """
    keys = sorted(params) if params and getattr(stmt, "is_dml", False) else []
    compiled: Any
    compiled, extracted, collected, _ = stmt._compile_w_cache(
        dialect, compiled_cache=_COMPILED, column_keys=keys
    )
    values = compiled.construct_params(
        params, extracted_parameters=extracted, _collected_params=collected
    )
    processors = compiled._bind_processors
    if compiled.post_compile_params or compiled.literal_execute_params:
        state = compiled._process_parameters_for_postcompile(values)
        processors = {**processors, **state.processors}
        sql, names = state.statement, state.positiontup
        values = state.parameters
    else:
        sql, names = compiled.string, compiled.positiontup
    return sql, [
        processors[name](values[name]) if name in processors else values[name]
        for name in names or ()
    ]


def _touch(engine: Engine) -> None:
    """Open one connection now, so that a bad URL fails at start-up."""
    with engine.connect():
        pass


def _begin(engine: Engine) -> Connection:
    conn = engine.connect()
    try:
        conn.begin()
    except BaseException:
        conn.close()
        raise
    return conn


def _end(conn: Connection, commit: bool) -> None:
    try:
        if commit:
            conn.commit()
        else:
            conn.rollback()
    finally:
        conn.close()


def _in_transaction(engine: Engine, work: Callable[[Connection], _T]) -> _T:
    with engine.begin() as conn:
        return work(conn)


def _on_reader(engine: Engine, work: Callable[[Connection], _T]) -> _T:
    with engine.connect() as conn:
        return work(conn)


def _begin_held(side: _SqliteSide) -> Connection:
    conn = side.connection()
    if conn.in_transaction():  # what a failed BEGIN or COMMIT may have left behind
        conn.rollback()
    conn.begin()
    return conn


def _end_held(conn: Connection, commit: bool) -> None:
    if not conn.in_transaction():
        return
    if commit:
        try:
            conn.commit()
        except BaseException:
            if conn.in_transaction():
                conn.rollback()
            raise
    else:
        conn.rollback()


def _in_held_transaction(side: _SqliteSide, work: Callable[[Connection], _T]) -> _T:
    conn = _begin_held(side)
    try:
        result = work(conn)
    except BaseException:
        _end_held(conn, False)
        raise
    _end_held(conn, True)
    return result


def _on_held(side: _SqliteSide, work: Callable[[Connection], _T]) -> _T:
    return work(side.connection())


# -- the one Sql of both engines -----------------------------------------------------------------


def _cursor(conn: Connection) -> sqlite3.Cursor:
    dbapi = conn.connection.dbapi_connection
    assert dbapi is not None
    cursor = cast(sqlite3.Cursor, dbapi.cursor())
    cursor.row_factory = sqlite3.Row  # rows read by column name, as the Sql surface's
    return cursor


def _rows(conn: Connection, stmt: Executable, params: Params = None) -> Sequence[Row]:
    """Run ``stmt`` on a SQLite connection (in its thread) and return its rows."""
    sql, args = statement(conn.dialect, stmt, params)
    cursor = _cursor(conn)
    try:
        return cast("Sequence[Row]", cursor.execute(sql, args).fetchall())
    except sqlite3.IntegrityError as exc:
        raise ConstraintError(str(exc)) from exc
    finally:
        cursor.close()


def _changed(conn: Connection, stmt: Executable, rows: Sequence[Mapping[str, Any]]) -> int:
    """Run a write on a SQLite connection (once, or once per row); return the rows changed."""
    cursor = _cursor(conn)
    try:
        if len(rows) <= 1:
            sql, args = statement(conn.dialect, stmt, rows[0] if rows else None)
            return int(cursor.execute(sql, args).rowcount)
        batch = [statement(conn.dialect, stmt, row) for row in rows]
        if len({sql for sql, _ in batch}) == 1:
            return int(cursor.executemany(batch[0][0], [args for _, args in batch]).rowcount)
        # Expanding parameters: each row's text is its own.
        return sum(int(cursor.execute(sql, args).rowcount) for sql, args in batch)
    except sqlite3.IntegrityError as exc:
        raise ConstraintError(str(exc)) from exc
    finally:
        cursor.close()


class CoreSql:
    """:class:`~bot.storage.sql.Sql` over SQLAlchemy Core, unbound or bound to a transaction.

    SQLite runs the statements with Core's execution in the connection's thread; PostgreSQL
    compiles them with Core (cached by structure, :meth:`Engines.pg_statement`) and runs them
    on asyncpg.

    Args:
        engines: the database's connections.
        conn: SQLite: the transaction's Core connection; None when unbound.
        reports: unbound, its reads run on the reports' lane (:data:`REPORT_READS`).
        pg: PostgreSQL: the transaction's asyncpg connection; None when unbound.
    """

    __slots__ = ("_conn", "_engines", "_locked", "_pg", "_reports")

    def __init__(
        self,
        engines: Engines,
        conn: Connection | None = None,
        *,
        pg: asyncpg.Connection[Any] | PoolConnectionProxy[Any] | None = None,
        reports: bool = False,
    ) -> None:
        self._engines = engines
        self._conn = conn
        self._pg = pg
        self._reports = reports
        self._locked: set[int] = set()

    @property
    def dialect(self) -> DialectName:
        """The engine's name: ``"sqlite"`` or ``"postgresql"``."""
        return self._engines.dialect

    def write(self) -> AbstractAsyncContextManager[Sql]:
        """Yield an executor bound to a write transaction: this one's, or a new one."""
        if self._conn is not None or self._pg is not None:
            return contextlib.nullcontext(self)
        return self._engines.transaction()

    async def all(self, stmt: Executable, params: Params = None) -> Sequence[Row]:
        """Return every row of a query (a write's ``RETURNING`` runs in a write transaction).

        Raises:
            ConstraintError: a write broke a constraint (nothing of it is kept).
        """
        if self._engines.dialect == "postgresql":
            return await self._pg_fetch(stmt, params)
        if self._conn is not None:
            return await self._engines.call_bound(_rows, self._conn, stmt, params)
        if getattr(stmt, "is_dml", False):
            return await self._engines.run_in_transaction(lambda c: _rows(c, stmt, params))
        return await self._engines.run_read(lambda c: _rows(c, stmt, params), report=self._reports)

    async def one(self, stmt: Executable, params: Params = None) -> Row | None:
        """Return the first row, or None."""
        rows = await self.all(stmt, params)
        return rows[0] if rows else None

    async def scalar(self, stmt: Executable, params: Params = None) -> Any:
        """Return the first column of the first row, or None when there is no row."""
        row = await self.one(stmt, params)
        return None if row is None else row[0]  # type: ignore[index]

    async def run(self, stmt: Executable, rows: Sequence[Mapping[str, Any]] = ()) -> int:
        """Execute a write (once, or once per mapping of ``rows``); return the rows changed.

        Raises:
            ConstraintError: the write broke a constraint (nothing of it is kept).
        """
        if self._engines.dialect == "postgresql":
            if self._pg is None:
                async with self._engines.transaction() as tx:
                    return await tx.run(stmt, rows)
            changed = 0
            # asyncpg's executemany reports no row counts: one execution per row (in the one
            # transaction).
            for row in rows or (None,):
                sql, args = self._engines.pg_statement(stmt, row)
                try:
                    status = await self._pg.execute(sql, *args)
                except asyncpg.IntegrityConstraintViolationError as exc:
                    raise ConstraintError(exc.message) from exc
                # The command tag: "UPDATE 3", "DELETE 0", "INSERT 0 1" ("CREATE TABLE": 0).
                count = status.rsplit(" ", 1)[-1]
                changed += int(count) if count.isdigit() else 0
            return changed
        if self._conn is not None:
            return await self._engines.call_bound(_changed, self._conn, stmt, rows)
        return await self._engines.run_in_transaction(lambda conn: _changed(conn, stmt, rows))

    async def _pg_fetch(self, stmt: Executable, params: Params) -> Sequence[Row]:
        if self._pg is None and getattr(stmt, "is_dml", False):
            async with self._engines.transaction() as tx:
                return await tx.all(stmt, params)
        sql, args = self._engines.pg_statement(stmt, params)
        try:
            if self._pg is not None:
                rows: Sequence[Row] = await self._pg.fetch(sql, *args)
            elif self._reports:
                rows = await self._engines.pg_report_read(sql, args)
            else:
                rows = await self._engines.pg_read(sql, args)
        except asyncpg.IntegrityConstraintViolationError as exc:
            raise ConstraintError(exc.message) from exc
        return rows

    async def lock_guild(self, guild_id: int) -> None:
        """PostgreSQL: hold the guild's advisory lock until the transaction ends.

        SQLite needs nothing (its writer lock serialises every write transaction), nor does an
        unbound executor (there is no transaction to hold it in).
        """
        if self._pg is None or guild_id in self._locked:
            return
        await self._pg.execute("SELECT pg_advisory_xact_lock($1)", guild_id)
        self._locked.add(guild_id)


def _advisory_lock(conn: Connection, guild_id: int) -> None:
    conn.execute(select(func.pg_advisory_xact_lock(guild_id)))
