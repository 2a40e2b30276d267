"""Group commit (bot/genapi/group_commit.py): callers arriving together share one write."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from bot.genapi.group_commit import GroupCommit


class Writes:
    """A write that records its batches and can be held open or made to fail."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail_next = False

    async def __call__(self, items: Sequence[int]) -> list[int]:
        self.batches.append(list(items))
        await self.gate.wait()
        if self.fail_next:
            self.fail_next = False
            raise ConnectionResetError("the database went away")
        return [item * 10 for item in items]


async def test_a_lone_item_is_written_at_once_and_a_burst_in_one_more_write() -> None:
    writes = Writes()
    commits = GroupCommit(writes)
    assert await commits.submit(1) == 10
    results = await asyncio.gather(*(commits.submit(i) for i in range(2, 8)))
    assert results == [20, 30, 40, 50, 60, 70]
    assert writes.batches == [[1], [2, 3, 4, 5, 6, 7]]


async def test_a_write_takes_at_most_max_batch_items() -> None:
    writes = Writes()
    commits = GroupCommit(writes, max_batch=2)
    await asyncio.gather(*(commits.submit(i) for i in range(5)))
    assert writes.batches == [[0, 1], [2, 3], [4]]


async def test_a_failed_write_reaches_every_caller_of_its_batch_and_only_them() -> None:
    writes = Writes()
    commits = GroupCommit(writes)
    writes.gate.clear()
    first = asyncio.ensure_future(commits.submit(1))
    await asyncio.sleep(0)
    writes.fail_next = True
    queued = [asyncio.ensure_future(commits.submit(i)) for i in (2, 3)]
    await asyncio.sleep(0)
    writes.gate.set()
    with pytest.raises(ConnectionResetError):
        await first
    assert await asyncio.gather(*queued) == [20, 30]


async def test_a_cancelled_caller_leaves_its_item_written_and_the_others_served() -> None:
    writes = Writes()
    commits = GroupCommit(writes)
    writes.gate.clear()
    callers = [asyncio.ensure_future(commits.submit(i)) for i in (1, 2, 3)]
    await asyncio.sleep(0)
    callers[1].cancel()
    writes.gate.set()
    done = await asyncio.gather(*callers, return_exceptions=True)
    assert done[0] == 10 and done[2] == 30
    assert isinstance(done[1], asyncio.CancelledError)
    assert writes.batches == [[1, 2, 3]]
