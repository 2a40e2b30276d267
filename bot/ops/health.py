"""``/metrics``, ``/livez`` and ``/readyz`` over HTTP (``METRICS_PORT``, ``METRICS_HOST``).

Served by ``aiohttp.web``, which discord.py already brings, on the process's own event loop: a
``/livez`` answer proves that loop runs. In a multi-process deployment each process, gateway or
``python -m bot worker``, serves its own (one registry per process, docs/operations.md). The
checks of a gateway's ``/readyz`` (:func:`check_readiness`; each one a reason in its 503 body):

* ``gateway``: the bot has received READY (``Client.is_ready``) and is not shutting down;
* ``database``: a trivial query answers within :data:`DATABASE_TIMEOUT` (1 s);
* ``poller``: the poller finished a pass within :data:`POLLER_STALE_SECONDS` (it passes at
  least every 5 s when idle, so a minute without one means it is stuck or dead); skipped in a
  gateway process with ``POLLER_ENABLED=false``, whose poller never runs (workers poll).

A worker (:func:`check_worker_readiness`) has no gateway: it is ready when it is not stopping,
the database answers, and its lease loop (the poller, which claims due jobs and deliveries
under leases) finished a pass within :data:`POLLER_STALE_SECONDS`.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from aiohttp import web

from bot.clock import Clock
from bot.config import Settings, SettingsError
from bot.ops.metrics import CONTENT_TYPE, Metrics

log = logging.getLogger(__name__)


class LeaseLoop(Protocol):
    """What the checks read of a poller (:class:`bot.jobs.poller.Poller`)."""

    @property
    def last_pass_at(self) -> float | None:
        """When its last pass ended (monotonic seconds), or None before the first."""


class GatewayServices(Protocol):
    """What the checks read of a gateway's services (:class:`bot.wiring.Services`)."""

    @property
    def settings(self) -> Settings:
        """The process's settings (``POLLER_ENABLED``)."""

    @property
    def clock(self) -> Clock:
        """The process's clock (its monotonic time)."""


class Gateway(Protocol):
    """What the checks read of a gateway process's bot (:class:`bot.discord.bot.GenBot`).

    A port, so that operations import nothing of the Discord adapter or the job runner: the
    bot is handed in by ``python -m bot``.
    """

    @property
    def closing(self) -> bool:
        """True once a graceful shutdown began."""

    @property
    def latency(self) -> float:
        """The gateway's heartbeat latency, seconds (NaN or inf before the first heartbeat)."""

    @property
    def shard_id(self) -> int | None:
        """The shard whose latency is reported."""

    @property
    def poller(self) -> LeaseLoop:
        """The bot's poller."""

    @property
    def services(self) -> GatewayServices:
        """The bot's services."""

    def is_closed(self) -> bool:
        """True once the client's connection is closed."""

    def is_ready(self) -> bool:
        """True once the gateway's READY was received."""


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


async def _database_reason(ping: Callable[[], Awaitable[object]]) -> str | None:
    """Why the database check fails (``ping`` a trivial query), or None when it answers."""
    try:
        async with asyncio.timeout(DATABASE_TIMEOUT):
            await ping()
    except TimeoutError:
        return f"no answer within {DATABASE_TIMEOUT:.0f} s"
    except Exception as exc:
        return f"query failed: {type(exc).__name__}"
    return None


def _poller_reason(last_pass_at: float | None, now: float) -> str | None:
    """Why the poller check fails, from its last pass (monotonic seconds), or None."""
    if last_pass_at is None:
        return "has not run yet"
    if now - last_pass_at > POLLER_STALE_SECONDS:
        return f"last ran {now - last_pass_at:.0f} s ago"
    return None


