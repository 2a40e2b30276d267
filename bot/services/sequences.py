"""Video sequences: clips continued from one another (Continue), their bound, and their order.

A clip continued (its last frame sent as the next clip's ``image_url``) forms a sequence with
the clip it continues: stored with its clips in order and who started it
(:class:`bot.storage.repos.sequences.SequenceStore`). A server bounds its length
(``/config sequence-length``, default :data:`DEFAULT_MAX_CLIPS`): continued clips drift in
colour and contrast, so past :data:`SUGGEST_CUT_AFTER` clips the card suggests a cut.

Joins wait in one line per process (:class:`JoinLine`, :attr:`SequenceService.joins`): one
join runs at a time, each member has at most one join in line, and a join that could no longer
be answered (its interaction token would expire before it ends) leaves the line with a
sentence while its token still works.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Final

from bot.clock import Clock
from bot.domain import Job, JobStatus
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.services.generation import MAX_TAKES, Requester
from bot.storage import Database
from bot.storage.repos.sequences import Sequence

log = logging.getLogger(__name__)

DEFAULT_MAX_CLIPS: Final = 6
"""Clips a sequence may hold where the server set no bound."""

MAX_MAX_CLIPS: Final = 50
"""The largest bound ``/config sequence-length`` takes."""

SUGGEST_CUT_AFTER: Final = 3
"""Past this many clips a continued clip's card suggests a cut (a fresh ``/video``)."""


ONE_JOIN_EACH = N_("You already have a join in line; wait for it to finish.")
"""A member's second join while their first is running or waiting."""

JOIN_DROPPED = N_(
    "Your join waited in line longer than Discord lets me answer it (15 minutes), so it "
    "left the line; nothing was joined. Try again when fewer joins are waiting."
)
"""A waiting join whose interaction token would expire before it could end."""


FRAME_CHECK_URL: Final = "https://cdn.discordapp.com/attachments/0/0/last-frame.png"
"""Stands for a Continue's frame URL while its options are checked, before the clip is fetched."""


def require_clip(job: Job | None, who: Requester) -> Job:
    """``job`` when it is a finished video of this server (or wallet) with a file to use.

    Raises:
        ValidationFailed: it is not (nothing is fetched or charged).
    """
    if job is None or job.guild_id != who.guild_id:
        raise ValidationFailed(N_("That video is not known here; `/jobs` lists yours."))
    if job.kind != "video":
        raise ValidationFailed(N_("Job #{number} is an image, not a video."), number=job.id)
    if job.status is not JobStatus.COMPLETED:
        raise ValidationFailed(
            N_("Video #{number} has not finished; `/jobs` says where it is."), number=job.id
        )
    if not any(url.startswith(("https://", "http://")) for url in job.outputs):
        raise ValidationFailed(
            N_("The service returned no file for video #{number}."), number=job.id
        )
    return job


class JoinLine:
    """One join at a time per process; the others wait in line, told their place.

    First come, first served; a member has at most one join in line (running or waiting). A
    waiting member is told how many joins are ahead of theirs whenever that changes. A join
    that must start by a time (its interaction token's life, less the work's own bound) leaves
    the line at that time, if its turn has not come, with :data:`JOIN_DROPPED`.

    Args:
        clock: wall time (UTC epoch seconds) and the wait for a join's start-by time.
    """

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._line: list[int] = []  # members, in order; the first one's join runs
        self._moved = asyncio.Event()

    @property
    def length(self) -> int:
        """Joins running or waiting."""
        return len(self._line)

    def refuse_if_queued(self, member_id: int) -> None:
        """Refuse a member who already has a join in line (before anything is deferred).

        Raises:
            ValidationFailed: :data:`ONE_JOIN_EACH`.
        """
        if member_id in self._line:
            raise ValidationFailed(ONE_JOIN_EACH)

    @contextlib.asynccontextmanager
    async def turn(
        self,
        member_id: int,
        told: Callable[[int], Awaitable[None]],
        *,
        start_by: float | None = None,
    ) -> AsyncIterator[None]:
        """Wait for this join's turn; ``told(ahead)`` hears the joins ahead while waiting.

        The turn ends when the block exits, however (the next in line goes).

        Args:
            member_id: whose join it is.
            told: called with the joins ahead whenever that changes (its failures ignored).
            start_by: UTC epoch seconds by which the turn must have come; None: no bound.

        Raises:
            ValidationFailed: the member already has a join in line (:data:`ONE_JOIN_EACH`),
                or ``start_by`` passed before the turn came (:data:`JOIN_DROPPED`).
        """
        self.refuse_if_queued(member_id)
        self._line.append(member_id)
        try:
            shown = -1
            while (ahead := self._line.index(member_id)) > 0:
                if ahead != shown:
                    shown = ahead
                    with contextlib.suppress(Exception):  # a lost note must not lose the place
                        await told(ahead)
                await self._wait_move(start_by)
            if start_by is not None and self._clock.time() >= start_by:
                raise ValidationFailed(JOIN_DROPPED)
            yield
        finally:
            self._line.remove(member_id)
            moved, self._moved = self._moved, asyncio.Event()
            moved.set()

    async def _wait_move(self, start_by: float | None) -> None:
        """Wait until the line moves, or raise once ``start_by`` is reached first."""
        if start_by is None:
            await self._moved.wait()
            return
        remaining = start_by - self._clock.time()
        if remaining <= 0:
            raise ValidationFailed(JOIN_DROPPED)
        moved = asyncio.ensure_future(self._moved.wait())
        timer = asyncio.ensure_future(self._clock.sleep(remaining))
        try:
            await asyncio.wait({moved, timer}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            moved.cancel()
            timer.cancel()


class SequenceService:
    """Sequences of continued clips and each server's bound.

    Args:
        db: the database.
        clock: stamps new sequences (UTC epoch seconds); times the join line.

    Attributes:
        joins: this process's one line of joins.
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._store = db.sequences
        self._clock = clock
        self.joins = JoinLine(clock)

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
            return await tx.sequences.add_clip(
                previous_job_id=previous_job_id,
                job_id=job_id,
                guild_id=guild_id,
                starter_id=starter_id,
                at=self._clock.time(),
            )
