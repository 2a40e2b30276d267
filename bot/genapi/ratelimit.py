"""Per-key request limiter: 30 requests per rolling minute per key, all endpoints.

The limit is docs/genapi.md §8.1's.

A sliding-window log, not a token bucket: a bucket that refills continuously lets a 31st
request through less than 60 s after the first of a burst of 30, which the service would
answer with 429. The log keeps the send times of the last ``limit`` requests, so a request is
released only when at most ``limit - 1`` others were sent in the preceding ``window`` seconds.

The window is counted from when we release a request, the service counts from when it arrives;
a request that waits for a new connection arrives a few milliseconds later, so a window that
starts with it would close early on the service's side. A ``margin`` (1 s) is added to the
window to absorb that (measured: without it, one 429 in a 30-video run, docs/benchmarks.md).

**The window is known, never assumed**. Every request released is first recorded in
the database (``db.rates``, table ``rate_requests``, per key, on the database's clock) before it
is sent, and a key's limiter starts from the rows of the last window: after any restart, clean
or ``kill -9``, it knows what was really sent (a fresh database starts empty, so the first
burst after a deploy is served at once). The record writes of requests released together are
one transaction (:class:`RateRecorder`, a group commit), which keeps the poller's CPU per poll
low. A 429's ``Retry-After`` is recorded too (``rate_blocks``). Several processes use the same
rows, deciding inside the database (:mod:`bot.genapi.shared_ratelimit`).

**Priorities.** Two priorities share each key, by the rules of :mod:`bot.genapi.slots`:
interactive requests (a user is waiting on a command) go first and may use the whole window;
background requests (polls, catalogue refreshes) leave users the slots kept for them, looking ahead
at the users' pace, and are owed one slot every 10 s however busy the users are. That floor
is a share of the window, not a priority at every instant: a poll owed it lets answers waiting
at the head of the queue take the free slots first, for at most ``floor_yield`` (20 s, issue
23), so a member's ``/text`` is not the one that waits in a full window.

**A fair, visible queue**. Interactive requests that must wait are queued, not
refused: an interaction can be answered for 15 minutes after it is deferred. Turns go round the
guilds with requests waiting (the guild served longest ago first, :func:`fair_order`), first
come first served within a guild and kind of request, so a burst of 40 from one server cannot
hold another server's single request behind it.

**Answers before submissions**. Interactive requests are of two kinds
(:class:`Kind`): an *answer* is one whose reply the member waits for at the command (``/text``,
an image, the catalogue), a *submission* one whose reply is a task that takes tens of seconds
to minutes anyway (``/video``). Within a guild, first come first served holds per kind, and a
guild's turn takes its oldest answer before its oldest submission: a ``/text`` does not wait
behind the ten ``/video`` its own server queued a moment before. And submissions leave
``answer_slots`` slots of the window (6 of 30) to answers, as polls leave theirs to users: a
burst of submissions that finds the window nearly full waits for slots beyond the answers', and
answers that come meanwhile pass it. A submission waits this way at most ``answer_patience``
(30 s), after which it takes its turn like an answer (leaving only the users' ``user_slots`` of 2,
so that waiting submissions coming due together leave room for a burst of answers), so a stream
of answers from one server never starves another server's submission (the guilds' turns then
apply: while it is the head of the queue, nothing passes it). Fairness across guilds
is unchanged within each kind. Measured in docs/benchmarks.md (``bench batch``'s second round:
the ``/text`` wait). The caller's :class:`QueueSeat` (a context variable set by the
Discord side) names its guild, hears its place and estimated wait, and may cancel, which costs
nothing: nothing was sent. A request is refused when, as it is queued, the estimated wait
already exceeds the caller's ``max_wait`` (``QUEUE_MAX_WAIT_SECONDS``, 5 minutes).

**Judged again on every wake.** A queued interactive request has a time past which it is not
sent: ``max_wait`` after it was queued, and :data:`SEND_MARGIN` before the earlier of its
interaction token's end (:attr:`QueueSeat.expires_at`) and its budget hold's end
(:data:`HOLD_EXPIRES_AT`): a call sent later could be answered after the token can show it, or
charged after the hold stopped counting against the budget. Each waiting request wakes by that
time at the latest, and each time it wakes (the queue moved, a 429 blocked the key, its timer)
it is refused as soon as it can no longer be sent by then, with the queue's own refusal
(:class:`~bot.genapi.errors.RateLimitWaitTooLong`; nothing was sent, so the caller releases its
hold).

``aiolimiter`` and similar libraries offer neither a strict rolling window, nor priorities, nor
fairness between groups, hence this module.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from enum import IntEnum
from typing import TYPE_CHECKING, Any, NoReturn, Protocol

from bot.clock import Clock
from bot.genapi.errors import QueueCancelled, RateLimitWaitTooLong
from bot.genapi.group_commit import GroupCommit
from bot.genapi.slots import SlotRules

if TYPE_CHECKING:
    from bot.genapi.rate_window import RateWindowRepository
    from bot.ops.metrics import Metrics

log = logging.getLogger(__name__)

MAX_TURNS = 1024
"""Guilds whose last turn a key's limiter remembers (the oldest are forgotten beyond it)."""

