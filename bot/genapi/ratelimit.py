"""Per-key request limiter: spec part 8, 30 requests per rolling minute per key, all endpoints.

A sliding-window log, not a token bucket: a bucket that refills continuously lets a 31st
request through less than 60 s after the first of a burst of 30, which the service would
answer with 429. The log keeps the send times of the last ``limit`` requests, so a request is
released only when at most ``limit - 1`` others were sent in the preceding ``window`` seconds.

The window is counted from when we release a request, the service counts from when it arrives;
a request that waits for a new connection arrives a few milliseconds later, so a window that
starts with it would close early on the service's side. A ``margin`` (1 s) is added to the
window to absorb that (measured: without it, one 429 in a 30-video run, docs/benchmarks.md).

Two priorities share each key, by the rules of :mod:`bot.genapi.budget`: interactive requests
(a user is waiting on a command) go first and may use the whole window; background requests
(polls, catalogue refreshes) leave users their reserved slots, looking ahead at the users' pace,
and are owed one slot every 10 s however busy the users are.

After a restart the limiter cannot know what the previous process sent, and the service still
counts it: starting empty would allow a burst of ``limit`` requests that a full previous minute
turns into 429s. So a new :class:`RateLimiter` assumes the window before it was built was
*evenly* filled: ``limit`` requests, one every ``window / limit`` seconds, the last one now.
Slots then free up one by one (about every 2 s), so nobody is locked out for a whole minute,
and after one window the assumption has expired. The worst case left (the previous process
burst its 30 requests just before dying) costs a few refused 429s, which charge nothing and
whose ``Retry-After`` the limiter honours.

``aiolimiter`` and similar libraries offer neither a strict rolling window nor priorities,
hence this module.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
from collections import deque
from enum import IntEnum
from typing import TYPE_CHECKING, Protocol

from bot.clock import Clock, sleep_or_wake
from bot.genapi.budget import BudgetRules
from bot.genapi.errors import RateLimitWaitTooLong

if TYPE_CHECKING:
    from bot.metrics import Metrics


class Priority(IntEnum):
    """Who is waiting for a request; lower values are served first."""

    INTERACTIVE = 0
    BACKGROUND = 1


class KeyGate(Protocol):
    """What :class:`~bot.genapi.client.GenAPIClient` needs of one key's limiter."""

    def block_for(self, seconds: float) -> None:
        """Release nothing for ``seconds`` (a 429's ``Retry-After``)."""

    async def acquire(self, priority: Priority, *, max_wait: float | None = None) -> None:
        """Wait until one request may be sent now, and count it as sent.

        Raises:
            RateLimitWaitTooLong: the wait would exceed ``max_wait`` (nothing is counted).
        """


class Limiter(Protocol):
    """Per-key limiters, for this process or for every process on the database.

    :class:`RateLimiter` counts this process's requests;
    :class:`~bot.genapi.shared_ratelimit.SharedRateLimiter` those of every process.
    """

    def for_key(self, fingerprint: str) -> KeyGate:
        """Return the limiter of the key with ``fingerprint``."""


