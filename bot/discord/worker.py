"""``python -m bot worker``: poll, settle and deliver jobs beside the gateway, without one.

The gateway's process is :class:`bot.discord.bot.GenBot`; a worker logs in for REST only and
runs the same poller over the same announcer, so any number of them share the jobs by lease.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import signal

import discord

from bot.clock import SystemClock
from bot.config import Settings
from bot.dashboard.serve import serve_dashboard
from bot.discord.bot import build_announcer, change_outlet, post_missing_key_notice
from bot.discord.dashboard_directory import RestDirectory
from bot.discord.locales import GuildLocales
from bot.jobs.supervisor import supervise
from bot.ops.health import HealthServer, serve_health
from bot.ops.logs import RedactionFilter
from bot.ops.metrics import Metrics
from bot.wiring import build_poller, build_services, start_safety

log = logging.getLogger("bot")


async def run_worker(settings: Settings, *, redaction: RedactionFilter | None = None) -> None:
    """``python -m bot worker``: poll, settle and deliver jobs, with no gateway connection.

    Logs in for REST only (``Client.login``: the bot token, no gateway session, no shard), so
    any number of workers may run beside the gateway processes (``POLLER_ENABLED=false``
    there). Jobs are claimed under leases with fencing tokens and each key's rate window is
    shared through the database, so workers never poll one job at once nor exceed a key's
    limit together (docs/deployment.md, "Several processes"). SIGTERM or SIGINT stops it
    gracefully: it claims nothing more, lets the polls and deliveries under way finish within
    ``SHUTDOWN_GRACE_SECONDS``, cancels the rest and releases their leases, so that another
    worker takes those jobs at once rather than after their leases run out. A second signal
    cancels at once (the leases are still released).

    With ``DASHBOARD_PUBLIC_URL`` and ``DISCORD_CLIENT_SECRET`` it serves the web dashboard
    (``docs/dashboard.md``). Like a gateway it serves ``/metrics``, ``/livez`` and ``/readyz``
    on ``METRICS_PORT`` (ready: not stopping, the database answers, its lease loop passed
    within a minute; :func:`bot.ops.health.check_worker_readiness`), and ``redaction`` learns
    every key it decrypts.
    """
    if settings.shared_rate_limit is None:
        settings = settings.model_copy(update={"shared_rate_limit": True})
    clock = SystemClock()
    metrics = Metrics(role="worker")
    async with contextlib.AsyncExitStack() as stack:
        services = await build_services(
            settings,
            clock,
            stack,
            metrics=metrics,
            on_secret=None if redaction is None else redaction.add,
        )
        await start_safety(services)
        # The guilds intent only silences discord.py's warning: no gateway session is opened.
        client = discord.Client(
            intents=discord.Intents(guilds=True), allowed_mentions=discord.AllowedMentions.none()
        )
        await client.login(settings.discord_token.get_secret_value())
        stack.push_async_callback(client.close)
        # The dashboard may be served by a worker too: rights are read over REST, cached; its
        # saves are posted in the admin channel as the gateway posts /config's.
        services.guild_config.set_change_outlet(
            change_outlet(client, GuildLocales(client, services.guild_config, clock, rest=True))
        )
        await serve_dashboard(
            settings,
            services,
            RestDirectory.over(client, services),
            application_id=client.application_id or 0,
            clock=clock,
            stack=stack,
        )
        # The job's guild's admins are told as the gateway tells them.
        services.keys.set_missing_key_notice(
            functools.partial(post_missing_key_notice, client, services.guild_config)
        )
        # The gateway's announcer (its schedule, tokens, private cards), on the worker's client.
        _, announcer = build_announcer(client, services)
        poller = build_poller(services, announcer)
        work: asyncio.Task[None] | None = None

        def stopping() -> bool:
            # Draining after SIGTERM counts as stopping: a balancer should send nothing new.
            return poller.stopping or (work is not None and (work.done() or work.cancelling() > 0))

        if settings.metrics_port is not None:
            health = HealthServer.for_worker(
                poller,
                metrics,
                ping=services.ping_database,
                monotonic=clock.monotonic,
                stopping=stopping,
                refresh=services.count_open_jobs,
            )
            await serve_health(settings, health)
            stack.push_async_callback(health.stop)
        work = asyncio.create_task(supervise("poller", poller.run, clock=clock), name="poller")
        loop = asyncio.get_running_loop()

        def stop(name: str) -> None:
            if poller.stopping:
                log.warning("%s received again: stopping at once", name)
                work.cancel()
                return
            log.warning(
                "%s received: claiming no more jobs; up to %.0f s for the polls and deliveries "
                "under way",
                name,
                settings.shutdown_grace_seconds,
            )
            poller.stop()

        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, stop, signum.name)
        log.info("worker started as %s (no gateway): polling and delivering jobs", client.user)
        with contextlib.suppress(asyncio.CancelledError):
            await work
        log.info("worker stopped")
