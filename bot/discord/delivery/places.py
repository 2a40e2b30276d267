"""Where a job's card is: its channel's message, the requester's DM, or an interaction's response.

Placeholders are ordinary channel messages the bot posted with its own token, never an
interaction's response: an interaction token dies 15 minutes after the command (then 401, code
50027), and a video can take longer.

A personal job (billed to a member's wallet, asked where the bot may not be a member) has no
channel message: its card is the interaction's original response, edited through the
interaction webhook while its token lives (``bot.services.response_tokens``), never with the
bot's token on the channel, and never after the token expired or Discord refused it (401,
50027).

A private server job (private results: :mod:`bot.services.private_cards`) has its card in the
requester's DM, edited and replied to there with the bot's token like a channel card, or, where
the member's DMs are closed, in the command's ephemeral response, edited like a personal card
while its token lives (its followups ephemeral too).
"""

from __future__ import annotations

import logging

import discord

from bot.discord.delivery.sending import ResponseMessage
from bot.domain import Job
from bot.services.personal import is_personal
from bot.services.private_cards import CardPlace, PrivateCard, PrivateCards
from bot.services.response_tokens import WEBHOOK_TOKEN_DEAD, ResponseTokens

log = logging.getLogger(__name__)


class CardPlaces:
    """Finds a job's card as a message the delivery can edit.

    Args:
        client: the logged-in bot.
        tokens: the interaction tokens of personal jobs, whose cards are interaction
            responses; None: such cards are never edited (Show result shows them).
        cards: where private server jobs' cards are; None: every server job's card is in
            its channel.
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        tokens: ResponseTokens | None = None,
        cards: PrivateCards | None = None,
    ) -> None:
        self._client = client
        self._tokens = tokens
        self._cards = cards

    def channel(self, job: Job) -> discord.PartialMessageable:
        """The job's channel, addressed without a cache."""
        return self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)

    def message(self, job: Job) -> discord.PartialMessage | None:
        """The job's card in its channel; None when none was posted."""
        if job.message_id is None:
            return None
        return self.channel(job).get_partial_message(job.message_id)

    async def private(self, job: Job) -> PrivateCard | None:
        """Where a private server job's card is; None for a channel card (or a personal job).

        Raises:
            Exception: the database could not be read.
        """
        if self._cards is None or is_personal(job.guild_id):
            return None
        return await self._cards.get(job.id)

    @staticmethod
    def is_response(job: Job, card: PrivateCard | None) -> bool:
        """Whether the job's card is an interaction's response (personal, or private there)."""
        return is_personal(job.guild_id) or (card is not None and card.place is CardPlace.RESPONSE)

    def in_dm(self, job: Job, card: PrivateCard) -> discord.PartialMessage | None:
        """The job's card in the member's DM; None when it was never recorded (a crash)."""
        if card.channel_id is None or job.message_id is None:
            return None
        channel = self._client.get_partial_messageable(card.channel_id)
        return channel.get_partial_message(job.message_id)

    async def response(self, job: Job) -> tuple[ResponseMessage, int] | None:
        """The job's card as an editable response and its upload limit, bytes.

        None when there is no live token (expired, refused, never kept) or no card: nothing
        may then be sent about it.
        """
        if self._tokens is None or job.message_id is None:
            return None
        token = await self._tokens.get(job.id)
        app_id = self._client.application_id
        if token is None or app_id is None:
            return None
        # The interaction's own webhook (type 3, "application"), as discord.py's
        # ``Interaction.followup``: only that kind may send ephemeral followups.
        webhook = discord.Webhook.from_state(
            data={"id": app_id, "type": 3, "token": token.token},
            state=self._client._connection,
        )
        message = ResponseMessage(webhook, job.message_id, private=token.private)
        return message, token.filesize_limit

    async def token_refused(self, job: Job, exc: BaseException) -> bool:
        """Forget the job's token if Discord says it is dead (401 50027, 10015); say so."""
        if not isinstance(exc, discord.HTTPException):
            return False
        if exc.status != 401 and exc.code not in WEBHOOK_TOKEN_DEAD:
            return False
        if self._tokens is not None:
            await self._tokens.forget(job.id)
        log.info("job %s: its interaction token is no longer valid; not used again", job.id)
        return True
