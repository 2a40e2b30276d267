"""The shared rate window's port: what the limiters need of durable per-key request records.

Owned here, by its consumer (``ratelimit``, ``shared_ratelimit``), so that the client package
depends on no storage: the storage engines implement :class:`RateWindowRepository`
structurally (``bot.storage``'s ``rates``). Two rules shape it: one
window across processes, and a window known after any restart, never assumed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeAlias

RateDecision: TypeAlias = Callable[[float, Sequence[tuple[float, bool]], float], float]
"""``decide(now, sent, blocked_until) -> delay``: the rate rule :meth:`RateWindowRepository.take`
applies inside its transaction. ``now`` and ``blocked_until`` are the database's clock (UTC epoch
seconds; ``blocked_until`` 0.0 when the key is not blocked), ``sent`` the key's recorded requests
``(at, background)`` of the last window, oldest first. It returns the seconds to wait; <= 0
means "send now"."""


@dataclass(frozen=True, slots=True)
class RateSnapshot:
    """One key's recorded window, read in one statement on the database's clock.

    Attributes:
        now: the database's time, UTC epoch seconds.
        sent: ``(at, background)`` of the requests recorded after ``now - window``, oldest
            first (``at`` UTC epoch seconds).
        blocked_until: UTC epoch seconds before which nothing is sent (0.0: not blocked).
    """

    now: float
    sent: Sequence[tuple[float, bool]]
    blocked_until: float


@dataclass(frozen=True, slots=True)
class RateTake:
    """One request asking the shared window for a slot (:meth:`RateWindowRepository.take`).

    Attributes:
        key_id: the key's fingerprint (never the key).
        background: the request is background (a poll), recorded as such.
        window: seconds of history passed to ``decide`` (the rolling window, margin included).
        decide: the rule (:data:`RateDecision`).
    """

    key_id: str
    background: bool
    window: float
    decide: RateDecision


class RateWindowRepository(Protocol):
    """The service's rate window per key, shared by every process on the database.

    Not part of a transaction's repositories: each method is its own short transaction, timed
    by the database's clock (SQLite ``julianday('now')``, PostgreSQL ``clock_timestamp()``), so
    processes on several machines agree on time without synchronised clocks.
    """

    async def take(self, takes: Sequence[RateTake]) -> list[float]:
        """Decide ``takes`` in order and record those allowed, in one transaction.

        Atomic per key across processes (SQLite: ``BEGIN IMMEDIATE``; PostgreSQL: the keys'
        advisory locks): two processes can never both take the last slot of a window. A take
        sees the requests recorded by the takes before it in the batch. Rows older than ten
        windows are deleted now and then (a key's first take, then every hundredth).

        Returns:
            per take, 0.0 when its request was recorded (send it now), else the seconds to
            wait before asking again.
        """
        ...

    async def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        """Read ``key_id``'s requests of the last ``window`` seconds and its block.

        What a limiter starts from after a restart: the window is known, never assumed.
        """
        ...

    async def record(self, requests: Sequence[tuple[str, bool]], *, window: float) -> None:
        """Record requests sent now, in one transaction, before they are sent.

        Args:
            requests: ``(key_id, background)`` of each request, stamped with the database's
                time.
            window: the rolling window, seconds; rows older than ten windows are deleted on
                the way.
        """
        ...

    async def block(self, key_id: str, seconds: float) -> None:
        """No process may send with ``key_id`` for ``seconds`` from now (a 429's Retry-After).

        An existing longer block is kept.
        """
        ...

    async def forget(self, key_id: str) -> None:
        """Delete every row of ``key_id`` (its requests and its block).

        For a key the service rejected when it was checked: it will never be used, so
        nothing of it is kept.
        """
        ...