async def check_readiness(
    bot: Gateway, ping: Callable[[], Awaitable[object]], *, now: float
) -> Readiness:
    """Run the three checks of a gateway's ``/readyz`` (module docstring).

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
    if (database := await _database_reason(ping)) is not None:
        reasons["database"] = database
    if bot.services.settings.poller_enabled:
        poller = _poller_reason(bot.poller.last_pass_at, now)
        if poller is not None:
            reasons["poller"] = poller
    return Readiness(not reasons, reasons)


async def check_worker_readiness(
    poller: LeaseLoop,
    ping: Callable[[], Awaitable[object]],
    *,
    now: float,
    stopping: bool,
) -> Readiness:
    """Run the checks of a worker's ``/readyz``: ``worker``, ``database``, ``poller``.

    Args:
        poller: the worker's poller (its lease loop).
        ping: a trivial database query.
        now: the worker's monotonic time, to compare with the poller's last pass.
        stopping: the worker received SIGTERM or SIGINT, or its poller ended.
    """
    reasons: dict[str, str] = {}
    if stopping:
        reasons["worker"] = "shutting down"
    if (database := await _database_reason(ping)) is not None:
        reasons["database"] = database
    if (lease_loop := _poller_reason(poller.last_pass_at, now)) is not None:
        reasons["poller"] = lease_loop
    return Readiness(not reasons, reasons)


class HealthServer:
    """The HTTP server of ``/metrics``, ``/livez`` and ``/readyz``, for a gateway or a worker.

    Built by :meth:`for_gateway` or :meth:`for_worker`.

    Args:
        metrics: the process's metrics.
        readiness: the checks of ``/readyz`` (:func:`check_readiness`,
            :func:`check_worker_readiness`).
        refresh: called before each ``/metrics`` answer to read the gauges kept elsewhere
            (jobs by state from the database); its failure is logged, the scrape still served.
        observe: called before each ``/metrics`` answer to read the process's own state
            (a gateway's heartbeat latency); must not raise.
    """

    def __init__(
        self,
        metrics: Metrics,
        *,
        readiness: Callable[[], Awaitable[Readiness]],
        refresh: Callable[[], Awaitable[None]] | None = None,
        observe: Callable[[], None] | None = None,
    ) -> None:
        self._metrics = metrics
        self._readiness = readiness
        self._refresh = refresh
        self._observe = observe
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

    @classmethod
    def for_gateway(
        cls,
        bot: Gateway,
        metrics: Metrics,
        *,
        ping: Callable[[], Awaitable[object]],
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> HealthServer:
        """The server of a gateway process (``python -m bot``): :func:`check_readiness`."""

        async def readiness() -> Readiness:
            return await check_readiness(bot, ping, now=bot.services.clock.monotonic())

        def observe() -> None:
            # One shard per process today (Client.latency); an AutoShardedClient would give
            # ``latencies``, one per shard.
            latency = bot.latency
            if math.isfinite(latency):  # NaN or inf before the first heartbeat
                metrics.gateway_latency.labels(str(bot.shard_id or 0)).set(latency)

        return cls(metrics, readiness=readiness, refresh=refresh, observe=observe)

    @classmethod
    def for_worker(
        cls,
        poller: LeaseLoop,
        metrics: Metrics,
        *,
        ping: Callable[[], Awaitable[object]],
        monotonic: Callable[[], float],
        stopping: Callable[[], bool],
        refresh: Callable[[], Awaitable[None]] | None = None,
    ) -> HealthServer:
        """The server of ``python -m bot worker``: :func:`check_worker_readiness`.

        Args:
            poller: the worker's poller.
            metrics: the worker's metrics.
            ping: a trivial database query.
            monotonic: the worker's monotonic clock, seconds.
            stopping: True once the worker is shutting down (or its poller ended).
            refresh: as in :class:`HealthServer`.
        """

        async def readiness() -> Readiness:
            return await check_worker_readiness(poller, ping, now=monotonic(), stopping=stopping())

        return cls(metrics, readiness=readiness, refresh=refresh)

    async def readiness(self) -> Readiness:
        """The current answer of ``/readyz``."""
        return await self._readiness()

    async def _livez(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "alive"})

    async def _readyz(self, request: web.Request) -> web.Response:
        readiness = await self.readiness()
        if readiness.ready:
            return web.json_response({"status": "ready"})
        return web.json_response({"status": "not ready", "reasons": readiness.reasons}, status=503)

    async def _serve_metrics(self, request: web.Request) -> web.Response:
        metrics = self._metrics
        if self._observe is not None:
            self._observe()
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


async def serve_health(settings: Settings, health: HealthServer) -> None:
    """Start ``health`` (``/metrics``, ``/livez``, ``/readyz``) on ``METRICS_PORT``.

    Nothing is served when ``METRICS_PORT`` is unset. The gateway's and the worker's servers
    differ only in their ``/readyz`` checks (the readiness checks above).

    Raises:
        SettingsError: ``METRICS_PORT: cannot listen on ...`` (in use, not permitted).
    """
    if settings.metrics_port is None:
        return
    where = f"{settings.metrics_host}:{settings.metrics_port}"
    try:
        url = await health.start(settings.metrics_host, settings.metrics_port)
    except OSError as exc:
        raise SettingsError(
            f"METRICS_PORT: cannot listen on {where}: {exc.strerror or exc}"
        ) from None
    log.info("metrics and health checks at %s (/metrics, /livez, /readyz)", url)
