"""The one :class:`~bot.storage.repositories.Database` of both engines (issue 19).

SQLite at ``DATABASE_PATH`` (the embedded default) or PostgreSQL at ``DATABASE_URL``: the same
class, the same repositories (``bot/storage/repos``) over :class:`~bot.storage.engine.CoreSql`;
what differs between the engines is in :mod:`bot.storage.engine`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection
from sqlalchemy.sql import ClauseElement, Executable

from bot.clock import Clock
from bot.genapi.rate_window import RateWindowRepository
from bot.storage.engine import POOL_MAX_SIZE, CoreSql, Engines
from bot.storage.migrations import migrate
from bot.storage.repos.conversations import ConversationStore
from bot.storage.repos.guilds import GuildStore
from bot.storage.repos.jobs import JobStore
from bot.storage.repos.ledger import LedgerStore
from bot.storage.repos.members import MemberStore
from bot.storage.repos.meta import MetaStore
from bot.storage.repos.policy import PolicyStore
from bot.storage.repos.rates import RateWindowStore
from bot.storage.repos.result_requests import ResultRequestStore
from bot.storage.repos.sequences import SequenceStore
from bot.storage.repositories import (
    CardRepository,
    ConversationRepository,
    GuildRepository,
    JobRepository,
    LedgerRepository,
    MemberSettingsRepository,
    PolicyRepository,
)
from bot.storage.sql import Engine, compile_for


class Repositories:
    """The repositories over one :class:`CoreSql` (the database's, or one transaction's)."""

    jobs: JobRepository
    ledger: LedgerRepository
    guilds: GuildRepository
    cards: CardRepository
    policy: PolicyRepository
    conversations: ConversationRepository
    members: MemberSettingsRepository

    def __init__(self, sql: CoreSql) -> None:
        self.ledger = LedgerStore(sql)
        self.guilds = GuildStore(sql)
        self.meta = MetaStore(sql)
        self.cards = ResultRequestStore(sql)
        self.conversations = ConversationStore(sql)
        self.policy = PolicyStore(sql)
        self.members = MemberStore(sql)
        self.jobs = JobStore(sql)
        self.sequences = SequenceStore(sql)


class Database(Repositories):
    """The bot's database, either engine.

    Used directly, reads see committed data (SQLite: the ``query_only`` reader; PostgreSQL:
    the pool in autocommit) and each write method runs in its own transaction;
    :meth:`transaction` binds the repositories to one. Build it with :meth:`open_sqlite` or
    :meth:`open_postgresql` (both migrate the schema first); release it with :meth:`close`.
    """

    def __init__(self, engines: Engines, schema_version: int) -> None:
        super().__init__(engines.sql)
        self._engines = engines
        self._schema_version = schema_version
        self.rates: RateWindowRepository = RateWindowStore(engines.sql)

    @classmethod
    async def open_sqlite(cls, path: Path, *, clock: Clock) -> Database:
        """Open (creating if needed) the SQLite file at ``path`` and migrate it.

        Args:
            path: the database file; its parent directory is created if missing.
            clock: stamps the migration records in ``meta``.

        Raises:
            SchemaTooNewError: the database was written by a newer release.
            OSError: the directory cannot be created.
            sqlalchemy.exc.DBAPIError: the file cannot be opened, or a migration failed
                (nothing of it is kept).
        """
        return await cls._migrated(await Engines.open_sqlite(path), clock)

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

    @property
    def engine(self) -> Engine:
        """The engine's name: ``"sqlite"`` or ``"postgresql"`` (logs, metrics)."""
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

        Commits when the block exits normally; rolls back (nothing kept) when it raises or is
        cancelled. Not re-entrant: inside the block, use the yielded repositories only.
        """
        async with self._engines.transaction() as sql:
            yield Repositories(sql)

    async def ping(self) -> None:
        """Run a trivial query.

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
