"""The member's view of a request waiting in its key's queue (the Discord side).

A request that must wait for its key's rate window waits in the limiter's fair queue
(:mod:`bot.genapi.ratelimit`). After :data:`FIRST_SHOWN_AFTER` seconds of waiting, the deferred
response shows the member's place and an estimate ("Queued: 4th on this key, about 10 s"),
with a Cancel button; it is updated at most every :data:`UPDATE_EVERY` seconds, well within
Discord's rate limits on webhook edits (a few per few seconds per interaction token, see
Discord's "Rate Limits" documentation), and only when the text changes. Cancel takes the
request out of the queue: nothing is sent upstream, the budget reservation is released, nothing
is charged. When the request goes, the response says so and loses the button, and the command's
normal flow continues in it. The seat carries the end of the interaction's token: a request
that could no longer be answered in time is refused by the queue instead of sent.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import discord

from bot.clock import Clock
from bot.discord.choices import ChoiceOption, OpenChoices, choice_view
from bot.discord.tree import send_ephemeral
from bot.genapi.ratelimit import QUEUE_SEAT, QueueSeat
from bot.i18n import N_, SOURCE, _, current, number
from bot.services.personal import queue_seat
from bot.services.response_tokens import TOKEN_LIFETIME_SECONDS

if TYPE_CHECKING:
    from bot.discord.bot import GenBot

log = logging.getLogger(__name__)

FIRST_SHOWN_AFTER = 2.0
"""Seconds a request waits before its place is shown (most waits are shorter: nothing shown)."""

UPDATE_EVERY = 5.0
"""Least seconds between two edits of the place shown (Discord's edit rate limits)."""

CANCELLED = N_("Cancelled; nothing was sent or charged.")
"""What the response says once the member cancelled."""

GOING = N_("Your turn: sending the request…")
"""What the response says when a request that showed its place leaves the queue."""


def ordinal(n: int) -> str:
    """``1st``, ``2nd``, ``3rd``, ``4th``, ``11th``, ``21st``... (``4.`` in German, ``4番目``)."""
    if current() != SOURCE:
        # Each language writes its ordinals its own way; one message, the number inside.
        return _("place {number}", number=number(n))
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


def about(seconds: float) -> str:
    """A wait for people: ``about 10 s`` (to the next 5 s), ``about 3 min`` past 90 s."""
    if seconds > 90:
        return _("about {minutes} min", minutes=number(math.ceil(seconds / 60)))
    return _("about {seconds} s", seconds=number(max(5, 5 * math.ceil(seconds / 5))))


def queue_text(place: int, estimate: float) -> str:
    """The status line of a waiting request: ``Queued: 4th on this key, about 10 s``.

    Args:
        place: 1 for the next request to go on the key.
        estimate: the limiter's estimated wait, seconds.
    """
    return _(
        "Queued: {place} on this key, {wait}. "
        "The service allows a limited number of requests per minute; yours goes in turn.",
        place=ordinal(place),
        wait=about(estimate),
    )


NOT_SENT = N_("Not sent: the queue could not send it in time; nothing was charged.")
"""What the response says when the queue refused a request that showed its place."""

TOO_LATE = N_("Too late to cancel: your request was already sent.")
"""The answer to a Cancel pressed as the request went."""

CANCEL_SECONDS = 900.0
"""How long Cancel is held: Discord lets an interaction be answered for 15 minutes, no more."""


class QueueStatus:
    """Shows one waiting request's place in its deferred response, with a Cancel button.

    Cancel is a :class:`~bot.discord.choices.PendingChoice` held in this process, like the queue
    itself (after a restart the request is gone anyway: the deferred interaction is not
    resumed). Only the requester may press it; it is not admitted like work (a Cancel only
    stops spending, so it is honoured during a shutdown too).

    Args:
        interaction: the deferred interaction whose original response shows the status.
        requester_id: the member who may cancel.
        guild_id: the guild (or member's wallet) the request is billed to; the queue's turns
            go round guilds, and all personal use shares one seat
            (:func:`bot.services.personal.queue_seat`).
        clock: time for the display's pacing (the bot's clock).
        choices: where the Cancel button's state is held while it is shown.
    """

    def __init__(
        self,
        interaction: discord.Interaction[GenBot],
        requester_id: int,
        guild_id: int,
        clock: Clock,
        choices: OpenChoices,
    ) -> None:
        self._interaction = interaction
        self._requester_id = requester_id
        self._clock = clock
        self._choices = choices
        self._token: str | None = None
        self._latest: tuple[int, float] | None = None
        self._gone = False
        self._shown = False
        self._task: asyncio.Task[None] | None = None
        # Every member's wallet shares one seat: members on the owner's shared key take one
        # turn together, as large as one server's, not one each. Not sent once its answer
        # could come after the token can show it (judged on every wake, bot.genapi.ratelimit):
        # Discord's token lives 15 min from the interaction.
        expires_at = interaction.created_at.timestamp() + TOKEN_LIFETIME_SECONDS
        self.seat = QueueSeat(
            guild_id=queue_seat(guild_id),
            on_wait=self._on_wait,
            on_go=self._on_go,
            expires_at=expires_at,
        )

    @property
    def owner_id(self) -> int:
        """The member who asked: the only one who may cancel."""
        return self._requester_id

    def admits(self, option: str) -> bool:
        """Never: a Cancel only stops spending."""
        return False

    async def choose(self, interaction: discord.Interaction[GenBot], option: str) -> bool:
        """Cancel: the request leaves the queue; nothing is sent or charged.

        Pressed as the request went, it is told so and stays: the command may queue again
        (a catalogue fetch, then its request).
        """
        if self._gone:
            await send_ephemeral(interaction, _(TOO_LATE))
            return True
        self.seat.cancelled.set()
        await interaction.response.edit_message(content=_(CANCELLED), view=None)
        return False

    def _on_wait(self, place: int, estimate: float) -> None:
        self._latest = (place, estimate)
        # A command may queue more than once (a catalogue fetch, then its request): each wait
        # is shown in turn.
        self._gone = False
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._show())

    def _on_go(self) -> None:
        self._gone = True

    async def _show(self) -> None:
        await self._clock.sleep(FIRST_SHOWN_AFTER)
        if self._token is None:
            self._token = self._choices.open(self, CANCEL_SECONDS)
        view = choice_view(self._token, [ChoiceOption("cancel", "Cancel")])
        shown: str | None = None
        while not self._gone and not self.seat.cancelled.is_set() and self._latest is not None:
            text = queue_text(*self._latest)
            if text != shown:
                try:
                    await self._interaction.edit_original_response(content=text, view=view)
                    shown, self._shown = text, True
                except discord.HTTPException as exc:
                    log.warning("could not show a request's place in the queue: %s", exc)
            await self._clock.sleep(UPDATE_EVERY)

    async def close(self) -> None:
        """Stop updating; if the place was shown and the request went, say so, without Cancel."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
        if self._token is not None:
            self._choices.close(self._token)
        if self._shown and not self.seat.cancelled.is_set():
            # Gone: its turn came. Not gone: the queue refused it (its wait or its token ran
            # out), and the command's refusal follows; either way the Cancel button goes.
            text = _(GOING) if self._gone else _(NOT_SENT)
            try:
                await self._interaction.edit_original_response(content=text, view=None)
            except discord.HTTPException as exc:
                log.warning("could not clear a request's queue status: %s", exc)


@asynccontextmanager
async def queue_status(
    interaction: discord.Interaction[GenBot], requester_id: int, guild_id: int
) -> AsyncIterator[QueueStatus]:
    """Within the block, requests made wait in the fair queue as this member's, visibly.

    Sets :data:`~bot.genapi.ratelimit.QUEUE_SEAT` for the block (the command's own task), so
    the limiter knows the guild and reports the place; the status is closed on the way out,
    before the command's next edit of the response.
    """
    bot = interaction.client
    status = QueueStatus(interaction, requester_id, guild_id, bot.services.clock, bot.choices)
    token = QUEUE_SEAT.set(status.seat)
    try:
        yield status
    finally:
        QUEUE_SEAT.reset(token)
        await status.close()
