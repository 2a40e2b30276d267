"""The limiter shared by several processes: its rule, and two limiters over one database.

Two ``Database`` objects on one database (the file, or the PostgreSQL server) stand for two
processes. The window is timed by the database's own clock, which a test cannot move, so the
two-limiter test runs on real time with a window scaled down to half a second.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence

import asyncpg
import pytest

from bot.clock import ManualClock, SystemClock
from bot.genapi.errors import RateLimitWaitTooLong
from bot.genapi.rate_window import RateTake, RateWindowRepository
from bot.genapi.ratelimit import Priority
from bot.genapi.shared_ratelimit import SharedRateLimiter, shared_delay
from bot.genapi.slots import SlotRules
from bot.storage import Database

LIMIT = 5
WINDOW = 0.4
MARGIN = 0.1
USER_SLOTS = 2


def rule(now: float, sent: Sequence[tuple[float, bool]], *, background: bool) -> float:
    return shared_delay(now, sent, 0.0, rules=SlotRules(), background=background)


def test_the_rule_counts_every_process_and_keeps_slots_for_interactive_requests() -> None:
    full = [(1000.0 + i, False) for i in range(30)]
    assert rule(1030.0, full, background=False) == pytest.approx(31.0)  # 1000 + 61 - 1030
    assert rule(1030.0, full[:29], background=False) <= 0
    # Users active: background requests leave them 2 slots, whoever sent the others...
    polls = [(1021.0 + i, True) for i in range(7)]
    assert rule(1030.0, [*full[:21], *polls], background=True) > 0
    assert rule(1030.0, [*full[:21], *polls], background=False) <= 0
    # ...but are owed a share (6 of 30) when users are what fills the window.
    assert rule(1030.0, full[:28], background=True) <= 0
    # Polls of every process count in the burst they may make at once.
    polls = [(1029.0, True)] * 6
    assert rule(1030.0, polls, background=True) == pytest.approx(61.0 / 30 - 1.0)
    assert rule(1030.0, polls, background=False) <= 0
    blocked = shared_delay(10.0, [], 25.0, rules=SlotRules(), background=False)
    assert blocked == 15.0


@pytest.fixture
async def two(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> AsyncIterator[tuple[Database, Database]]:
    one = await open_db(ManualClock())
    other = await open_db(ManualClock())
    yield one, other
    await other.close()
    await one.close()


async def recorded(db: Database, key_id: str) -> list[tuple[float, bool]]:
    """Every request recorded for the key, oldest first (read through the rule's own view)."""
    seen: list[tuple[float, bool]] = []

    def look(now: float, sent: Sequence[tuple[float, bool]], blocked_until: float) -> float:
        seen.extend(sent)
        return 1.0  # record nothing

    await db.rates.take([RateTake(key_id, False, 3600.0, look)])
    return seen


async def blocked_until(db: Database, key_id: str) -> float:
    """When the key's recorded block ends (the database's clock); 0 when it has none."""
    seen: list[float] = []

    def look(now: float, sent: Sequence[tuple[float, bool]], blocked_until: float) -> float:
        seen.append(blocked_until)
        return 1.0  # record nothing

    await db.rates.take([RateTake(key_id, False, 3600.0, look)])
    return seen[0] if seen else 0.0


async def test_two_processes_never_exceed_the_limit_in_any_rolling_window(
    two: tuple[Database, Database],
) -> None:
    limiters = [
        SharedRateLimiter(
            SystemClock(),
            db.rates,
            SlotRules(limit=LIMIT, window=WINDOW + MARGIN, user_slots=USER_SLOTS, min_pace=0.0),
        )
        for db in two
    ]
    rng = random.Random(7)
    priorities = [rng.choice(list(Priority)) for _ in range(24)]
    await asyncio.gather(
        *(
            limiters[i % 2].for_key("fp-shared").acquire(priority)
            for i, priority in enumerate(priorities)
        )
    )

    sent = await recorded(two[0], "fp-shared")
    assert len(sent) == 24
    span = WINDOW + MARGIN
    times = [at for at, _ in sent]
    for i in range(len(times) - LIMIT):
        assert times[i + LIMIT] - times[i] >= span - 1e-6, "more than the limit in one window"
    for at, background in sent:
        if background:  # a background request never found the window at its cap
            before = [t for t in times if at - span < t < at]
            assert len(before) <= LIMIT - 1
    assert sum(1 for _, background in sent if background) == priorities.count(Priority.BACKGROUND)


async def test_a_429_blocks_the_key_for_every_process(two: tuple[Database, Database]) -> None:
    first, second = (SharedRateLimiter(SystemClock(), db.rates) for db in two)
    await first.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=5.0)
    first.for_key("fp").block_for(120.0)
    for _ in range(500):  # the block is written in the background: until the other sees it
        if await blocked_until(two[1], "fp") > 0:
            break
        await asyncio.sleep(0.01)
    with pytest.raises(RateLimitWaitTooLong):
        await second.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=5.0)
    # Nothing was recorded for the refused request.
    assert len(await recorded(two[1], "fp")) == 1


