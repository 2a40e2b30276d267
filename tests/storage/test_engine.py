"""The engines under the repositories (bot/storage/engine.py): what the storage tests of the
repositories do not see. Both engines unless the behaviour is one engine's."""

from __future__ import annotations

import asyncio
import logging

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
