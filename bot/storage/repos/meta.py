"""Meta: small named values of bot state (:class:`MetaStore`), one class for both engines."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import bindparam, select
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.sql import Executable

from bot.storage.schema import meta
from bot.storage.sql import DialectName, Sql

_GET: Final = select(meta.c.value).where(meta.c.key == bindparam("key"))
_GET_MANY: Final = select(meta.c.key, meta.c.value).where(
    meta.c.key.in_(bindparam("keys", expanding=True))
)

# An upsert: both dialects' INSERT constructs share ``on_conflict_do_update``.
_SQLITE_INSERT = sqlite.insert(meta)
_PG_INSERT = postgresql.insert(meta)
_SET: Final[dict[DialectName, Executable]] = {
    "sqlite": _SQLITE_INSERT.on_conflict_do_update(
        index_elements=[meta.c.key], set_={"value": _SQLITE_INSERT.excluded.value}
    ),
    "postgresql": _PG_INSERT.on_conflict_do_update(
        index_elements=[meta.c.key], set_={"value": _PG_INSERT.excluded.value}
    ),
}


class MetaStore:
    """Small named values of bot state (e.g. the hash of the last synced command tree)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def get(self, key: str) -> str | None:
        """Return the value stored under ``key``, or None."""
        value = await self._sql.scalar(_GET, {"key": key})
        return None if value is None else str(value)

    async def get_many(self, keys: Sequence[str]) -> dict[str, str]:
        """Return the values stored under ``keys`` (one query); keys without a value are absent."""
        if not keys:
            return {}
        rows = await self._sql.all(_GET_MANY, {"keys": list(keys)})
        return {str(row["key"]): str(row["value"]) for row in rows}

    async def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        await self._sql.run(_SET[self._sql.dialect], [{"key": key, "value": value}])
