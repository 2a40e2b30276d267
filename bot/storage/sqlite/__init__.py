"""The SQLite engine (aiosqlite): the embedded default, one file at ``DATABASE_PATH``.

``engine`` holds the connections, transactions and migrations; ``jobs``, ``ledger``,
``guilds`` and ``meta`` implement the repositories of :mod:`bot.storage.repositories`, each
write once, over an :class:`~bot.storage.sqlite.engine.Executor`; ``database`` puts them
together as :class:`SqliteDatabase`.
"""

from bot.storage.sqlite.database import SqliteDatabase

__all__ = ["SqliteDatabase"]
