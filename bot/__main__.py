"""``python -m bot [run|worker|sync|invite|backup PATH]``: the bot and its operator commands.

``run`` (the default) starts the bot; ``worker`` polls and delivers jobs without a gateway
connection (beside gateway processes with ``POLLER_ENABLED=false``); ``sync`` registers the
slash commands with Discord and exits; ``invite`` prints the URL that adds the bot to a
server; ``backup PATH`` copies the database while the bot may be running. Without
``GENAPI_BASE_URL`` the built-in emulator of the Generation API runs in-process (sandbox
mode), so every flow can be tried without spending credits; its key and tasks are kept beside
the database (:func:`bot.wiring.sandbox_state_path`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import contextlib
import functools
import importlib.metadata
import logging
import signal
import sqlite3
import sys
import urllib.parse
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import aiohttp
import discord
import yarl
from discord.gateway import DiscordWebSocket

from bot.clock import SystemClock
from bot.config import (
    SANDBOX_ALONE,
    Settings,
    SettingsError,
    check_database_path,
    check_database_url,
    load_settings,
    redact_database_url,
)
from bot.dashboard.serve import serve_dashboard
from bot.discord.bot import (
    GenBot,
    build_announcer,
    change_outlet,
    post_missing_key_notice,
)
from bot.discord.dashboard_directory import RestDirectory
from bot.discord.locales import GuildLocales
from bot.discord.permissions import install_links, invite_url
from bot.domain import SchemaTooNewError
from bot.errors import KeyEncryptionUnavailable
from bot.jobs.poller import Poller
from bot.jobs.supervisor import supervise
from bot.ops.health import HealthServer, serve_health
from bot.ops.logs import RedactionFilter, setup_logging
from bot.ops.metrics import Metrics
from bot.services.keys import KeyResolver, KeyVault, StoredKeyUnreadable
from bot.storage.copy_db import CopyError, copy_sqlite_to_postgres
from bot.storage.engine import DatabaseUnavailable
from bot.wiring import Services, build_poller, build_services, open_database, start_safety

log = logging.getLogger("bot")


def run_event_loop(main: Coroutine[Any, Any, None]) -> None:
    """Run the bot's (or a worker's) coroutine to completion, on uvloop where there is one.

    uvloop cut the bot's CPU per poll by about a tenth at 80 polls a second (its event loop,
    sockets and the SQLite connections' thread hand-offs; docs/benchmarks.md, "Cheaper
    polls"). It has no Windows build: there, asyncio's own loop runs it.
    """
    if sys.platform == "win32":
        asyncio.run(main)
    else:
        import uvloop

        uvloop.run(main)


def quiet_library_loggers(level: int) -> None:
    """Keep secrets and noise out of the log, whatever ``LOG_LEVEL`` says.

    discord.py's DEBUG lines carry raw gateway payloads and webhook URLs: modal inputs (a guild's
    API key typed into ``/config api-key set``) and interaction tokens. httpx2, httpcore2 and
    SQLAlchemy log a line per request or statement (SQLAlchemy's engine with its parameters, key
    ciphertexts included, at INFO; it sets itself to WARNING at import, kept here explicitly).
    """
    for name in ("discord.gateway", "discord.webhook", "discord.http"):
        logging.getLogger(name).setLevel(max(logging.INFO, level))
    for name in ("httpx2", "httpcore2", "sqlalchemy", "alembic"):
        logging.getLogger(name).setLevel(max(logging.WARNING, level))


def point_discord_at(settings: Settings) -> None:
    """Send REST calls and the gateway connection where the settings say (proxy, emulator).

    An unsharded discord.py client connects straight to ``DEFAULT_GATEWAY`` without asking
    ``/gateway``, so both the REST base and the gateway need setting.
    """
    discord.http.Route.BASE = settings.discord_api_base_url.rstrip("/")
    DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(settings.discord_gateway_url)


def silence_voice_warnings() -> None:
    """Stop discord.py's start-up warnings that PyNaCl and davey are missing.

    The bot has no voice, so neither is needed (discord.py 2.7 ``Client.__init__`` checks
    both flags).
    """
    discord.VoiceClient.warn_nacl = False
    discord.VoiceClient.warn_dave = False


def application_id_from_token(token: str) -> int:
    """Read the application id from a bot token, without asking Discord.

    A bot token's first dot-separated part is the bot user's id in base64, and a bot user's id
    is its application's id (Discord developer docs, "Bot users"; true of every application
    since 2018).

    Raises:
        SettingsError: the token's first part is not a base64 number.
    """
    first = token.split(".", 1)[0]
    try:
        decoded = base64.b64decode(first + "=" * (-len(first) % 4), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        decoded = ""
    if not decoded.isdigit():
        raise SettingsError(
            "DISCORD_TOKEN: its first part is not an application id; "
            "pass --application-id (developer portal, General Information)"
        )
    return int(decoded)


def backup_database(source: Path, target: Path) -> None:
    """Copy the database at ``source`` to ``target`` with SQLite's online backup API.

    Consistent while the bot runs: the copy is one snapshot that includes the committed
    transactions still in the WAL file (SQLite docs, "Online Backup API").

    Raises:
        SettingsError: ``source`` does not exist, or ``target`` exists already.
        sqlite3.Error: the copy failed.
    """
    if not source.is_file():
        raise SettingsError(f"DATABASE_PATH: {source} does not exist")
    if target.exists():
        raise SettingsError(f"{target} exists already; choose a new file")
    # mode=ro: a backup must not create, migrate or lock out the live database.
    with (
        contextlib.closing(sqlite3.connect(f"{source.resolve().as_uri()}?mode=ro", uri=True)) as db,
        contextlib.closing(sqlite3.connect(target)) as copy,
    ):
        db.backup(copy)


def known_secrets(settings: Settings) -> list[str]:
    """The secrets in the settings, for the log redaction filter (``bot.ops.logs``)."""
    secrets = [settings.discord_token.get_secret_value()]
    if settings.genapi_api_key is not None:
        secrets.append(settings.genapi_api_key.get_secret_value())
    if settings.discord_client_secret is not None:
        secrets.append(settings.discord_client_secret.get_secret_value())
    if settings.key_encryption_key is not None:
        encryption_keys = settings.key_encryption_key.get_secret_value().split(",")
        secrets.extend(part.strip() for part in encryption_keys)
    if settings.database_url is not None:
        # The whole URL and its password alone: a driver may print either.
        url = settings.database_url.get_secret_value()
        secrets.append(url)
        password = urllib.parse.urlsplit(url).password
        if password:
            secrets.extend({password, urllib.parse.unquote(password)})
    return secrets


def warn_of_an_unbudgeted_key(settings: Settings) -> None:
    """Warn when the operator's key may be spent by every server without a limit.

    In sandbox mode the key is not used (a warning at start says so), and nothing costs money.
    """
    if (
        settings.genapi_api_key is not None
        and not settings.sandbox
        and settings.default_guild_monthly_budget_cents is None
        and settings.default_user_daily_budget_cents is None
    ):
        log.warning(
            "GENAPI_API_KEY is set with no default budget: servers without their own key spend "
            "it without limit (set DEFAULT_GUILD_MONTHLY_BUDGET_CENTS or "
            "DEFAULT_USER_DAILY_BUDGET_CENTS)"
        )


def say_ready_listener(bot: GenBot) -> Callable[[], Coroutine[Any, Any, None]]:
    """The bot's ``on_ready`` listener: log where it is, or, in no server, the invite link."""

    async def say_ready() -> None:
        user, servers = bot.user, len(bot.guilds)
        url = invite_url(bot.application_id or (user.id if user else 0))
        if servers:
            log.info("ready as %s in %d server(s); invite it with %s", user, servers, url)
        else:
            # A new operator's first start: the token works, and the next step is the invite.
            log.warning(
                "ready as %s, but in no server yet: open %s to add it to one "
                "(python -m bot invite prints this link again)",
                user,
                url,
            )

    return say_ready


