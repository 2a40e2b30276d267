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
from bot.errors import KeyEncryptionUnavailable
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.sandbox import GenApiEmulator
from bot.services.billing import Billing
from bot.services.keys import KeyResolver, KeyVault, StoredKeyUnreadable
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
    if settings.genapi_api_key is not None and (
        settings.default_guild_monthly_budget_cents is None
        and settings.default_user_daily_budget_cents is None
    ):
        log.warning(
            "GENAPI_API_KEY is set with no default budget: servers without their own key spend "
            "it without limit (set DEFAULT_GUILD_MONTHLY_BUDGET_CENTS or "
            "DEFAULT_USER_DAILY_BUDGET_CENTS)"
        )
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
        client = GenAPIClient(
            base_url,
            http=http,
            limiter=limiter,
            clock=clock,
            known_keys=() if default_key is None else (default_key,),
        )
        vault = KeyVault(settings.key_encryption_key)
        services = Services(
            settings=settings,
            clock=clock,
            store=store,
            client=client,
            catalogue=CatalogueCache(client, clock),
            billing=Billing(store, settings, clock),
            vault=vault,
            keys=KeyResolver(store, vault, default_key, clock=clock),
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


def rotate_keys(settings: Settings) -> int:
    """``python -m bot rotate-keys``: re-encrypt every stored key with the first encryption key.

    Run it after putting a new Fernet key first in ``KEY_ENCRYPTION_KEY`` (old ones after it);
    then the old ones can be dropped. All or nothing, in one transaction.

    Returns:
        The exit status: 0 done, 1 a stored key is unreadable, 2 ``KEY_ENCRYPTION_KEY`` unset.
    """

    async def rotate() -> int:
        store = await Store.open(settings.database_path, clock=SystemClock())
        try:
            vault = KeyVault(settings.key_encryption_key)
            return await KeyResolver(store, vault, None).rotate()
        finally:
            await store.close()

    try:
        count = asyncio.run(rotate())
    except KeyEncryptionUnavailable:
        print("genbot: rotate-keys: KEY_ENCRYPTION_KEY is not set", file=sys.stderr)
        return 2
    except StoredKeyUnreadable:
        print(
            "genbot: rotate-keys: a stored key was made with none of the keys in "
            "KEY_ENCRYPTION_KEY (add the old one after the new one); nothing was changed",
            file=sys.stderr,
        )
        return 1
    print(f"re-encrypted {count} stored API keys with the first KEY_ENCRYPTION_KEY")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bot``; returns the process exit status."""
    parser = argparse.ArgumentParser(prog="python -m bot", description=__doc__.splitlines()[0])
    parser.add_argument(
        "command",
        nargs="?",
        default="run",
        choices=("run", "sync", "rotate-keys"),
        help="run the bot (default), or sync its slash commands with Discord and exit, or "
        "rotate-keys: re-encrypt stored API keys with the first KEY_ENCRYPTION_KEY",
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
    if args.command == "rotate-keys":
        return rotate_keys(settings)
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
