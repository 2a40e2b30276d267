"""PostgreSQL meta: :class:`bot.storage.repositories.MetaRepository` over an :class:`Executor`."""

from __future__ import annotations

from collections.abc import Sequence

from bot.storage.postgres.engine import Executor


class PgMeta:
    """Small named values of bot state, in the ``meta`` table."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or None."""
        value = await self._sql.value("SELECT value FROM meta WHERE key = $1", key)
        return None if value is None else str(value)

    async def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        await self._sql.run(
            "INSERT INTO meta (key, value) VALUES ($1, $2)"
            " ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value",
            key,
            value,
        )

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Return the values stored under ``keys`` (one query); keys without a value are absent."""
        if not keys:
            return {}
        sql = "SELECT key, value FROM meta WHERE key = ANY($1::text[])"
        rows = await self._sql.all(sql, list(keys))
        return {str(row["key"]): str(row["value"]) for row in rows}
