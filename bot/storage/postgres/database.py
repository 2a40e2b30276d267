"""The PostgreSQL :class:`~bot.storage.repositories.Database`, chosen by ``DATABASE_URL``."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from bot.clock import Clock
from bot.storage.postgres.engine import Executor, PgConnections
from bot.storage.postgres.meta import PgMeta
from bot.storage.repos.conversations import ConversationStore
from bot.storage.repos.guilds import GuildStore
from bot.storage.repos.jobs import JobStore
from bot.storage.repos.ledger import LedgerStore
from bot.storage.repos.members import MemberStore
from bot.storage.repos.policy import PolicyStore
from bot.storage.repos.rates import RateWindowStore
from bot.storage.repos.result_requests import ResultRequestStore
from bot.storage.sql import LegacySql


class PgRepositories:
    """The repositories over one executor (the database's, or one transaction's)."""

    def __init__(self, sql: Executor) -> None:
        self.jobs = JobStore(LegacySql("postgresql", sql))
        self.ledger = LedgerStore(LegacySql("postgresql", sql))
        self.guilds = GuildStore(LegacySql("postgresql", sql))
        self.meta = PgMeta(sql)
        self.cards = ResultRequestStore(LegacySql("postgresql", sql))
        self.conversations = ConversationStore(LegacySql("postgresql", sql))
        self.policy = PolicyStore(LegacySql("postgresql", sql))
        self.members = MemberStore(LegacySql("postgresql", sql))


class PostgresDatabase(PgRepositories):
    """The bot's PostgreSQL database (``DATABASE_URL``).

    Used directly, reads run on the pool (committed data) and each write method runs in its own
    transaction; :meth:`transaction` binds the repositories to one. Transactions of this and
    other processes run concurrently: what must not interleave takes the guild's lock
    (``GuildRepository.lock``; see :mod:`bot.storage.postgres.engine`). Build it with
    :meth:`open`; release it with :meth:`close`.
    """

    engine = "postgresql"

    def __init__(self, connections: PgConnections) -> None:
        super().__init__(connections.executor)
        self._connections = connections
        self.rates = RateWindowStore(LegacySql("postgresql", connections.executor))

    @classmethod
    async def open(cls, url: str, *, clock: Clock) -> PostgresDatabase:
        """Connect to ``url`` (``postgresql://user:password@host:port/dbname``) and migrate.

        Raises:
            SchemaTooNewError: the database was written by a newer version of the bot.
            DatabaseUnavailable: the server is unreachable or refused the login (one line, the
                URL without its password).
        """
        return cls(await PgConnections.open(url, clock=clock))

    @property
    def schema_version(self) -> int:
        """The schema version (PostgreSQL numbering, ``schema_migrations``)."""
        return self._connections.schema_version

    @asynccontextmanager
    async def transaction(self) -> AsyncIterator[PgRepositories]:
        """Run the block as one transaction on one pooled connection.

        Commits when the block exits normally; rolls back when it raises or is cancelled.
        """
        async with self._connections.transaction() as sql:
            yield PgRepositories(sql)

    async def ping(self) -> None:
        """Run a trivial query.

        Raises:
            StorageUnavailableError: the server did not answer.
        """
        await self._connections.ping()

    async def close(self) -> None:
        """Close the pool once the connections in use are released."""
        await self._connections.close()