_EPSILON = 1e-6
"""A delay this small is none: a clock that cannot represent it would never get past it."""


class Priority(IntEnum):
    """Who is waiting for a request; lower values are served first."""

    INTERACTIVE = 0
    BACKGROUND = 1


class Kind(IntEnum):
    """What an interactive request's member waits for (module docstring).

    ANSWER: the reply itself, at the command (``/text``, an image, the catalogue): every
    second of queueing is a second the member watches "thinking…".
    SUBMISSION: a task whose result comes tens of seconds to minutes later (``/video``): a few
    seconds more in the queue barely change when the member sees the result.
    """

    ANSWER = 0
    SUBMISSION = 1


@dataclass(frozen=True, slots=True, eq=False)
class QueueSeat:
    """Who waits for an interactive request, set in :data:`QUEUE_SEAT` by the Discord side.

    Attributes:
        guild_id: the guild the request is for (the queue's turns go round guilds); None for
            requests of no guild.
        on_wait: called with the request's place (1 = next) among the key's waiting requests
            and the estimated wait in seconds, each time the queue moves while it waits.
        on_go: called once when the request leaves the queue to be sent.
        cancelled: set by the member (a Cancel button): the request leaves the queue and
            :class:`~bot.genapi.errors.QueueCancelled` is raised; nothing is sent.
        expires_at: when the interaction's token ends (Discord: 15 minutes after the
            interaction), UTC epoch seconds; the request is not sent later than
            :data:`SEND_MARGIN` before it. None: no token to outlive.
    """

    guild_id: int | None = None
    on_wait: Callable[[int, float], None] | None = None
    on_go: Callable[[], None] | None = None
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    expires_at: float | None = None


QUEUE_SEAT: ContextVar[QueueSeat | None] = ContextVar("queue_seat", default=None)
"""The seat of the interactive requests made in this context (a command's task); None: a
request of no guild, shown to nobody."""

HOLD_EXPIRES_AT: ContextVar[float | None] = ContextVar("hold_expires_at", default=None)
"""When the budget hold of the charging call made in this context stops counting, UTC epoch
seconds (set by the generation service around the call); None: no hold."""

SEND_MARGIN = 180.0
"""Seconds a request must be sent before its token or hold ends: a generation call may take
150 s (``bot.genapi.client.GENERATION_TIMEOUT``: connect 5, write 15, read 120, pool 10),
then its charge is settled and its answer shown (30 s)."""


def send_by(seat: QueueSeat | None) -> float | None:
    """The latest time an interactive request of this context may be sent, UTC epoch seconds.

    :data:`SEND_MARGIN` before the earlier of the seat's token end and the hold's end; None
    when neither is known.
    """
    ends = [t for t in (None if seat is None else seat.expires_at, HOLD_EXPIRES_AT.get()) if t]
    return min(ends) - SEND_MARGIN if ends else None


@dataclass(frozen=True, slots=True)
class Ticket:
    """One request waiting in a key's queue.

    Attributes:
        seq: arrival order on the key.
        priority: interactive or background.
        guild_id: the guild an interactive request is for (None: no guild).
        kind: what an interactive request's member waits for (answers go first in a guild).
        queued_at: monotonic seconds when it was queued (a submission's patience counts from it).
    """

    seq: int
    priority: Priority
    guild_id: int | None = None
    kind: Kind = Kind.ANSWER
    queued_at: float = 0.0


