"""Progress edits of a pending job's card, wherever the card is; never in a delivery's way.

A job without a card message (its post failed) has nothing to refresh on any route (channel, DM
or response). An edit that fails is logged and dropped: the next progress edit tries again.
"""

from __future__ import annotations

import dataclasses
import logging

from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.sending import REQUEST_ERRORS, Editable, edit_in_either_form
from bot.discord.render import job_placeholder, job_unwatched
from bot.discord.render.buttons import show_buttons
from bot.discord.render.parts import MessageParts
from bot.domain import Job
from bot.services.personal import is_personal
from bot.services.schedule import PollSchedule

log = logging.getLogger(__name__)


async def pending_parts(
    job: Job, now: float, *, sandbox: bool, schedule: PollSchedule | None
) -> MessageParts:
    """A pending job's card: unwatched, else its elapsed time and ``ready`` estimate.

    Args:
        job: a pending job.
        now: wall time, UTC epoch seconds.
        sandbox: mark the card as the sandbox emulator's.
        schedule: estimates when the job will be ready; None shows no estimate.
    """
    if job.unwatched_at is not None:
        return job_unwatched(job, now=now, sandbox=sandbox)
    ready_at = None
    if schedule is not None:
        ready_at = await schedule.estimated_finish(job, now=now)
    return job_placeholder(job, now=now, sandbox=sandbox, ready_at=ready_at)


async def edit_quietly(context: DeliveryContext, job: Job, parts: MessageParts) -> None:
    """Edit the job's card into ``parts`` wherever it is; log and drop any failure.

    A card that is an interaction's response is edited with the interaction's token while it
    lives, never with the bot's token on the channel; a private card in the member's DM is
    edited there whatever the server does; a channel card is skipped while its server or
    channel cannot be reached (:class:`~bot.discord.delivery.reach.Reach`), and an edit that
    finds the channel gone marks it.
    """
    places = context.places
    message: Editable | None
    try:
        card = await places.private(job)
    except Exception as exc:
        log.info("placeholder edit of job %s skipped: %s", job.id, type(exc).__name__)
        return
    response = places.is_response(job, card)
    if response:
        if is_personal(job.guild_id):
            parts = dataclasses.replace(parts, action_buttons=show_buttons(job.id))
        found = await places.response(job)
        message = None if found is None else found[0]
    elif card is not None:
        message = places.in_dm(job, card)  # the requester's DM, whatever the server does
    elif context.reach.unreachable(job) is not None:
        return
    else:
        message = places.message(job)
    if message is None:
        return
    try:
        await edit_in_either_form(message, parts)
    except REQUEST_ERRORS as exc:
        if response:
            await places.token_refused(job, exc)
        elif card is None:
            context.reach.note_failure(job, exc)
        log.info("placeholder edit of job %s skipped: %s", job.id, exc)
