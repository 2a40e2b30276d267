"""Video sequences and takes, both engines: continued clips in order; one request's takes.

Tables ``sequences`` (who started one, in which guild), ``sequence_clips`` (its jobs by
position, 1-based), ``sequence_settings`` (a guild's bound on clips per sequence), ``takes``
(a take's job, its group: the first take's job id, and its position, 1-based; on the first
take's row, which take's delivery made the group's final one) and
``member_takes`` (a member's default number of takes).
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import delete, func, insert, or_, select, update

from bot.storage.repos.dialect import upsert
from bot.storage.schema import (
    member_takes,
    sequence_clips,
    sequence_settings,
    sequences,
    takes,
)
from bot.storage.sql import Sql


@dataclass(frozen=True, slots=True)
class Sequence:
    """A stored sequence.

    Attributes:
        id: the store's id.
        guild_id: the guild (a member's wallet id for personal jobs).
        user_id: the member who started it.
        job_ids: its clips' jobs, in order.
    """

    id: int
    guild_id: int
    user_id: int
    job_ids: tuple[int, ...]


class SequenceStore:
    """Sequences of clips and each guild's bound.

    Args:
        sql: the database's executor, or one transaction's (:meth:`add_clip` needs one).
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def max_clips(self, guild_id: int) -> int | None:
        """The guild's bound on clips per sequence; None when it set none."""
        value = await self._sql.scalar(
            select(sequence_settings.c.max_clips).where(sequence_settings.c.guild_id == guild_id)
        )
        return None if value is None else int(value)

    async def set_max_clips(self, guild_id: int, max_clips: int | None) -> None:
        """Set the guild's bound, or go back to the default with None."""
        if max_clips is None:
            await self._sql.run(
                delete(sequence_settings).where(sequence_settings.c.guild_id == guild_id)
            )
            return
        stmt = upsert(self._sql, sequence_settings).values(guild_id=guild_id, max_clips=max_clips)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[sequence_settings.c.guild_id],
                set_={"max_clips": stmt.excluded.max_clips},
            )
        )

    async def of_job(self, job_id: int) -> Sequence | None:
        """The newest sequence holding ``job_id``, cut after it (its clips up to that one).

        None when the job is in no sequence (a clip not continued, nor continued from).
        """
        found = await self._sql.one(
            select(sequence_clips.c.sequence_id, sequence_clips.c.position)
            .where(sequence_clips.c.job_id == job_id)
            .order_by(sequence_clips.c.sequence_id.desc())
            .limit(1)
        )
        if found is None:
            return None
        return await self._load(int(found["sequence_id"]), upto=int(found["position"]))

    async def get(self, sequence_id: int) -> Sequence | None:
        """The sequence ``sequence_id`` with all its clips; None if unknown."""
        return await self._load(sequence_id, upto=None)

    async def _load(self, sequence_id: int, *, upto: int | None) -> Sequence | None:
        head = await self._sql.one(select(sequences).where(sequences.c.id == sequence_id))
        if head is None:
            return None
        query = select(sequence_clips.c.job_id.label("job_id")).where(
            sequence_clips.c.sequence_id == sequence_id
        )
        if upto is not None:
            query = query.where(sequence_clips.c.position <= upto)
        rows = await self._sql.all(query.order_by(sequence_clips.c.position))
        return Sequence(
            int(head["id"]),
            int(head["guild_id"]),
            int(head["user_id"]),
            tuple(int(r["job_id"]) for r in rows),
        )

    async def add_clip(
        self, *, previous_job_id: int, job_id: int, guild_id: int, starter_id: int, at: float
    ) -> Sequence:
        """Record ``job_id`` as continued from ``previous_job_id``; return its sequence.

        Appended when the previous clip is the last of its sequence; else (a clip continued
        twice, or from the middle) a new sequence of the clips up to it, then this one. A
        previous clip in no sequence starts one, started by ``starter_id``. Run it in a
        transaction (``db.transaction()``) so that two continuations of one clip do not
        interleave.

        Args:
            previous_job_id: the clip continued.
            job_id: the new clip's job.
            guild_id: the guild (or wallet) of a new sequence.
            starter_id: who started the previous clip: the starter of a new sequence (a
                branch keeps its sequence's).
            at: UTC epoch seconds.
        """
        found = await self._sql.one(
            select(sequence_clips.c.sequence_id, sequence_clips.c.position)
            .where(sequence_clips.c.job_id == previous_job_id)
            .order_by(sequence_clips.c.sequence_id.desc())
            .limit(1)
        )
        if found is not None:
            sequence_id, position = int(found["sequence_id"]), int(found["position"])
            last = await self._sql.scalar(
                select(func.max(sequence_clips.c.position)).where(
                    sequence_clips.c.sequence_id == sequence_id
                )
            )
            if int(last) == position:
                await self._sql.run(
                    insert(sequence_clips).values(
                        sequence_id=sequence_id, position=position + 1, job_id=job_id
                    )
                )
                loaded = await self._load(sequence_id, upto=None)
                assert loaded is not None
                return loaded
            branched = await self._load(sequence_id, upto=position) or _EMPTY
            prefix, starter_id = branched.job_ids, branched.user_id or starter_id
        else:
            prefix = (previous_job_id,)
        new_id = int(
            await self._sql.scalar(
                insert(sequences)
                .values(guild_id=guild_id, user_id=starter_id, created_at=at)
                .returning(sequences.c.id)
            )
        )
        clips = (*prefix, job_id)
        await self._sql.run(
            insert(sequence_clips),
            [
                {"sequence_id": new_id, "position": n, "job_id": clip}
                for n, clip in enumerate(clips, start=1)
            ],
        )
        return Sequence(new_id, guild_id, starter_id, clips)

    async def add_takes(self, job_ids: list[int]) -> None:
        """Record ``job_ids`` as the takes of one request, in order (group: the first's id)."""
        await self._sql.run(
            insert(takes),
            [
                {"job_id": job_id, "group_id": job_ids[0], "position": n}
                for n, job_id in enumerate(job_ids, start=1)
            ],
        )

    async def takes_of(self, job_id: int) -> tuple[int, ...]:
        """The jobs of ``job_id``'s request's takes, in order; empty when it is no take."""
        group = await self._sql.scalar(select(takes.c.group_id).where(takes.c.job_id == job_id))
        if group is None:
            return ()
        rows = await self._sql.all(
            select(takes.c.job_id.label("job_id"))
            .where(takes.c.group_id == group)
            .order_by(takes.c.position)
        )
        return tuple(int(r["job_id"]) for r in rows)

    async def claim_final(self, group_id: int, job_id: int) -> bool:
        """Claim the group's final delivery for the take ``job_id``; True if it is this one's.

        One atomic conditional ``UPDATE`` of the first take's row: it succeeds when nobody
        claimed it yet, or ``job_id`` did (its own delivery tried again after a crash or a
        lost lease). Of two workers finishing the last takes together, one gets it.
        """
        changed = await self._sql.run(
            update(takes)
            .where(
                takes.c.job_id == group_id,
                or_(takes.c.final_delivered_by.is_(None), takes.c.final_delivered_by == job_id),
            )
            .values(final_delivered_by=job_id)
        )
        return changed > 0

    async def release_final(self, group_id: int, job_id: int) -> None:
        """Give back ``job_id``'s claim (its final delivery failed and will be tried again)."""
        await self._sql.run(
            update(takes)
            .where(takes.c.job_id == group_id, takes.c.final_delivered_by == job_id)
            .values(final_delivered_by=None)
        )

    async def member_takes(self, user_id: int) -> int | None:
        """The member's default number of takes; None when they set none."""
        value = await self._sql.scalar(
            select(member_takes.c.takes).where(member_takes.c.user_id == user_id)
        )
        return None if value is None else int(value)

    async def set_member_takes(self, user_id: int, count: int | None) -> None:
        """Set the member's default number of takes, or remove it with None."""
        if count is None:
            await self._sql.run(delete(member_takes).where(member_takes.c.user_id == user_id))
            return
        stmt = upsert(self._sql, member_takes).values(user_id=user_id, takes=count)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[member_takes.c.user_id], set_={"takes": stmt.excluded.takes}
            )
        )


_EMPTY = Sequence(0, 0, 0, ())
