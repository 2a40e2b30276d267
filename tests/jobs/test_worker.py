"""``python -m bot worker`` as it is composed: what its poller is handed.

The worker runs in this process up to the point where its poller would start: the services
are built by ``bot.wiring`` as in production, Discord's login is skipped (a unit test opens
no connection) and the poller's arguments are kept. The end-to-end proof of a worker
(``/readyz``, ``/metrics``) is ``tests/e2e/test_scale_e2e.py``.
"""

import asyncio
import dataclasses
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import discord
import pytest
from pydantic import SecretStr

import bot.__main__
import bot.wiring
from bot.discord.render.admin import missing_key_notice
from bot.discord.render.parts import MessageParts
from bot.domain import DeliveryRoute, Job, JobStatus
from bot.jobs.announcer import Attempt, Renew
from bot.jobs.poller import Poller
from bot.ops.metrics import Metrics
from bot.services.generation import Requester
from bot.services.keys import KeyUnknown
from tests.support.jobs import make_job
from tests.support.poller import RecordingAnnouncer, make_poller, submit
from tests.support.settings import make_settings
from tests.support.stack import Stack


async def run_worker_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    inside: Callable[[dict[str, Any]], Awaitable[None]],
    **overrides: Any,
) -> None:
    """Run ``run_worker`` with ``inside(poller's arguments)`` as its poller's run, then stop.

    ``inside`` runs while the worker's database and clients are open, as its poller would.
    ``overrides``: settings besides the database and the API's (unreachable) address.
    """
    settings = make_settings(
        database_path=tmp_path / "bot.db", genapi_base_url="http://127.0.0.1:9/api/v1", **overrides
    )
    ran: list[bool] = []
    failed: list[Exception] = []

    class Poller:
        last_pass_at = None

        def __init__(self, **kwargs: Any) -> None:
            self.kwargs = kwargs

        async def run(self) -> None:
            try:
                await inside(self.kwargs)
            except Exception as exc:  # raised below: the supervisor would restart it forever
                failed.append(exc)
            ran.append(True)
            raise asyncio.CancelledError  # as a SIGTERM: the worker stops

    async def login(self: discord.Client, token: str) -> None:
        return None

    monkeypatch.setattr(bot.wiring, "Poller", Poller)
    monkeypatch.setattr(discord.Client, "login", login)
    await bot.__main__.run_worker(settings)
    if failed:
        raise failed[0]
    assert ran == [True]


async def test_a_workers_progress_edit_keeps_the_ready_estimate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's announcer had no schedule, so its progress edit replaced
    # the card the gateway posted (with `ready <t:...:R>`) by one without an estimate.
    edits: list[MessageParts] = []

    async def edit(job: Job, parts: MessageParts) -> None:
        edits.append(parts)

    async def progress(arguments: dict[str, Any]) -> None:
        announcer = arguments["announcer"].inner  # inside the DM-notice wrapper
        monkeypatch.setattr(announcer, "_edit_quietly", edit)
        # A job with its card posted (a job without one has nothing to edit).
        job = dataclasses.replace(make_job(created_at=1000.0), message_id=77)
        await announcer.progress(job, 1070.0)

    await run_worker_with(tmp_path, monkeypatch, progress)
    (parts,) = edits
    assert parts.card is not None
    assert " · ready <t:" in parts.card.text()


async def test_a_worker_counts_its_polls_and_deliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The worker's poller was built without metrics (no poll lag, no delivery
    # counters); they must be the registry its /metrics serves.
    handed: list[Any] = []

    async def keep(arguments: dict[str, Any]) -> None:
        handed.append(arguments.get("metrics"))

    await run_worker_with(tmp_path, monkeypatch, keep)
    (metrics,) = handed
    assert metrics is not None
    assert metrics.registry.get_sample_value("genbot_process_info", {"role": "worker"}) == 1


class _HeldAnnouncer(RecordingAnnouncer):
    """A worker whose delivery hangs (a slow Discord) until ``release`` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.release = asyncio.Event()

    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        await self.release.wait()  # never renews: its lease runs out
        return await super().deliver(job, route, renew)


async def until_idle(*pollers: Poller) -> None:
    async with asyncio.timeout(10):
        while any(poller.in_flight for poller in pollers):
            await asyncio.sleep(0.01)


async def test_a_worker_counts_the_leases_it_lost(stack: Stack, who: Requester) -> None:
    # Lease churn: a worker whose delivery outlived its lease is fenced (another
    # worker delivered the result, the requester is pinged once); its /metrics says so.
    (job,) = await submit(stack, who)
    await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, ("https://x/v.mp4",), None, 0.0)
    slow, fast = _HeldAnnouncer(), RecordingAnnouncer()
    slow_metrics, fast_metrics = Metrics(role="worker"), Metrics(role="worker")
    first = make_poller(stack, slow, delivery_lease=300.0, metrics=slow_metrics)  # type: ignore[arg-type]
    second = make_poller(stack, fast, delivery_lease=300.0, metrics=fast_metrics)  # type: ignore[arg-type]
    assert await first.deliver_due() == 1
    stack.clock.advance(301.0)  # the first worker's lease ran out: the job is due again
    assert await second.deliver_due() == 1
    await until_idle(second)
    slow.release.set()
    await until_idle(first)
    assert fast.notified == [job.id] and slow.notified == []
    lost = "genbot_leases_lost_total"
    assert slow_metrics.registry.get_sample_value(lost, {"what": "delivery"}) == 1
    assert fast_metrics.registry.get_sample_value(lost, {"what": "delivery"}) == 0


async def test_a_worker_tells_the_admin_channel_once_of_a_job_on_a_key_known_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The gateway posts this notice; a worker, which polls the jobs when POLLER_ENABLED=false,
    # only logged it, so the admins of a server served by workers were never told.
    posted: list[tuple[int, str]] = []

    async def send(self: discord.PartialMessageable, content: str, **kwargs: Any) -> None:
        posted.append((self.id, content))

    monkeypatch.setattr(discord.PartialMessageable, "send", send)
    guild_id, admin_channel = 4242, 777

    async def poll_on_a_vanished_key(arguments: dict[str, Any]) -> None:
        await arguments["db"].guilds.set_admin_channel(guild_id, admin_channel)
        for _ in range(3):  # every poll of the job meets the missing key
            with pytest.raises(KeyUnknown):
                await arguments["keys"].resolve_fingerprint(guild_id, "sk-…gone")

    await run_worker_with(
        tmp_path,
        monkeypatch,
        poll_on_a_vanished_key,
        genapi_api_key=SecretStr("sk-the-current-default-key-0000"),
    )
    assert posted == [(admin_channel, missing_key_notice("sk-…gone"))]
