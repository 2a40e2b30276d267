"""Creative control's tables (revision ``0015_creative``), both engines.

``creative_settings`` (a server's Enhance and Draft settings: one row once it set one),
``styles`` with ``style_references`` (their order is ``position``) and ``style_thumbnails``
(revision ``0018_style_tiers``, with ``styles.roles``), ``characters``. Rules are
the service's (:mod:`bot.services.creative`); this module only reads and writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import and_, delete, insert, or_, select, update

from bot.domain import Character, CreativeSettings, ImageRef, Style, StyleThumbnail
from bot.storage.repos.dialect import upsert
from bot.storage.schema import (
    characters,
    creative_settings,
    style_references,
    style_thumbnails,
    styles,
)
from bot.storage.sql import Row, Sql

SETTINGS_FIELDS = (
    "enhance_model",
    "image_system",
    "video_system",
    "draft_image_model",
    "draft_video_model",
)
"""The columns of ``creative_settings`` beyond its key, as :class:`CreativeSettings` names them."""


def _roles_text(roles: Sequence[int]) -> str | None:
    """``styles.roles`` of a style's tiers: their role ids, space-separated; None: everyone."""
    return " ".join(str(r) for r in sorted(set(roles))) or None


def _roles(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (text or "").split() if part.isdigit())


def _character(row: Row) -> Character:
    return Character(
        id=row["id"],
        user_id=row["user_id"],
        guild_id=row["guild_id"],
        name=row["name"],
        image=ImageRef(row["channel_id"], row["message_id"], row["attachment"]),
        shared=bool(row["shared"]),
    )


def _thumbnail(row: Row, data: bytes = b"") -> StyleThumbnail:
    """A ``style_thumbnails`` row as its record; ``data``: its bytes where they were read."""
    return StyleThumbnail(
        row["style_id"],
        row["position"],
        row["digest"],
        row["mime"],
        row["width"],
        row["height"],
        data,
    )


