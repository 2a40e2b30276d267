"""The per-key limiter shared by every process on one database (issue 10).

Spec part 8 allows 30 requests per rolling minute per key, whatever process sends them. When
several processes may use one key (gateway processes for several shards, poll workers), each
process's own :class:`~bot.genapi.ratelimit.RateLimiter` knows only its own requests, so the
window lives in the database instead (``db.rates``, tables ``rate_requests`` and
``rate_blocks``), timed by the database's clock: processes on several machines agree on time
without synchronised clocks.

The rules are those of :mod:`bot.genapi.ratelimit`, applied to the shared record inside one
transaction per request (:meth:`RateWindowRepository.take`, atomic per key across processes):

- never a request when ``limit`` others were recorded in the preceding ``window + margin``
  seconds (the 1 s margin covers the time a request takes to arrive);
- background requests (polls, catalogue refreshes) only while fewer than ``limit - reserve``
  were recorded, and at most one every ``window / (limit - reserve)`` seconds across all
  processes, so interactive requests of any process always find the reserved slots;
- a 429's ``Retry-After`` blocks the key for every process (``rate_blocks``).

Each process still queues its own callers in an in-process :class:`KeyLimiter` first (the fast
path: interactive before background within the process, the restart assumption of that module,
the wait estimate for ``max_wait``); the shared record is consulted only by the request at the
head. A request the local limiter released but the shared window refused waits and asks again.
The restart assumption is otherwise moot here: the shared record holds what a previous process
sent (a row is written before its request is sent, so even a process killed right after is
counted).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from bot.clock import Clock
from bot.genapi.errors import RateLimitWaitTooLong
from bot.genapi.ratelimit import KeyLimiter, Priority, RateLimiter
from bot.storage.repositories import RateWindowRepository

if TYPE_CHECKING:
    from bot.metrics import Metrics

log = logging.getLogger(__name__)

RECHECK_MAX = 5.0
"""Longest sleep (seconds) before asking the shared window again: another process's 429 or a
slot freed elsewhere is noticed within this time."""


def shared_delay(
    now: float,
    sent: Sequence[tuple[float, bool]],
    blocked_until: float,
    *,
    limit: int,
    window: float,
    background_cap: int,
    background_spacing: float,
    background: bool,
) -> float:
    """Seconds until a request may be sent, by the rules of the module docstring.

    Args:
        now: the database's time, UTC epoch seconds.
        sent: the key's recorded requests ``(at, background)`` after ``now - window``, oldest
            first.
        blocked_until: UTC epoch seconds before which nothing is sent (0.0: not blocked).
        limit: requests per window (spec part 8: 30).
        window: the rolling window, margin included, seconds.
        background_cap: how many requests of a window background ones may bring it to.
        background_spacing: seconds between two background requests.
        background: whether this request is background.

    Returns:
        <= 0 when it may be sent now.
    """
    delay = blocked_until - now
    cap = limit
    if background:
        cap = background_cap
        last = max((at for at, was_background in sent if was_background), default=None)
        if last is not None:
            delay = max(delay, last + background_spacing - now)
    if len(sent) >= cap:
        delay = max(delay, sent[len(sent) - cap][0] + window - now)
    return delay


class SharedKeyLimiter:
    """The limiter of one API key across processes. Create through :class:`SharedRateLimiter`.

    Args:
        local: this process's limiter of the key (in-process order and the fast path).
        rates: the shared windows.
        key_id: the key's fingerprint.
        clock: sleeping and monotonic time (the window itself uses the database's clock).
        limit: requests per window.
        window: the rolling window, margin included, seconds.
        reserve: slots of every window background requests may not take.
        tasks: where the 429 blocks being written are kept until done.
    """

    def __init__(
        self,
        local: KeyLimiter,
        rates: RateWindowRepository,
        key_id: str,
        clock: Clock,
        *,
        limit: int,
        window: float,
        reserve: int,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self._local = local
        self._rates = rates
        self._key_id = key_id
        self._clock = clock
        self._window = window
        cap = max(1, limit - reserve)
        self._rule = partial(
            shared_delay,
            limit=limit,
            window=window,
            background_cap=cap,
            background_spacing=window / cap,
        )
        self._tasks = tasks

    def block_for(self, seconds: float) -> None:
        """Release nothing, in any process, for ``seconds`` (a 429's ``Retry-After``)."""
        self._local.block_for(seconds)
        task = asyncio.get_running_loop().create_task(self._block(seconds))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def acquire(self, priority: Priority, *, max_wait: float | None = None) -> None:
        """Wait until one request may be sent now by every process's count, and record it.

        Args:
            priority: interactive requests overtake this process's queued background ones, and
                only they may use the reserved slots of the shared window.
            max_wait: seconds the caller is willing to wait; None waits as long as needed.

        Raises:
            RateLimitWaitTooLong: the wait (in this process's queue, then for the shared
                window) would exceed ``max_wait``; nothing is recorded in the shared window.
        """
        started = self._clock.monotonic()
        await self._local.acquire(priority, max_wait=max_wait)
        background = priority is Priority.BACKGROUND
        while True:
            delay = await self._rates.take(
                self._key_id,
                background=background,
                window=self._window,
                decide=partial(self._rule, background=background),
            )
            if delay <= 0:
                return
            if max_wait is not None and self._clock.monotonic() - started + delay > max_wait:
                raise RateLimitWaitTooLong(delay)
            await self._clock.sleep(min(delay, RECHECK_MAX))

    async def _block(self, seconds: float) -> None:
        try:
            await self._rates.block(self._key_id, seconds)
        except Exception as exc:  # the local block still holds in this process
            log.warning("could not share a rate-limit block with other processes: %s", exc)


class SharedRateLimiter:
    """One :class:`SharedKeyLimiter` per API key: the window in the database, for all processes.

    A drop-in for :class:`~bot.genapi.ratelimit.RateLimiter` (same ``for_key``), chosen by
    ``bot.wiring`` when several processes may share keys (``SHARED_RATE_LIMIT``).

    Args:
        clock: sleeping and monotonic time (the window uses the database's clock).
        rates: the database's shared windows (``db.rates``).
        limit: requests per window per key (spec part 8: 30).
        window: rolling window in seconds (spec part 8: 60).
        reserve: slots per window kept for interactive requests.
        margin: seconds added to the window for the time a request takes to arrive.
        metrics: given to this process's limiters; None counts nothing.
    """

    def __init__(
        self,
        clock: Clock,
        rates: RateWindowRepository,
        *,
        limit: int = 30,
        window: float = 60.0,
        reserve: int = 6,
        margin: float = 1.0,
        metrics: Metrics | None = None,
    ) -> None:
        self._clock = clock
        self._rates = rates
        self._limit = limit
        self._window = window + margin
        self._reserve = min(reserve, limit - 1)
        self._local = RateLimiter(clock, limit=limit, window=window, reserve=reserve, margin=margin)
        self._keys: dict[str, SharedKeyLimiter] = {}
        self._tasks: set[asyncio.Task[None]] = set()

    def for_key(self, fingerprint: str) -> SharedKeyLimiter:
        """Return the limiter of the key with ``fingerprint``, creating it on first use."""
        limiter = self._keys.get(fingerprint)
        if limiter is None:
            limiter = SharedKeyLimiter(
                self._local.for_key(fingerprint),
                self._rates,
                fingerprint,
                self._clock,
                limit=self._limit,
                window=self._window,
                reserve=self._reserve,
                tasks=self._tasks,
            )
            self._keys[fingerprint] = limiter
        return limiter
