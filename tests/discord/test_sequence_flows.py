"""Joins wait in one line per process, each told its place; /video-join reads its numbers."""

from __future__ import annotations

import asyncio

import pytest

from bot.discord.sequence_flows import JoinLine
from bot.errors import ValidationFailed
from cogs.sequences import parse_numbers


async def test_one_join_at_a_time_the_others_told_their_place_in_order() -> None:
    line = JoinLine()
    told: dict[str, list[int]] = {"b": [], "c": []}
    ran: list[str] = []
    release = {"a": asyncio.Event(), "b": asyncio.Event(), "c": asyncio.Event()}
    release["c"].set()

    async def join(name: str) -> None:
        async def tell(ahead: int) -> None:
            told[name].append(ahead)

        async with line.turn(tell):
            ran.append(name)
            await release[name].wait()

    first = asyncio.create_task(join("a"))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(join("b")), asyncio.create_task(join("c"))]
    await asyncio.sleep(0.01)
    assert ran == ["a"] and line.length == 3
    assert told == {"b": [1], "c": [2]}
    release["a"].set()
    await asyncio.sleep(0.01)
    assert ran == ["a", "b"]
    release["b"].set()
    await asyncio.gather(first, *waiting)
    assert ran == ["a", "b", "c"]
    assert told == {"b": [1], "c": [2, 1]}
    assert line.length == 0


async def test_a_join_cancelled_while_waiting_leaves_the_line() -> None:
    line = JoinLine()
    release = asyncio.Event()

    async def hold() -> None:
        async with line.turn(lambda ahead: asyncio.sleep(0)):
            await release.wait()

    async def wait() -> None:
        async with line.turn(lambda ahead: asyncio.sleep(0)):
            pass

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert line.length == 1
    release.set()
    await holder
    assert line.length == 0


def test_video_join_reads_numbers_in_order() -> None:
    assert parse_numbers("12, 15 #16") == [12, 15, 16]
    for bad in ("12", "a b", "1 2 3 4 5 6 7 8 9", ""):
        with pytest.raises(ValidationFailed):
            parse_numbers(bad)
