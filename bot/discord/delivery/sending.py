"""How a delivery's messages reach Discord, and what Discord's answers mean for it.

A delivery attempt by one route (:class:`bot.domain.DeliveryRoute`) either shows the
result, fails for good on that route (unknown message 10008 or channel 10003, missing access
50001 or permissions 50013, archived thread 50083, DMs closed 50007, ...: the poller falls back
to the next route), or fails transiently (5xx, 429, network errors, time-outs: the poller
retries later). Classifying Discord's answers is this module's job (:func:`classify`); the
schedule is the poller's (docs/architecture.md, "Delivery").

Every message the delivery posts (a new channel message, a DM, the reply to the placeholder)
carries a nonce derived from the job and the route, with ``enforce_nonce`` (Discord, Create
Message: the same author's message with that nonce from the past few minutes is returned
instead of a new one), so a send retried after an answer that was lost is not posted twice.

Results are Components V2 cards (``bot/discord/render/jobs.py``) sent in their old form (content
and embeds) where Discord refuses the card (400, 50035); a card whose edit may not add the file
shows the service's link and the file goes with the completion reply (docs/architecture.md,
"The job card").
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import aiohttp
import discord

from bot.discord.render import completion_reply
from bot.discord.render import limits as discord_limits
from bot.discord.render.jobs import with_files
from bot.discord.render.parts import MessageParts, ping_only
from bot.domain import DeliveryRoute, Job
from bot.i18n import _
from bot.jobs.announcer import Attempt

log = logging.getLogger(__name__)

MISSING_ACCESS = 50001
"""Discord's JSON code for 403 "Missing Access": the bot cannot see the server or channel."""

UNKNOWN_CHANNEL = 10003
UNKNOWN_GUILD = 10004

REQUEST_TOO_LARGE = 40005
"""Discord's JSON code for 413 "Request entity too large"."""

INVALID_FORM_BODY = 50035
"""Discord's JSON code for a payload it refuses (400): how it would refuse a Components V2
card, or an edit adding a new attachment to one; the message is then sent in another form."""

NONCE_ROUTES = {
    DeliveryRoute.PLACEHOLDER: "r",  # the reply to the edited placeholder
    DeliveryRoute.CHANNEL: "c",
    DeliveryRoute.DM: "d",
}

REQUEST_ERRORS = (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError)
"""What a request to Discord may raise that a best-effort edit or notice logs and drops."""

Files = tuple[tuple[str, bytes], ...]
"""Attachments: (file name, its bytes), in order."""


class ResponseMessage:
    """A card that is an interaction's response, edited through the interaction's webhook.

    Args:
        webhook: the interaction's webhook (``/webhooks/{application_id}/{token}``).
        message_id: the card (the interaction's original response).
        private: the response is ephemeral; so are its followups.
    """

    def __init__(self, webhook: discord.Webhook, message_id: int, *, private: bool = False) -> None:
        self._webhook = webhook
        self._message_id = message_id
        self._private = private

    def __repr__(self) -> str:
        return f"<response message {self._message_id}>"  # never the token

    async def edit(self, **kwargs: Any) -> Any:
        """Edit the card (Discord: Edit Followup Message, which also takes the original)."""
        return await self._webhook.edit_message(self._message_id, **kwargs)

    async def followup(self, job: Job, files: Files) -> None:
        """Send the completion notice as a followup, pinging only the requester."""
        parts = completion_reply(job)
        if files:
            parts = dataclasses.replace(parts, files=files)
        await self._webhook.send(**parts.kwargs(), ephemeral=self._private)


Editable = discord.PartialMessage | ResponseMessage
"""A message a delivery edits: a channel's or DM's message, or an interaction's response."""


def delivery_nonce(job: Job, route: DeliveryRoute) -> str:
    """The nonce of the message ``route`` posts for ``job``: ``gb<job id><r|c|d>``.

    At most 23 characters (Discord allows 25): ``gb``, a job id of at most 19 digits (a
    64-bit integer) and the route's letter (``r`` the reply to the placeholder, ``c`` a
    channel message, ``d`` a DM). The same for every attempt, so that Discord returns the
    message a lost answer left posted (Create Message, ``enforce_nonce``).
    """
    return f"gb{job.id}{NONCE_ROUTES[route]}"


def classify(exc: Exception) -> Attempt | None:
    """How a failed Discord request counts for delivery; None for an unexpected exception.

    5xx, 429 and network errors are transient; any other HTTP error (404 unknown message or
    channel, 403 missing access or permissions, 400 archived thread or DMs closed) means this
    route cannot work.
    """
    if isinstance(exc, discord.RateLimited):
        return Attempt(
            shown=False, error="rate limited by Discord", retry_after=exc.retry_after, code="429"
        )
    if isinstance(exc, discord.HTTPException):
        error = f"{exc.status} {exc.code} {exc.text}"[:200]
        code = str(exc.code) if exc.code else ("429" if exc.status == 429 else f"http_{exc.status}")
        if exc.status >= 500 or exc.status in (401, 408, 429):
            return Attempt(shown=False, error=error, code=code)
        return Attempt(shown=False, permanent=True, error=error, code=code)
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        return Attempt(shown=False, error=f"network: {type(exc).__name__}", code="network")
    return None


