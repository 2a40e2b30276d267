"""The per-key limiter, on a manual clock: nothing here sleeps for real."""

import asyncio
import itertools
from collections.abc import Awaitable, Callable

import pytest

from bot.clock import ManualClock
from bot.genapi.errors import QueueCancelled, RateLimitWaitTooLong
from bot.genapi.ratelimit import (
    HOLD_EXPIRES_AT,
    QUEUE_SEAT,
    SEND_MARGIN,
    KeyLimiter,
    Kind,
    Limiter,
    Priority,
    QueueSeat,
    RateLimiter,
    Ticket,
    fair_order,
)
from bot.genapi.shared_ratelimit import SharedRateLimiter
from bot.genapi.slots import SlotRules
from bot.storage import Database
from tests.support.clocks import TimerClock


def limiter_of(
    clock: ManualClock,
    *,
    limit: int = 30,
    window: float = 60.0,
    margin: float = 1.0,
    **rules: float,
) -> RateLimiter:
    return RateLimiter(clock, SlotRules(limit=limit, window=window + margin, **rules))


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
    assert released[:6] == [0.0] * 6  # SlotRules.burst
    gaps = [later - earlier for earlier, later in itertools.pairwise(released[5:])]
    assert gaps == pytest.approx([60 / 30] * 3)


async def test_a_background_request_owed_its_floor_passes_waiting_submissions() -> None:
    clock = ManualClock()
    limiter = settled(clock, margin=0).for_key("k")
    for _ in range(30):  # one a second: they leave the window one by one
        await limiter.acquire(Priority.INTERACTIVE)
        clock.advance(1.0)
    order: list[str] = []

    async def request(name: str, priority: Priority, kind: Kind = Kind.SUBMISSION) -> None:
        await limiter.acquire(priority, kind=kind)
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
    # Right after start-up the key had sent nothing, so ten /video go at once.
    clock = ManualClock()
    db = await open_db(clock)
    try:
        limiter = RateLimiter(clock, SlotRules(), rates=db.rates).for_key("k")
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
        before = RateLimiter(clock, SlotRules(), rates=db.rates).for_key("k")
        for _ in range(30):
            await before.acquire(Priority.INTERACTIVE)
        after = RateLimiter(clock, SlotRules(), rates=db.rates).for_key("k")
        await after.acquire(Priority.INTERACTIVE)
        assert clock.monotonic() >= 60.0
    finally:
        await db.close()


@pytest.mark.parametrize("shared", [False, True], ids=["process", "shared"])
async def test_a_forgotten_key_leaves_no_limiter_and_no_rows(
    open_db: Callable[[ManualClock], Awaitable[Database]], shared: bool
) -> None:
    # A key the service rejected when it was checked: nothing of it is kept, others untouched.
    clock = ManualClock()
    db = await open_db(clock)
    try:
        limiters: Limiter = (
            SharedRateLimiter(clock, db.rates)
            if shared
            else RateLimiter(clock, SlotRules(), rates=db.rates)
        )
        for key in ("rejected", "kept"):
            await limiters.for_key(key).acquire(Priority.INTERACTIVE)
        limiters.for_key("rejected").block_for(30.0)
        for _ in range(1000):  # the block is written in the background: wait until it is
            if (await db.rates.snapshot("rejected", 61.0)).blocked_until > 0:
                break
            await asyncio.sleep(0)
        else:
            pytest.fail("the block was never written")
        await limiters.forget("rejected")
        gone = await db.rates.snapshot("rejected", 10.0**9)
        assert (list(gone.sent), gone.blocked_until) == ([], 0.0)
        assert len((await db.rates.snapshot("kept", 61.0)).sent) == 1
        assert "rejected" not in limiters._keys  # type: ignore[attr-defined]
    finally:
        await db.close()


