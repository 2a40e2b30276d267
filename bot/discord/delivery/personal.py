"""A result whose card is an interaction's response: a personal job's, or a private one's there.

A personal job (billed to a member's wallet, asked where the bot may not be a member) has no
channel message: its only route is its card, edited through the interaction's webhook while the
token lives. When the token is gone, the result is announced where the bot can still write: the
member's DM with the bot (route ``dm``), for a job asked there and, for one asked elsewhere,
when the member turned DM notices on (``/settings notify dm``). The DM names the result and how
to see it (its Show result button, ``/jobs show``); its link too, unless the server's safety
policy holds or withholds it (then it says so, without the link). Where neither applies (or the
DM is refused), the result waits for the card's Show result button and ``/jobs show`` (route
``jobs``), without a request.

A private server job whose member's DMs are closed has its card in the command's ephemeral
response, edited the same way (its followups ephemeral too); once that token is gone its result
falls back to the channel, saying why (:mod:`~bot.discord.delivery.channel_card`).
"""

from __future__ import annotations

import discord

from bot.discord.delivery.context import DeliveryContext
from bot.discord.delivery.present import HERE, Shown
from bot.discord.delivery.sending import classify, delivery_nonce, edit_card, send_card
from bot.discord.dm_notice import MemberSettingsReader
from bot.domain import DeliveryRoute, Job
from bot.jobs.announcer import SHOWN, Attempt, Renew

TOKEN_EXPIRED = Attempt(
    shown=False, permanent=True, error="the interaction token expired", code="token_expired"
)
TOKEN_REFUSED = Attempt(
    shown=False,
    permanent=True,
    error="Discord refused the interaction token (expired)",
    code="token_expired",
)


class PersonalRoute:
    """A personal job's routes (its card, the DM), and the edit of any response card.

    Args:
        context: what the routes share.
        members: members' settings (who turned DM notices on), for the DM of a personal result
            whose card's token died; None: only jobs asked in the bot's DM get one.
    """

    def __init__(
        self, context: DeliveryContext, *, members: MemberSettingsReader | None = None
    ) -> None:
        self._context = context
        self._members = members

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None) -> Attempt:
        """Edit a personal job's card (the interaction's response) into its result.

        The bot may not be a member where it was asked, so there is no channel message. While
        the token lives, the card is edited; once it is gone, the DM route announces the
        result in the member's DM with the bot (:meth:`late_dm`). Files stay within the
        interaction's upload limit (``Interaction.filesize_limit``).
        """
        if route is DeliveryRoute.DM:
            return await self.late_dm(job)
        if route is not DeliveryRoute.PLACEHOLDER:
            return Attempt(
                shown=False,
                permanent=True,
                error="a personal result has no channel message (its card, or the DM)",
                code="personal",
            )
        return await self.response(job, renew)

    async def late_dm(self, job: Job) -> Attempt:
        """Announce a personal result whose card can no longer be edited, in the member's DM.

        The bot's DM with the member is the one place it can always write with its own token.
        Used for a job asked in that DM (its channel is the DM), else only when the member
        turned DM notices on. The message is :meth:`~.present.Presenter.late_notice`; it
        carries the route's nonce, so a retried send is not posted twice.
        """
        context = self._context
        try:
            dm = await context.client.create_dm(discord.Object(job.user_id))
            if dm.id != job.channel_id:
                wanted = (
                    self._members is not None and (await self._members.get(job.user_id)).notify_dm
                )
                if not wanted:
                    return Attempt(
                        shown=False,
                        permanent=True,
                        error="asked outside the bot's DM, and DM notices are off",
                        code="personal",
                    )
            presenter = context.presenter
            parts = presenter.late_notice(job, await presenter.decided(job))
            await send_card(dm, parts, nonce=delivery_nonce(job, DeliveryRoute.DM))
        except Exception as exc:
            outcome = classify(exc)
            if outcome is None:
                raise
            return outcome
        return SHOWN

    async def response(self, job: Job, renew: Renew | None) -> Attempt:
        """Edit a card that is an interaction's response into its result, while its token lives.

        A personal job's card, or a private server job's whose member's DMs are closed (its
        ephemeral response). Without a live token nothing is sent: the attempt fails for good
        (a personal result then waits for Show result and ``/jobs show``; a private one goes
        to the channel, saying why).
        """
        context = self._context
        found = await context.places.response(job)
        if found is None:
            return TOKEN_EXPIRED
        message, limit = found

        async def send(shown: Shown) -> Attempt:
            finished, parts = context.presenter.finished(job, shown)
            for_reply = await edit_card(message, parts, finished)
            if for_reply:
                await message.followup(job, for_reply)
                context.replied.add(job.id)
            return SHOWN

        try:
            return await context.send_result(
                job, limit, renew, send, limit_name=HERE, renew_before_send=False
            )
        except Exception as exc:
            if await context.places.token_refused(job, exc):
                return TOKEN_REFUSED
            outcome = classify(exc)
            if outcome is None:
                raise
            return outcome
