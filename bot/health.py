"""``/metrics``, ``/livez`` and ``/readyz`` over HTTP (``METRICS_PORT``, ``METRICS_HOST``).

Served by ``aiohttp.web``, which discord.py already brings, on the bot's own event loop: a
``/livez`` answer proves that loop runs. In a multi-process deployment each process serves its
own. The checks of ``/readyz`` (each one a reason in its 503 body):

* ``gateway``: the bot has received READY (``Client.is_ready``) and is not shutting down;
* ``database``: a trivial query answers within :data:`DATABASE_TIMEOUT` (1 s);
* ``poller``: the poller finished a pass within :data:`POLLER_STALE_SECONDS` (it passes at
  least every 5 s when idle, so a minute without one means it is stuck or dead); skipped in a
  gateway process with ``POLLER_ENABLED=false``, whose poller never runs (workers poll).
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from aiohttp import web

from bot.metrics import CONTENT_TYPE, Metrics

if TYPE_CHECKING:
    from bot.app import GenBot

log = logging.getLogger(__name__)

DATABASE_TIMEOUT = 1.0
"""Seconds the database has to answer the readiness query."""

POLLER_STALE_SECONDS = 60.0
"""A poller whose last pass is older than this, seconds, makes the bot not ready."""


@dataclass(frozen=True, slots=True)
class Readiness:
    """The answer of ``/readyz``.

    Attributes:
        ready: every check passed.
        reasons: ``{"gateway": "not connected", ...}``, one entry per failed check.
    """

    ready: bool
    reasons: dict[str, str]


async def check_readiness(
    bot: GenBot, ping: Callable[[], Awaitable[object]], *, now: float
) -> Readiness:
    """Run the three checks of ``/readyz`` (module docstring).

    Args:
        bot: the bot (gateway state and its poller).
        ping: a trivial database query.
        now: the bot's monotonic time, to compare with the poller's last pass.
    """
    reasons: dict[str, str] = {}
    if bot.closing or bot.is_closed():
        reasons["gateway"] = "shutting down"
    elif not bot.is_ready():
        reasons["gateway"] = "not connected to the Discord gateway (no READY yet)"
    try:
        async with asyncio.timeout(DATABASE_TIMEOUT):
            await ping()
    except TimeoutError:
        reasons["database"] = f"no answer within {DATABASE_TIMEOUT:.0f} s"
    except Exception as exc:
        reasons["database"] = f"query failed: {type(exc).__name__}"
    if not bot.services.settings.poller_enabled:
        return Readiness(not reasons, reasons)
    last = bot.poller.last_pass_at
    if last is None:
        reasons["poller"] = "has not run yet"
    elif now - last > POLLER_STALE_SECONDS:
        reasons["poller"] = f"last ran {now - last:.0f} s ago"
    return Readiness(not reasons, reasons)


class HealthServer:
    """The HTTP server of ``/metrics``, ``/livez`` and ``/readyz``.

    Args:
        bot: the bot whose state is reported.
        metrics: the process's metrics.
        ping: a trivial database query for ``/readyz``.
        refresh: called before each ``/metrics`` answer to read the gauges kept elsewhere
            (jobs by state from the database); its failure is logged, the scrape still served.
    """

    def __init__(
        self,
        bot: GenBot,
        metrics: Metrics,
        *,
        ping: Callable[[], Awaitable[object]],
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> None:
        self._bot = bot
        self._metrics = metrics
        self._ping = ping
        self._refresh = refresh
        self._runner: web.AppRunner | None = None
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        app.router.add_get("/livez", self._livez)
        app.router.add_get("/readyz", self._readyz)
        self._app = app

    async def start(self, host: str, port: int) -> str:
        """Listen on ``host``:``port`` (0 picks a free port) and return the base URL.

        Raises:
            OSError: the address is in use or cannot be bound.
        """
        runner = web.AppRunner(self._app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, host, port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self._runner = runner
        bound_host, bound_port = runner.addresses[0][:2]
        return f"http://{bound_host}:{bound_port}"

    async def stop(self) -> None:
        """Stop listening."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def readiness(self) -> Readiness:
        """The current answer of ``/readyz``."""
        return await check_readiness(
            self._bot, self._ping, now=self._bot.services.clock.monotonic()
        )

    async def _livez(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, request: web.Request) -> web.Response:
        readiness = await self.readiness()
        if readiness.ready:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reasons": readiness.reasons}, status=503)

    async def _serve_metrics(self, request: web.Request) -> web.Response:
        metrics = self._metrics
        # One shard per process today (Client.latency); an AutoShardedClient would give
        # ``latencies``, one per shard.
        latency = self._bot.latency
        if math.isfinite(latency):  # NaN or inf before the first heartbeat
            shard = self._bot.shard_id or 0
            metrics.gateway_latency.labels(str(shard)).set(latency)
        metrics.ready.set(1 if (await self.readiness()).ready else 0)
        if self._refresh is not None:
            try:
                async with asyncio.timeout(DATABASE_TIMEOUT):
                    await self._refresh()
            except Exception as exc:
                log.warning("metrics: job counts not refreshed (%s)", type(exc).__name__)
        return web.Response(body=metrics.render(), headers={"Content-Type": CONTENT_TYPE})


JOB_STATES = ("pending", "undelivered")
"""``genbot_jobs`` states: being made, and finished but not yet shown."""


async def refresh_job_counts(
    metrics: Metrics, counts: Callable[[], Awaitable[dict[tuple[str, str], int]]]
) -> None:
    """Set ``genbot_jobs`` from ``counts()``, ``{(state, kind): number}``; 0 where absent."""
    rows = await counts()
    for state in JOB_STATES:
        for kind in ("image", "video"):
            metrics.jobs.labels(state, kind).set(rows.get((state, kind), 0))
    for (state, kind), number in rows.items():
        metrics.jobs.labels(state, kind).set(number)
