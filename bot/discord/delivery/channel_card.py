"""The channel routes of a server job: its card edited into the result, or a new message.

Route ``placeholder`` edits the job's card (in its channel, or a private job's in the member's
DM) into the result and replies to it, pinging only the requester (the reply carries the files
when the card's edit could not). Route ``channel`` posts the result as a new message in the
job's channel, carrying its own ping; a private result posted there says why. A server that
removed the bot, or a channel it cannot see, fails these routes at once (permanently, without a
request), and a request that finds them so marks them (:mod:`bot.discord.delivery.reach`).
"""

from __future__ import annotations

from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.present import Shown
from bot.discord.delivery.reach import DM_UPLOAD_LIMIT
from bot.discord.delivery.sending import (
    classify,
    delivery_nonce,
    edit_card,
    reply,
    send_card,
    with_notice,
)
from bot.domain import DeliveryRoute, Job
from bot.i18n import N_, _
from bot.jobs.announcer import SHOWN, Attempt, Renew
from bot.services.private_cards import CardPlace, PrivateCard

PRIVATE_FALLBACK = N_(" (posted here: it could not be shown to you privately)")
"""What a private job's result says where it falls back to the channel."""


class ChannelCardRoute:
    """Routes ``placeholder`` and ``channel`` of a server job whose card is not a response.

    Args:
        context: what the routes share.
    """

    def __init__(self, context: DeliveryContext) -> None:
        self._context = context

    async def deliver(
        self, job: Job, route: DeliveryRoute, card: PrivateCard | None, renew: Renew | None
    ) -> Attempt:
        """Show the result by ``route`` (``placeholder`` or ``channel``).

        Args:
            job: the finished server job.
            route: ``placeholder`` (its card edited) or ``channel`` (a new message).
            card: where a private job's card is (the member's DM); None for a channel card.
            renew: the delivery's lease.
        """
        context = self._context
        if route is DeliveryRoute.PLACEHOLDER and card is not None:
            limit = DM_UPLOAD_LIMIT  # a DM takes 10 MiB, whatever the server's boosts
        else:
            if card is not None and card.place is CardPlace.DM:
                # The member's DM took its card: a private result whose card cannot be edited
                # goes there as a new message (the DM route), not where everyone sees it.
                return Attempt(
                    shown=False,
                    permanent=True,
                    error="a private result goes to the member's DM, not the channel",
                    code="private",
                )
            if (why := context.reach.unreachable(job)) is not None:
                return Attempt(shown=False, permanent=True, error=why, code="unreachable")
            limit = await context.reach.upload_limit(job.guild_id)
            if (why := context.reach.unreachable(job)) is not None:  # the lookup just learnt it
                return Attempt(shown=False, permanent=True, error=why, code="unreachable")

        async def send(shown: Shown) -> Attempt:
            if route is DeliveryRoute.PLACEHOLDER:
                return await self._edit(job, card, shown)
            return await self._post(job, card, shown)

        try:
            return await context.send_result(job, limit, renew, send)
        except Exception as exc:
            outcome = classify(exc)
            if outcome is None:
                raise
            if route is DeliveryRoute.CHANNEL or card is None:
                context.reach.note_failure(job, exc)
            return outcome

    async def _edit(self, job: Job, card: PrivateCard | None, shown: Shown) -> Attempt:
        """Edit the card into the result; reply to it, with the files the edit could not take."""
        context = self._context
        places = context.places
        message = places.message(job) if card is None else places.in_dm(job, card)
        if message is None:
            return Attempt(
                shown=False,
                permanent=True,
                error="no placeholder was posted",
                code="no_placeholder",
            )
        finished, parts = context.presenter.finished(job, shown)
        for_reply = await edit_card(message, parts, finished)
        if for_reply:
            await reply(job, message, for_reply)
            context.replied.add(job.id)
        return SHOWN

    async def _post(self, job: Job, card: PrivateCard | None, shown: Shown) -> Attempt:
        """Post the result as a new message in the job's channel, carrying its own ping."""
        context = self._context
        parts = context.presenter.finished(job, shown)[1]
        # A private result says why it is posted where everyone sees it.
        notice = with_notice(parts, job, "" if card is None else _(PRIVATE_FALLBACK))
        route = DeliveryRoute.CHANNEL
        await send_card(context.places.channel(job), notice, nonce=delivery_nonce(job, route))
        return SHOWN