async def test_a_request_the_shared_window_refused_frees_its_slot_in_the_process(
    two: tuple[Database, Database],
) -> None:
    # A process whose requests the shared window refused must not then refuse its users
    # for a whole window on its own count (they were never sent).
    # The refusals must come while the first requests are still in the window, however slow
    # a loaded machine makes the writes before them: they come at once, in a window of a second
    # (real time only lengthens the wait after them, which is what lets the last ones through).
    span = 2 * (WINDOW + MARGIN)
    rules = SlotRules(limit=LIMIT, window=span, min_pace=0.0)
    first, second = (SharedRateLimiter(SystemClock(), db.rates, rules) for db in two)
    await second.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=0.05)
    for _ in range(LIMIT - 1):
        await first.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=0.05)
    for _ in range(LIMIT - 1):  # the shared window is full: refused, nothing sent
        with pytest.raises(RateLimitWaitTooLong):
            await second.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=0.05)
    await asyncio.sleep(span + 0.05)  # the first requests left the window
    for _ in range(LIMIT - 1):
        await second.for_key("fp").acquire(Priority.INTERACTIVE, max_wait=0.05)
    assert len(await recorded(two[1], "fp")) == 2 * LIMIT - 1


async def test_a_shorter_block_never_shortens_a_longer_one(two: tuple[Database, Database]) -> None:
    # A 429 with a short Retry-After, seen by one process, must not cut short the longer block
    # another process's 429 set: the key would be used again too early (the window's row is
    # an upsert that keeps the later time).
    first, second = two
    await first.rates.block("fp", 600.0)
    longer = (await second.rates.snapshot("fp", 60.0)).blocked_until
    await second.rates.block("fp", 5.0)
    assert (await first.rates.snapshot("fp", 60.0)).blocked_until == longer
    await second.rates.block("fp", 1200.0)
    assert (await first.rates.snapshot("fp", 60.0)).blocked_until >= longer + 500.0


