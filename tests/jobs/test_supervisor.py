"""Background tasks survive what would have ended them: restarts with backoff, a locked database.

The backoff runs on a manual clock. The database lock is real: a second SQLite connection holds
``BEGIN IMMEDIATE`` as an operator's ``sqlite3`` session would; only the busy timeout is
shortened, so that each failed write takes milliseconds instead of 5 s.
"""

import asyncio
import itertools
import logging
import sqlite3
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from bot.clock import ManualClock
from bot.domain import JobStatus
from bot.jobs.supervisor import supervise
from bot.services.generation import Requester
from tests.support.poller import RecordingAnnouncer, make_poller, submit
from tests.support.stack import Stack


def starts_of(
    clock: ManualClock, failures: int
) -> tuple[list[float], Callable[[], Awaitable[None]]]:
    """A task that raises ``failures`` times, then returns; and the times it was started."""
    starts: list[float] = []

    async def run() -> None:
        starts.append(clock.monotonic())
        if len(starts) <= failures:
            raise RuntimeError(f"boom {len(starts)}")

    return starts, run


async def test_a_failing_task_restarts_with_a_doubling_capped_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock = ManualClock()
    starts, run = starts_of(clock, failures=9)
    with caplog.at_level(logging.ERROR, logger="bot.jobs.supervisor"):
        await supervise("poller", run, clock=clock)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert gaps == [1, 2, 4, 8, 16, 32, 60, 60, 60]
    errors = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert len(errors) == 9
    assert all("poller" in r.getMessage() and "error id" in r.getMessage() for r in errors)
    assert all(r.exc_info is not None for r in errors)  # the traceback is in the log
    ids = {r.args[1] for r in errors}  # type: ignore[index]
    assert len(ids) == 9


async def test_the_backoff_starts_over_after_a_healthy_run() -> None:
    clock = ManualClock()
    starts: list[float] = []

    async def run() -> None:
        starts.append(clock.monotonic())
        if len(starts) == 3:
            await clock.sleep(120)  # ran well for two minutes, then failed
        if len(starts) < 4:
            raise RuntimeError("boom")

    await supervise("sweep", run, clock=clock)
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert gaps == [1, 2, 120 + 1]


async def test_cancellation_stops_the_task_at_once() -> None:
    clock = ManualClock()
    starts = 0
    running = asyncio.Event()

    async def run() -> None:
        nonlocal starts
        starts += 1
        running.set()
        await asyncio.Event().wait()

    task = asyncio.create_task(supervise("catalogue-refresh", run, clock=clock))
    await running.wait()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert starts == 1


SHORT_BUSY_TIMEOUT = pytest.mark.parametrize(
    "stack_overrides", [{"database_busy_timeout_seconds": 0.02}]
)
"""``DATABASE_BUSY_TIMEOUT_SECONDS`` of 20 ms: a locked write fails at once."""


# SQLite's own lock (an operator's sqlite3 session on the file).
@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
@SHORT_BUSY_TIMEOUT
async def test_a_locked_database_delays_the_poller_but_never_stops_it(
    stack: Stack,
    who: Requester,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer)
    operator = sqlite3.connect(tmp_path / "bot.db", isolation_level=None)
    operator.execute("BEGIN IMMEDIATE")  # an operator's sqlite3 session, mid-transaction
    task = asyncio.create_task(supervise("poller", poller.run, clock=stack.clock))
    try:
        async with asyncio.timeout(20):
            while sum("database is locked" in r.getMessage() for r in caplog.records) < 3:
                await asyncio.sleep(0.01)
        assert not task.done()
        assert announcer.results == []
        operator.execute("ROLLBACK")
        async with asyncio.timeout(20):
            while not announcer.notified:
                await asyncio.sleep(0.01)
    finally:
        operator.close()
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED
    assert announcer.notified == [job.id]
    # An operator's lock is reported as such, not as a crash with a traceback.
    locked = [r for r in caplog.records if "database is locked" in r.getMessage()]
    assert all(r.exc_info is None for r in locked if r.name == "bot.jobs.supervisor")


# SQLite's own lock (an operator's sqlite3 session on the file).
@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
@SHORT_BUSY_TIMEOUT
async def test_a_poll_that_meets_a_locked_database_ends_cleanly_and_is_retried(
    stack: Stack,
    who: Requester,
    tmp_path: Path,
) -> None:
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    poller = make_poller(stack, announcer)
    stack.clock.advance(60)  # the video is done at the service and due here
    assert await poller.poll_due() == 1
    operator = sqlite3.connect(tmp_path / "bot.db", isolation_level=None)
    operator.execute("BEGIN IMMEDIATE")  # taken while the poll is on its way to the service
    try:
        (poll,) = [t for t in asyncio.all_tasks() if t.get_name() == f"poll-{job.id}"]
        (outcome,) = await asyncio.gather(poll, return_exceptions=True)
    finally:
        operator.close()
    assert outcome is None  # the poll's own error handling did not die on the lock
    assert poller.in_flight == 0
    stack.clock.advance(60)  # its lease ends: it is due again
    task = asyncio.create_task(supervise("poller", poller.run, clock=stack.clock))
    try:
        async with asyncio.timeout(20):
            while not announcer.notified:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
    assert announcer.notified == [job.id]