def test_turns_go_round_the_guilds_first_come_first_served_within_each() -> None:
    a = [Ticket(seq, Priority.INTERACTIVE, 1) for seq in range(5)]
    b = [Ticket(10, Priority.INTERACTIVE, 2)]
    c = [Ticket(11, Priority.INTERACTIVE, 3), Ticket(12, Priority.INTERACTIVE, 3)]
    order = fair_order([*c, *b, *a], {1: 7})  # guild 1 sent last: the others go first
    assert [t.seq for t in order] == [10, 11, 0, 12, 1, 2, 3, 4]


async def test_a_single_request_of_another_guild_passes_a_burst_of_forty() -> None:
    clock = TimerClock()
    limiter = limiter_of(clock).for_key("k")
    sent: list[str] = []

    async def request(guild: int, name: str) -> None:
        QUEUE_SEAT.set(QueueSeat(guild_id=guild))
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0)
        sent.append(name)

    # Queued in the same instant (a manual clock's sleep would jump past a later arrival).
    burst = [asyncio.ensure_future(request(1, f"a{i}")) for i in range(40)]
    other = asyncio.ensure_future(request(2, "b"))
    await clock.drive(*burst, other)
    assert sent.index("b") < sent.index("a30")
    assert sent[:30] == [f"a{i}" for i in range(30)]


async def test_a_waiting_member_sees_the_place_and_may_cancel_at_no_cost() -> None:
    clock = TimerClock()
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
    await clock.drive(first)
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


def test_a_guilds_turn_takes_its_oldest_answer_before_its_submissions() -> None:
    # First come first served per kind within a guild; turns between guilds as before.
    a = [Ticket(seq, Priority.INTERACTIVE, 1, Kind.SUBMISSION) for seq in range(3)]
    a_text = Ticket(5, Priority.INTERACTIVE, 1, Kind.ANSWER)
    b_video = Ticket(4, Priority.INTERACTIVE, 2, Kind.SUBMISSION)
    order = fair_order([*a, a_text, b_video], {})
    assert [t.seq for t in order] == [5, 4, 0, 1, 2]


async def test_a_text_does_not_wait_behind_its_own_servers_queued_videos() -> None:
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    QUEUE_SEAT.set(QueueSeat(guild_id=1))  # one server: the bench's second round
    for i in range(30):  # the window is full; one request leaves it every 2 s, the first in 2 s
        if i:
            clock.advance(2.0)
        await limiter.acquire(Priority.INTERACTIVE)
    sent: list[tuple[str, float]] = []

    async def request(name: str, kind: Kind) -> None:
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0, kind=kind)
        sent.append((name, clock.monotonic()))

    queued_at = clock.monotonic()
    videos = [asyncio.ensure_future(request(f"video{i}", Kind.SUBMISSION)) for i in range(3)]
    text = asyncio.ensure_future(request("text", Kind.ANSWER))
    await clock.drive(*videos, text)
    assert sent[0][0] == "text"
    assert sent[0][1] - queued_at <= 2.0  # the next slot to come free, not the fourth


async def test_queued_videos_leave_a_burst_of_texts_its_slots() -> None:
    # The bench's second round: ten /video at once find the window two-thirds full (polls
    # lent the idle slots); the /text that come next must not wait for the window to move.
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    for _ in range(20):
        await limiter.acquire(Priority.BACKGROUND)
        clock.advance(2.0)
    start = clock.monotonic()
    sent: list[tuple[str, float]] = []

    async def request(name: str, kind: Kind) -> None:
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0, kind=kind)
        sent.append((name, clock.monotonic() - start))

    # Queued in the same instant (a manual clock's sleep would jump past a later arrival).
    videos = [asyncio.ensure_future(request(f"video{i}", Kind.SUBMISSION)) for i in range(10)]
    texts = [asyncio.ensure_future(request(f"text{i}", Kind.ANSWER)) for i in range(3)]
    await clock.drive(*videos, *texts)
    waits = dict(sent)
    assert [waits[f"text{i}"] for i in range(3)] == [0.0, 0.0, 0.0]
    assert sorted(waits[f"video{i}"] for i in range(10))[:4] == [0.0] * 4  # 24 of 30
    assert limiter.sent_in_window <= 30


