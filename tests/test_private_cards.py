"""Where a private server job's card lives (issue 22, private results): kept in the database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from bot.clock import ManualClock
from bot.services.private_cards import CardPlace, PrivateCard, PrivateCards
from bot.storage.repositories import Database


async def test_a_cards_place_is_found_by_another_process(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    db = await open_db(ManualClock())
    try:
        cards = PrivateCards(db)
        assert await cards.keep(1, PrivateCard(CardPlace.DM, 555))
        assert await cards.keep(2, PrivateCard(CardPlace.RESPONSE))
        # A worker (or the bot after a restart) finds them; any other job is a channel card.
        other = PrivateCards(db)
        assert await other.get(1) == PrivateCard(CardPlace.DM, 555)
        assert await other.get(2) == PrivateCard(CardPlace.RESPONSE)
        assert await other.get(3) is None
    finally:
        await db.close()


async def test_the_cache_is_bounded_and_a_dropped_job_is_read_again(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    db = await open_db(ManualClock())
    try:
        cards = PrivateCards(db, cache_size=2)
        await cards.keep(1, PrivateCard(CardPlace.DM, 7))
        for job_id in (2, 3, 4):
            assert await cards.get(job_id) is None
        assert len(cards._cache) == 2
        assert await cards.get(1) == PrivateCard(CardPlace.DM, 7)  # dropped, read again
    finally:
        await db.close()


async def test_a_card_that_cannot_be_recorded_says_so_without_raising(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    db = await open_db(ManualClock())
    await db.close()  # every write now fails
    assert not await PrivateCards(db).keep(1, PrivateCard(CardPlace.DM, 7))