class KeyLimiter:
    """The limiter of one API key. Create through :class:`RateLimiter`.

    Args:
        rules: how the window is shared between users and polls.
        clock: source of monotonic time and of sleeping.
        assumed_until: monotonic time up to which the window is assumed evenly filled by
            requests we did not see (the limiter's start; see the module docstring).
        metrics: observes each wait by priority and counts refusals; None counts nothing.
    """

    def __init__(
        self,
        rules: BudgetRules,
        clock: Clock,
        *,
        assumed_until: float,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._rules = rules
        self._clock = clock
        spacing = rules.window / rules.limit
        # (monotonic send time, background): what the previous process may have sent is
        # counted as background, so it neither makes users look active nor sets their pace.
        self._sent: deque[tuple[float, bool]] = deque(
            (assumed_until - rules.window + spacing * (i + 1), True) for i in range(rules.limit)
        )
        self._blocked_until = 0.0
        self._queue: list[tuple[int, int]] = []
        self._last_head: tuple[int, int] | None = None
        self._tickets = itertools.count()
        self._changed = asyncio.Event()

    @property
    def sent_in_window(self) -> int:
        """How many requests were released in the current rolling window."""
        self._prune(self._clock.monotonic())
        return len(self._sent)

    @property
    def waiting(self) -> int:
        """How many callers are queued."""
        return len(self._queue)

    def block_for(self, seconds: float) -> None:
        """Release nothing for ``seconds`` (a 429's ``Retry-After``), whatever the window says."""
        self._blocked_until = max(self._blocked_until, self._clock.monotonic() + seconds)
        self._notify()

    async def acquire(self, priority: Priority, *, max_wait: float | None = None) -> None:
        """Wait until one request may be sent now, and count it as sent.

        Args:
            priority: interactive requests overtake every queued background one, except
                when the background floor is due (:mod:`bot.genapi.budget`).
            max_wait: seconds the caller is willing to wait; None waits as long as needed.

        Raises:
            RateLimitWaitTooLong: the estimated wait exceeds ``max_wait`` (nothing is counted).
        """
        ticket = (int(priority), next(self._tickets))
        heapq.heappush(self._queue, ticket)
        queued_at = self._clock.monotonic()
        try:
            while True:
                now = self._clock.monotonic()
                delay = self._delay(priority, now)
                head = self._head(now)
                if head != self._last_head:
                    # Whose turn it is can change with time alone (the floor falls due as the
                    # window moves): wake the others so that the new head takes its turn.
                    self._last_head = head
                    self._notify()
                if head == ticket and delay <= 0:
                    self._queue.remove(ticket)
                    heapq.heapify(self._queue)
                    self._sent.append((now, priority is Priority.BACKGROUND))
                    self._notify()
                    if self._metrics is not None:
                        self._metrics.limiter_wait.labels(priority.name.lower()).observe(
                            now - queued_at
                        )
                    return
                if max_wait is not None:
                    estimate = self._estimate(ticket, now)
                    if estimate > max_wait:
                        if self._metrics is not None:
                            self._metrics.limiter_refusals.labels(priority.name.lower()).inc()
                        raise RateLimitWaitTooLong(estimate)
                # Only the head of the queue needs a timer; the rest wake when it moves.
                await sleep_or_wake(self._clock, self._changed, delay if head == ticket else None)
        finally:
            if ticket in self._queue:
                self._queue.remove(ticket)
                heapq.heapify(self._queue)
                self._notify()

    def _head(self, now: float) -> tuple[int, int]:
        """The ticket served next: interactive first, but a background one owed its floor.

        Only a background request that may go now passes: one that must still wait (its
        burst, a block) never holds back a user who could go.
        """
        # The queue is checked first: most evaluations have no background ticket waiting, and
        # the rules' look-ahead is the costlier part.
        background = [t for t in self._queue if t[0] == Priority.BACKGROUND]
        rules = self._rules
        if (
            background
            and rules.floor_due(now, self._sent)
            and self._blocked_until <= now
            and rules.background_delay(now, self._sent) <= 0
        ):
            return min(background)
        return self._queue[0]

    def _prune(self, now: float) -> None:
        horizon = now - self._rules.window
        while self._sent and self._sent[0][0] <= horizon:
            self._sent.popleft()

    def _delay(self, priority: Priority, now: float) -> float:
        """Seconds until a request of ``priority`` could be released, ignoring the queue."""
        self._prune(now)
        if priority is Priority.INTERACTIVE:
            delay = self._rules.interactive_delay(now, self._sent)
        else:
            delay = self._rules.background_delay(now, self._sent)
        return max(delay, self._blocked_until - now)

    def _estimate(self, ticket: tuple[int, int], now: float) -> float:
        """Seconds until ``ticket`` is released, counting the tickets queued before it."""
        limit, window = self._rules.limit, self._rules.window
        ahead = sum(1 for other in self._queue if other < ticket)
        delay = self._blocked_until - now
        needed = len(self._sent) + ahead + 1 - limit
        if needed > 0:
            windows, index = divmod(needed - 1, limit)
            start = self._sent[index][0] if index < len(self._sent) else now
            delay = max(delay, start + window * (windows + 1) - now)
        return max(0.0, delay)

    def _notify(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()


class RateLimiter:
    """One :class:`KeyLimiter` per API key, shared by every caller in the process.

    Keys are identified by their fingerprint, so no secret is held here. Every key starts with
    the window before this limiter was built assumed evenly filled (a restart; module docstring).

    Args:
        clock: source of time and sleeping (inject a manual clock in tests).
        rules: how each key's window is shared (:class:`~bot.genapi.budget.BudgetRules`:
            30 requests per 60 s plus a 1 s margin, spec part 8).
        metrics: given to every key's limiter; None counts nothing.
    """

    def __init__(
        self,
        clock: Clock,
        rules: BudgetRules | None = None,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self._metrics = metrics
        self._clock = clock
        self.rules = rules or BudgetRules()
        self._keys: dict[str, KeyLimiter] = {}
        self._started = clock.monotonic()

    def for_key(self, fingerprint: str) -> KeyLimiter:
        """Return the limiter of the key with ``fingerprint``, creating it on first use."""
        limiter = self._keys.get(fingerprint)
        if limiter is None:
            limiter = KeyLimiter(
                self.rules, self._clock, assumed_until=self._started, metrics=self._metrics
            )
            self._keys[fingerprint] = limiter
        return limiter
