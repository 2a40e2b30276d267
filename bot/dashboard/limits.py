"""What bounds the dashboard's memory and its callers: bounded caches and request budgets.

The dashboard faces the internet, so nothing a visitor does may grow the process without
bound or reach Discord or the database without limit (``docs/dashboard.md``, "Under abuse"):

- :class:`Bounded` is a dictionary with a size (least recently used entries leave first) and a
  time to live, on an injectable clock; every cache of the dashboard is one.
- :class:`RequestBuckets` are token buckets per caller (an address, a member): ``burst`` requests at
  once, then ``per_second``; a request over it waits the seconds :meth:`RequestBuckets.take` returns
  (answered 429 with ``Retry-After``).
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Final, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class Bounded(Generic[K, V]):
    """A dictionary of at most ``size`` entries, each kept at most ``seconds``.

    Putting a key past the size drops the least recently used one; a key read after its time
    is gone. Time is ``clock()`` (monotonic seconds), so tests move it by hand.

    Args:
        size: the most entries kept.
        seconds: how long an entry is kept by default (``put`` may give it less or more).
        clock: monotonic seconds.
    """

    def __init__(self, size: int, seconds: float, clock: Callable[[], float]) -> None:
        self._size = size
        self._seconds = seconds
        self._clock = clock
        self._items: OrderedDict[K, tuple[float, V]] = OrderedDict()

    def get(self, key: K) -> V | None:
        """Return the value of ``key`` (now the most recently used); None if absent or old."""
        found = self._items.get(key)
        if found is None:
            return None
        if found[0] <= self._clock():
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return found[1]

    def put(self, key: K, value: V, seconds: float | None = None) -> None:
        """Keep ``value`` for ``seconds`` (the default time when None)."""
        until = self._clock() + (self._seconds if seconds is None else seconds)
        self._items[key] = (until, value)
        self._items.move_to_end(key)
        while len(self._items) > self._size:
            self._items.popitem(last=False)

    def pop(self, key: K) -> None:
        """Forget ``key`` (nothing if absent)."""
        self._items.pop(key, None)

    def kept(self) -> list[K]:
        """Every key kept (a copy: the dictionary may be changed while iterating)."""
        return list(self._items)

    def __len__(self) -> int:
        return len(self._items)


@dataclass(frozen=True, slots=True)
class RequestBudget:
    """A token bucket's shape: ``burst`` requests at once, refilled ``per_second``."""

    burst: float
    per_second: float


ADDRESS_BUDGET: Final = RequestBudget(burst=200, per_second=40)
"""Every request but static files, per address, before the session is even read."""

SESSION_BUDGET: Final = RequestBudget(burst=100, per_second=10)
"""Every request of a signed-in member (all their sessions together) but thumbnails
(:data:`THUMB_BUDGET`)."""

THUMB_BUDGET: Final = RequestBudget(burst=150, per_second=30)
"""Thumbnails (``/thumbs/...``, ``/public/thumbs/...``), per address, signed in or not: a
gallery or showcase page shows up to 60 (a database read each, no Discord question)."""

ANONYMOUS_BUDGET: Final = RequestBudget(burst=30, per_second=2)
"""Every request without a session, per address: the front page, signing in, the public
showcase."""

CALLERS: Final = 10_000
"""Callers whose buckets are kept (least recently seen leave first: a full bucket again)."""


class RequestBuckets(Generic[K]):
    """One token bucket per caller, of one :class:`RequestBudget`.

    Args:
        budget: the buckets' shape.
        clock: monotonic seconds.
        callers: how many callers' buckets are kept (:data:`CALLERS`).
    """

    def __init__(
        self, budget: RequestBudget, clock: Callable[[], float], callers: int = CALLERS
    ) -> None:
        self._budget = budget
        self._clock = clock
        # A bucket left alone for burst / per_second seconds is full again: forgetting it then
        # changes nothing.
        keep = budget.burst / budget.per_second
        self._levels: Bounded[K, tuple[float, float]] = Bounded(callers, keep, clock)

    def take(self, caller: K) -> float:
        """Take one request from the caller's bucket; return 0, or the seconds to wait.

        Over the budget nothing is taken: the caller may try again after the seconds returned.
        """
        now = self._clock()
        found = self._levels.get(caller)
        tokens = self._budget.burst
        if found is not None:
            level, at = found
            tokens = min(self._budget.burst, level + (now - at) * self._budget.per_second)
        if tokens < 1.0:
            self._levels.put(caller, (tokens, now))
            return (1.0 - tokens) / self._budget.per_second
        self._levels.put(caller, (tokens - 1.0, now))
        return 0.0


def retry_after(seconds: float) -> str:
    """A ``Retry-After`` header's value: whole seconds, at least 1 (RFC 9110, 10.2.3)."""
    return str(max(1, math.ceil(seconds)))
