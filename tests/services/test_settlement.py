"""Settlement under a failing database: retried with backoff, else spooled and replayed once."""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import sqlite3
import stat
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from decimal import Decimal
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from sqlalchemy.exc import OperationalError

from bot.clock import ManualClock
from bot.domain import BillingMode, Charge, Kind, NewJob
from bot.errors import SettlementDeferred, user_message
from bot.services.billing import Billing
from bot.services.credits import MemberCredits
from bot.services.guard import SpendGuard
from bot.services.settlement_spool import SettlementSpool, SpooledSettlement
from bot.storage import Repositories
from bot.storage.database import Database as SqlDatabase
from bot.storage.transient import is_transient
from tests.support.billing import GUILD, charge_for, settings


def database_is_locked(tmp_path: Path) -> OperationalError:
    """SQLite's own "database is locked" (SQLITE_BUSY), as SQLAlchemy raises it."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    other = sqlite3.connect(path, timeout=0, isolation_level=None)
    try:
        other.execute("BEGIN IMMEDIATE")
    except sqlite3.OperationalError as exc:
        return OperationalError("BEGIN IMMEDIATE", {}, exc)
    finally:
        holder.close()
        other.close()
    raise AssertionError("the second writer was not refused")


def connection_dropped() -> Exception:
    return asyncpg.exceptions.ConnectionDoesNotExistError(
        "connection was closed in the middle of operation"
    )


class FailingDatabase:
    """A database whose next ``failures`` write transactions raise ``error()``.

    ``lose_commit``: the next transaction commits, then raises as a connection dropped while
    its COMMIT was answered would.
    """

    def __init__(self, db: SqlDatabase, error: Callable[[], Exception]) -> None:
        self._db = db
        self._error = error
        self.failures = 0
        self.lose_commit = False
        self.transactions = 0
        # Set: the next transaction waits for it (a hung connection) after ``entered`` is set.
        self.hang: asyncio.Event | None = None
        self.entered = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._db, name)

    @contextlib.asynccontextmanager
    async def _faulty(self) -> AsyncIterator[None]:
        """One write transaction, as the faults set say: hung, failed, or its commit lost."""
        self.transactions += 1
        if self.hang is not None:
            hang, self.hang = self.hang, None
            self.entered.set()
            await hang.wait()
        if self.failures > 0:
            self.failures -= 1
            raise self._error()
        yield
        if self.lose_commit:
            self.lose_commit = False
            raise self._error()

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[Repositories]:
        async with self._faulty(), self._db.transaction() as tx:
            yield tx

    @property
    def ledger(self) -> Any:
        """The ledger, whose settlement (one transaction of its own) meets the same faults."""
        return FailingLedger(self, self._db.ledger)


class FailingLedger:
    """:class:`FailingDatabase`'s ledger: ``settle`` is one of its write transactions."""

    def __init__(self, failing: FailingDatabase, ledger: Any) -> None:
        self._failing = failing
        self._ledger = ledger

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ledger, name)

    async def settle(self, settlement: Any) -> Any:
        async with self._failing._faulty():
            return await self._ledger.settle(settlement)


@pytest.fixture(params=["sqlite_busy", "pg_dropped"])
def failing(request: pytest.FixtureRequest, store: SqlDatabase, tmp_path: Path) -> FailingDatabase:
    busy = database_is_locked(tmp_path)
    error = (lambda: busy) if request.param == "sqlite_busy" else connection_dropped
    return FailingDatabase(store, error)


@pytest.fixture
def spool(tmp_path: Path) -> SettlementSpool:
    return SettlementSpool(tmp_path / "data" / "bot.settlements.jsonl")


def billing_on(
    db: Any, clock: ManualClock, spool: SettlementSpool, *, attempts: int = 6
) -> Billing:
    return Billing(db, settings(), clock, spool=spool, settle_attempts=attempts)


async def reserve_text(billing: Billing) -> Any:
    return await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.TEXT, model="acme/chat", cost_cents=3
    )


