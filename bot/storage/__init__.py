"""Persistent storage: the database of both engines and its repositories.

One implementation serves both engines (SQLite, the default, and PostgreSQL): the repositories
of ``repos`` (one module per concern, each with its row mapping) over ``engine``, put together
by ``database``; the tables in ``schema``, built by ``migrations``; the rows are the dataclasses
of :mod:`bot.domain`; money conversion for the columns is in ``money``.
"""

from bot.storage.database import Database, Repositories

__all__ = ["Database", "Repositories"]
