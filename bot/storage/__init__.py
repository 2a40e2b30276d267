"""Persistent storage: the engine-neutral interface (``repositories``) and its implementation.

Services depend on :class:`Database` and the repositories' Protocols only. One implementation
serves both engines (SQLite, the default, and PostgreSQL): the repositories of ``repos`` over
``engine``, put together by ``database``, the schema in ``schema`` and ``migrations``; the rows
are the dataclasses of :mod:`bot.domain`; money conversion for the columns is in ``money``.
"""

from bot.storage.repositories import (
    Database,
    GuildRepository,
    JobRepository,
    LedgerRepository,
    MetaRepository,
    Repositories,
)

__all__ = [
    "Database",
    "GuildRepository",
    "JobRepository",
    "LedgerRepository",
    "MetaRepository",
    "Repositories",
]