@pytest.mark.parametrize("engine_settings", ["postgresql"], indirect=True)
async def test_a_batch_of_takes_costs_five_round_trips_on_postgresql(
    open_db: Callable[[ManualClock], Awaitable[Database]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The window's take runs per request to the service: its round trips are the server's load.

    BEGIN, the key's lock, one read (clock, block and window), the insert, COMMIT; and the pool
    does not reset a released connection (nothing session-level is ever set; the locks are the
    transaction's), which would add ``RESET ALL`` and three more statements (docs/benchmarks.md).
    """
    statements: list[str] = []
    create_pool = asyncpg.create_pool

    def logged(*args: object, **kwargs: object) -> object:
        async def init(connection: asyncpg.Connection) -> None:
            connection.add_query_logger(lambda query: statements.append(query.query))

        return create_pool(*args, init=init, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(asyncpg, "create_pool", logged)
    db = await open_db(ManualClock())
    try:

        def send(now: float, sent: Sequence[tuple[float, bool]], blocked_until: float) -> float:
            return 0.0

        keys = ["fp-a", "fp-b", "fp-c"]
        for key in keys:  # a key's first take also prunes its old rows
            await db.rates.take([RateTake(key, True, 61.0, send)])
        statements.clear()
        for _ in range(3):
            await db.rates.take([RateTake("fp-a", True, 61.0, send)])
        assert len(statements) == 3 * 5, statements
        assert not any("RESET" in s.upper() for s in statements)
        # Takes that arrive together share one transaction, whatever their keys.
        statements.clear()
        await db.rates.take([RateTake(key, True, 61.0, send) for key in keys])
        assert len(statements) == 5, statements
        # ...in statements whose text does not depend on the batch's size: each is compiled
        # and prepared once, not once per size.
        three = set(statements)
        statements.clear()
        await db.rates.take([RateTake(key, True, 61.0, send) for key in keys[:2]])
        assert set(statements) == three
        # The single process's record writes its batch in one statement too.
        statements.clear()
        await db.rates.record([(key, True) for key in keys], window=61.0)
        assert len(statements) == 3, statements  # BEGIN, the insert, COMMIT
        assert [len(await recorded(db, key)) for key in keys] == [7, 4, 3]
    finally:
        await db.close()


async def test_takes_of_one_key_written_together_see_each_other(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    """A burst for one key shares a transaction: the rule still sees every earlier take."""
    db = await open_db(ManualClock())
    try:

        def two_at_most(now: float, sent: Sequence[tuple[float, bool]], blocked: float) -> float:
            return 0.0 if len(sent) < 2 else 7.0

        delays = await db.rates.take([RateTake("fp", False, 60.0, two_at_most)] * 5)
        assert delays == [0.0, 0.0, 7.0, 7.0, 7.0]
        assert len(await recorded(db, "fp")) == 2
    finally:
        await db.close()


class CountedTakes:
    """The database's windows, counting the transactions the limiter asks of them."""

    def __init__(self, rates: RateWindowRepository) -> None:
        self.rates = rates
        self.batches: list[int] = []

    async def take(self, takes: Sequence[RateTake]) -> list[float]:
        self.batches.append(len(takes))
        return await self.rates.take(takes)

    def __getattr__(self, name: str) -> object:
        return getattr(self.rates, name)


async def test_requests_of_many_keys_released_together_share_a_transaction(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    """A poller's pass releases polls of many keys at once: one write, not one per poll."""
    db = await open_db(ManualClock())
    try:
        counted = CountedTakes(db.rates)
        limiter = SharedRateLimiter(SystemClock(), counted)  # type: ignore[arg-type]
        keys = [f"fp-{i}" for i in range(12)]
        # A key's first request reads its window (one read per key, on its own schedule).
        await asyncio.gather(*(limiter.for_key(k).acquire(Priority.INTERACTIVE) for k in keys))
        counted.batches.clear()
        await asyncio.gather(*(limiter.for_key(k).acquire(Priority.INTERACTIVE) for k in keys))
        assert sum(counted.batches) == 12
        assert len(counted.batches) <= 2  # the first alone, at once; the others together
        assert [len(await recorded(db, key)) for key in keys] == [2] * 12
    finally:
        await db.close()


async def test_rows_older_than_ten_windows_are_deleted_by_a_keys_first_write(
    two: tuple[Database, Database],
) -> None:
    """The table keeps ten windows for operators, not forever (a new process prunes first)."""
    first, second = two

    def allow(now: float, sent: Sequence[tuple[float, bool]], blocked: float) -> float:
        return 0.0

    await first.rates.record([("fp-r", True)], window=0.02)
    await first.rates.take([RateTake("fp-t", True, 0.02, allow)])
    await asyncio.sleep(0.3)  # the database's clock: more than ten windows of 0.02 s
    await second.rates.record([("fp-r", False)], window=0.02)
    await second.rates.take([RateTake("fp-t", False, 0.02, allow)])
    for key in ("fp-r", "fp-t"):  # only the second process's request is left
        assert [background for _, background in await recorded(first, key)] == [False]
