"""The showcase's tables, both engines: shared results, their votes, each server's settings.

``showcase_entries`` (one per server and job; ``removed_at`` once an admin removed it),
``showcase_votes`` (one row per member and entry: a second vote is the same row) and
``showcase_settings`` (the showcase channel; whether the page is public).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Select, delete, func, select, update

from bot.domain import ShowcaseEntry
from bot.storage.repos.dashboard import _result
from bot.storage.repos.dialect import upsert
from bot.storage.repos.safety import job_hidden
from bot.storage.schema import jobs, showcase_entries, showcase_settings, showcase_votes
from bot.storage.sql import Row, Sql

_votes = (
    select(func.count())
    .where(showcase_votes.c.entry_id == showcase_entries.c.id)
    .correlate(showcase_entries)
    .scalar_subquery()
    .label("votes")
)


def _entry(row: Row) -> ShowcaseEntry:
    return ShowcaseEntry(
        id=row["entry_id"],
        guild_id=row["guild_id"],
        user_id=row["sharer_id"],
        shared_at=row["shared_at"],
        votes=int(row["votes"]),
        result=_result(row),
        removed_at=row["removed_at"],
        post=(
            None
            if row["post_message_id"] is None
            else (row["post_channel_id"], row["post_message_id"])
        ),
    )


def _entries() -> Select[Any]:
    return select(
        jobs,
        showcase_entries.c.id.label("entry_id"),
        showcase_entries.c.user_id.label("sharer_id"),
        showcase_entries.c.shared_at,
        showcase_entries.c.removed_at,
        showcase_entries.c.channel_id.label("post_channel_id"),
        showcase_entries.c.message_id.label("post_message_id"),
        _votes,
    ).join_from(showcase_entries, jobs, jobs.c.id == showcase_entries.c.job_id)


class ShowcaseStore:
    """Shared results, votes and the showcase's settings.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def share(self, guild_id: int, job_id: int, user_id: int, at: float) -> tuple[int, bool]:
        """Add a result to the server's showcase; return ``(entry id, added)``.

        ``added`` is False when the job was shared already (or removed by an admin): the
        entry is left as it is, so sharing again neither duplicates nor undoes a removal.
        """
        stmt = upsert(self._sql, showcase_entries).values(
            guild_id=guild_id, job_id=job_id, user_id=user_id, shared_at=at
        )
        added = await self._sql.run(stmt.on_conflict_do_nothing()) > 0
        entry_id = await self._sql.scalar(
            select(showcase_entries.c.id).where(
                showcase_entries.c.guild_id == guild_id, showcase_entries.c.job_id == job_id
            )
        )
        return int(entry_id), added

    async def set_message(self, entry_id: int, channel_id: int, message_id: int) -> None:
        """Remember the showcase channel's message of an entry."""
        await self._sql.run(
            update(showcase_entries)
            .where(showcase_entries.c.id == entry_id)
            .values(channel_id=channel_id, message_id=message_id)
        )

    async def vote(self, entry_id: int, user_id: int, at: float) -> bool:
        """Count a member's vote for an entry; False when they had voted already."""
        stmt = upsert(self._sql, showcase_votes).values(entry_id=entry_id, user_id=user_id, at=at)
        return await self._sql.run(stmt.on_conflict_do_nothing()) > 0

    async def remove(self, guild_id: int, entry_id: int, by: int, at: float) -> bool:
        """Take an entry out of the showcase; False if it is not the server's or gone already."""
        done = await self._sql.run(
            update(showcase_entries)
            .where(
                showcase_entries.c.id == entry_id,
                showcase_entries.c.guild_id == guild_id,
                showcase_entries.c.removed_at.is_(None),
            )
            .values(removed_at=at, removed_by=by)
        )
        if done:
            await self._sql.run(delete(showcase_votes).where(showcase_votes.c.entry_id == entry_id))
        return done > 0

    async def posts_of(self, guild_id: int, job_id: int) -> list[tuple[int, int]]:
        """Return the showcase channel post ``(channel id, message id)`` of a job's entry."""
        rows = await self._sql.all(
            select(showcase_entries.c.channel_id, showcase_entries.c.message_id).where(
                showcase_entries.c.guild_id == guild_id,
                showcase_entries.c.job_id == job_id,
                showcase_entries.c.message_id.is_not(None),
            )
        )
        return [(int(r["channel_id"]), int(r["message_id"])) for r in rows]

    async def entry(self, entry_id: int) -> ShowcaseEntry | None:
        """Return an entry (removed or not), or None."""
        row = await self._sql.one(_entries().where(showcase_entries.c.id == entry_id))
        return None if row is None else _entry(row)

    async def ranked(self, guild_id: int, since: float | None, limit: int) -> list[ShowcaseEntry]:
        """Return the server's shown entries shared since ``since``, most votes first.

        Ties: the most recently shared first. Removed entries are never returned, nor the
        results the server's safety policy holds, withholds or rejected (docs/safety.md).
        """
        stmt = _entries().where(
            showcase_entries.c.guild_id == guild_id,
            showcase_entries.c.removed_at.is_(None),
            jobs.c.status == "completed",
            ~job_hidden(jobs.c.id),
        )
        if since is not None:
            stmt = stmt.where(showcase_entries.c.shared_at >= since)
        stmt = stmt.order_by(_votes.desc(), showcase_entries.c.shared_at.desc()).limit(limit)
        return [_entry(r) for r in await self._sql.all(stmt)]

    async def settings(self, guild_id: int) -> tuple[int | None, bool]:
        """Return the server's ``(showcase channel id, public)``; ``(None, False)`` by default."""
        row = await self._sql.one(
            select(showcase_settings).where(showcase_settings.c.guild_id == guild_id)
        )
        if row is None:
            return None, False
        return row["channel_id"], bool(row["public"])

    async def set_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (None: clear) the channel shared results are posted in."""
        stmt = upsert(self._sql, showcase_settings).values(guild_id=guild_id, channel_id=channel_id)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[showcase_settings.c.guild_id], set_={"channel_id": channel_id}
            )
        )

    async def public_since(self, guild_id: int) -> float | None:
        """Return when the server's showcase page became public; None while it is not."""
        row = await self._sql.one(
            select(showcase_settings.c.public, showcase_settings.c.public_since).where(
                showcase_settings.c.guild_id == guild_id
            )
        )
        if row is None or not row["public"]:
            return None
        return float(row["public_since"] or 0.0)  # 0009 stamped the rows public before it

    async def set_public(self, guild_id: int, public: bool, at: float) -> None:
        """Make the server's showcase page readable without signing in, or not.

        Made public (from not public) at ``at``: the page lists the entries shared since
        then. Saved public again while it is, the time of the switch stays.
        """
        async with self._sql.write() as tx:
            row = await tx.one(
                select(showcase_settings.c.public, showcase_settings.c.public_since).where(
                    showcase_settings.c.guild_id == guild_id
                )
            )
            since: float | None = None
            if public:
                kept = None if row is None or not row["public"] else row["public_since"]
                since = at if kept is None else float(kept)
            stmt = upsert(tx, showcase_settings).values(
                guild_id=guild_id, public=int(public), public_since=since
            )
            await tx.run(
                stmt.on_conflict_do_update(
                    index_elements=[showcase_settings.c.guild_id],
                    set_={"public": int(public), "public_since": since},
                )
            )
