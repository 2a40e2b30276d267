"""The takes of one request: one shared channel card, filled in as each take finishes.

Only a server job's public channel card is shared: a personal or private take has its own card
(:mod:`bot.discord.render.takes`). Until the last take finishes the card shows the service's
links; the delivery of the last one attaches every take's result that fits and pings the
requester, the only ping of the takes (and a take a reviewer approved afterwards, delivered
again, makes that final delivery once more). Each take is screened by the safety check
(:meth:`~bot.discord.delivery.present.Presenter.prepare`) before the card shows it: a held or
withheld take shows neither its file nor its link there (docs/safety.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import io
import logging
from collections.abc import Awaitable, Callable

import discord

from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.progress import edit_quietly
from bot.discord.delivery.sending import (
    Files,
    classify,
    delivery_nonce,
    edit_card,
    too_large,
)
from bot.discord.render.parts import ping_only
from bot.discord.render.takes import takes_ready
from bot.domain import DeliveryRoute, Job, JobStatus, Visibility
from bot.jobs.announcer import SHOWN, Attempt, Renew
from bot.services.personal import is_personal
from bot.services.sequences import SequenceService

log = logging.getLogger(__name__)

IDLE_LOCKS = 1024
"""Locks of takes cards kept before the idle ones (of finished takes) are dropped."""


class TakesRoute:
    """Shows each take on its request's shared card, one edit at a time.

    Args:
        context: what the routes share.
        takes: finds a job's sibling takes (every take of its request, as stored now; empty
            for a job asked alone); None: every job has its own card.
        final: claims a request's final delivery of its takes in the database
            (:meth:`~bot.services.sequences.SequenceService.claim_final_delivery`), so two
            workers finishing its last takes together make one; None: this process's lock only.
    """

    def __init__(
        self,
        context: DeliveryContext,
        *,
        takes: Callable[[Job], Awaitable[tuple[Job, ...]]] | None = None,
        final: SequenceService | None = None,
    ) -> None:
        self._context = context
        self._takes = takes
        self._final = final
        # One edit of a takes card at a time per request, each rendered from the latest
        # state, so a slower edit never puts back an older state of the takes.
        self._locks: dict[int, asyncio.Lock] = {}

    async def siblings(self, job: Job) -> tuple[Job, ...]:
        """The takes sharing ``job``'s channel card (itself included); empty for none."""
        if self._takes is None or is_personal(job.guild_id) or not job.details.get("take"):
            return ()  # a job asked alone (no "take" in its details) costs no lookup
        try:
            if await self._context.places.private(job) is not None:
                return ()
            group = await self._takes(job)
        except Exception as exc:
            log.info("the takes of job %s were not read (%s)", job.id, type(exc).__name__)
            return ()
        # A take not attached yet (its card being posted) is on its way to the same card.
        shared = all(t.message_id in (None, job.message_id) for t in group)
        return group if len(group) > 1 and shared else ()

    def _lock(self, group: tuple[Job, ...]) -> asyncio.Lock:
        lock = self._locks.get(group[0].id)
        if lock is None:
            if len(self._locks) > IDLE_LOCKS:  # idle locks of finished takes
                for key, old in list(self._locks.items()):
                    if not old.locked():
                        del self._locks[key]
            lock = self._locks[group[0].id] = asyncio.Lock()
        return lock

    async def progress(self, job: Job, group: tuple[Job, ...]) -> None:
        """Refresh the shared card from the takes' latest state (a pending take's progress)."""
        async with self._lock(group):
            group = await self.siblings(job)
            presenter = self._context.presenter
            hidden = await presenter.hidden_takes(group)
            await edit_quietly(self._context, job, presenter.takes(group, hidden=hidden))

    async def deliver(
        self,
        job: Job,
        group: tuple[Job, ...],
        placeholder: discord.PartialMessage,
        renew: Renew | None = None,
    ) -> Attempt:
        """Show a finished take on its request's shared card, as every take stands now.

        The delivery of the last take attaches every take's result that fits the server's
        upload limit (one download each, held within the deliveries' memory budget), so the
        results outlive the service's links, and pings the requester. That final delivery is
        claimed in the database first (``final``): of two workers finishing the last takes
        together, the one that does not get it leaves the card to the other.
        """
        context = self._context
        context.replied.add(job.id)  # notify pings nobody for a take
        claimed = False
        try:
            async with self._lock(group):
                group = tuple(job if t.id == job.id else t for t in await self.siblings(job))
                if not group:
                    return Attempt(
                        shown=False, permanent=True, error="takes unreadable", code="takes"
                    )
                if any(t.status is JobStatus.PENDING for t in group):
                    await self._screen(job, renew)  # before the card shows its link
                    hidden = await context.presenter.hidden_takes(group)
                    parts = context.presenter.takes(group, hidden=hidden)
                    await edit_card(placeholder, parts, parts)
                    return SHOWN
                if await self._claim_final(group[0].id, job.id):
                    claimed = True
                elif not await self._approved(job):
                    return SHOWN  # another take's delivery makes the final one
                # else: a take approved after the final delivery is shown on the card as an
                # ordinary completion again (its file, the requester's ping).
                await self._final_card(job, group, placeholder, renew)
        except Exception as exc:
            context.replied.discard(job.id)
            if claimed:
                await self._release_final(group[0].id, job.id)
            outcome = classify(exc)
            if outcome is None:
                raise
            context.reach.note_failure(job, exc)
            return outcome
        return SHOWN

    async def _final_card(
        self,
        job: Job,
        group: tuple[Job, ...],
        placeholder: discord.PartialMessage,
        renew: Renew | None,
    ) -> None:
        """Edit the card into every take's result with their files, then ping the requester.

        Raises:
            discord.HTTPException: Discord refused the edit or the reply.
        """
        context = self._context
        presenter = context.presenter
        limit = await context.reach.upload_limit(job.guild_id)
        done = [t for t in group if t.status is JobStatus.COMPLETED and t.outputs]
        async with context.memory.hold(limit if done else 0, renew) as held:
            files: list[tuple[str, bytes]] = []
            attached: dict[int, str] = {}
            for take in done:
                room = limit - sum(len(data) for _, data in files)
                shown = await presenter.prepare(take, room, renew)
                if shown.files:
                    files.append(shown.files[0])
                    attached[take.id] = shown.files[0][0]
            held.shrink(sum(len(data) for _, data in files))
            hidden = await presenter.hidden_takes(group)
            plain = presenter.takes(group, hidden=hidden)
            parts = dataclasses.replace(
                presenter.takes(group, attached, hidden), files=tuple(files)
            )
            for_reply: Files
            try:
                for_reply = await edit_card(placeholder, parts, plain)
            except discord.HTTPException as exc:
                if not files or not too_large(exc):
                    raise
                await edit_card(placeholder, plain, plain)
                for_reply = ()
            await placeholder.channel.send(
                content=takes_ready(group),
                files=[discord.File(io.BytesIO(data), name) for name, data in for_reply],
                allowed_mentions=ping_only(job.user_id),
                reference=placeholder.to_reference(fail_if_not_exists=False),
                mention_author=False,
                nonce=delivery_nonce(job, DeliveryRoute.PLACEHOLDER),
            )

    async def _screen(self, job: Job, renew: Renew | None) -> None:
        """Screen a finished take before the shared card shows it (its decision recorded).

        Its files are downloaded to be scored, then let go: the final delivery attaches them.
        Nothing to do without a safety check, or for a take that did not complete.
        """
        context = self._context
        gate = context.presenter.safety
        if gate is None or not gate.active or job.status is not JobStatus.COMPLETED:
            return
        limit = await context.reach.upload_limit(job.guild_id)
        async with context.memory.hold(limit, renew):
            await context.presenter.prepare(job, limit, renew)

    async def _approved(self, job: Job) -> bool:
        """Whether ``job`` is a take a reviewer approved (held or withheld before)."""
        gate = self._context.presenter.safety
        if gate is None or not gate.active:
            return False
        record = await gate.service.record(f"j{job.id}")
        return record is not None and record.state is Visibility.APPROVED

    async def _claim_final(self, group_id: int, job_id: int) -> bool:
        """Whether this take's delivery makes its request's final one (claimed in the database).

        A database that cannot answer lets it through: a second ping beats no result.
        """
        if self._final is None:
            return True
        try:
            return await self._final.claim_final_delivery(group_id, job_id)
        except Exception as exc:
            log.warning("takes of job %s: final delivery not claimed (%r)", group_id, exc)
            return True

    async def _release_final(self, group_id: int, job_id: int) -> None:
        if self._final is None:
            return
        try:
            await self._final.release_final_delivery(group_id, job_id)
        except Exception as exc:  # the same take claims it again when tried again
            log.warning("takes of job %s: final delivery claim kept (%r)", group_id, exc)