async def run(settings: Settings, *, sync: str, redaction: RedactionFilter | None = None) -> None:
    """Build the services, run the bot until it is closed, and release everything."""
    clock = SystemClock()
    metrics = Metrics(role="bot" if settings.poller_enabled else "gateway")
    warn_of_an_unbudgeted_key(settings)
    async with contextlib.AsyncExitStack() as stack:
        services = await build_services(
            settings,
            clock,
            stack,
            metrics=metrics,
            on_secret=None if redaction is None else redaction.add,
        )
        await start_safety(services)
        bot = GenBot(services, sync=sync, shutdown_grace=settings.shutdown_grace_seconds)
        if sync != "only" and settings.metrics_port is not None:
            health = HealthServer.for_gateway(
                bot,
                metrics,
                ping=services.ping_database,
                refresh=services.count_open_jobs,
            )
            await serve_health(settings, health)
            stack.push_async_callback(health.stop)
        # SIGTERM (docker stop, systemd) and Ctrl-C: finish running commands, then close.
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, bot.close_on_signal, signum.name)
        bot.add_listener(say_ready_listener(bot), "on_ready")
        async with bot:
            token = settings.discord_token.get_secret_value()
            await bot.login(token)
            if sync != "only":
                # After the login: the application id (the OAuth2 client) is known then.
                await serve_dashboard(
                    settings,
                    services,
                    RestDirectory.over(bot, services, bot.locales),
                    application_id=bot.application_id or application_id_from_token(token),
                    clock=clock,
                    stack=stack,
                )
                await bot.connect()


