"""What the routes of a delivery share, and the one way each of them shows a result with files.

The routes (:mod:`~bot.discord.delivery.channel_card`, :mod:`~bot.discord.delivery.dm`,
:mod:`~bot.discord.delivery.personal`, :mod:`~bot.discord.delivery.takes`,
:mod:`~bot.discord.delivery.reshow`) are handed one :class:`DeliveryContext` by the dispatcher
(:class:`bot.discord.delivery.dispatch.DiscordAnnouncer`).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import discord

from bot.clock import Clock
from bot.discord.delivery.places import CardPlaces
from bot.discord.delivery.present import SERVER_LIMIT, Presenter, Shown
from bot.discord.delivery.reach import Reach
from bot.discord.delivery.sending import too_large
from bot.domain import Job, JobStatus
from bot.jobs.announcer import Attempt, Renew
from bot.jobs.byte_budget import ByteBudget

REPLIED_REMEMBERED = 1024
"""Jobs remembered by :class:`RepliedJobs` at once, the oldest dropped first. ``notify`` follows
its delivery at once (at most 20 deliveries run together per process), so only the ids of
deliveries whose ``notify`` never ran (a crash or a lost lease between the two) are dropped."""


class RepliedJobs:
    """Jobs whose reply to the placeholder went with their delivery (:data:`REPLIED_REMEMBERED`).

    That reply carried the files a card could not take by an edit, so ``notify`` does not ping
    a second time; an id is discarded by ``notify``, or by the job's next attempt, or dropped
    as the oldest past the bound (a ``notify`` that never ran).
    """

    def __init__(self) -> None:
        self._ids: OrderedDict[int, None] = OrderedDict()  # oldest first

    def __len__(self) -> int:
        return len(self._ids)

    def add(self, job_id: int) -> None:
        """The job's delivery sent the completion reply."""
        self._ids[job_id] = None
        self._ids.move_to_end(job_id)
        while len(self._ids) > REPLIED_REMEMBERED:
            self._ids.popitem(last=False)

    def discard(self, job_id: int) -> None:
        """Forget the job (its delivery is tried again, or failed)."""
        self._ids.pop(job_id, None)

    def take(self, job_id: int) -> bool:
        """Whether the job's delivery sent the completion reply; forgets it either way."""
        if job_id not in self._ids:
            return False
        del self._ids[job_id]
        return True


@dataclass(frozen=True, slots=True)
class DeliveryContext:
    """What every route uses.

    Attributes:
        client: the logged-in bot.
        clock: wall time.
        places: where a job's card is.
        reach: the servers and channels that cannot be reached, and upload limits.
        presenter: what a route shows of a result (the one step every route goes through).
        memory: the deliveries' bound on downloaded bytes held at once.
        replied: the jobs whose delivery already sent the completion reply.
    """

    client: discord.Client
    clock: Clock
    places: CardPlaces
    reach: Reach
    presenter: Presenter
    memory: ByteBudget
    replied: RepliedJobs

    async def send_result(
        self,
        job: Job,
        limit: int,
        renew: Renew | None,
        send: Callable[[Shown], Awaitable[Attempt]],
        *,
        limit_name: str = SERVER_LIMIT,
        renew_before_send: bool = True,
    ) -> Attempt:
        """Prepare ``job``'s result within ``limit`` bytes and hand it to ``send``.

        The files are held within :attr:`memory` from their download until ``send`` returns;
        ``renew`` (the delivery's lease) is awaited while waiting for room, between downloads
        and (``renew_before_send``) once they are all in. A send Discord refuses as too large
        (413, 40005) is made again with the link only (:data:`~.present.TOO_LARGE_NOTE`).

        Raises:
            Exception: as ``send`` raised it (the route classifies it).
        """
        wanted = limit if job.status is JobStatus.COMPLETED and job.outputs else 0
        async with self.memory.hold(wanted, renew) as held:
            shown = await self.presenter.prepare(job, limit, renew, limit_name=limit_name)
            held.shrink(shown.size)
            if renew_before_send and shown.files and renew is not None:
                await renew()
            try:
                return await send(shown)
            except discord.HTTPException as exc:
                if not shown.files or not too_large(exc):
                    raise
            return await send(shown.refused_as_too_large())
