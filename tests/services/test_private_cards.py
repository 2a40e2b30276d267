"""Where a private server job's card lives (private results): kept in the database."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence

import pytest

from bot.clock import ManualClock
from bot.services.private_cards import CardPlace, PrivateCard, PrivateCards
from bot.storage import Database
from bot.storage.repos.meta import MetaStore


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


async def test_a_listings_cards_are_read_in_one_query_and_remembered(
    open_db: Callable[[ManualClock], Awaitable[Database]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``/jobs`` lists up to 50 jobs: their cards' places are one read, not one per job."""
    db = await open_db(ManualClock())
    try:
        writer = PrivateCards(db)
        assert await writer.keep(1, PrivateCard(CardPlace.DM, 555))
        assert await writer.keep(2, PrivateCard(CardPlace.RESPONSE))
        reads: list[list[str]] = []
        read_many = MetaStore.get_many

        async def counted(store: MetaStore, keys: Sequence[str]) -> dict[str, str]:
            reads.append(list(keys))
            return await read_many(store, keys)

        monkeypatch.setattr(MetaStore, "get_many", counted)
        cards = PrivateCards(db)
        expected = {1: PrivateCard(CardPlace.DM, 555), 2: PrivateCard(CardPlace.RESPONSE)}
        assert await cards.get_many([1, 2, 3]) == expected
        assert len(reads) == 1
        # Known now, found or not: the next listing and the poller's edits read nothing.
        assert await cards.get_many([3, 2, 1]) == expected
        assert await cards.get(3) is None
        assert len(reads) == 1
        assert await cards.get_many([]) == {}
        assert len(reads) == 1
    finally:
        await db.close()


def test_a_dm_card_links_to_the_dm_and_a_response_to_nothing() -> None:
    assert PrivateCard(CardPlace.DM, 555).link(777) == "https://discord.com/channels/@me/555/777"
    assert PrivateCard(CardPlace.DM, 555).link(None) is None
    assert PrivateCard(CardPlace.RESPONSE).link(777) is None
