"""The per-key limiter, on a manual clock: nothing here sleeps for real."""

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest

from bot.clock import ManualClock
from bot.genapi.budget import BudgetRules
from bot.genapi.errors import QueueCancelled, RateLimitWaitTooLong
from bot.genapi.ratelimit import (
    QUEUE_SEAT,
    Priority,
    QueueSeat,
    RateLimiter,
    Ticket,
    fair_order,
)
from bot.storage import Database


def limiter_of(
    clock: ManualClock,
    *,
    limit: int = 30,
    window: float = 60.0,
    margin: float = 1.0,
    **rules: float,
) -> RateLimiter:
    return RateLimiter(clock, BudgetRules(limit=limit, window=window + margin, **rules))


def settled(
    clock: ManualClock,
    *,
    limit: int = 30,
    window: float = 60.0,
    margin: float = 1.0,
    **rules: float,
) -> RateLimiter:
    """A limiter past the window it assumes used at start-up: the steady state."""
    limiter = limiter_of(clock, limit=limit, window=window, margin=margin, **rules)
    clock.advance(window + margin)
    return limiter


def most_in_any_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, start = 0, 0
    for end, t in enumerate(times):
        while times[start] <= t - window:
            start += 1
        best = max(best, end - start + 1)
    return best


async def test_never_releases_a_31st_request_within_any_rolling_minute() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock).for_key("k")
    released: list[float] = []

    async def request(priority: Priority) -> None:
        await limiter.acquire(priority)
        released.append(clock.monotonic())

    priorities = [Priority.INTERACTIVE if i % 3 == 0 else Priority.BACKGROUND for i in range(150)]
    await asyncio.gather(*(request(p) for p in priorities))

    assert len(released) == 150
    assert most_in_any_window(released, 60.0) == 30
    assert clock.monotonic() >= 4 * 60  # 150 requests need at least five windows


async def test_background_leaves_headroom_for_interactive() -> None:
    clock = ManualClock()
    limiter = settled(clock, margin=0, burst=30).for_key("k")
    await limiter.acquire(Priority.INTERACTIVE)  # a user is active: 2 slots are kept
    for _ in range(27):
        await limiter.acquire(Priority.BACKGROUND)
    start = clock.monotonic()

    # The next background request waits for slots to come free; users get theirs now.
    background = asyncio.ensure_future(limiter.acquire(Priority.BACKGROUND))
    await asyncio.sleep(0)
    await limiter.acquire(Priority.INTERACTIVE)
    await limiter.acquire(Priority.INTERACTIVE)
    assert clock.monotonic() == start
    assert not background.done()
    await background
    assert clock.monotonic() > start


async def test_background_requests_burst_a_little_then_are_spaced() -> None:
    clock = ManualClock()
    limiter = settled(clock, margin=0).for_key("k")
    start = clock.monotonic()
    released = []
    for _ in range(9):
        await limiter.acquire(Priority.BACKGROUND)
        released.append(clock.monotonic() - start)
    assert released[:6] == [0.0] * 6  # BudgetRules.burst
    gaps = [later - earlier for earlier, later in itertools.pairwise(released[5:])]
    assert gaps == pytest.approx([60 / 30] * 3)


async def test_a_background_request_owed_its_floor_passes_waiting_users() -> None:
    clock = ManualClock()
    limiter = settled(clock, margin=0).for_key("k")
    for _ in range(30):  # one a second: they leave the window one by one
        await limiter.acquire(Priority.INTERACTIVE)
        clock.advance(1.0)
    order: list[str] = []

    async def request(name: str, priority: Priority) -> None:
        await limiter.acquire(priority)
        order.append(name)

    # Users fill the window: without the floor, users queued after the poll would go first.
    poll = asyncio.ensure_future(request("poll", Priority.BACKGROUND))
    await asyncio.sleep(0)
    users = [asyncio.ensure_future(request(f"user{i}", Priority.INTERACTIVE)) for i in range(3)]
    await asyncio.gather(poll, *users)
    assert order[0] == "poll"


async def test_the_window_has_a_margin_for_the_requests_travel_time() -> None:
    clock = ManualClock()
    limiter = settled(clock, limit=2, window=60.0).for_key("k")
    start = clock.monotonic()
    for _ in range(3):
        await limiter.acquire(Priority.INTERACTIVE)
    assert clock.monotonic() - start == pytest.approx(61)


async def test_interactive_overtakes_a_queue_of_background_requests() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock, floor=float("inf")).for_key("k")  # no floor: users fill the window
    for _ in range(30):
        await limiter.acquire(Priority.INTERACTIVE)
    order: list[str] = []

    async def request(name: str, priority: Priority) -> None:
        await limiter.acquire(priority)
        order.append(name)

    tasks = [asyncio.ensure_future(request(f"poll{i}", Priority.BACKGROUND)) for i in range(5)]
    await asyncio.sleep(0)
    tasks.append(asyncio.ensure_future(request("user", Priority.INTERACTIVE)))
    await asyncio.gather(*tasks)
    assert order[0] == "user"


async def test_retry_after_blocks_the_key() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock).for_key("k")
    limiter.block_for(12.5)
    await limiter.acquire(Priority.INTERACTIVE)
    assert clock.monotonic() == pytest.approx(12.5)


