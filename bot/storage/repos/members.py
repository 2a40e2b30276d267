"""Members' own defaults (``/settings``), both engines: :class:`MemberStore`.

Table ``member_settings``, keyed by user id; the flags are 0 or 1 on both engines (so copy-db
moves rows unchanged).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from bot.domain import MemberSettings
from bot.storage.repos.dialect import upsert
from bot.storage.schema import member_settings
from bot.storage.sql import Sql

_VALUES = (
    "text_model",
    "image_model",
    "video_model",
    "aspect_ratio",
    "video_duration",
    "prompt_suffix",
)
"""The columns stored as the settings hold them (None: no default)."""

_FLAGS = ("private", "remix", "notify_dm")
"""The yes/no columns, stored as 0 or 1."""


class MemberStore:
    """Members' own defaults (``/settings``), keyed by user id.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def get(self, user_id: int) -> MemberSettings:
        """Return the member's settings; :meth:`MemberSettings.default` when they set none."""
        row = await self._sql.one(
            select(member_settings).where(member_settings.c.user_id == user_id)
        )
        if row is None:
            return MemberSettings.default(user_id)
        values: dict[str, Any] = {name: row[name] for name in _VALUES}
        values.update({name: bool(row[name]) for name in _FLAGS})
        return MemberSettings(user_id=user_id, **values)

    async def save(self, settings: MemberSettings, at: float) -> None:
        """Store (insert or replace) the member's settings; ``at`` UTC epoch seconds."""
        values: dict[str, Any] = {name: getattr(settings, name) for name in _VALUES}
        values.update({name: int(bool(getattr(settings, name))) for name in _FLAGS})
        stmt = upsert(self._sql, member_settings).values(
            user_id=settings.user_id, updated_at=at, **values
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[member_settings.c.user_id],
                set_={name: stmt.excluded[name] for name in (*values, "updated_at")},
            )
        )