def new_job(clock: ManualClock, task_id: str = "task-1") -> NewJob:
    return NewJob(
        task_id=task_id,
        provider="p",
        poll_url="/video/task-1",
        kind=Kind.VIDEO,
        model="vid/t2v",
        guild_id=GUILD,
        channel_id=7,
        message_id=None,
        user_id=1,
        prompt_summary="a fox",
        details={"duration": 5},
        cost_cents=Decimal("0.35"),
        key_fingerprint="fp-default",
        created_at=clock.time(),
        next_poll_at=clock.time() + 30,
    )


async def ledger_rows(store: SqlDatabase) -> list[Decimal]:
    return [row.cents for row in await store.ledger.usage(GUILD, 0.0)]


def test_busy_sqlite_and_dropped_postgresql_connections_are_transient(tmp_path: Path) -> None:
    assert is_transient(database_is_locked(tmp_path))
    assert is_transient(connection_dropped())
    assert is_transient(asyncpg.exceptions.SerializationError("could not serialize"))
    assert not is_transient(ValueError("a bug"))
    assert not is_transient(asyncpg.exceptions.UniqueViolationError("duplicate key"))


async def test_a_transient_error_at_settlement_is_retried_until_it_passes(
    failing: FailingDatabase,
    store: SqlDatabase,
    clock: ManualClock,
    spool: SettlementSpool,
) -> None:
    billing = Billing(failing, settings(), clock)  # retried with or without a spool
    reservation = await reserve_text(billing)
    failing.failures = 3
    started = clock.monotonic()
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert failing.transactions == 1 + 4  # the reservation, then three failed tries and one
    assert clock.monotonic() - started >= 0.25 + 0.5 + 1.0  # with backoff between them
    report = await billing.report(GUILD, 1)
    assert (report.today_cents, report.reserved_cents) == (2, 0)
    assert not spool.pending()


