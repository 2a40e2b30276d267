"""The queue's place as the member sees it: wording and pacing (manual clock)."""

from __future__ import annotations

import asyncio
import itertools
from datetime import UTC, datetime
from typing import Any

from bot.clock import ManualClock
from bot.discord.choices import OpenChoices
from bot.discord.queue_status import GOING, NOT_SENT, QueueStatus, queue_text
from bot.errors import user_message
from bot.genapi.errors import QueueCancelled, RateLimitWaitTooLong
from bot.genapi.ratelimit import QUEUE_SEAT, Priority, RateLimiter
from bot.genapi.slots import SlotRules
from bot.services.personal import wallet_id
from tests.support.clocks import TimerClock


def test_the_place_and_the_wait_read_as_people_say_them() -> None:
    assert queue_text(4, 9.2).startswith("Queued: 4th on this key, about 10 s.")
    assert queue_text(1, 0.3).startswith("Queued: 1st on this key, about 5 s.")
    assert queue_text(12, 130).startswith("Queued: 12th on this key, about 3 min.")
    assert queue_text(22, 61).startswith("Queued: 22nd on this key, about 65 s.")


class FakeInteraction:
    """Records the edits of the original response, as seconds of the clock."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.edits: list[tuple[float, str, Any]] = []
        self.created_at = datetime.fromtimestamp(clock.time(), tz=UTC)

    async def edit_original_response(self, *, content: str, view: Any) -> None:
        self.edits.append((self.clock.monotonic(), content, view))


async def test_the_place_is_shown_after_two_seconds_and_edited_at_most_every_five() -> None:
    clock = ManualClock()
    interaction = FakeInteraction(clock)
    status = QueueStatus(interaction, 1, 2, clock, OpenChoices())  # type: ignore[arg-type]
    for place in (5, 4, 3, 2):
        status.seat.on_wait(place, place * 2.0)  # type: ignore[misc]
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        clock.advance(1.0)
    for _ in range(4):
        await asyncio.sleep(0)
    assert interaction.edits, "the place was never shown"
    assert interaction.edits[0][0] >= 2.0
    assert interaction.edits[0][2] is not None  # the Cancel button
    times = [at for at, _, _ in interaction.edits]
    assert all(b - a >= 5.0 for a, b in itertools.pairwise(times))
    status.seat.on_go()  # type: ignore[misc]
    await status.close()
    assert interaction.edits[-1][1:] == (GOING, None)  # the button goes with the wait


async def test_a_short_wait_shows_nothing() -> None:
    clock = ManualClock()
    interaction = FakeInteraction(clock)
    status = QueueStatus(interaction, 1, 2, clock, OpenChoices())  # type: ignore[arg-type]
    status.seat.on_wait(1, 1.0)  # type: ignore[misc]
    status.seat.on_go()  # type: ignore[misc]
    await status.close()
    assert interaction.edits == []


def test_a_refusal_says_how_long_the_queue_is_and_a_cancel_that_nothing_was_charged() -> None:
    refused = user_message(RateLimitWaitTooLong(420.0, queued=57))
    assert refused == (
        "The queue for this key is too long: 57 requests are waiting, about 7 min; try again later."
    )
    assert user_message(QueueCancelled()) == "Cancelled; nothing was sent or charged."


async def test_members_on_the_shared_key_take_one_turn_together_not_one_each() -> None:
    """Forty members' personal requests on the shared key hold a server's one back no longer
    than one server's burst would: they share one seat of the fair queue."""
    clock = TimerClock()
    limiter = RateLimiter(clock, SlotRules(limit=30, window=61.0)).for_key("shared")
    sent: list[str] = []

    async def request(guild_id: int, user_id: int, name: str) -> None:
        status = QueueStatus(
            FakeInteraction(clock),  # type: ignore[arg-type]
            user_id,
            guild_id,
            clock,
            OpenChoices(),
        )
        QUEUE_SEAT.set(status.seat)
        await limiter.acquire(Priority.INTERACTIVE, max_wait=600.0)
        sent.append(name)
        await status.close()

    members = [request(wallet_id(user), user, f"m{user}") for user in range(1, 41)]
    await clock.drive(*members, request(7, 99, "server"))
    # The first 30 go as they come (the window is free); then the server's turn comes first,
    # not after each of the ten members still waiting.
    assert sent.index("server") == 30


def test_the_seat_carries_the_end_of_the_interactions_token() -> None:
    clock = ManualClock()
    status = QueueStatus(FakeInteraction(clock), 1, 2, clock, OpenChoices())  # type: ignore[arg-type]
    assert status.seat.expires_at == clock.time() + 900  # Discord: 15 minutes


async def test_a_request_the_queue_refused_loses_its_cancel_button() -> None:
    clock = ManualClock()
    interaction = FakeInteraction(clock)
    status = QueueStatus(interaction, 1, 2, clock, OpenChoices())  # type: ignore[arg-type]
    status.seat.on_wait(3, 30.0)  # type: ignore[misc]
    for _ in range(4):
        await asyncio.sleep(0)
    assert interaction.edits and interaction.edits[-1][2] is not None
    await status.close()  # refused by the queue: never went, never cancelled
    assert interaction.edits[-1][1:] == (NOT_SENT, None)