async def test_interactive_caller_is_told_to_come_back_instead_of_waiting_long() -> None:
    clock = ManualClock()
    limiter = settled(clock, limit=30, window=60.0, margin=0).for_key("k")
    for _ in range(30):
        await limiter.acquire(Priority.INTERACTIVE)
    clock.advance(20)
    with pytest.raises(RateLimitWaitTooLong) as caught:
        await limiter.acquire(Priority.INTERACTIVE, max_wait=10)
    assert caught.value.retry_after == pytest.approx(40)
    assert limiter.waiting == 0
    assert limiter.sent_in_window == 30


async def test_keys_are_limited_separately() -> None:
    clock = ManualClock()
    limiters = settled(clock, limit=30, window=60.0)
    start = clock.monotonic()
    for _ in range(30):
        await limiters.for_key("a").acquire(Priority.INTERACTIVE)
    await limiters.for_key("b").acquire(Priority.INTERACTIVE)
    assert clock.monotonic() == start


async def test_a_fresh_database_serves_the_first_burst_at_once(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    # Issue 18: right after start-up the key had sent nothing, so ten /video go at once.
    clock = ManualClock()
    db = await open_db(clock)
    try:
        limiter = RateLimiter(clock, BudgetRules(), rates=db.rates).for_key("k")
        await asyncio.gather(*(limiter.acquire(Priority.INTERACTIVE) for _ in range(30)))
        assert clock.monotonic() == 0.0
        assert len((await db.rates.snapshot("k", 61.0)).sent) == 30  # recorded before sent
    finally:
        await db.close()


async def test_after_a_restart_the_limiter_starts_from_what_was_recorded(
    open_db: Callable[[ManualClock], Awaitable[Database]],
) -> None:
    # The process before (killed at once) sent 30 in this window: the new one sends no 31st
    # until the first of them leaves the window, whatever the previous process was.
    clock = ManualClock()
    db = await open_db(clock)
    try:
        before = RateLimiter(clock, BudgetRules(), rates=db.rates).for_key("k")
        for _ in range(30):
            await before.acquire(Priority.INTERACTIVE)
        after = RateLimiter(clock, BudgetRules(), rates=db.rates).for_key("k")
        await after.acquire(Priority.INTERACTIVE)
        assert clock.monotonic() >= 60.0
    finally:
        await db.close()


def test_turns_go_round_the_guilds_first_come_first_served_within_each() -> None:
    a = [Ticket(seq, Priority.INTERACTIVE, 1) for seq in range(5)]
    b = [Ticket(10, Priority.INTERACTIVE, 2)]
    c = [Ticket(11, Priority.INTERACTIVE, 3), Ticket(12, Priority.INTERACTIVE, 3)]
    order = fair_order([*c, *b, *a], {1: 7})  # guild 1 sent last: the others go first
    assert [t.seq for t in order] == [10, 11, 0, 12, 1, 2, 3, 4]


async def test_a_single_request_of_another_guild_passes_a_burst_of_forty() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock).for_key("k")
    sent: list[str] = []

    async def request(guild: int, name: str) -> None:
        QUEUE_SEAT.set(QueueSeat(guild_id=guild))
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0)
        sent.append(name)

    # Queued in the same instant (a manual clock's sleep would jump past a later arrival).
    burst = [asyncio.ensure_future(request(1, f"a{i}")) for i in range(40)]
    other = asyncio.ensure_future(request(2, "b"))
    await asyncio.gather(*burst, other)
    assert sent.index("b") < sent.index("a30")
    assert sent[:30] == [f"a{i}" for i in range(30)]


async def test_a_waiting_member_sees_the_place_and_may_cancel_at_no_cost() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock).for_key("k")
    QUEUE_SEAT.set(QueueSeat(guild_id=1))  # one guild: first come, first served
    for _ in range(30):
        await limiter.acquire(Priority.INTERACTIVE)
    seen: list[tuple[int, float]] = []
    seat = QueueSeat(guild_id=1, on_wait=lambda place, wait: seen.append((place, wait)))
    first = asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE, max_wait=300.0))

    async def mine() -> None:
        QUEUE_SEAT.set(seat)
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0)

    waiting = asyncio.ensure_future(mine())
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert seen[0][0] == 2  # second on the key
    assert 0 < seen[0][1] <= 61.0
    seat.cancelled.set()
    with pytest.raises(QueueCancelled):
        await waiting
    await first
    assert limiter.sent_in_window == 1  # the cancelled request took no slot
    assert limiter.waiting == 0


async def test_a_refusal_says_how_long_the_queue_is() -> None:
    clock = ManualClock()
    limiter = limiter_of(clock, limit=2).for_key("k")
    queued = [asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE)) for _ in range(6)]
    await asyncio.sleep(0)
    with pytest.raises(RateLimitWaitTooLong) as caught:
        await limiter.acquire(Priority.INTERACTIVE, max_wait=100.0)
    assert caught.value.queued == 4  # the two sent went; four wait before it
    assert caught.value.retry_after > 100.0
    await asyncio.gather(*queued)