def fair_order(tickets: Iterable[Ticket], last_turn: Mapping[int | None, int]) -> list[Ticket]:
    """Order waiting interactive requests: round-robin over guilds, FIFO within each.

    Turns go round the guilds with requests waiting; a round starts with the guild served
    longest ago (never served first, then by its oldest request), and each guild gives one
    request per round: its oldest answer, else its oldest submission (first come first served
    per :class:`Kind` within a guild).

    Args:
        tickets: the waiting interactive requests, any order.
        last_turn: a growing turn number of the last request each guild sent (absent: none
            remembered).

    Returns:
        The tickets in the order they will be served.
    """
    by_guild: dict[int | None, list[Ticket]] = {}
    for ticket in sorted(tickets, key=lambda t: (t.kind, t.seq)):
        by_guild.setdefault(ticket.guild_id, []).append(ticket)
    guilds = sorted(by_guild, key=lambda g: (last_turn.get(g, -1), min(t.seq for t in by_guild[g])))
    rounds = max((len(queue) for queue in by_guild.values()), default=0)
    return [
        by_guild[guild][turn]
        for turn in range(rounds)
        for guild in guilds
        if turn < len(by_guild[guild])
    ]


class KeyGate(Protocol):
    """What :class:`~bot.genapi.client.GenAPIClient` needs of one key's limiter."""

    def block_for(self, seconds: float) -> None:
        """Release nothing for ``seconds`` (a 429's ``Retry-After``)."""

    async def acquire(
        self, priority: Priority, *, max_wait: float | None = None, kind: Kind = Kind.ANSWER
    ) -> None:
        """Wait until one request may be sent now, and count it as sent.

        ``kind`` tells an interactive request's :class:`Kind` (ignored for background ones).

        Raises:
            RateLimitWaitTooLong: the wait would exceed ``max_wait`` (nothing is counted).
            QueueCancelled: the member cancelled while waiting (nothing is counted).
        """


class Limiter(Protocol):
    """Per-key limiters, for this process or for every process on the database.

    :class:`RateLimiter` counts this process's requests;
    :class:`~bot.genapi.shared_ratelimit.SharedRateLimiter` those of every process.
    """

    def for_key(self, fingerprint: str) -> KeyGate:
        """Return the limiter of the key with ``fingerprint``."""

    async def forget(self, fingerprint: str) -> None:
        """Drop the key's limiter and its recorded window (a key the service rejected)."""


@dataclass(frozen=True, slots=True)
class KnownWindow:
    """What was sent on a key before this limiter existed, relative to now.

    Attributes:
        ages: ``(seconds ago, background)`` of each request recorded in the last window.
        blocked_for: seconds a recorded 429 still blocks the key (0: none).
    """

    ages: Sequence[tuple[float, bool]]
    blocked_for: float = 0.0


class WindowRecord(Protocol):
    """The durable record of one key's window (:class:`DurableWindow`)."""

    async def load(self) -> KnownWindow:
        """Read what was sent in the last window (raises the database's errors)."""
        ...

    async def record(self, background: bool) -> None:
        """Record one request sent now, durably, before it is sent."""
        ...

    def block(self, seconds: float) -> None:
        """Record a 429's block (in the background: failures only logged)."""
        ...


