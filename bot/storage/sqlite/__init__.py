"""The SQLite engine (aiosqlite): the embedded default, one file at ``DATABASE_PATH``.

``engine`` holds the connections, transactions and migrations; the other modules implement
repositories of :mod:`bot.storage.repositories`, each write once, over an
:class:`~bot.storage.sqlite.engine.Executor` (the ones written once for both engines are in
:mod:`bot.storage.repos`); ``database`` puts them together as :class:`SqliteDatabase`.
"""

from bot.storage.sqlite.database import SqliteDatabase

__all__ = ["SqliteDatabase"]