def too_large(exc: discord.HTTPException) -> bool:
    """Discord refused the message as too large (413, 40005): its files must go."""
    return exc.status == 413 or exc.code == REQUEST_TOO_LARGE


def refused_form(exc: discord.HTTPException) -> bool:
    """Discord refused the payload (400, 50035): the card must go in another form."""
    return exc.status == 400 and exc.code == INVALID_FORM_BODY


async def send_card(
    channel: discord.abc.Messageable, parts: MessageParts, *, nonce: str | None = None
) -> discord.Message:
    """Post ``parts`` as a Components V2 card, in the old form when Discord refuses the card.

    Args:
        channel: where to post.
        parts: the message.
        nonce: sent with ``enforce_nonce`` (discord.py sets it with any nonce), so that Discord
            returns the message already posted with it in the past few minutes instead of
            posting another; None: a random one (no protection across attempts).

    Raises:
        discord.HTTPException: Discord refused the message in both forms.
    """
    extra: dict[str, Any] = {} if nonce is None else {"nonce": nonce}
    try:
        return await channel.send(**parts.kwargs() | extra)
    except discord.HTTPException as exc:
        if parts.card is None or not refused_form(exc):
            raise
        log.warning("Discord refused a card (%s); sent in the old form", exc.code)
        # The refused card was not posted: the same nonce cannot match it.
        return await channel.send(**parts.legacy().kwargs() | extra)


async def edit_in_either_form(message: Editable, parts: MessageParts) -> None:
    """Edit ``message`` into ``parts``, in the old form when Discord refuses the card.

    Raises:
        discord.HTTPException: Discord refused the edit in both forms.
    """
    try:
        await message.edit(**parts.edit_kwargs())
    except discord.HTTPException as exc:
        if parts.card is None or not refused_form(exc):
            raise
        await message.edit(**parts.legacy().edit_kwargs())


async def edit_card(message: Editable, parts: MessageParts, finished: MessageParts) -> Files:
    """Edit the placeholder into the result: the card with its files, else without them.

    Discord may refuse an edit that adds a new attachment to a Components V2 message; the
    card then points at the service's URLs and the files go in the completion reply. A
    placeholder refused a card at all (an old message, a payload Discord rejects) gets the
    old form with the files.

    Returns:
        The files the reply must carry (empty when the edit took them).

    Raises:
        discord.HTTPException: Discord refused the edit in every form.
    """
    if parts.card is not None:
        try:
            await message.edit(**parts.edit_kwargs())
            return ()
        except discord.HTTPException as exc:
            if not refused_form(exc):
                raise
        if parts.files:
            later = _("Attached to the reply below; the service's link may stop working.")
            textual = with_files(finished, (), later, show_attached=False)
            try:
                await message.edit(**textual.edit_kwargs())
                return parts.files
            except discord.HTTPException as exc:
                if not refused_form(exc):
                    raise
    await message.edit(**parts.legacy().edit_kwargs())
    return ()


async def reply(job: Job, message: discord.PartialMessage, files: Files) -> None:
    """Reply to the placeholder, pinging only the requester, with ``files`` if any.

    The reply carries the job's reply nonce (``enforce_nonce``), so a reply repeated by a
    retry within Discord's few minutes is not posted twice, and does not fail when the
    placeholder was deleted meanwhile (``fail_if_not_exists=False``: it is then posted
    as an ordinary message).

    Raises:
        discord.HTTPException: Discord refused the reply.
    """
    parts = completion_reply(job)
    if files:
        parts = dataclasses.replace(parts, files=files)
    await message.channel.send(
        **parts.kwargs(),
        reference=message.to_reference(fail_if_not_exists=False),
        mention_author=False,
        nonce=delivery_nonce(job, DeliveryRoute.PLACEHOLDER),
    )


def with_notice(parts: MessageParts, job: Job, where: str) -> MessageParts:
    """``parts`` led by the completion notice (pinging only the requester), ``where`` in it.

    For a result posted as a new message (the channel or DM routes): there is no placeholder
    to reply to, so the message carries its own ping.
    """
    notice = completion_reply(job).content or ""
    # The sentence's own full stop goes after the place (a Japanese one too).
    stop = "。" if notice.endswith("。") else "."
    notice = notice.removesuffix(stop) + where + stop
    content = notice if not parts.content else f"{notice}\n{parts.content}"
    if len(content) > discord_limits.CONTENT:
        content = notice  # the link buttons and the attachment still carry the result
    card = parts.card
    if card is not None:
        card = dataclasses.replace(card, texts=(notice, *card.texts))
    return dataclasses.replace(
        parts, content=content, card=card, allowed_mentions=ping_only(job.user_id)
    )