async def test_a_stream_of_texts_holds_another_servers_video_only_for_its_patience() -> None:
    # Turns between servers still hold across kinds: 40 /text of one server cannot
    # keep a single /video of another behind all of them.
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    for _ in range(30):  # full; one request leaves every 2 s from a minute on
        await limiter.acquire(Priority.INTERACTIVE)
        clock.advance(2.0)
    sent: list[str] = []

    async def request(guild: int, name: str, kind: Kind) -> None:
        QUEUE_SEAT.set(QueueSeat(guild_id=guild))
        await limiter.acquire(Priority.INTERACTIVE, max_wait=600.0, kind=kind)
        sent.append(name)

    video = asyncio.ensure_future(request(2, "video", Kind.SUBMISSION))
    texts = [asyncio.ensure_future(request(1, f"text{i}", Kind.ANSWER)) for i in range(40)]
    await clock.drive(video, *texts)
    # 30 s of patience at one slot every 2 s: about 15 texts go first, never 30.
    assert sent.index("video") < sent.index("text29")
    assert sent.index("video") > sent.index("text0")  # held while the window was nearly full


async def test_submissions_go_at_once_while_the_window_has_room_beyond_the_reserve() -> None:
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    await clock.drive(
        *(limiter.acquire(Priority.INTERACTIVE, kind=Kind.SUBMISSION) for _ in range(24))
    )
    assert limiter.sent_in_window == 24
    start = clock.monotonic()
    await clock.drive(limiter.acquire(Priority.INTERACTIVE, kind=Kind.SUBMISSION))  # 25th waits
    assert clock.monotonic() > start


async def test_held_videos_coming_due_together_leave_room_for_a_burst_of_texts() -> None:
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    for _ in range(20):  # the window two-thirds full; nothing leaves it for a minute
        await limiter.acquire(Priority.INTERACTIVE)
    start = clock.monotonic()
    waits: dict[str, float] = {}

    async def request(name: str, kind: Kind, at: float = 0.0) -> None:
        await clock.sleep(at)
        queued = clock.monotonic()
        await limiter.acquire(Priority.INTERACTIVE, max_wait=300.0, kind=kind)
        waits[name] = clock.monotonic() - queued

    videos = [request(f"video{i}", Kind.SUBMISSION) for i in range(10)]
    texts = [request(f"text{i}", Kind.ANSWER, at=31.0) for i in range(2)]  # past the patience
    await clock.drive(*videos, *texts)
    assert waits["text0"] == waits["text1"] == 0.0
    assert sorted(waits[f"video{i}"] for i in range(10)) == [0.0] * 4 + [30.0] * 4 + [60.0] * 2
    assert clock.monotonic() - start == 60.0


async def full_of_answers(
    clock: TimerClock, limiter: KeyLimiter, spacing: float, window: float = 60.0
) -> float:
    """Fill the window with 30 answers ``spacing`` s apart; return when the first leaves it."""
    first = clock.monotonic()
    for i in range(30):
        if i:
            clock.advance(spacing)
        await limiter.acquire(Priority.INTERACTIVE)
    return first + window


async def test_a_poll_owed_its_floor_yields_the_free_slot_to_a_waiting_text() -> None:
    # As in the batch benchmark's trickle: users fill the window and the polls are owed their
    # floor; the slot that comes free goes to the member's /text, the poll takes the next one.
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    free_at = await full_of_answers(clock, limiter, 2.0)  # one leaves every 2 s
    sent: dict[str, float] = {}

    async def request(name: str, priority: Priority) -> None:
        await limiter.acquire(priority, max_wait=300.0)
        sent[name] = clock.monotonic()

    poll = asyncio.ensure_future(request("poll", Priority.BACKGROUND))
    await asyncio.sleep(0)  # the poll was queued first
    text = asyncio.ensure_future(request("text", Priority.INTERACTIVE))
    await clock.drive(poll, text)
    assert sent["text"] == free_at  # the first slot to come free
    assert sent["poll"] == free_at + 2.0  # the next one