async def attach_worker_client(
    settings: Settings,
    services: Services,
    client: discord.Client,
    *,
    clock: SystemClock,
    stack: contextlib.AsyncExitStack,
) -> Poller:
    """Hand a worker's REST-only ``client`` to what speaks to Discord; return its poller.

    The dashboard may be served by a worker too: rights are read over REST, cached; its saves
    are posted in the admin channel as the gateway posts /config's. A job's guild's admins
    are told of a missing key as the gateway tells them. The poller delivers through the
    gateway's announcer (its schedule, tokens, private cards), on the worker's client.
    """
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
    services.keys.set_missing_key_notice(
        functools.partial(post_missing_key_notice, client, services.guild_config)
    )
    _, announcer = build_announcer(client, services)
    return build_poller(services, announcer)


def stop_worker_on_signals(settings: Settings, poller: Poller, work: asyncio.Task[None]) -> None:
    """SIGTERM or SIGINT: claim no more jobs and drain; a second one cancels ``work`` at once."""

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

    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop, signum.name)


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
        poller = await attach_worker_client(settings, services, client, clock=clock, stack=stack)
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
        stop_worker_on_signals(settings, poller, work)
        log.info("worker started as %s (no gateway): polling and delivering jobs", client.user)
        with contextlib.suppress(asyncio.CancelledError):
            await work
        log.info("worker stopped")


def rotate_keys(settings: Settings) -> int:
    """``python -m bot rotate-keys``: re-encrypt every stored key with the first encryption key.

    Run it after putting a new Fernet key first in ``KEY_ENCRYPTION_KEY`` (old ones after it);
    then the old ones can be dropped. All or nothing, in one transaction.

    Returns:
        The exit status: 0 done, 1 a stored key is unreadable, 2 ``KEY_ENCRYPTION_KEY`` unset.
    """

    async def rotate() -> int:
        db = await open_database(settings, SystemClock())
        try:
            vault = KeyVault(settings.key_encryption_key)
            return await KeyResolver(db, vault, None).rotate()
        finally:
            await db.close()

    try:
        count = asyncio.run(rotate())
    except KeyEncryptionUnavailable:
        print("genbot: rotate-keys: KEY_ENCRYPTION_KEY is not set", file=sys.stderr)
        return 2
    except (SettingsError, SchemaTooNewError) as exc:  # e.g. DATABASE_URL unreachable
        print(f"genbot: rotate-keys failed: {exc}", file=sys.stderr)
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


def copy_db(settings: Settings, url: str) -> int:
    """``python -m bot copy-db --to URL``: copy the SQLite database into an empty PostgreSQL one.

    Prints the rows copied per table and the ledger's exact totals per guild, verified against
    the source before the one transaction commits (:mod:`bot.storage.copy_db`).

    Returns:
        The exit status: 0 copied, 1 the copy failed its check or the server failed, 2 refused
        (a bad URL, a missing or unmigrated source, a non-empty target).
    """
    try:
        check_database_url(url)
    except ValueError as exc:
        print(f"genbot: copy-db failed: --to: {exc}", file=sys.stderr)
        return 2
    try:
        report = asyncio.run(
            copy_sqlite_to_postgres(settings.database_path, url, clock=SystemClock())
        )
    except (CopyError, SchemaTooNewError, DatabaseUnavailable) as exc:
        print(f"genbot: copy-db failed: {exc}", file=sys.stderr)
        return 1 if isinstance(exc, DatabaseUnavailable) else 2
    print(f"genbot: copied {settings.database_path} to {redact_database_url(url)}, verified:")
    for line in report.lines():
        print(f"  {line}")
    return 0


