"""The PostgreSQL engine (asyncpg), chosen by ``DATABASE_URL``; SQLite stays the default.

``engine`` holds the pool, transactions and migrations; the other modules implement
repositories of :mod:`bot.storage.repositories` over an
:class:`~bot.storage.postgres.engine.Executor` (the ones written once for both engines are in
:mod:`bot.storage.repos`); ``database`` puts them together as :class:`PostgresDatabase`.
"""

from bot.storage.postgres.database import PostgresDatabase
from bot.storage.postgres.engine import DatabaseUnavailable

__all__ = ["DatabaseUnavailable", "PostgresDatabase"]