async def test_a_poll_yields_to_a_stream_of_texts_only_for_a_bounded_time() -> None:
    # The floor still holds: however many /text wait, a poll owed it goes within floor_yield
    # seconds of the first free slot it yielded (detection delay moves by at most that much).
    clock = TimerClock()
    limiter = settled(clock, margin=0).for_key("k")
    free_at = await full_of_answers(clock, limiter, 1.0)  # one leaves every second
    sent: list[tuple[str, float]] = []

    async def request(name: str, priority: Priority) -> None:
        await limiter.acquire(priority, max_wait=600.0)
        sent.append((name, clock.monotonic()))

    poll = asyncio.ensure_future(request("poll", Priority.BACKGROUND))
    await asyncio.sleep(0)
    texts = [asyncio.ensure_future(request(f"text{i}", Priority.INTERACTIVE)) for i in range(40)]
    await clock.drive(poll, *texts)
    names = [name for name, _ in sent]
    poll_at = dict(sent)["poll"]
    assert names[0] == "text0"  # it yielded
    assert poll_at <= free_at + SlotRules().floor_yield
    assert names.index("poll") < names.index("text20")


# -- a queued request is judged again on every wake --------------------------------------------


async def test_a_queued_request_is_refused_once_it_cannot_go_within_its_wait() -> None:
    clock = TimerClock()
    limiter = limiter_of(clock, limit=1).for_key("k")
    await limiter.acquire(Priority.INTERACTIVE)
    waiting = asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE, max_wait=100.0))
    for _ in range(5):
        await asyncio.sleep(0)
    assert limiter.waiting == 1  # 61 s fits in its 100
    limiter.block_for(500.0)  # a 429: nothing goes for 500 s
    with pytest.raises(RateLimitWaitTooLong):
        await clock.drive(waiting)
    assert clock.monotonic() < 100.0  # refused at once, not after waiting it out
    assert (limiter.sent_in_window, limiter.waiting) == (1, 0)


async def test_a_request_behind_others_is_refused_when_its_wait_runs_out() -> None:
    clock = TimerClock()
    limiter = limiter_of(clock, limit=1).for_key("k")
    await limiter.acquire(Priority.INTERACTIVE)
    ahead = asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE))
    for _ in range(5):
        await asyncio.sleep(0)
    # Second in the queue (122 s estimated, within its 150); then a 429 blocks the key.
    mine = asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE, max_wait=150.0))
    for _ in range(5):
        await asyncio.sleep(0)
    limiter.block_for(120.0)
    with pytest.raises(RateLimitWaitTooLong):
        await clock.drive(mine)
    assert clock.monotonic() <= 150.0  # refused within its wait, never sent after it
    await clock.drive(ahead)
    assert limiter.sent_in_window == 1


@pytest.mark.parametrize("end", ["token", "hold"])
async def test_a_queued_request_is_never_sent_after_its_token_or_hold_would_end(end: str) -> None:
    clock = TimerClock()
    limiter = limiter_of(clock, limit=1).for_key("k")
    await limiter.acquire(Priority.INTERACTIVE)
    ahead = asyncio.ensure_future(limiter.acquire(Priority.INTERACTIVE))
    for _ in range(5):
        await asyncio.sleep(0)
    ends = clock.time() + SEND_MARGIN + 100.0  # its own turn (61 s) fits; after the head, not

    async def mine() -> None:
        if end == "token":
            QUEUE_SEAT.set(QueueSeat(expires_at=ends))
        else:
            HOLD_EXPIRES_AT.set(ends)
        await limiter.acquire(Priority.INTERACTIVE, max_wait=800.0)

    waiting = asyncio.ensure_future(mine())
    with pytest.raises(RateLimitWaitTooLong):
        await clock.drive(waiting, ahead)
    assert clock.monotonic() <= 100.0
    assert limiter.sent_in_window == 1  # the head went at 61 s; the late one never did
