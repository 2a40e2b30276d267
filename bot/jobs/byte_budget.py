"""A process-wide bound on the bytes of downloaded results held in memory at once.

Up to 20 deliveries run at once (``Poller.max_deliveries``), each allowed to attach up to its
server's upload limit (10 MiB, up to 100 MiB with boosts): unbounded, that is up to 2 GB held
for a moment. A delivery therefore reserves what it may hold before it downloads, keeps only
what it downloaded once the downloads are done, and gives it back when its messages are sent
(docs/architecture.md, "Delivery").
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from bot.clock import Clock, sleep_or_wake

DELIVERY_MEMORY_BYTES = 256 * 1024 * 1024
"""Bytes of results the deliveries of one process may hold at once (256 MiB): 25 deliveries
at the 10 MiB of a server without boosts, 2 at the 100 MiB of a boosted one."""

RENEW_EVERY = 60.0
"""Seconds between two renewals of a delivery's lease while it waits for room (the lease is
300 s: ``DELIVERY_LEASE_SECONDS``)."""


class Hold:
    """Bytes reserved in a :class:`ByteBudget`; :meth:`shrink` gives back what is not needed.

    Attributes:
        size: bytes held now.
    """

    def __init__(self, budget: ByteBudget, size: int) -> None:
        self._budget = budget
        self.size = size

    def shrink(self, size: int) -> None:
        """Keep only ``size`` bytes (no more than held now) and give the rest back at once."""
        size = max(0, min(size, self.size))
        self._budget.release(self.size - size)
        self.size = size


class ByteBudget:
    """Reservations of bytes against a fixed total, served first come, first served.

    A reservation larger than the total is cut to the total (it then waits for everything to
    be free), so no delivery waits forever. First come, first served: a large reservation is
    not starved by a stream of small ones.

    Args:
        total: bytes that may be held at once.
        clock: the clock a waiting reservation renews its lease by.
    """

    def __init__(self, total: int, clock: Clock) -> None:
        self.total = total
        self._clock = clock
        self._held = 0
        self._waiting: deque[tuple[int, asyncio.Event]] = deque()

    @property
    def held(self) -> int:
        """Bytes reserved now."""
        return self._held

    @asynccontextmanager
    async def hold(
        self, size: int, renew: Callable[[], Awaitable[None]] | None = None
    ) -> AsyncIterator[Hold]:
        """Reserve ``size`` bytes (at most the total) for the body of the ``async with``.

        Args:
            size: the most the holder may keep in memory, bytes.
            renew: awaited every :data:`RENEW_EVERY` seconds while waiting for room (the
                delivery's lease), if given.

        Yields:
            The reservation; what is still held is released on exit, whatever happens.
        """
        size = max(0, min(size, self.total))
        await self._acquire(size, renew)
        held = Hold(self, size)
        try:
            yield held
        finally:
            self.release(held.size)

    async def _acquire(self, size: int, renew: Callable[[], Awaitable[None]] | None) -> None:
        if not self._waiting and self._held + size <= self.total:
            self._held += size
            return
        granted = asyncio.Event()
        entry = (size, granted)
        self._waiting.append(entry)
        try:
            while not granted.is_set():
                await sleep_or_wake(self._clock, granted, RENEW_EVERY)
                if not granted.is_set() and renew is not None:
                    await renew()
        except BaseException:
            if granted.is_set():
                self.release(size)  # granted, but the holder is gone (cancelled)
            else:
                self._waiting.remove(entry)
                self._grant()  # it may have been first in line
            raise

    def release(self, size: int) -> None:
        """Give ``size`` bytes back and let the reservations next in line go."""
        self._held -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self._held + self._waiting[0][0] <= self.total:
            size, granted = self._waiting.popleft()
            self._held += size
            granted.set()
