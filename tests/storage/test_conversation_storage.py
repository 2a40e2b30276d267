"""Conversations and their turns on both engines: kept across a reopen."""

from collections.abc import Awaitable, Callable
from dataclasses import replace
from decimal import Decimal

import pytest

from bot.clock import ManualClock
from bot.domain import ConstraintError, Conversation, ConversationTurn
from bot.storage import Database

THREAD = 5000


def turn(n: int, cost: Decimal | None = Decimal("0.35")) -> ConversationTurn:
    return ConversationTurn(
        thread_id=THREAD,
        user_id=100 + n,
        author=f"member{n}",
        text=f"question {n}",
        answer=f"answer {n}",
        model="openai/gpt-4o-mini",
        prompt_tokens=10 * n,
        completion_tokens=5,
        cost_cents=cost,
        carried=n - 1,
        at=1000.0 + n,
    )


CONVERSATION = Conversation(
    thread_id=THREAD,
    guild_id=1,
    channel_id=10,
    user_id=101,
    model="openai/gpt-4o-mini",
    system="Be brief.",
    created_at=1000.0,
)


async def test_turns_are_kept_in_order_across_a_reopen(
    store: Database, open_db: Callable[[ManualClock], Awaitable[Database]]
) -> None:
    assert await store.conversations.start(CONVERSATION)
    assert not await store.conversations.start(CONVERSATION)  # one per thread
    assert await store.conversations.add_turn(turn(1)) == 1
    assert await store.conversations.add_turn(turn(2, Decimal("0.000001"))) == 2
    assert await store.conversations.add_turn(turn(3, None)) == 3
    await store.close()

    reopened = await open_db(ManualClock())
    try:
        assert await reopened.conversations.get(THREAD) == CONVERSATION
        turns = await reopened.conversations.turns(THREAD)
        assert turns == [turn(1), turn(2, Decimal("0.000001")), turn(3, None)]
        assert await reopened.conversations.turn_count(THREAD) == 3
    finally:
        await reopened.close()


async def test_an_ended_conversation_says_why_once(store: Database) -> None:
    await store.conversations.start(CONVERSATION)
    assert await store.conversations.end(THREAD, "archived", 2000.0)
    assert not await store.conversations.end(THREAD, "deleted", 3000.0)
    ended = await store.conversations.get(THREAD)
    assert ended is not None
    assert (ended.ended_at, ended.end_reason) == (2000.0, "archived")
    assert await store.conversations.get(THREAD + 1) is None


async def test_a_turn_needs_its_conversation(store: Database) -> None:
    with pytest.raises(ConstraintError):
        await store.conversations.add_turn(turn(1))


async def test_a_channels_persona_is_set_replaced_and_removed(store: Database) -> None:
    from bot.domain import Persona

    assert await store.conversations.persona(10) is None
    await store.conversations.set_persona(Persona(1, 10, "You are a pirate."), 1.0)
    await store.conversations.set_persona(Persona(1, 10, "You are a poet.", "m/x"), 2.0)
    await store.conversations.set_persona(Persona(1, 11, "Be terse."), 3.0)
    await store.conversations.set_persona(Persona(2, 12, "Other server."), 3.0)
    assert await store.conversations.persona(10) == Persona(1, 10, "You are a poet.", "m/x")
    await store.conversations.set_persona(Persona(1, 11, "Be terse.", locked=True), 3.0)
    assert await store.conversations.persona(11) == Persona(1, 11, "Be terse.", locked=True)
    await store.conversations.set_persona(Persona(1, 11, "Be terse."), 4.0)
    assert await store.conversations.persona(11) == Persona(1, 11, "Be terse.", locked=False)
    assert [p.channel_id for p in await store.conversations.personas(1)] == [10, 11]
    assert await store.conversations.remove_persona(10)
    assert not await store.conversations.remove_persona(10)
    assert await store.conversations.persona(10) is None


async def test_a_deleted_threads_turns_are_purged_and_none_is_stored_after(
    store: Database,
) -> None:
    await store.conversations.start(CONVERSATION)
    await store.conversations.add_turn(turn(1))
    await store.conversations.set_summary(THREAD, "They asked one question.", 1)
    await store.conversations.start(
        Conversation(THREAD + 1, 1, 10, 101, None, None, created_at=1000.0)
    )
    await store.conversations.add_turn(replace(turn(2), thread_id=THREAD + 1))

    assert await store.conversations.purge(THREAD, 2000.0)
    assert await store.conversations.turns(THREAD) == []
    gone = await store.conversations.get(THREAD)
    assert gone is not None
    assert (gone.end_reason, gone.ended_at, gone.system, gone.summary) == (
        "deleted",
        2000.0,
        None,
        None,
    )
    # A turn answered while the thread was being deleted is not stored.
    assert await store.conversations.add_turn(turn(3)) == 0
    assert await store.conversations.turns(THREAD) == []
    # Another thread's conversation is untouched; a thread without one stores nothing.
    assert await store.conversations.turn_count(THREAD + 1) == 1
    assert not await store.conversations.purge(THREAD + 2, 2000.0)
    assert await store.conversations.get(THREAD + 2) is None
