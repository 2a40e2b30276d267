"""The bot's database, either engine: its repositories, its transactions.

SQLite at ``DATABASE_PATH`` (the embedded default) or PostgreSQL at ``DATABASE_URL``: the same
class, the same repositories (``bot/storage/repos``, one module per concern) over
:class:`~bot.storage.engine.CoreSql`; what differs between the engines is in
:mod:`bot.storage.engine`.

Shapes and units, for every engine:

- Rows are the dataclasses of :mod:`bot.domain`.
- Money is :class:`~decimal.Decimal` cents, exact as the service reported it (budgets admins set
  stay whole ``int`` cents). Both engines store INTEGER micro-cents (:mod:`bot.storage.money`);
  an amount finer than a micro-cent is stored rounded *up* to the next micro-cent.
- Times are UTC epoch seconds (``float``). Ids of Discord objects are ``int`` snowflakes.

Transactions:

- Used directly (``db.jobs.finish(...)``), every method is atomic on its own: a method that
  writes several rows (``guilds.replace_api_key``, ``guilds.reencrypt_keys``) commits all of
  them or none. Reads made this way see committed data only.
- ``async with db.transaction() as tx:`` gives the same repositories bound to one transaction:
  reads see its own writes, it commits when the block exits normally and rolls back (nothing
  kept) when the block raises or is cancelled. Keep blocks short and free of network calls.
- A check followed by a write (a budget check and reservation) must not interleave with another
  one for the same guild, in this process or another: the block calls ``tx.guilds.lock`` first,
  and so does every block that changes what such a check sums (settling a charge). SQLite
  serialises all write transactions anyway; PostgreSQL takes a per-guild lock held until the
  transaction ends.

Errors (:mod:`bot.domain.errors`; engines translate their drivers' errors into these, the
driver's error is the ``__cause__``):

- ``ConstraintError``: a write broke a constraint of the schema (a negative cost, a cap below
  1); nothing of the transaction it ran in is kept once the error leaves the block.
- ``SchemaTooNewError``: at open, the database was written by a newer release.
- ``StorageUnavailableError``: :meth:`Database.ping` got no answer.
- Anything else the driver raises (a busy or lost connection) propagates as it is; see
  :mod:`bot.jobs.supervisor` for the ones treated as transient.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql import ClauseElement, Executable

from bot.clock import Clock
from bot.genapi.rate_window import RateWindowRepository
from bot.storage.engine import BUSY_TIMEOUT_MS, POOL_MAX_SIZE, CoreSql, Engines
from bot.storage.migrations import migrate
from bot.storage.repos.conversations import ConversationStore
from bot.storage.repos.creative import CreativeStore
from bot.storage.repos.credits import CreditStore
from bot.storage.repos.dashboard import DashboardStore, DashboardViews
from bot.storage.repos.guard import GuardStore
from bot.storage.repos.guilds import GuildStore
from bot.storage.repos.jobs import JobStore
from bot.storage.repos.ledger import LedgerStore
from bot.storage.repos.members import MemberStore
from bot.storage.repos.meta import MetaStore
from bot.storage.repos.policy import PolicyStore
from bot.storage.repos.rates import RateWindowStore
from bot.storage.repos.result_requests import ResultRequestStore
from bot.storage.repos.retention import RetentionStore
from bot.storage.repos.safety import SafetyStore
from bot.storage.repos.sequences import SequenceStore
from bot.storage.repos.showcase import ShowcaseStore
from bot.storage.repos.thumbnails import ThumbnailStore
from bot.storage.sql import DialectName, Sql, compile_for


class Repositories:
    """The repositories of one scope over one :class:`CoreSql`: the database, or a transaction.

    Every repository is reached one way, by its attribute here: ``db.jobs`` runs each write in
    its own transaction and, inside ``async with db.transaction() as tx:``, ``tx.jobs`` runs in
    that one. Each is built on first use (a transaction touches two or three of them).
    """

    def __init__(self, sql: CoreSql) -> None:
        self._sql = sql

    @cached_property
    def jobs(self) -> JobStore:
        """Jobs: polling, leases, delivery, listing."""
        return JobStore(self._sql)

    @cached_property
    def ledger(self) -> LedgerStore:
        """The ledger, anomalies and reservations."""
        return LedgerStore(self._sql)

    @cached_property
    def guilds(self) -> GuildStore:
        """Guild settings, limits, channels and keys."""
        return GuildStore(self._sql)

    @cached_property
    def policy(self) -> PolicyStore:
        """Role tiers, model list, blocked terms, cooldowns and the audit log."""
        return PolicyStore(self._sql)

    @cached_property
    def conversations(self) -> ConversationStore:
        """``/chat`` conversations and their turns, by thread."""
        return ConversationStore(self._sql)

    @cached_property
    def meta(self) -> MetaStore:
        """Small named values (the command-tree hash, migration records)."""
        return MetaStore(self._sql)

    @cached_property
    def members(self) -> MemberStore:
        """Members' own defaults (``/settings``)."""
        return MemberStore(self._sql)

    @cached_property
    def result_requests(self) -> ResultRequestStore:
        """The request behind each result, and each server's confirmation threshold."""
        return ResultRequestStore(self._sql)

    @cached_property
    def credits(self) -> CreditStore:
        """Members' credit balances, purchases and holds (docs/credits.md)."""
        return CreditStore(self._sql)

    @cached_property
    def guard(self) -> GuardStore:
        """The spend guard's thresholds, sums and notes."""
        return GuardStore(self._sql)

    @cached_property
    def safety(self) -> SafetyStore:
        """Output checks' verdicts, reviews and reports."""
        return SafetyStore(self._sql)

    @cached_property
    def sequences(self) -> SequenceStore:
        """Takes and clips of sequences."""
        return SequenceStore(self._sql)

    @cached_property
    def creative(self) -> CreativeStore:
        """Styles, characters and Enhance settings (docs/creative.md)."""
        return CreativeStore(self._sql)

    @cached_property
    def showcase(self) -> ShowcaseStore:
        """The public showcase's choices."""
        return ShowcaseStore(self._sql)

    @cached_property
    def thumbnails(self) -> ThumbnailStore:
        """The dashboard's small pictures of results."""
        return ThumbnailStore(self._sql)

    @cached_property
    def dashboard(self) -> DashboardStore:
        """The dashboard's own rows (sign-ins, daily sums)."""
        return DashboardStore(self._sql)

    @cached_property
    def dashboard_views(self) -> DashboardViews:
        """The dashboard's read models (lists, totals)."""
        return DashboardViews(self._sql)

    @cached_property
    def retention(self) -> RetentionStore:
        """Deletes rows past their retention period (never inside a transaction)."""
        return RetentionStore(self._sql)

    @property
    def sql(self) -> Sql:
        """The raw executor of this scope (``rebuild_daily(db.sql)``, a benchmark's bulk load)."""
        return self._sql


