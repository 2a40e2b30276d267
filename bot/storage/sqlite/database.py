"""The SQLite :class:`~bot.storage.repositories.Database`: one file, the embedded default."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from bot.clock import Clock
from bot.storage.repos.conversations import ConversationStore
from bot.storage.repos.guilds import GuildStore
from bot.storage.repos.jobs import JobStore
from bot.storage.repos.ledger import LedgerStore
from bot.storage.repos.members import MemberStore
from bot.storage.repos.policy import PolicyStore
from bot.storage.repos.rates import RateWindowStore
from bot.storage.repos.result_requests import ResultRequestStore
from bot.storage.sql import LegacySql
from bot.storage.sqlite.engine import Executor, SqliteConnections
from bot.storage.sqlite.meta import SqliteMeta


class SqliteRepositories:
    """The repositories over one executor (the database's, or one transaction's)."""

    def __init__(self, sql: Executor) -> None:
        self.jobs = JobStore(LegacySql("sqlite", sql))
        self.ledger = LedgerStore(LegacySql("sqlite", sql))
        self.guilds = GuildStore(LegacySql("sqlite", sql))
        self.meta = SqliteMeta(sql)
        self.cards = ResultRequestStore(LegacySql("sqlite", sql))
        self.conversations = ConversationStore(LegacySql("sqlite", sql))
        self.policy = PolicyStore(LegacySql("sqlite", sql))
        self.members = MemberStore(LegacySql("sqlite", sql))


class SqliteDatabase(SqliteRepositories):
    """The bot's SQLite database (``DATABASE_PATH``).

    Used directly, reads go to the ``query_only`` reader connection and each write method runs
    in its own ``BEGIN IMMEDIATE`` transaction; :meth:`transaction` binds the repositories to
    one. Build it with :meth:`open`; release it with :meth:`close`.
    """

    engine = "sqlite"

    def __init__(self, connections: SqliteConnections) -> None:
        super().__init__(connections.executor)
        self._connections = connections
        self.rates = RateWindowStore(LegacySql("sqlite", connections.executor))

    @classmethod
    async def open(cls, path: Path, *, clock: Clock) -> SqliteDatabase:
        """Open (creating if needed) the database at ``path`` and migrate it to the latest schema.

        Args:
            path: the database file; its parent directory is created if missing.
            clock: stamps the migration records in ``meta``.

        Raises:
            SchemaTooNewError: the database was written by a newer version of the bot.
            sqlite3.Error: the file cannot be opened or a migration failed (nothing of that
                migration is kept).
        """
        return cls(await SqliteConnections.open(path, clock=clock))

    @property
    def schema_version(self) -> int:
        """The schema version (``PRAGMA user_version``) the database is at."""
        return self._connections.schema_version

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[SqliteRepositories]:
        """Run the block as one ``BEGIN IMMEDIATE`` transaction, one writer at a time.

        Commits when the block exits normally; rolls back (nothing kept) when it raises or is
        cancelled. Not re-entrant: inside the block, use the yielded repositories only.
        """
        async with self._connections.transaction() as sql:
            yield SqliteRepositories(sql)

    async def ping(self) -> None:
        """Run a trivial query on the reader connection.

        Raises:
            StorageUnavailableError: the database did not answer.
        """
        await self._connections.ping()

    async def close(self) -> None:
        """Close both connections (waits for a write in progress to finish)."""
        await self._connections.close()

    async def query_plan(self, sql: str, params: Sequence[Any] = ()) -> list[str]:
        """Return SQLite's ``EXPLAIN QUERY PLAN`` details of ``sql`` (tests, diagnostics)."""
        return await self._connections.executor.query_plan(sql, params)