async def test_a_commit_lost_with_its_connection_is_not_recorded_twice(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(failing, clock, spool)
    reservation = await reserve_text(billing)
    failing.lose_commit = True  # committed, but the answer to COMMIT never came
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert await ledger_rows(store) == [2]


async def test_a_text_charge_still_failing_is_spooled_and_the_next_start_records_it_once(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(failing, clock, spool)
    reservation = await reserve_text(billing)
    failing.failures = 100
    # The member gets the answer: the settlement returns as if recorded.
    assert await billing.settle(reservation, charge_for(reservation, 2, clock)) is None
    assert spool.pending()
    assert await ledger_rows(store) == []
    # The next start, on a database that answers again.
    restarted = billing_on(store, clock, spool)
    assert await restarted.replay_spool() == 1
    assert await ledger_rows(store) == [2]
    assert not spool.pending()
    assert await restarted.replay_spool() == 0
    assert await ledger_rows(store) == [2]


async def test_a_replay_interrupted_before_the_spool_was_rewritten_records_nothing_twice(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(failing, clock, spool)
    text = await reserve_text(billing)
    video = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model="vid/t2v", cost_cents=1
    )
    failing.failures = 100
    await billing.settle(text, charge_for(text, 2, clock))
    with pytest.raises(SettlementDeferred):
        await billing.settle(
            video, charge_for(video, 1, clock, task_id="task-1"), new_job(clock, "task-1")
        )
    saved = spool.path.read_text()
    assert len(saved.splitlines()) == 2
    await billing_on(store, clock, spool).replay_spool()
    spool.path.write_text(saved)  # as if killed after the commits, before the rewrite
    await billing_on(store, clock, spool).replay_spool()
    assert sorted(await ledger_rows(store)) == [1, 2]
    job = await store.jobs.by_task("fp-default", Kind.VIDEO, "task-1")
    assert job is not None and job.prompt_summary == "a fox"
    assert len(await store.jobs.recent(GUILD, user_id=None, limit=10)) == 1


async def test_a_spooled_job_tells_the_member_it_went_through(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(failing, clock, spool)
    video = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model="vid/t2v", cost_cents=1
    )
    failing.failures = 100
    with pytest.raises(SettlementDeferred) as deferred:
        await billing.settle(video, charge_for(video, 1, clock, task_id="t"), new_job(clock, "t"))
    sentence = user_message(deferred.value)
    assert sentence.startswith("Your request went through (it was charged)")
    assert "fail" not in sentence and "wrong" not in sentence


async def test_without_a_usable_spool_the_error_is_raised_and_the_settlement_logged(
    failing: FailingDatabase,
    clock: ManualClock,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    blocked = tmp_path / "not-a-folder"
    blocked.write_text("")
    billing = billing_on(failing, clock, SettlementSpool(blocked / "spool.jsonl"), attempts=2)
    reservation = await reserve_text(billing)
    failing.failures = 100
    charge: Charge = charge_for(reservation, 2, clock)
    with pytest.raises(
        (OperationalError, asyncpg.exceptions.ConnectionDoesNotExistError)
    ) as raised:
        await billing.settle(reservation, charge)
    assert is_transient(raised.value)
    assert "neither recorded" in caplog.text and '"cost_cents":"2"' in caplog.text


class SleepHook(ManualClock):
    """A manual clock that runs ``hook`` (once each) whenever something sleeps on it."""

    def __init__(self) -> None:
        super().__init__()
        self.hooks: list[Callable[[], Awaitable[None]]] = []

    async def sleep(self, seconds: float) -> None:
        while self.hooks:
            await self.hooks.pop(0)()
        await super().sleep(seconds)


class HeldClock(ManualClock):
    """A manual clock whose sleeps never end (until cancelled); ``sleeping`` says one began."""

    def __init__(self) -> None:
        super().__init__()
        self.sleeping = asyncio.Event()

    async def sleep(self, seconds: float) -> None:
        self.sleeping.set()
        await asyncio.Event().wait()


async def test_the_spool_holds_a_settlement_before_its_first_retry_waits(
    failing: FailingDatabase, store: SqlDatabase, spool: SettlementSpool
) -> None:
    clock = SleepHook()
    billing = billing_on(failing, clock, spool)
    reservation = await reserve_text(billing)
    seen: list[bool] = []

    async def look() -> None:
        seen.append(spool.pending())

    clock.hooks.append(look)
    failing.failures = 1
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert seen == [True]  # on disk while the retry waited
    assert await ledger_rows(store) == [2]
    assert not spool.pending()  # the retry recorded it: the entry is gone again
    assert await billing_on(store, clock, spool).replay_spool() == 0


async def test_a_retry_decides_already_recorded_by_the_ledger_not_by_the_reservation(
    failing: FailingDatabase, store: SqlDatabase, spool: SettlementSpool
) -> None:
    clock = SleepHook()
    billing = billing_on(failing, clock, spool)
    reservation = await reserve_text(billing)

    async def sweep() -> None:  # the reservation is gone, nothing was recorded
        await store.ledger.delete_reservation(reservation.id)

    clock.hooks.append(sweep)
    failing.failures = 1
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert await ledger_rows(store) == [2]


async def test_a_replay_during_a_retrys_backoff_records_the_charge_once(
    failing: FailingDatabase, store: SqlDatabase, spool: SettlementSpool
) -> None:
    clock = SleepHook()
    billing = billing_on(failing, clock, spool)
    reservation = await reserve_text(billing)

    async def replay() -> None:  # the minute's replay, while the reservation is still held
        await billing_on(store, clock, spool).replay_spool()

    clock.hooks.append(replay)
    failing.failures = 1
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert await ledger_rows(store) == [2]
    assert (await billing.report(GUILD, 1)).reserved_cents == 0


@pytest.mark.parametrize("where", ["backoff", "first try"])
async def test_a_settlement_cancelled_in_a_database_incident_is_spooled_and_replayed(
    failing: FailingDatabase, store: SqlDatabase, spool: SettlementSpool, where: str
) -> None:
    clock = HeldClock()
    billing = billing_on(failing, clock, spool)
    video = await billing.reserve(
        guild_id=GUILD, user_id=1, kind=Kind.VIDEO, model="vid/t2v", cost_cents=1
    )
    if where == "backoff":
        failing.failures = 100
        started = clock.sleeping
    else:
        failing.hang = asyncio.Event()
        started = failing.entered
    settling = asyncio.create_task(
        billing.settle(video, charge_for(video, 1, clock, task_id="t"), new_job(clock, "t"))
    )
    await started.wait()
    settling.cancel()  # SIGTERM: the shutdown cancels the command
    with pytest.raises(asyncio.CancelledError):
        await settling
    assert spool.pending()
    restarted = billing_on(store, clock, spool)
    assert await restarted.replay_spool() == 1
    assert await ledger_rows(store) == [1]
    job = await store.jobs.by_task("fp-default", Kind.VIDEO, "t")
    assert job is not None and job.prompt_summary == "a fox"


def entry(clock: ManualClock, cost: int = 2) -> SpooledSettlement:
    charge = Charge(
        guild_id=GUILD,
        channel_id=7,
        user_id=1,
        kind=Kind.TEXT,
        model="acme/chat",
        task_id=None,
        cost_cents=Decimal(cost),
        remaining_credits_cents=None,
        key_fingerprint="fp-default",
        at=clock.time(),
    )
    return SpooledSettlement.new(GUILD, charge, None, None)


async def test_a_spool_lock_held_elsewhere_does_not_block_the_event_loop(
    failing: FailingDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    spool.path.parent.mkdir(parents=True)
    other = spool.path.open("a")  # another process appending or replaying
    fcntl.flock(other.fileno(), fcntl.LOCK_EX)
    # Safety net for the old code, whose flock stopped the loop: let go after 3 s.
    rescue = threading.Timer(3.0, lambda: fcntl.flock(other.fileno(), fcntl.LOCK_UN))
    rescue.start()
    try:
        billing = billing_on(failing, clock, spool, attempts=1)
        reservation = await reserve_text(billing)
        failing.failures = 100
        settling = asyncio.create_task(
            billing.settle(reservation, charge_for(reservation, 2, clock))
        )
        for _ in range(20):  # the loop turns while the settlement waits for the lock
            await asyncio.sleep(0)
        assert not rescue.finished.is_set(), "the event loop waited for the lock"
        assert not settling.done()  # waiting for the lock, in a thread
        fcntl.flock(other.fileno(), fcntl.LOCK_UN)
        assert await settling is None
        assert spool.pending()
    finally:
        rescue.cancel()
        other.close()


async def test_a_replay_does_not_hold_the_spool_while_it_waits_for_the_database(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    await asyncio.to_thread(spool.append, entry(clock))
    gate = failing.hang = asyncio.Event()
    replaying = asyncio.create_task(billing_on(failing, clock, spool).replay_spool())
    await failing.entered.wait()
    late = entry(clock, 3)
    with spool.path.open("a") as other:  # another process appends meanwhile
        fcntl.flock(other.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # BlockingIOError if held
        other.write(late.to_json() + "\n")
    gate.set()
    assert await replaying == 1
    assert await ledger_rows(store) == [2]
    # The entry appended during the replay stays for the next one.
    assert [e.id for e in await asyncio.to_thread(spool.read)] == [late.id]


def test_the_first_append_fsyncs_the_spools_folder(
    spool: SettlementSpool, clock: ManualClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(stat.S_ISDIR(os.fstat(fd).st_mode))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    spool.append(entry(clock))
    assert synced.count(True) == 1  # the new file's directory entry is durable too
    synced.clear()
    spool.append(entry(clock))
    assert synced == [False]


async def hours_of(store: SqlDatabase) -> int:
    """The server's spend in the spend guard's hourly table, micro-cents."""
    return sum((await store.guard.hourly(f"g{GUILD}", 0, 10**10)).values())


async def test_a_charge_settled_again_is_counted_once_in_the_guards_hours(
    store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(store, clock, spool)
    billing.set_watcher(SpendGuard(store, clock, billing).after_charge)
    reservation = await reserve_text(billing)
    charge = charge_for(reservation, 2, clock, task_id="task-9")
    await billing.record_charge(charge)
    await billing.record_charge(charge)  # the same task settled again: already recorded
    assert await ledger_rows(store) == [2]
    assert await hours_of(store) == 2_000_000  # 2 cents, once


async def test_a_spooled_charge_replayed_is_counted_once_in_the_guards_hours(
    failing: FailingDatabase, store: SqlDatabase, clock: ManualClock, spool: SettlementSpool
) -> None:
    billing = billing_on(failing, clock, spool)
    billing.set_watcher(SpendGuard(store, clock, billing).after_charge)
    reservation = await reserve_text(billing)
    failing.failures = 100  # every try fails: spooled, recorded by the next replays
    await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert spool.pending()
    await billing_on(store, clock, spool).replay_spool()
    await billing_on(store, clock, spool).replay_spool()
    assert await ledger_rows(store) == [2]
    assert await hours_of(store) == 2_000_000


async def test_a_guard_meeting_a_locked_database_after_a_charge_logs_one_line(
    store: SqlDatabase,
    clock: ManualClock,
    spool: SettlementSpool,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # The charge is committed; the spend guard's own statements then find the database locked
    # (an operator's session, a shutdown's last seconds): one clean line, no traceback.
    busy = database_is_locked(tmp_path)

    async def guard(charge: Charge, allowances: Any) -> None:
        raise busy

    billing = billing_on(store, clock, spool)
    billing.set_watcher(guard)
    reservation = await reserve_text(billing)
    with caplog.at_level("WARNING", logger="bot.services.billing"):
        await billing.settle(reservation, charge_for(reservation, 2, clock))
    assert await ledger_rows(store) == [2]
    (record,) = [r for r in caplog.records if "spend guard" in r.getMessage()]
    assert record.exc_info is None
    assert "database is locked" in record.getMessage()
    assert "\n" not in record.getMessage()


# -- a member's balance pays: taken once, also through the spool ---------------------------------


@pytest.mark.parametrize("hold_swept", [False, True])
async def test_a_spooled_settlement_paid_by_a_balance_takes_it_from_the_balance_once(
    failing: FailingDatabase,
    store: SqlDatabase,
    clock: ManualClock,
    spool: SettlementSpool,
    hold_swept: bool,
) -> None:
    config = settings(credit_packs="1100000000000000001=500")

    def members(db: Any) -> Billing:
        return Billing(
            db, config, clock, spool=spool, credits=MemberCredits(config.credit_pack_cents, 0)
        )

    await store.credits.set_mode(GUILD, BillingMode.MEMBERS)
    async with store.transaction() as tx:
        await tx.credits.credit_purchase(
            entitlement_id=1, sku_id=1100000000000000001, user_id=1, cents=500, at=clock.time()
        )
    billing = members(failing)
    reservation = await reserve_text(billing)
    failing.failures = 100
    assert await billing.settle(reservation, charge_for(reservation, 2, clock)) is None
    assert spool.pending()
    assert await store.credits.balance(1) == 500  # nothing recorded yet
    if hold_swept:  # the next start comes after the hold expired and was swept
        clock.advance(3600)
        await store.credits.expire_holds(clock.time())
    saved = spool.path.read_text()
    assert await members(store).replay_spool() == 1
    assert await ledger_rows(store) == [2]
    assert await store.credits.balance(1) == 498
    assert await store.credits.held(1, 0.0) == 0
    spool.path.write_text(saved)  # as if killed after the commit, before the rewrite
    assert await members(store).replay_spool() == 1
    assert await ledger_rows(store) == [2]
    assert await store.credits.balance(1) == 498
    paid, cost = await store.credits.spent_since(1, 0.0)
    assert (paid, cost) == (2, 2)