HELP_EPILOG = """\
Settings come from the environment, or from a .env file in the working directory
(copy .env.example). Every setting is described in docs/settings.md; the only one
required is DISCORD_TOKEN. Without GENAPI_BASE_URL the bot runs in sandbox mode.
"""


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``python -m bot [--version] [run|sync|invite|rotate-keys|backup PATH]``."""
    parser = argparse.ArgumentParser(
        prog="python -m bot",
        description="genbot: a Discord bot for the Generation Service API (video, image, text).",
        epilog=HELP_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    try:
        version = importlib.metadata.version("genbot")
    except importlib.metadata.PackageNotFoundError:  # run from a checkout, not installed
        version = "(not installed)"
    parser.add_argument("--version", action="version", version=f"genbot {version}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", title="commands")
    commands.add_parser("run", help="run the bot (the default)")
    commands.add_parser("sync", help="register the slash commands with Discord, then exit")
    commands.add_parser(
        "worker",
        help="poll, settle and deliver jobs without a gateway connection (several may run)",
    )
    invite = commands.add_parser(
        "invite",
        help="print the links that install the bot to a server (with the permissions it needs) "
        "and to a member's account",
    )
    invite.add_argument(
        "--application-id",
        type=int,
        help="the application id (default: read from DISCORD_TOKEN)",
    )
    commands.add_parser(
        "rotate-keys",
        help="re-encrypt the stored API keys with the first KEY_ENCRYPTION_KEY, then exit",
    )
    backup = commands.add_parser(
        "backup", help="copy the database to PATH, safely while the bot runs"
    )
    backup.add_argument("path", type=Path, metavar="PATH", help="the new backup file")
    copy = commands.add_parser(
        "copy-db",
        help="copy the SQLite database (DATABASE_PATH) into an empty PostgreSQL database, "
        "verify the totals, then exit",
    )
    copy.add_argument(
        "--to", required=True, metavar="URL", help="postgresql://user:password@host:port/dbname"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m bot``; returns the process exit status."""
    args = build_parser().parse_args(argv)
    command = args.command or "run"
    if command == "invite" and args.application_id:
        print(install_links(args.application_id))
        return 0
    try:
        settings = load_settings()
        if command == "invite":
            token = settings.discord_token.get_secret_value()
            print(install_links(application_id_from_token(token)))
            return 0
        if command == "backup":
            if settings.database_url is not None:
                raise SettingsError(
                    "DATABASE_URL is set: back up PostgreSQL with pg_dump "
                    "(backup copies the SQLite database of DATABASE_PATH)"
                )
            backup_database(settings.database_path, args.path)
            print(f"genbot: backed up {settings.database_path} to {args.path}")
            return 0
        if command == "worker" and settings.sandbox:
            raise SettingsError(SANDBOX_ALONE)
        check_database_path(settings.database_path)
    except SettingsError as exc:
        doing = "cannot start" if command in ("run", "sync", "worker") else f"{command} failed"
        print(f"genbot: {doing}: {exc}", file=sys.stderr)
        return 2
    except sqlite3.Error as exc:
        print(f"genbot: backup failed: {exc}", file=sys.stderr)
        return 1
    silence_voice_warnings()
    redaction = setup_logging(
        settings.log_level_number, settings.log_format, secrets=known_secrets(settings)
    )
    quiet_library_loggers(settings.log_level_number)
    if command == "rotate-keys":
        return rotate_keys(settings)
    if command == "copy-db":
        return copy_db(settings, args.to)
    point_discord_at(settings)
    try:
        if command == "worker":
            run_event_loop(run_worker(settings, redaction=redaction))
        else:
            run_event_loop(
                run(settings, sync="only" if command == "sync" else "auto", redaction=redaction)
            )
    except (SettingsError, SchemaTooNewError) as exc:
        print(f"genbot: cannot start: {exc}", file=sys.stderr)
        return 2
    except discord.LoginFailure:
        print("genbot: cannot start: DISCORD_TOKEN was rejected by Discord", file=sys.stderr)
        return 2
    except (aiohttp.ClientConnectionError, discord.GatewayNotFound) as exc:
        where = settings.discord_api_base_url
        print(f"genbot: cannot start: Discord is unreachable at {where} ({exc})", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
