"""``python -m bot worker`` as it is composed (issue 23): what its poller is handed.

The worker runs in this process up to the point where its poller would start: the services
are built by ``bot.wiring`` as in production, Discord's login is skipped (a unit test opens
no connection) and the poller's arguments are kept. The end-to-end proof of a worker
(``/readyz``, ``/metrics``) is ``tests/e2e/test_scale_e2e.py``.
"""

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import discord
import pytest

import bot.__main__
from bot.render.parts import MessageParts
from bot.storage.models import Job
from tests.conftest import make_settings
from tests.test_schedule import make_job


async def run_worker_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    inside: Callable[[dict[str, Any]], Awaitable[None]],
) -> None:
    """Run ``run_worker`` with ``inside(poller's arguments)`` as its poller's run, then stop.

    ``inside`` runs while the worker's database and clients are open, as its poller would.
    """
    settings = make_settings(
        database_path=tmp_path / "bot.db", genapi_base_url="http://127.0.0.1:9/api/v1"
    )
    ran: list[bool] = []

    class Poller:
        last_pass_at = None

        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        async def run(self) -> None:
            await inside(self.kwargs)
            ran.append(True)
            raise asyncio.CancelledError  # as a SIGTERM: the worker stops

    async def login(self: discord.Client, token: str) -> None:
        return None

    monkeypatch.setattr(bot.__main__, "Poller", Poller)
    monkeypatch.setattr(discord.Client, "login", login)
    await bot.__main__.run_worker(settings)
    assert ran == [True]


async def test_a_workers_progress_edit_keeps_the_ready_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 23, E12: the worker's announcer had no schedule, so its progress edit replaced
    # the card the gateway posted (with `ready <t:...:R>`) by one without an estimate.
    edits: list[MessageParts] = []

    async def edit(job: Job, parts: MessageParts) -> None:
        edits.append(parts)

    async def progress(arguments: dict[str, Any]) -> None:
        announcer = arguments["announcer"]
        monkeypatch.setattr(announcer, "_edit_quietly", edit)
        await announcer.progress(make_job(created_at=1000.0), 1070.0)

    await run_worker_with(tmp_path, monkeypatch, progress)
    (parts,) = edits
    assert parts.card is not None
    assert " · ready <t:" in parts.card.text()


async def test_a_worker_counts_its_polls_and_deliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 23, E18: the worker's poller was built without metrics (no poll lag, no delivery
    # counters); they must be the registry its /metrics serves.
    handed: list[Any] = []

    async def keep(arguments: dict[str, Any]) -> None:
        handed.append(arguments.get("metrics"))

    await run_worker_with(tmp_path, monkeypatch, keep)
    (metrics,) = handed
    assert metrics is not None
    assert metrics.registry.get_sample_value("genbot_process_info", {"role": "worker"}) == 1