class Database(Repositories):
    """The bot's database, either engine.

    Used directly, reads see committed data (SQLite: the ``query_only`` reader; PostgreSQL:
    the pool in autocommit) and each write method runs in its own transaction;
    :meth:`transaction` binds the repositories to one. Build it with :meth:`open_sqlite` or
    :meth:`open_postgresql` (both migrate the schema first, and raise ``SchemaTooNewError`` for
    a newer one); release it with :meth:`close`.

    Attributes:
        rates: the shared per-key rate windows (never inside a transaction).
    """

    def __init__(self, engines: Engines, schema_version: int) -> None:
        super().__init__(engines.sql)
        self._engines = engines
        self._schema_version = schema_version
        self.rates: RateWindowRepository = RateWindowStore(engines.sql)

    @classmethod
    async def open_sqlite(
        cls, path: Path, *, clock: Clock, busy_timeout_ms: int = BUSY_TIMEOUT_MS
    ) -> Database:
        """Open (creating if needed) the SQLite file at ``path`` and migrate it.

        Args:
            path: the database file; its parent directory is created if missing.
            clock: stamps the migration records in ``meta``.
            busy_timeout_ms: how long a statement waits for another connection's write lock
                before it fails as "database is locked", ms (``DATABASE_BUSY_TIMEOUT_SECONDS``).

        Raises:
            SchemaTooNewError: the database was written by a newer release.
            OSError: the directory cannot be created.
            sqlalchemy.exc.DBAPIError: the file cannot be opened, or a migration failed
                (nothing of it is kept).
        """
        engines = await Engines.open_sqlite(path, busy_timeout_ms=busy_timeout_ms)
        return await cls._migrated(engines, clock)

    @classmethod
    async def open_postgresql(
        cls, url: str, *, clock: Clock, max_size: int = POOL_MAX_SIZE
    ) -> Database:
        """Connect to ``url`` (``postgresql://user:password@host:port/dbname``) and migrate.

        Raises:
            SchemaTooNewError: the database was written by a newer release.
            DatabaseUnavailable: the server is unreachable or refused the login (one line, the
                URL without its password).
        """
        return await cls._migrated(await Engines.open_postgresql(url, max_size=max_size), clock)

    @classmethod
    async def _migrated(cls, engines: Engines, clock: Clock) -> Database:
        try:
            version = await migrate(engines, clock)
        except BaseException:
            await engines.close()
            raise
        return cls(engines, version)

    @cached_property
    def reports(self) -> Repositories:
        """The repositories with their reads on the reports' lane (``db.reports.dashboard_views``).

        For heavy reads made for people rather than for the bot (the dashboard's ledger,
        exports, spend): at most ``REPORT_READS`` at once, on a connection of their own
        (SQLite) or a bounded share of the pool (PostgreSQL), so the poller's and the
        commands' reads never wait behind them. Writes run as the database's own.
        """
        return Repositories(self._engines.reports)

    @property
    def engine(self) -> DialectName:
        """The engine's name: ``"sqlite"`` or ``"postgresql"`` (for logs and metrics)."""
        return self._engines.dialect

    @property
    def engines(self) -> Engines:
        """The connections under this database (copy-db's bulk work, diagnostics)."""
        return self._engines

    @property
    def schema_version(self) -> int:
        """The schema version: its Alembic revision's position in the one sequence.

        The same number on both engines (``bot.storage.migrations``; ``0001_baseline`` is 1).
        """
        return self._schema_version

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[Repositories]:
        """Run the block as one transaction (SQLite: ``BEGIN IMMEDIATE``, one writer at a time).

        ``async with db.transaction() as tx:`` yields its repositories. Commits when the block
        exits normally; rolls back (nothing kept) when it raises or is cancelled. The yielded
        repositories must not be used after the block. Not re-entrant: inside the block, use
        the yielded repositories only (SQLite's single writer makes ``db.*`` wait for the block
        to end).
        """
        async with self._engines.transaction() as sql:
            yield Repositories(sql)

    async def ping(self) -> None:
        """Check cheaply that the database answers (a trivial query; for health checks).

        Raises:
            StorageUnavailableError: the database did not answer or is closed.
        """
        await self._engines.ping()

    async def close(self) -> None:
        """Close the connections once a write in progress finishes; unusable afterwards."""
        await self._engines.close()

    async def query_plan(self, stmt: Executable | str, params: Sequence[Any] = ()) -> list[str]:
        """Return the engine's plan of a query, one line per step (tests, diagnostics).

        SQLite: the ``detail`` column of ``EXPLAIN QUERY PLAN``; PostgreSQL: ``EXPLAIN``'s lines.

        Args:
            stmt: a Core statement (its bound values are used), or SQL text in the engine's
                own placeholder style with ``params``.
            params: the values of SQL text's placeholders.
        """
        if isinstance(stmt, str):
            sql, values = stmt, list(params)
        else:
            assert isinstance(stmt, ClauseElement)
            sql, values = compile_for(self.engine, stmt)
        prefix = "EXPLAIN QUERY PLAN " if self.engine == "sqlite" else "EXPLAIN "

        def explain(conn: Connection) -> list[str]:
            rows = conn.exec_driver_sql(prefix + sql, tuple(values)).all()
            return [str(r[-1] if self.engine == "sqlite" else r[0]) for r in rows]

        return await self._engines.run_read(explain)
