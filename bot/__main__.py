"""``python -m bot [run|sync]``: build the settings and the services, then run the bot.

``run`` (the default) starts the bot; ``sync`` registers the slash commands with Discord and
exits. Without ``GENAPI_BASE_URL`` the built-in emulator of the Generation API runs in-process
(sandbox mode), so every flow can be tried without spending credits.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys

import aiohttp
import discord
import httpx
import yarl
from discord.gateway import DiscordWebSocket
from pydantic import SecretStr

from bot.app import GenBot, Services
from bot.clock import SystemClock
from bot.config import Settings, SettingsError, load_settings
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.sandbox import GenApiEmulator
from bot.services.billing import Billing
from bot.services.keys import KeyResolver, KeyVault
from bot.services.schedule import PollSchedule
from bot.storage.database import SchemaTooNewError, Store

log = logging.getLogger("bot")


def quiet_library_loggers(level: int) -> None:
    """Keep secrets and noise out of the log, whatever ``LOG_LEVEL`` says.

    discord.py's DEBUG lines carry raw gateway payloads and webhook URLs: modal inputs (a guild's
    API key typed into ``/config api-key set``) and interaction tokens. httpx and aiosqlite log a
    line per request or query.
    """
    for name in ("discord.gateway", "discord.webhook", "discord.http"):
        logging.getLogger(name).setLevel(max(logging.INFO, level))
    for name in ("httpx", "httpcore", "aiosqlite"):
        logging.getLogger(name).setLevel(max(logging.WARNING, level))


def point_discord_at(settings: Settings) -> None:
    """Send REST calls and the gateway connection where the settings say (proxy, emulator).

    An unsharded discord.py client connects straight to ``DEFAULT_GATEWAY`` without asking
    ``/gateway``, so both the REST base and the gateway need setting.
    """
    discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url)


async def run(settings: Settings, *, sync: str) -> None:
    """Build the services, run the bot until it is closed, and release everything."""
    clock = SystemClock()
    async with contextlib.AsyncExitStack() as stack:
        base_url = settings.genapi_base_url
        default_key = settings.genapi_api_key
        if base_url is None:
            emulator = GenApiEmulator(time_scale=settings.sandbox_time_scale)
            await emulator.start()
            stack.push_async_callback(emulator.stop)
            base_url = emulator.base_url
            default_key = SecretStr(emulator.create_key())
            log.warning(
                "SANDBOX MODE: GENAPI_BASE_URL is not set, so the built-in emulator at %s "
                "answers every request; results are marked as sandbox and cost nothing.",
                base_url,
            )
        http = await stack.enter_async_context(
            httpx.AsyncClient(
                limits=httpx.Limits(max_connections=200, max_keepalive_connections=50)
            )
        )
        store = await Store.open(settings.database_path, clock=clock)
        stack.push_async_callback(store.close)
        limiter = RateLimiter(
            clock, limit=settings.genapi_rate_limit, window=settings.genapi_rate_window_seconds
        )
        client = GenAPIClient(base_url, http=http, limiter=limiter, clock=clock)
        vault = KeyVault(settings.key_encryption_key)
        services = Services(
            settings=settings,
            clock=clock,
            store=store,
            client=client,
            catalogue=CatalogueCache(client, clock),
            billing=Billing(store, settings, clock),
            vault=vault,
            keys=KeyResolver(store, vault, default_key),
            schedule=PollSchedule(store.completion_seconds),
            sandbox=settings.sandbox,
            default_key=default_key,
        )
        bot = GenBot(services, sync=sync)
        # SIGTERM (docker stop, systemd) and Ctrl-C: finish running commands, then close.
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, bot.close_on_signal, signum.name)
        async with bot:
            token = settings.discord_token.get_secret_value()
            if sync == "only":
                await bot.login(token)
            else:
                await bot.start(token)


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bot``; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=("run", "sync"),
        help="run the bot (default), or sync its slash commands with Discord and exit",
    )
    args = parser.parse_args(argv)
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"genbot: cannot start: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=settings.log_level_number,
        format="%(asctime)s %(levelname)-8s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    quiet_library_loggers(settings.log_level_number)
    point_discord_at(settings)
    try:
        asyncio.run(run(settings, sync="only" if args.command == "sync" else "auto"))
    except discord.LoginFailure:
        print("genbot: cannot start: DISCORD_TOKEN was rejected by Discord", file=sys.stderr)
        return 2
    except (aiohttp.ClientConnectionError, discord.GatewayNotFound) as exc:
        where = settings.discord_api_base_url
        print(f"genbot: cannot start: Discord is unreachable at {where} ({exc})", file=sys.stderr)
        return 1
    except SchemaTooNewError as exc:
        print(f"genbot: cannot start: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
