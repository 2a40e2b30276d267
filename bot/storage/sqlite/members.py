"""SQLite member settings: :class:`bot.storage.repositories.MemberSettingsRepository`."""

from __future__ import annotations

from bot.storage.models import MemberSettings
from bot.storage.sqlite.engine import Executor

COLUMNS = (
    "text_model",
    "image_model",
    "video_model",
    "aspect_ratio",
    "video_duration",
    "prompt_suffix",
    "private",
    "remix",
    "notify_dm",
)


class SqliteMembers:
    """Members' own defaults (``member_settings``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def get(self, user_id: int) -> MemberSettings:
        """Return the member's settings; the defaults when they set none."""
        row = await self._sql.one("SELECT * FROM member_settings WHERE user_id = ?", (user_id,))
        if row is None:
            return MemberSettings.default(user_id)
        return MemberSettings(
            user_id=user_id,
            text_model=row["text_model"],
            image_model=row["image_model"],
            video_model=row["video_model"],
            aspect_ratio=row["aspect_ratio"],
            video_duration=row["video_duration"],
            prompt_suffix=row["prompt_suffix"],
            private=bool(row["private"]),
            remix=bool(row["remix"]),
            notify_dm=bool(row["notify_dm"]),
        )

    async def save(self, settings: MemberSettings, at: float) -> None:
        """Insert or replace the member's settings; ``at`` UTC epoch seconds."""
        values = [getattr(settings, name) for name in COLUMNS]
        values[6:9] = [int(bool(v)) for v in values[6:9]]
        updates = ", ".join(f"{name} = excluded.{name}" for name in (*COLUMNS, "updated_at"))
        await self._sql.run(
            f"INSERT INTO member_settings (user_id, {', '.join(COLUMNS)}, updated_at)"
            f" VALUES ({', '.join('?' * (len(COLUMNS) + 2))})"
            f" ON CONFLICT (user_id) DO UPDATE SET {updates}",
            (settings.user_id, *values, at),
        )