class KeyLimiter:
    """The limiter of one API key. Create through :class:`RateLimiter`.

    Args:
        rules: how the window is shared between users and polls.
        clock: source of monotonic time and of sleeping.
        metrics: observes each wait by priority and counts refusals; None counts nothing.
        record: the key's durable window: read before the first request, written before each
            one is sent. None: this process's memory only (tests, benchmarks).
        writes: whether released requests are written to ``record`` (False when another layer
            writes them: the shared window's ``take``); a 429's block is written either way.
    """

    def __init__(
        self,
        rules: SlotRules,
        clock: Clock,
        *,
        metrics: Metrics | None = None,
        record: WindowRecord | None = None,
        writes: bool = True,
    ) -> None:
        self._metrics = metrics
        self._rules = rules
        self._clock = clock
        # (monotonic send time, background), oldest first.
        self._sent: deque[tuple[float, bool]] = deque()
        self._blocked_until = 0.0
        self._waiting: dict[int, Ticket] = {}
        self._turns: dict[int | None, int] = {}
        self._last_head: Ticket | None = None
        # Since when a background request owed the floor has yielded free slots to answers
        # (None: it is not yielding); :meth:`_order` bounds it by ``floor_yield``.
        self._yielding_since: float | None = None
        self._seq = itertools.count()
        self._turn_seq = itertools.count()
        self._changed = asyncio.Event()
        self._record = record
        self._writes = writes and record is not None
        self._loaded = record is None
        self._load_lock = asyncio.Lock()

    @property
    def sent_in_window(self) -> int:
        """How many requests were released in the current rolling window."""
        self._prune(self._clock.monotonic())
        return len(self._sent)

    @property
    def waiting(self) -> int:
        """How many callers are queued."""
        return len(self._waiting)

    def block_for(self, seconds: float) -> None:
        """Release nothing for ``seconds`` (a 429's ``Retry-After``), whatever the window says."""
        self._blocked_until = max(self._blocked_until, self._clock.monotonic() + seconds)
        if self._record is not None:  # for every later process, whoever records the requests
            self._record.block(seconds)
        self._notify()

    def release(self, stamp: float, background: bool) -> None:
        """Give back a slot that :meth:`take` counted but whose request was never sent.

        Args:
            stamp: what :meth:`take` returned.
            background: the request's priority was background.
        """
        try:
            self._sent.remove((stamp, background))
        except ValueError:
            return  # already out of the window
        self._notify()

    async def acquire(
        self, priority: Priority, *, max_wait: float | None = None, kind: Kind = Kind.ANSWER
    ) -> None:
        """Wait until one request may be sent now, and count (and record) it as sent.

        Args:
            priority: interactive requests overtake every queued background one, except
                when the background floor is due (:mod:`bot.genapi.slots`).
            max_wait: seconds an interactive caller accepts to wait: as it is queued, the
                estimated wait must fit; on every wake, the request must still be sendable
                within it; None waits as long as needed.
            kind: an interactive request's :class:`Kind`: submissions leave the answers'
                slots and go after their guild's answers (module docstring).

        Raises:
            RateLimitWaitTooLong: the estimated wait exceeds ``max_wait`` as it is queued, or
                on a later wake it can no longer be sent within ``max_wait`` or before its
                token's or hold's end less :data:`SEND_MARGIN` (:func:`send_by`); nothing is
                counted.
            QueueCancelled: the member cancelled while waiting (nothing is counted).
        """
        await self.take(priority, max_wait=max_wait, kind=kind)

    async def take(
        self, priority: Priority, *, max_wait: float | None = None, kind: Kind = Kind.ANSWER
    ) -> float:
        """:meth:`acquire`, returning the slot's stamp for :meth:`release`."""
        if not self._loaded:
            await self._load()
        interactive = priority is Priority.INTERACTIVE
        seat = QUEUE_SEAT.get() if interactive else None
        queued_at = self._clock.monotonic()
        ticket = Ticket(
            next(self._seq),
            priority,
            None if seat is None else seat.guild_id,
            kind if interactive else Kind.ANSWER,
            queued_at,
        )
        background = priority is Priority.BACKGROUND
        limit = self._limit(queued_at, max_wait, seat) if interactive else None
        self._waiting[ticket.seq] = ticket
        first = True
        try:
            while True:
                if seat is not None and seat.cancelled.is_set():
                    raise QueueCancelled()
                now = self._clock.monotonic()
                delay = self._delay(ticket, now)
                order = self._order(now)
                head = order[0]
                if head != self._last_head:
                    # Whose turn it is can change with time alone (the floor falls due as the
                    # window moves): wake the others so that the new head takes its turn.
                    self._last_head = head
                    self._notify()
                place = order.index(ticket)
                if head == ticket and delay <= _EPSILON and (limit is None or now <= limit):
                    stamp = self._release_ticket(ticket, now, queued_at)
                    break
                if limit is not None and (now >= limit or now + delay > limit):
                    # Judged again on every wake: it can no longer go in time (module docstring).
                    self._refuse(priority, self._estimate(place, now, ticket.kind))
                if first or (seat is not None and seat.on_wait is not None):
                    estimate = self._estimate(place, now, ticket.kind)
                    if first and max_wait is not None and estimate > max_wait:
                        self._refuse(priority, estimate)
                    if seat is not None and seat.on_wait is not None:
                        seat.on_wait(place + 1, estimate)
                first = False
                # The head of the queue needs a timer, and a request with a limit one to wake
                # by it; the rest wake when the queue moves.
                timer = delay if head == ticket else None
                if limit is not None:
                    timer = min(limit - now, timer) if timer is not None else limit - now
                await self._wait(timer, seat)
        finally:
            if self._waiting.pop(ticket.seq, None) is not None:
                self._notify()
        await self._go(stamp, seat, background)
        return stamp

    async def _go(self, stamp: float, seat: QueueSeat | None, background: bool) -> None:
        """A slot taken: tell the member's queue status, and record the request before it goes."""
        if seat is not None and seat.on_go is not None:
            seat.on_go()
        if self._writes and self._record is not None:
            try:
                await self._record.record(background)
            except BaseException:
                # Not recorded, so not sent: the slot is free again (a cancellation while the
                # write was under way may have written the row: counted, which is safe).
                self.release(stamp, background)
                raise

    def _limit(
        self, queued_at: float, max_wait: float | None, seat: QueueSeat | None
    ) -> float | None:
        """The monotonic time past which an interactive request is not sent (None: none)."""
        limits = [] if max_wait is None else [queued_at + max_wait]
        latest = send_by(seat)
        if latest is not None:
            limits.append(queued_at + latest - self._clock.time())
        return min(limits) if limits else None

    def _refuse(self, priority: Priority, estimate: float) -> NoReturn:
        """Refuse a waiting request: raise the queue's refusal, counted."""
        if self._metrics is not None:
            self._metrics.limiter_refusals.labels(priority.name.lower()).inc()
        queued = sum(1 for t in self._waiting.values() if t.priority is Priority.INTERACTIVE)
        raise RateLimitWaitTooLong(estimate, queued=queued - 1)

    def _release_ticket(self, ticket: Ticket, now: float, queued_at: float) -> float:
        del self._waiting[ticket.seq]
        if ticket.priority is Priority.INTERACTIVE:
            self._turns[ticket.guild_id] = next(self._turn_seq)
        else:
            self._yielding_since = None
        self._forget_turns()
        self._sent.append((now, ticket.priority is Priority.BACKGROUND))
        self._notify()
        if self._metrics is not None:
            self._metrics.limiter_wait.labels(ticket.priority.name.lower()).observe(now - queued_at)
        return now

    def _forget_turns(self) -> None:
        # Only the relative order of recent turns matters: the oldest are forgotten (they then
        # count as "never served", which keeps them ahead of every more recent guild).
        if len(self._turns) > MAX_TURNS:
            recent = sorted(self._turns.items(), key=lambda item: item[1])[-MAX_TURNS // 2 :]
            self._turns = dict(recent)

    async def _load(self) -> None:
        async with self._load_lock:
            if self._loaded or self._record is None:
                return
            known = await self._record.load()
            now = self._clock.monotonic()
            merged = [(now - age, background) for age, background in known.ages]
            self._sent = deque(sorted([*merged, *self._sent]))
            self._blocked_until = max(self._blocked_until, now + known.blocked_for)
            self._loaded = True

    async def _wait(self, delay: float | None, seat: QueueSeat | None) -> None:
        """Return when the queue changes, ``delay`` passes or the seat is cancelled."""
        waiters: set[asyncio.Future[Any]] = {asyncio.ensure_future(self._changed.wait())}
        if seat is not None:
            waiters.add(asyncio.ensure_future(seat.cancelled.wait()))
        if delay is not None:
            waiters.add(asyncio.ensure_future(self._clock.sleep(delay)))
        try:
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()

    def _order(self, now: float) -> list[Ticket]:
        """The waiting tickets in serving order: users (fairly) first, but polls owed the floor.

        Only a background request that may go now passes users: one that must still wait (its
        burst, a block) never holds back a user who could go. And it passes an answer at the
        head of the users' queue only once it has yielded to answers for ``floor_yield``
        seconds (a member's ``/text`` takes the free slot, the poll the next one).
        """
        waiting = self._waiting
        if len(waiting) == 1:  # the poller's usual case: nothing to order
            return list(waiting.values())
        interactive = [t for t in waiting.values() if t.priority is Priority.INTERACTIVE]
        background = sorted(
            (t for t in waiting.values() if t.priority is Priority.BACKGROUND),
            key=lambda t: t.seq,
        )
        order = fair_order(interactive, self._turns) if interactive else []
        if any(t.kind is Kind.SUBMISSION for t in order):
            # Submissions kept back for the answers' slots go after every request that may use
            # those slots: an answer of any guild passes them while only those slots are free.
            behind = [t for t in order if self._behind_answers(t, now)]
            if behind:
                order = [*(t for t in order if t not in behind), *behind]
        rules = self._rules
        if not (background and interactive and rules.floor_due(now, self._sent)):
            self._yielding_since = None  # not owed the floor: a later yield starts afresh
            return [*order, *background]
        if self._blocked_until <= now and rules.background_delay(now, self._sent) <= 0:
            if order[0].kind is Kind.ANSWER:
                # Yield this free slot to the member's answer, within the bound.
                if self._yielding_since is None:
                    self._yielding_since = now
                if now - self._yielding_since < rules.floor_yield:
                    return [*order, *background]
            return [background[0], *order, *background[1:]]
        return [*order, *background]

    def _prune(self, now: float) -> None:
        horizon = now - self._rules.window
        while self._sent and self._sent[0][0] <= horizon:
            self._sent.popleft()

    def _behind_answers(self, ticket: Ticket, now: float) -> bool:
        """Whether ``ticket`` is a submission still kept back for the answers' slots."""
        return (
            ticket.kind is Kind.SUBMISSION
            and now - ticket.queued_at < self._rules.answer_patience
            and self._rules.submission_delay(now, self._sent) > _EPSILON
        )

    def _delay(self, ticket: Ticket, now: float) -> float:
        """Seconds until ``ticket`` could be released, ignoring the queue."""
        self._prune(now)
        rules = self._rules
        if ticket.priority is Priority.BACKGROUND:
            delay = rules.background_delay(now, self._sent)
        elif ticket.kind is Kind.SUBMISSION:
            # Kept back for the answers' slots until its patience runs out (module docstring);
            # then, at its turn, it still leaves the users' slots (a burst of answers).
            patience = ticket.queued_at + rules.answer_patience - now
            delay = max(
                min(rules.submission_delay(now, self._sent), max(patience, 0.0)),
                rules.submission_delay(now, self._sent, patient=False),
            )
        else:
            delay = rules.interactive_delay(now, self._sent)
        return max(delay, self._blocked_until - now)

    def _estimate(self, ahead: int, now: float, kind: Kind = Kind.ANSWER) -> float:
        """Seconds until the request with ``ahead`` others before it is released."""
        window = self._rules.window
        limit = self._rules.limit
        if kind is Kind.SUBMISSION:
            limit = max(1, limit - self._rules.answer_slots)
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


class RateRecorder:
    """Writes the requests released together as one transaction (a :class:`GroupCommit`).

    A request waits for its own row to be written; rows of requests released while a write is
    under way go in the next one. So a pass of the poller that releases polls of many keys
    writes once, not once per poll.

    Args:
        rates: the database's rate windows (``db.rates``).
        window: seconds a row must be kept (the rolling window, margin included); older rows
            are deleted now and then by the writes.
    """

    def __init__(self, rates: RateWindowRepository, window: float) -> None:
        self._rates = rates
        self._window = window
        self._commits: GroupCommit[tuple[str, bool], None] = GroupCommit(self._write)

    async def record(self, key_id: str, background: bool) -> None:
        """Write one request of ``key_id`` now; return once it is committed.

        Raises:
            Exception: the database's error (the request must then not be sent).
        """
        await self._commits.submit((key_id, background))

    async def _write(self, requests: Sequence[tuple[str, bool]]) -> list[None]:
        await self._rates.record(requests, window=self._window)
        return [None] * len(requests)


class DurableWindow:
    """One key's :class:`WindowRecord` in ``db.rates`` (the database's clock).

    Args:
        rates: the database's rate windows.
        key_id: the key's fingerprint (never the key).
        window: the rolling window, margin included, seconds.
        recorder: the process's batched writer.
        tasks: where the blocks being written are kept until done.
    """

    def __init__(
        self,
        rates: RateWindowRepository,
        key_id: str,
        window: float,
        recorder: RateRecorder,
        tasks: set[asyncio.Task[None]],
    ) -> None:
        self._rates = rates
        self._key_id = key_id
        self._window = window
        self._recorder = recorder
        self._tasks = tasks

    async def load(self) -> KnownWindow:
        """Read the key's requests of the last window and its block, as ages from now."""
        snapshot = await self._rates.snapshot(self._key_id, self._window)
        return KnownWindow(
            ages=[(snapshot.now - at, background) for at, background in snapshot.sent],
            blocked_for=max(0.0, snapshot.blocked_until - snapshot.now),
        )

    async def record(self, background: bool) -> None:
        """Record one request of the key, sent now (batched with concurrent ones)."""
        await self._recorder.record(self._key_id, background)

    def block(self, seconds: float) -> None:
        """Record a 429's block for every later process; failures are only logged."""
        task = asyncio.get_running_loop().create_task(self._block(seconds))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _block(self, seconds: float) -> None:
        try:
            await self._rates.block(self._key_id, seconds)
        except Exception as exc:  # the block still holds in this process
            log.warning("could not record a rate-limit block: %s", exc)


class RateLimiter:
    """One :class:`KeyLimiter` per API key, shared by every caller in the process.

    Keys are identified by their fingerprint, so no secret is held here. With ``rates`` each
    key starts from what the database recorded in the last window and records every request
    before it is sent (module docstring); without it (tests, benchmarks) it starts empty.

    Args:
        clock: source of time and sleeping (inject a manual clock in tests).
        rules: how each key's window is shared (:class:`~bot.genapi.slots.SlotRules`:
            30 requests per 60 s plus a 1 s margin, docs/genapi.md §8.1).
        metrics: given to every key's limiter; None counts nothing.
        rates: the database's rate windows (``db.rates``); None keeps the window in memory.
        writes: False when another layer records the requests (the shared limiter).
    """

    def __init__(
        self,
        clock: Clock,
        rules: SlotRules | None = None,
        *,
        metrics: Metrics | None = None,
        rates: RateWindowRepository | None = None,
        writes: bool = True,
    ) -> None:
        self._metrics = metrics
        self._clock = clock
        self.rules = rules or SlotRules()
        self._keys: dict[str, KeyLimiter] = {}
        self._rates = rates
        self._writes = writes
        self._recorder = None if rates is None else RateRecorder(rates, self.rules.window)
        self._tasks: set[asyncio.Task[None]] = set()

    def for_key(self, fingerprint: str) -> KeyLimiter:
        """Return the limiter of the key with ``fingerprint``, creating it on first use."""
        limiter = self._keys.get(fingerprint)
        if limiter is None:
            record = None
            if self._rates is not None and self._recorder is not None:
                record = DurableWindow(
                    self._rates, fingerprint, self.rules.window, self._recorder, self._tasks
                )
            limiter = KeyLimiter(
                self.rules,
                self._clock,
                metrics=self._metrics,
                record=record,
                writes=self._writes,
            )
            self._keys[fingerprint] = limiter
        return limiter

    async def forget(self, fingerprint: str) -> None:
        """Drop the key's limiter and delete its recorded window (a key the service rejected).

        The rows of ``rate_requests`` and ``rate_blocks``: a key rejected when it was checked
        is never to be used.

        Requests still waiting on the dropped limiter keep it until they go; the next request
        with the key starts a new one from what the database then holds.

        Raises:
            Exception: the database's error deleting the rows.
        """
        self._keys.pop(fingerprint, None)
        if self._rates is not None:
            await self._rates.forget(fingerprint)