class CreativeStore:
    """A server's Enhance and Draft settings, its styles, and members' characters.

    Args:
        sql: the database's executor.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def settings(self, guild_id: int) -> CreativeSettings:
        """Return the server's settings; the defaults (all None) when it set none."""
        row = await self._sql.one(
            select(creative_settings).where(creative_settings.c.guild_id == guild_id)
        )
        if row is None:
            return CreativeSettings()
        return CreativeSettings(**{name: row[name] for name in SETTINGS_FIELDS})

    async def update_settings(self, guild_id: int, **values: str | None) -> None:
        """Set some of the settings (``SETTINGS_FIELDS``; None: back to the default).

        Raises:
            ValueError: a name not in ``SETTINGS_FIELDS``.
        """
        unknown = set(values) - set(SETTINGS_FIELDS)
        if unknown:
            raise ValueError(f"not a creative setting: {sorted(unknown)}")
        if not values:
            return
        stmt = upsert(self._sql, creative_settings).values(guild_id=guild_id, **values)
        await self._sql.run(
            stmt.on_conflict_do_update(index_elements=[creative_settings.c.guild_id], set_=values)
        )

    # -- styles ------------------------------------------------------------------------

    async def add_style(
        self,
        guild_id: int,
        name: str,
        suffix: str,
        references: Sequence[ImageRef],
        *,
        created_by: int,
        at: float,
        roles: Sequence[int] = (),
    ) -> Style | None:
        """Store a style and its references in one transaction; None when the name is taken.

        ``roles``: the role ids of the tiers that may use it (empty: every member).
        """
        async with self._sql.write() as tx:
            taken = await tx.one(
                select(styles.c.id).where(styles.c.guild_id == guild_id, styles.c.name == name)
            )
            if taken is not None:
                return None
            style_id = await tx.scalar(
                insert(styles)
                .values(
                    guild_id=guild_id,
                    name=name,
                    suffix=suffix,
                    created_by=created_by,
                    created_at=at,
                    roles=_roles_text(roles),
                )
                .returning(styles.c.id)
            )
            rows: list[dict[str, Any]] = [
                {
                    "style_id": style_id,
                    "position": index,
                    "channel_id": ref.channel_id,
                    "message_id": ref.message_id,
                    "attachment": ref.attachment,
                }
                for index, ref in enumerate(references)
            ]
            if rows:
                await tx.run(insert(style_references), rows)
        return Style(
            int(style_id),
            guild_id,
            name,
            suffix,
            tuple(references),
            created_by,
            _roles(_roles_text(roles)),
        )

    async def set_style_roles(self, guild_id: int, name: str, roles: Sequence[int]) -> bool:
        """Set the tiers' roles that may use a style (empty: everyone); whether it exists."""
        changed = await self._sql.run(
            update(styles)
            .where(styles.c.guild_id == guild_id, styles.c.name == name)
            .values(roles=_roles_text(roles))
        )
        return changed > 0

    async def put_style_thumbnail(self, thumbnail: StyleThumbnail, *, at: float) -> None:
        """Store (or replace) the thumbnail of a style's reference."""
        values = {
            "data": thumbnail.data,
            "digest": thumbnail.digest,
            "mime": thumbnail.mime,
            "width": thumbnail.width,
            "height": thumbnail.height,
            "made_at": at,
        }
        stmt = upsert(self._sql, style_thumbnails).values(
            style_id=thumbnail.style_id, position=thumbnail.position, **values
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[style_thumbnails.c.style_id, style_thumbnails.c.position],
                set_=values,
            )
        )

    async def style_thumbnails(
        self, style_ids: Sequence[int]
    ) -> dict[tuple[int, int], StyleThumbnail]:
        """The thumbnails of the styles' references, without their bytes: (style, position)."""
        if not style_ids:
            return {}
        columns = [c for c in style_thumbnails.c if c.name not in ("data", "made_at")]
        rows = await self._sql.all(
            select(*columns).where(style_thumbnails.c.style_id.in_(list(style_ids)))
        )
        return {(row["style_id"], row["position"]): _thumbnail(row) for row in rows}

    async def style_thumbnail(self, style_id: int, position: int) -> StyleThumbnail | None:
        """One reference's thumbnail with its bytes, or None."""
        row = await self._sql.one(
            select(style_thumbnails).where(
                style_thumbnails.c.style_id == style_id, style_thumbnails.c.position == position
            )
        )
        return None if row is None else _thumbnail(row, bytes(row["data"]))

    async def remove_style(self, guild_id: int, name: str) -> bool:
        """Delete a style and its references; whether there was one."""
        async with self._sql.write() as tx:
            style_id = await tx.scalar(
                select(styles.c.id).where(styles.c.guild_id == guild_id, styles.c.name == name)
            )
            if style_id is None:
                return False
            await tx.run(delete(style_references).where(style_references.c.style_id == style_id))
            await tx.run(delete(style_thumbnails).where(style_thumbnails.c.style_id == style_id))
            await tx.run(delete(styles).where(styles.c.id == style_id))
        return True

    async def styles(self, guild_id: int) -> list[Style]:
        """Return the server's styles by name, each with its references in order."""
        rows = await self._sql.all(
            select(styles).where(styles.c.guild_id == guild_id).order_by(styles.c.name)
        )
        if not rows:
            return []
        refs = await self._sql.all(
            select(style_references)
            .where(style_references.c.style_id.in_([row["id"] for row in rows]))
            .order_by(style_references.c.style_id, style_references.c.position)
        )
        by_style: dict[int, list[ImageRef]] = {}
        for ref in refs:
            by_style.setdefault(ref["style_id"], []).append(
                ImageRef(ref["channel_id"], ref["message_id"], ref["attachment"])
            )
        return [
            Style(
                row["id"],
                row["guild_id"],
                row["name"],
                row["suffix"],
                tuple(by_style.get(row["id"], ())),
                row["created_by"],
                _roles(row["roles"]),
            )
            for row in rows
        ]

    # -- characters ----------------------------------------------------------------------

    async def add_character(
        self, user_id: int, guild_id: int, name: str, image: ImageRef, *, shared: bool, at: float
    ) -> Character | None:
        """Store a member's character; None when they have one of that name."""
        async with self._sql.write() as tx:
            taken = await tx.one(
                select(characters.c.id).where(
                    characters.c.user_id == user_id, characters.c.name == name
                )
            )
            if taken is not None:
                return None
            character_id = await tx.scalar(
                insert(characters)
                .values(
                    user_id=user_id,
                    guild_id=guild_id,
                    name=name,
                    channel_id=image.channel_id,
                    message_id=image.message_id,
                    attachment=image.attachment,
                    shared=int(shared),
                    created_at=at,
                )
                .returning(characters.c.id)
            )
        return Character(int(character_id), user_id, guild_id, name, image, shared)

    async def remove_character(self, user_id: int, name: str) -> bool:
        """Delete a member's character; whether they had one of that name."""
        removed = await self._sql.run(
            delete(characters).where(characters.c.user_id == user_id, characters.c.name == name)
        )
        return removed > 0

    async def characters(self, user_id: int, guild_id: int | None) -> list[Character]:
        """The characters ``user_id`` may use: their own, and those shared to ``guild_id``.

        Their own first, then the shared ones, each by name.
        """
        usable = characters.c.user_id == user_id
        if guild_id is not None:
            usable = or_(usable, and_(characters.c.guild_id == guild_id, characters.c.shared == 1))
        rows = await self._sql.all(
            select(characters)
            .where(usable)
            .order_by((characters.c.user_id != user_id), characters.c.name)
        )
        return [_character(row) for row in rows]

    async def count_characters(self, user_id: int) -> int:
        """How many characters ``user_id`` has."""
        return len(
            await self._sql.all(select(characters.c.id).where(characters.c.user_id == user_id))
        )
