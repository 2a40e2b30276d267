"""SQLite meta: :class:`bot.storage.repositories.MetaRepository` over an :class:`Executor`."""

from __future__ import annotations

from collections.abc import Sequence

from bot.storage.sqlite.engine import Executor


class SqliteMeta:
    """Small named values of bot state, in the ``meta`` table."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or None."""
        row = await self._sql.one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row["value"])

    async def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        await self._sql.run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Return the values stored under ``keys`` (one query); keys without a value are absent."""
        if not keys:
            return {}
        marks = ", ".join("?" for _ in keys)
        rows = await self._sql.all(f"SELECT key, value FROM meta WHERE key IN ({marks})", keys)
        return {str(row["key"]): str(row["value"]) for row in rows}
