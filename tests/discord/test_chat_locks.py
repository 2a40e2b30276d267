"""Replies to one answer are taken one at a time (one conversation per answer).

The end-to-end proof is ``tests/e2e/test_chat_e2e.py`` (two simultaneous replies to one
answer); here, the lock itself: one holder per answer, others free, nothing kept after.
"""

from __future__ import annotations

import asyncio

from cogs.chat import KeyedLocks


async def test_one_answer_is_held_by_one_reply_at_a_time_and_forgotten_after() -> None:
    locks = KeyedLocks()
    order: list[str] = []
    first_in = asyncio.Event()
    release = asyncio.Event()

    async def reply(name: str, answer: int, *, wait: bool = False) -> None:
        async with locks.hold(answer):
            order.append(f"{name} in")
            if wait:
                first_in.set()
                await release.wait()
            order.append(f"{name} out")

    first = asyncio.create_task(reply("first", 1, wait=True))
    await first_in.wait()
    second = asyncio.create_task(reply("second", 1))
    await reply("other answer", 2)  # another answer is not held up
    await asyncio.sleep(0)
    assert order == ["first in", "other answer in", "other answer out"]
    release.set()
    await asyncio.gather(first, second)
    assert order[3:] == ["first out", "second in", "second out"]
    assert len(locks) == 0
