"""The engines under the repositories (bot/storage/engine.py): what the storage tests of the
repositories do not see. Both engines unless the behaviour is one engine's."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import pytest

from bot.__main__ import quiet_library_loggers
from bot.domain import StorageUnavailableError
from bot.storage import Database


async def test_no_statement_or_parameter_reaches_the_log_even_at_debug(
    store: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLAlchemy's engine logs each statement with its parameters at INFO: a key's ciphertext."""
    quiet_library_loggers(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    await store.guilds.set_api_key(1, b"ciphertext-of-the-key", "WXYZ")
    async with store.transaction() as tx:
        await tx.meta.set("k", "v")
    assert (await store.guilds.settings(1)).api_key_last4 == "WXYZ"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "ciphertext-of-the-key" not in logged
    assert "INSERT" not in logged and "SELECT" not in logged


async def test_a_closed_database_answers_nothing(store: Database) -> None:
    await store.ping()
    await store.close()
    with pytest.raises(StorageUnavailableError):
        await store.ping()
    with pytest.raises(StorageUnavailableError):
        await store.meta.get("k")
    with pytest.raises(StorageUnavailableError):
        await store.meta.set("k", "v")
    await store.close()  # twice is harmless


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_a_transaction_cancelled_while_waiting_for_the_writer_leaves_it_usable(
    store: Database,
) -> None:
    """SQLite's single writer: a waiter cancelled in the queue takes nothing with it."""
    holding = asyncio.Event()
    release = asyncio.Event()

    async def hold() -> None:
        async with store.transaction() as tx:
            await tx.meta.set("a", "1")
            holding.set()
            await release.wait()

    async def wait_then_write() -> None:
        async with store.transaction() as tx:
            await tx.meta.set("b", "2")

    holder = asyncio.create_task(hold())
    await holding.wait()
    waiter = asyncio.create_task(wait_then_write())
    await asyncio.sleep(0)
    waiter.cancel()
    release.set()
    await holder
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert (await store.meta.get("a"), await store.meta.get("b")) == ("1", None)
    await store.meta.set("c", "3")
    assert await store.meta.get("c") == "3"


class _HeldReports:
    """Every SQLite connection opened meanwhile blocks its statements on ``ledger_daily``
    (a dashboard's report) until released, once armed (the migrations read that table too):
    a slow report, without waiting for real time."""

    def __init__(self) -> None:
        import threading

        self.release = threading.Event()
        self.lock = threading.Lock()
        self.held = 0
        self.most = 0
        self.armed = False

    def on_connect(self, dbapi_connection: Any, record: Any) -> None:
        dbapi_connection.set_trace_callback(self.trace)

    def trace(self, statement: str) -> None:
        if not self.armed or "FROM ledger_daily" not in statement:
            return
        if statement.startswith("EXPLAIN"):
            return
        with self.lock:
            self.held += 1
            self.most = max(self.most, self.held)
        try:
            self.release.wait(30)
        finally:
            with self.lock:
                self.held -= 1


async def test_slow_dashboard_reports_never_hold_up_the_bots_reads(tmp_path: Path) -> None:
    """Four reports (Overview's sums) are stuck in the database; a job lookup still answers,
    and at most two reports are in the database at once."""
    from sqlalchemy import Engine, event

    from bot.clock import ManualClock
    from bot.services.dashboard import DashboardService
    from tests.support.jobs import new_job

    held = _HeldReports()
    event.listen(Engine, "connect", held.on_connect)
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    held.armed = True
    try:
        job = await db.jobs.insert(new_job("t1"))
        dashboard = DashboardService(db, ManualClock())
        reports = [asyncio.create_task(dashboard.overview(5, None)) for _ in range(4)]
        loop = asyncio.get_running_loop()
        while held.held == 0:  # the first report reached the database (a thread)
            assert not all(t.done() for t in reports)
            await loop.run_in_executor(None, held.release.wait, 0.01)
        found = await asyncio.wait_for(db.jobs.get(job.id), 10)
        assert found is not None and found.id == job.id
        assert not any(t.done() for t in reports)  # the reports were still held meanwhile
        held.release.set()
        await asyncio.gather(*reports)
        assert held.most <= 2
    finally:
        held.release.set()
        event.remove(Engine, "connect", held.on_connect)
        await db.close()
