"""Time, injectable: every rule that depends on "now" takes a :class:`Clock`.

Wall time is UTC epoch seconds (``float``); intervals use the monotonic clock. Tests pass a
:class:`ManualClock` so that month and day boundaries, rate windows and poll schedules are
exercised without sleeping.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime
from typing import Any, Protocol


class Clock(Protocol):
    """A source of time and a way to wait."""

    def time(self) -> float:
        """Return the wall time, UTC epoch seconds."""
        ...

    def monotonic(self) -> float:
        """Return a monotonic time in seconds, for measuring intervals."""
        ...

    async def sleep(self, seconds: float) -> None:
        """Wait ``seconds`` (may return early only if the clock is advanced)."""
        ...


class SystemClock:
    """The real clock."""

    def time(self) -> float:
        """Return ``time.time()``."""
        return time.time()

    def monotonic(self) -> float:
        """Return ``time.monotonic()``."""
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        """Sleep for real."""
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when told to; ``sleep`` advances it instead of waiting.

    Args:
        start: initial wall time, UTC epoch seconds.
    """

    def __init__(self, start: float = 1_767_225_600.0) -> None:  # 2026-01-01T00:00:00Z
        self._now = start
        self._mono = 0.0

    def time(self) -> float:
        """Return the simulated wall time."""
        return self._now

    def monotonic(self) -> float:
        """Return the simulated monotonic time."""
        return self._mono

    def advance(self, seconds: float) -> None:
        """Move both clocks forward by ``seconds``."""
        self._now += seconds
        self._mono += seconds

    async def sleep(self, seconds: float) -> None:
        """Advance by ``seconds`` and yield to the event loop once."""
        self.advance(max(0.0, seconds))
        await asyncio.sleep(0)


def utc_datetime(epoch_seconds: float) -> datetime:
    """Return the aware UTC datetime of ``epoch_seconds``."""
    return datetime.fromtimestamp(epoch_seconds, tz=UTC)


async def sleep_or_wake(clock: Clock, event: asyncio.Event, delay: float | None) -> None:
    """Return when ``event`` is set or ``delay`` seconds of ``clock`` have passed (None: never)."""
    waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(event.wait())}
    if delay is not None:
        waiters.add(asyncio.ensure_future(clock.sleep(delay)))
    try:
        await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for waiter in waiters:
            waiter.cancel()
