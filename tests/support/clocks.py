"""Clocks for tests that wait on each other: time moves only as a real one would."""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections.abc import Awaitable

from bot.clock import ManualClock


class TimerClock(ManualClock):
    """A manual clock whose sleepers wake in the order of their deadlines (:meth:`drive`).

    ``ManualClock.sleep`` jumps the clock at once, so of two requests waiting for different
    slots the later deadline could pass first; here time moves only when every task is idle,
    to the earliest deadline, as it would in real time.
    """

    def __init__(self) -> None:
        super().__init__()
        self._timers: list[tuple[float, int, asyncio.Future[None]]] = []
        self._count = itertools.count()

    async def sleep(self, seconds: float) -> None:
        if seconds <= 0:
            await asyncio.sleep(0)
            return
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        heapq.heappush(self._timers, (self.monotonic() + seconds, next(self._count), future))
        await future

    async def drive(self, *aws: Awaitable[object]) -> None:
        """Run ``aws`` to the end, moving time to each next deadline whenever all are idle."""
        everything = asyncio.gather(*aws)
        while not everything.done():
            for _ in range(50):
                await asyncio.sleep(0)
            while self._timers and self._timers[0][2].done():
                heapq.heappop(self._timers)  # cancelled: the sleeper woke for another reason
            if everything.done() or not self._timers:
                continue
            deadline, _, future = heapq.heappop(self._timers)
            self.advance(max(0.0, deadline - self.monotonic()))
            future.set_result(None)
        await everything
