"""Route ``dm`` of a server job: its result as a new message in the requester's DM.

Where the server's routes failed (or a private job's card could not be edited), the result goes
to the member's DM with the bot, saying where it was asked. Its buttons that act in the
server (Again, Vary, Animate, Edit) act from the DM where the bot left the server, or cannot see
the channel a public card's next one goes to. A private result whose member closed their DMs
after the card went there still reaches them, in the channel, saying why.
"""

from __future__ import annotations

import dataclasses

import discord

from bot.discord.delivery.channel_card import PRIVATE_FALLBACK
from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.present import Shown
from bot.discord.delivery.reach import BOT_LEFT, DM_UPLOAD_LIMIT
from bot.discord.delivery.sending import classify, delivery_nonce, send_card, with_notice
from bot.discord.dm_notice import CANNOT_DM
from bot.discord.render.buttons import dm_buttons
from bot.domain import DeliveryRoute, Job
from bot.i18n import _
from bot.jobs.announcer import SHOWN, Attempt, Renew
from bot.services.private_cards import CardPlace, PrivateCard


class DmRoute:
    """Route ``dm`` of a server job (a personal job's DM is :mod:`~.personal`'s).

    Args:
        context: what the routes share.
    """

    def __init__(self, context: DeliveryContext) -> None:
        self._context = context

    async def deliver(self, job: Job, card: PrivateCard | None, renew: Renew | None) -> Attempt:
        """Post the result in the requester's DM, within a DM's upload limit (10 MiB)."""

        async def send(shown: Shown) -> Attempt:
            return await self._post(job, card, shown)

        try:
            return await self._context.send_result(job, DM_UPLOAD_LIMIT, renew, send)
        except Exception as exc:
            outcome = classify(exc)
            if outcome is None:
                raise
            return outcome

    async def _post(self, job: Job, card: PrivateCard | None, shown: Shown) -> Attempt:
        context = self._context
        parts = context.presenter.finished(job, shown)[1]
        dm = await context.client.create_dm(discord.Object(job.user_id))
        channel = f"<#{job.channel_id}>"
        where = _(" (requested in {channel}, where it could not be shown)", channel=channel)
        if card is not None:
            where = _(" (requested in {channel}; private results)", channel=channel)
        buttons = parts.action_buttons
        why = context.reach.unreachable(job)
        if why == BOT_LEFT or (why is not None and card is None):
            # Again, Vary, Animate and Edit act in the server and channel the job came
            # from, as on a private card (cogs.cards.dm_card_click): the bot is no longer
            # in that server, or cannot see the channel a public card's next one goes to.
            buttons = dm_buttons(buttons)
        notice = with_notice(dataclasses.replace(parts, action_buttons=buttons), job, where)
        try:
            await send_card(dm, notice, nonce=delivery_nonce(job, DeliveryRoute.DM))
        except discord.HTTPException as exc:
            if card is None or card.place is not CardPlace.DM or exc.code != CANNOT_DM:
                raise
            # The member closed their DMs after the card went there: the result still
            # reaches them, in the channel, saying why (its channel route was skipped).
            notice = with_notice(parts, job, _(PRIVATE_FALLBACK))
            channel_route = DeliveryRoute.CHANNEL
            await send_card(
                context.places.channel(job), notice, nonce=delivery_nonce(job, channel_route)
            )
        return SHOWN
