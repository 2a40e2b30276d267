"""The per-key limiter shared by every process on one database.

docs/genapi.md §8.1 allows 30 requests per rolling minute per key, whatever process sends them. When
several processes may use one key (gateway processes for several shards, poll workers), each
process's own :class:`~bot.genapi.ratelimit.RateLimiter` knows only its own requests, so the
window lives in the database instead (``db.rates``, tables ``rate_requests`` and
``rate_blocks``), timed by the database's clock: processes on several machines agree on time
without synchronised clocks.

The rules are those of :mod:`bot.genapi.slots`, applied to the shared record inside one
transaction (:meth:`RateWindowRepository.take`, atomic per key across processes; requests
released together share it): never more than ``limit`` requests in ``window + margin``
seconds; background requests only while users keep the slots kept for them (looking ahead at
their pace), and at least one every 10 s; a 429's ``Retry-After`` blocks the key for every
process (``rate_blocks``).

Each process still queues its own callers in an in-process :class:`KeyLimiter` first (the fast
path: interactive before background within the process, the fair turns between guilds, the wait
estimate for ``max_wait``, and the queue's place shown to members); it starts from the shared
record, like the single process's limiter. The shared record is consulted only by the request
at the head. A request the local limiter released but the shared window refused gives its local
slot back (it was not sent, so it must not make this process refuse users) and queues
again after the shared window's delay. A row is written before its request is sent, so even a
process killed right after is counted.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import partial
from typing import TYPE_CHECKING

from bot.clock import Clock
from bot.genapi.errors import RateLimitWaitTooLong
from bot.genapi.group_commit import GroupCommit
from bot.genapi.rate_window import RateTake, RateWindowRepository
from bot.genapi.ratelimit import QUEUE_SEAT, KeyLimiter, Kind, Priority, RateLimiter, send_by
from bot.genapi.slots import SlotRules

if TYPE_CHECKING:
    from bot.ops.metrics import Metrics

RECHECK_MAX = 5.0
"""Longest sleep (seconds) before asking the shared window again: another process's 429 or a
slot freed elsewhere is noticed within this time."""


def shared_delay(
    now: float,
    sent: Sequence[tuple[float, bool]],
    blocked_until: float,
    *,
    rules: SlotRules,
    background: bool,
) -> float:
    """Seconds until a request may be sent, by ``rules`` (:mod:`bot.genapi.slots`).

    Args:
        now: the database's time, UTC epoch seconds.
        sent: the key's recorded requests ``(at, background)`` after ``now - window``, oldest
            first.
        blocked_until: UTC epoch seconds before which nothing is sent (0.0: not blocked).
        rules: the sharing rules.
        background: whether this request is background.

    Returns:
        <= 0 when it may be sent now.
    """
    delay = rules.background_delay(now, sent) if background else rules.interactive_delay(now, sent)
    return max(delay, blocked_until - now)


class SharedKeyLimiter:
    """The limiter of one API key across processes. Create through :class:`SharedRateLimiter`.

    Args:
        local: this process's limiter of the key (in-process order and the fast path).
        takes: the process's batched takes of the shared windows (every key's).
        key_id: the key's fingerprint.
        clock: sleeping and monotonic time (the window itself uses the database's clock).
        rules: how the window is shared (limit, window with its margin, users' slots, floor).
    """

    def __init__(
        self,
        local: KeyLimiter,
        takes: GroupCommit[RateTake, float],
        key_id: str,
        clock: Clock,
        *,
        rules: SlotRules,
    ) -> None:
        self._local = local
        self._takes = takes
        self._key_id = key_id
        self._clock = clock
        self._window = rules.window
        self._rule = partial(shared_delay, rules=rules)

    def block_for(self, seconds: float) -> None:
        """Release nothing, in any process, for ``seconds`` (a 429's ``Retry-After``).

        The local limiter records the block in ``rate_blocks`` for the other processes.
        """
        self._local.block_for(seconds)

    async def acquire(
        self, priority: Priority, *, max_wait: float | None = None, kind: Kind = Kind.ANSWER
    ) -> None:
        """Wait until one request may be sent now by every process's count, and record it.

        Args:
            priority: interactive requests overtake this process's queued background ones
                (but for the floor), and only they may use the slots kept for users in the shared
                window.
            max_wait: seconds the caller is willing to wait; None waits as long as needed.
            kind: an interactive request's kind: this process's queue keeps submissions back for
                the answers' slots (by its view of the shared window, which it starts from);
                the shared window itself checks only the limit for every interactive request.

        Raises:
            RateLimitWaitTooLong: the wait (in this process's queue, then for the shared
                window) would exceed ``max_wait``, or send the request after its token's or
                hold's end less the margin (:func:`~bot.genapi.ratelimit.send_by`); nothing is
                recorded in the shared window.
        """
        started = self._clock.monotonic()
        background = priority is Priority.BACKGROUND
        queued_wait = max_wait  # the local queue judges the wait as the request is queued
        while True:
            stamp = await self._local.take(priority, max_wait=queued_wait, kind=kind)
            queued_wait = None
            try:
                delay = await self._takes.submit(
                    RateTake(
                        self._key_id,
                        background,
                        self._window,
                        partial(self._rule, background=background),
                    )
                )
            except BaseException:
                # Not recorded in the shared window: the local slot was never used (a
                # cancellation while the write was under way may have recorded it there,
                # where it then stays counted: safe).
                self._local.release(stamp, background)
                raise
            if delay <= 0:
                return
            # Refused by the shared window, so not sent: the local slot is free again,
            # else this process would refuse its users for up to a window for nothing.
            self._local.release(stamp, background)
            if max_wait is not None and self._clock.monotonic() - started + delay > max_wait:
                raise RateLimitWaitTooLong(delay)
            latest = None if background else send_by(QUEUE_SEAT.get())
            if latest is not None and self._clock.time() + delay > latest:
                # Never sent after its token or hold would end (judged on every wake).
                raise RateLimitWaitTooLong(delay)
            await self._clock.sleep(min(delay, RECHECK_MAX))


class SharedRateLimiter:
    """One :class:`SharedKeyLimiter` per API key: the window in the database, for all processes.

    A drop-in for :class:`~bot.genapi.ratelimit.RateLimiter` (same ``for_key``), chosen by
    ``bot.wiring`` when several processes may share keys (``SHARED_RATE_LIMIT``).

    Args:
        clock: sleeping and monotonic time (the window uses the database's clock).
        rates: the database's shared windows (``db.rates``).
        rules: how each key's window is shared (:class:`~bot.genapi.slots.SlotRules`).
        metrics: given to this process's limiters; None counts nothing.
    """

    def __init__(
        self,
        clock: Clock,
        rates: RateWindowRepository,
        rules: SlotRules | None = None,
        *,
        metrics: Metrics | None = None,
    ) -> None:
        self._clock = clock
        # Takes of every key share transactions (group commit): a pass of the poller that
        # releases polls of many keys costs one, not one per poll.
        self._takes: GroupCommit[RateTake, float] = GroupCommit(rates.take)
        self.rules = rules or SlotRules()
        # The local limiters start from the shared record too (what every process sent in the
        # last window); the shared ``take`` writes the rows, so they write none themselves.
        self._local = RateLimiter(clock, self.rules, metrics=metrics, rates=rates, writes=False)
        self._keys: dict[str, SharedKeyLimiter] = {}

    def for_key(self, fingerprint: str) -> SharedKeyLimiter:
        """Return the limiter of the key with ``fingerprint``, creating it on first use."""
        limiter = self._keys.get(fingerprint)
        if limiter is None:
            limiter = SharedKeyLimiter(
                self._local.for_key(fingerprint),
                self._takes,
                fingerprint,
                self._clock,
                rules=self.rules,
            )
            self._keys[fingerprint] = limiter
        return limiter

    async def forget(self, fingerprint: str) -> None:
        """Drop the key's limiters and delete its shared window (a key the service rejected).

        Raises:
            Exception: the database's error deleting the rows.
        """
        self._keys.pop(fingerprint, None)
        await self._local.forget(fingerprint)
