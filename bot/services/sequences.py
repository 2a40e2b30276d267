"""Video sequences: clips continued from one another (Continue), their bound, and their order.

A clip continued (its last frame sent as the next clip's ``image_url``) forms a sequence with
the clip it continues: stored with its clips in order and who started it
(:class:`bot.storage.repos.sequences.SequenceStore`). A server bounds its length
(``/config sequence-length``, default :data:`DEFAULT_MAX_CLIPS`): continued clips drift in
colour and contrast, so past :data:`SUGGEST_CUT_AFTER` clips the card suggests a cut.
"""

from __future__ import annotations

import logging
from typing import Final

from bot.clock import Clock
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.services.generation import MAX_TAKES
from bot.storage import Database
from bot.storage.repos.sequences import Sequence, SequenceStore

log = logging.getLogger(__name__)

DEFAULT_MAX_CLIPS: Final = 6
"""Clips a sequence may hold where the server set no bound."""

MAX_MAX_CLIPS: Final = 50
"""The largest bound ``/config sequence-length`` takes."""

SUGGEST_CUT_AFTER: Final = 3
"""Past this many clips a continued clip's card suggests a cut (a fresh ``/video``)."""


class SequenceService:
    """Sequences of continued clips and each server's bound.

    Args:
        db: the database.
        clock: stamps new sequences (UTC epoch seconds).
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._store = db.of(SequenceStore)
        self._clock = clock

    async def max_clips(self, guild_id: int) -> int:
        """The server's bound on clips per sequence (:data:`DEFAULT_MAX_CLIPS` when unset)."""
        stored = await self._store.max_clips(guild_id)
        return DEFAULT_MAX_CLIPS if stored is None else stored

    async def set_max_clips(self, guild_id: int, max_clips: int | None) -> None:
        """Set the server's bound (2 to :data:`MAX_MAX_CLIPS`), or the default with None.

        Raises:
            ValidationFailed: out of range.
        """
        if max_clips is not None and not 2 <= max_clips <= MAX_MAX_CLIPS:
            raise ValidationFailed(N_("A sequence holds 2 to {most} clips."), most=MAX_MAX_CLIPS)
        await self._store.set_max_clips(guild_id, max_clips)

    async def clips_upto(self, job_id: int) -> tuple[int, ...]:
        """The jobs of ``job_id``'s sequence up to it, in order (itself alone if in none)."""
        found = await self._store.of_job(job_id)
        return (job_id,) if found is None else found.job_ids

    async def check_room(self, guild_id: int, previous_job_id: int) -> int:
        """Refuse a continuation past the server's bound; return the new clip's number.

        Raises:
            ValidationFailed: the sequence up to ``previous_job_id`` is at the bound.
        """
        bound = await self.max_clips(guild_id)
        number = len(await self.clips_upto(previous_job_id)) + 1
        if number > bound:
            raise ValidationFailed(
                N_(
                    "This sequence has reached this server's limit of {bound} clips "
                    "(`/config sequence-length`): Join it, or start a fresh `/video`."
                ),
                bound=bound,
            )
        return number

    async def default_takes(self, user_id: int) -> int:
        """The member's default number of takes (``/settings defaults takes``); 1 when unset."""
        return await self._store.member_takes(user_id) or 1

    async def set_default_takes(self, user_id: int, count: int | None) -> None:
        """Set the member's default number of takes (1 to 4), or remove it with None.

        Raises:
            ValidationFailed: out of range.
        """
        if count is not None and not 1 <= count <= MAX_TAKES:
            raise ValidationFailed(N_("Takes must be 1 to {most}."), most=MAX_TAKES)
        await self._store.set_member_takes(user_id, count)

    async def record_takes(self, job_ids: list[int]) -> None:
        """Record the jobs of one request's takes, in order (two or more)."""
        if len(job_ids) > 1:
            await self._store.add_takes(job_ids)

    async def takes_of(self, job_id: int) -> tuple[int, ...]:
        """The jobs of ``job_id``'s takes, in order; empty when it was asked alone."""
        return await self._store.takes_of(job_id)

    async def claim_final_delivery(self, group_id: int, job_id: int) -> bool:
        """Claim the final delivery of a request's takes for the take ``job_id``.

        The final delivery (every result attached to the shared card, the requester's one
        ping) is made once, by whichever worker claims it first in the database
        (:meth:`~bot.storage.repos.sequences.SequenceStore.claim_final`); the take ``job_id``
        may claim it again (its own delivery tried again).

        Args:
            group_id: the first take's job id (the group).
            job_id: the take whose delivery asks.

        Returns:
            True: this delivery makes it; False: another take's does.
        """
        return await self._store.claim_final(group_id, job_id)

    async def release_final_delivery(self, group_id: int, job_id: int) -> None:
        """Give back ``job_id``'s claim after its final delivery failed (tried again later)."""
        await self._store.release_final(group_id, job_id)

    async def add_clip(
        self, *, previous_job_id: int, job_id: int, guild_id: int, starter_id: int
    ) -> Sequence:
        """Record a paid continuation (``job_id`` continues ``previous_job_id``), in one write.

        Raises:
            StorageError: it could not be stored (the caller logs it: the clip is paid).
        """
        async with self._db.transaction() as tx:
            return await tx.of(SequenceStore).add_clip(
                previous_job_id=previous_job_id,
                job_id=job_id,
                guild_id=guild_id,
                starter_id=starter_id,
                at=self._clock.time(),
            )
