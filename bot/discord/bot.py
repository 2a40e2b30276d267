"""The bot: a ``commands.Bot`` that loads the cogs, syncs commands deliberately, runs the poller."""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import json
import logging
import pkgutil
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.clock import SystemClock
from bot.config import Settings
from bot.discord.choices import ChoiceButton, OpenChoices
from bot.discord.click_debounce import SHOW_DEBOUNCE_SECONDS, ClickDebounce
from bot.discord.command_access import CommandAccess, Override
from bot.discord.credits import DiscordEntitlements, reconcile_forever
from bot.discord.delivery import DiscordAnnouncer, send_card
from bot.discord.dm_notice import DmNoticeAnnouncer
from bot.discord.locales import GuildLocales
from bot.discord.permissions import missing_permissions, permission_names
from bot.discord.render import job_placeholder, posted_later
from bot.discord.render.admin import (
    NO_KEY_YET,
    key_problem_notice,
    missing_key_notice,
    missing_permissions_notice,
)
from bot.discord.render.policy import audit_lines
from bot.discord.render.takes import takes_card
from bot.discord.safety_gate import SafetyGate
from bot.discord.translator import CatalogueTranslator, translated_payload
from bot.discord.tree import (
    BUTTON_GONE,
    FORM_EXPIRED,
    GenTree,
    OpenForms,
    member_locale,
    send_ephemeral,
)
from bot.domain import AuditEntry, Job
from bot.genapi.errors import GenAPIError
from bot.genapi.ratelimit import Priority
from bot.genapi.wire import Catalogue
from bot.i18n import Later, _, using
from bot.jobs.supervisor import supervise
from bot.ops.metrics import Metrics
from bot.services.generation import KeyProblem
from bot.services.guild_config import GuildConfigService
from bot.services.settings_audit import ChangeOutlet
from bot.wiring import Services, build_poller, build_retention, sweep_stale

log = logging.getLogger(__name__)


EXTENSION_PACKAGE = "cogs"
"""The package whose every module is an extension (``cogs/``)."""


def discover_extensions(package: str = EXTENSION_PACKAGE) -> tuple[str, ...]:
    """Return every module of ``package``, each an extension with a ``setup``.

    A new command is a new file in ``cogs/``; nothing else lists it. Modules whose names start
    with ``_`` are helpers, not extensions. The package is found by name, as discord.py loads
    extensions (``load_extension``), not imported: the cogs import the bot, never the reverse.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or spec.submodule_search_locations is None:
        raise ModuleNotFoundError(f"no extension package {package!r}")
    return tuple(
        sorted(
            f"{package}.{module.name}"
            for module in pkgutil.iter_modules(spec.submodule_search_locations)
            if not module.name.startswith("_")
        )
    )


EXTENSIONS = discover_extensions()

SHUTDOWN_GRACE_SECONDS = 20.0
"""How long a shutdown waits for commands already running (their charges to be recorded)."""

SPOOL_ON_CANCEL_SECONDS = 5.0
"""How long a shutdown waits, after the grace, for the commands it cancelled to end: a
settlement under way writes its charge to the settlement spool then (one fsync-ed append)."""


def shard_options(settings: Settings) -> dict[str, Any]:
    """``AutoShardedBot``'s ``shard_count`` and ``shard_ids`` from the settings, when set.

    Neither set: discord.py asks ``GET /gateway/bot`` for Discord's recommended count and runs
    every shard. ``SHARD_IDS`` needs ``SHARD_COUNT`` (checked by the settings).
    """
    options: dict[str, Any] = {}
    if settings.shard_count is not None:
        options["shard_count"] = settings.shard_count
    if settings.shard_id_list is not None:
        options["shard_ids"] = settings.shard_id_list
    return options


async def post_admin_line(
    client: discord.Client, guild_id: int, channel_id: int, text: str
) -> None:
    """Post ``text`` (at most 2,000 characters kept) in a guild's admin channel over REST.

    Works for a worker's REST-only client as for the gateway (a partial messageable needs no
    cache). Mentions are never pinged (the client's ``allowed_mentions`` is none); a failure
    is logged, never raised: an admin notice must not break what it reports on.
    """
    channel = client.get_partial_messageable(channel_id, guild_id=guild_id)
    try:
        await channel.send(text[:2000])
    except discord.HTTPException as exc:
        log.warning("could not post in the admin channel of guild %s: %s", guild_id, exc)


def change_outlet(client: discord.Client, locales: GuildLocales) -> ChangeOutlet:
    """Where :class:`GuildConfigService` posts audited changes: the admin channel, over REST.

    One message per change (``/config``'s or a dashboard save's), headed in the server's
    language (:func:`bot.discord.render.policy.audit_lines`). Failures are logged by
    :func:`post_admin_line`, never raised.
    """

    async def post_changes(guild_id: int, channel_id: int, entries: list[AuditEntry]) -> None:
        with using(await locales.of(guild_id)):
            text = audit_lines(entries)
        await post_admin_line(client, guild_id, channel_id, text)

    return post_changes


async def post_missing_key_notice(
    client: discord.Client, guild_config: GuildConfigService, guild_id: int, key_fingerprint: str
) -> None:
    """Tell a guild's admin channel, if it has one, that a job waits for a key known nowhere.

    The :data:`bot.services.keys.MissingKeyNotice` of the gateway and of workers (``python -m
    bot worker``): whichever process polls the job tells the admins, once per process per
    guild and key (:meth:`bot.services.keys.KeyResolver.set_missing_key_notice`).
    """
    channel_id = await guild_config.admin_channel(guild_id)
    if channel_id is not None:
        # The admin channel reads the server's language.
        rest = not isinstance(client, GenBot)
        locale = await GuildLocales(client, guild_config, SystemClock(), rest=rest).of(guild_id)
        with using(locale):
            text = missing_key_notice(key_fingerprint)
        await post_admin_line(client, guild_id, channel_id, text)


def build_announcer(
    client: discord.Client, services: Services
) -> tuple[DiscordAnnouncer, DmNoticeAnnouncer]:
    """The poller's announcer, the same for the gateway and a worker.

    A :class:`DiscordAnnouncer` (cards, their progress with the ``ready`` estimate, personal
    responses, private cards) wrapped by the DM of finished results members asked for.
    Built in one place so that a worker's announcer cannot lack what the
    gateway's has (a worker once had no schedule, and its progress edits dropped the estimate).

    Args:
        client: the logged-in client that sends (the gateway's bot, or a worker's client).
        services: the process's services (``bot.wiring``).

    Returns:
        The announcer that shows results, and the poller's announcer that wraps it.
    """
    # The gateway's cache holds its servers; a worker reads them by REST.
    locales = GuildLocales(
        client, services.guild_config, services.clock, rest=not isinstance(client, GenBot)
    )
    shows = DiscordAnnouncer(
        client,
        clock=services.clock,
        sandbox=services.sandbox,
        http=services.downloads,
        schedule=services.schedule,
        tokens=services.response_tokens,
        cards=services.private_cards,
        members=services.members,
        takes=_takes_lookup(services),
        locales=locales,
        final=services.sequences,
        safety=SafetyGate(client, services.moderation, locales),
        thumbnails=services.thumbnails,
    )
    return shows, DmNoticeAnnouncer(
        shows,
        client,
        services.members,
        services.private_cards,
        locales=locales,
        safety=services.moderation,
    )


def _takes_lookup(services: Services) -> Callable[[Job], Awaitable[tuple[Job, ...]]]:
    """How the announcer finds a take's siblings: every take of its request, as stored now."""

    async def takes_of(job: Job) -> tuple[Job, ...]:
        ids = await services.sequences.takes_of(job.id)
        if len(ids) < 2:
            return ()
        found = [job if each == job.id else await services.generation.job(each) for each in ids]
        return tuple(take for take in found if take is not None)

    return takes_of


PRIME_CATALOGUE_SECONDS = 10.0
"""How long start-up waits for the catalogue before going online without it."""


class GenBot(commands.AutoShardedBot):
    """The genbot Discord client.

    Needs no privileged intent: only ``guilds``, for the channels and permissions it checks.
    Sharded (``AutoShardedBot``): ``SHARD_COUNT`` shards in all (default: Discord's
    recommendation from ``GET /gateway/bot``), of which this process runs ``SHARD_IDS`` (default:
    all), so several gateway processes can split the servers. With ``POLLER_ENABLED=false`` it
    leaves polling and delivery to ``python -m bot worker`` processes.

    Args:
        services: the shared services.
        sync: ``"auto"`` syncs the command tree when its definitions changed since the last sync
            (a hash kept in the database); ``"force"`` syncs regardless; ``"only"`` syncs and
            starts nothing else (``python -m bot sync``).
        shutdown_grace: seconds :meth:`close` waits for the commands already running.
    """

    def __init__(
        self,
        services: Services,
        *,
        sync: str = "auto",
        shutdown_grace: float = SHUTDOWN_GRACE_SECONDS,
    ) -> None:
        intents = discord.Intents.none()
        intents.guilds = True
        # Conversations: members' messages in threads. Not the privileged Message
        # Content intent: messages that mention the bot (or reply to it) carry their content.
        intents.guild_messages = True
        super().__init__(
            command_prefix=commands.when_mentioned,
            intents=intents,
            tree_cls=GenTree,
            help_command=None,
            allowed_mentions=discord.AllowedMentions.none(),
            # Server installs only: a user install would spend the owner's default key anywhere.
            allowed_installs=app_commands.AppInstallationType(guild=True, user=False),
            guild_ready_timeout=services.settings.guild_ready_timeout_seconds,
            **shard_options(services.settings),
        )
        self.services = services
        self._sync = sync
        self._tasks: list[asyncio.Task[None]] = []
        self._shutdown_grace = shutdown_grace
        self._closing = False
        self._commands: set[asyncio.Task[Any]] = set()
        self._shutdown: asyncio.Task[None] | None = None
        # Built by bot.wiring with the other services; only the Discord side is built here.
        self.generation = services.generation
        self.guild_config = services.guild_config
        # The language of each server's public cards and notices.
        self.locales = GuildLocales(self, services.guild_config, services.clock, rest=False)
        # Audited changes (/config's, the dashboard's) in the admin channel.
        services.guild_config.set_change_outlet(change_outlet(self, self.locales))
        self.generation.set_admin_notifier(self._notify_admins)
        self.generation.set_admin_log(self.post_admin_line)
        # Discord's command permissions, for the buttons that run a command again.
        self.command_access = CommandAccess(self, dev_guild_id=services.settings.dev_guild_id)
        self.click_debounce = ClickDebounce(services.clock)
        # Show result and /jobs show, per member and job: each may download the result.
        self.show_debounce = ClickDebounce(services.clock, SHOW_DEBOUNCE_SECONDS)
        # Buttons whose state lives in this process (Cancel, confirmations, pages).
        self.choices = OpenChoices()
        # Forms shown and waited for, and the buttons' templates: a submission or a press that
        # nothing here answers is told so, not dropped.
        self.forms = OpenForms(services.clock)
        self._buttons: list[type[discord.ui.DynamicItem[Any]]] = []
        self.add_listener(self._unanswered, "on_interaction")
        self.add_listener(
            self._command_permissions_updated, "on_raw_app_command_permissions_update"
        )
        self.add_listener(self._shard_ready, "on_shard_ready")
        services.keys.set_missing_key_notice(self._missing_key_notice)
        # Personal jobs' interaction tokens: their cards are interaction responses.
        self.response_tokens = services.response_tokens
        # Where private results' cards are: the member's DM, or an ephemeral response.
        self.private_cards = services.private_cards
        self.announcer, announcer = build_announcer(self, services)
        self.poller = build_poller(services, announcer)
        self._poller_task: asyncio.Task[None] | None = None
        # The start-up permission check: what each guild lacked when last warned, and the
        # guilds whose admin channel was told (once per process).
        self._permissions_warned: dict[int, tuple[str, ...]] = {}
        self._permissions_told: set[int] = set()
        # The guilds without a key whose first admin to run a command was told how to set one
        # (once per process: a restart may tell one admin again, which costs nothing).
        self._no_key_told: set[int] = set()
        self.add_listener(self._tell_admin_no_key_yet, "on_app_command_completion")
        # The spend guard's alerts (admin channel or the owner's DM) and members' notes.
        # A personal key's alerts: a DM to its owner (who turned DM notices on).
        services.guard.set_outlets(self.post_admin_line, self._dm_owner, self._dm_member)
        self.add_listener(self._guard_note, "on_app_command_completion")

    async def _guard_note(
        self,
        interaction: discord.Interaction[Any],
        command: app_commands.Command[Any, ..., Any] | app_commands.ContextMenu,
    ) -> None:
        """After a command, the spend guard's note for its member, if its charge earned one.

        A member who crossed 80 % or 100 % of their allowance reads it in their language, as a
        follow-up of the command that crossed it (bot.services.guard.SpendGuard.take_note).
        """
        guild_id = interaction.guild_id
        if guild_id is None or not interaction.response.is_done():
            return
        note = self.services.guard.take_note(guild_id, interaction.user.id)
        if note is None:
            return
        with using(member_locale(interaction)):
            text = note.translated()
        try:
            await interaction.followup.send(
                text, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
        except discord.HTTPException as exc:
            log.warning("could not show a spend note in guild %s: %s", guild_id, exc)

    async def _dm_owner(self, guild_id: int, text: str) -> None:
        """DM a server's owner a spend guard alert, in the server's language (never raises)."""
        try:
            guild = self.get_guild(guild_id) or await self.fetch_guild(guild_id)
            if guild.owner_id is None:
                return
            if isinstance(text, Later):
                with using(await self.locales.of(guild_id)):
                    text = text.translated()
            dm = await self.create_dm(discord.Object(guild.owner_id))
            await dm.send(text[:2000], allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException as exc:
            log.warning("could not DM the owner of guild %s: %s", guild_id, exc)

    async def _dm_member(self, user_id: int, text: str) -> None:
        """DM a member a spend guard alert about their personal key (never raises).

        Written in the current locale: the member's, when their own command's charge raised it
        (the guard sends it from that command's context); English from the poller. A member
        whose DMs are closed (50007) is skipped, as a result's DM notice is.
        """
        try:
            if isinstance(text, Later):
                text = text.translated()
            dm = await self.create_dm(discord.Object(user_id))
            await dm.send(text[:2000], allowed_mentions=discord.AllowedMentions.none())
        except discord.HTTPException as exc:
            log.info("no spend guard DM to a member (%s %s)", exc.status, exc.code)

    async def _tell_admin_no_key_yet(
        self,
        interaction: discord.Interaction[Any],
        command: app_commands.Command[Any, ..., Any] | app_commands.ContextMenu,
    ) -> None:
        """After an admin's command, in a server without a key, say how to set one (once).

        A new server has neither its own key nor the bot's default (``GENAPI_API_KEY``), so
        every generation command would fail; the first admin (Manage Server) to run any command
        there is told, ephemerally, to run ``/config api-key set``. Not after that command
        itself or ``/config show`` (which shows the key's state), and not where only a member
        installed the app (no server key applies there).
        """
        guild_id = interaction.guild_id
        if (
            guild_id is None
            or guild_id in self._no_key_told
            or not interaction.is_guild_integration()
            or not interaction.permissions.manage_guild
            or command.qualified_name.startswith(("config api-key", "config show"))
            or not interaction.response.is_done()
            or interaction.response.type is discord.InteractionResponseType.modal
        ):
            return
        if await self.guild_config.has_key(guild_id):
            return
        self._no_key_told.add(guild_id)
        try:
            await interaction.followup.send(
                _(NO_KEY_YET), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
            )
        except discord.HTTPException as exc:
            log.warning("could not tell an admin of guild %s to set a key: %s", guild_id, exc)

    def add_dynamic_items(self, *items: type[discord.ui.DynamicItem[Any]]) -> None:
        """Register restart-safe buttons (discord.py), remembering their templates."""
        super().add_dynamic_items(*items)
        self._buttons.extend(items)

    async def _unanswered(self, interaction: discord.Interaction[Any]) -> None:
        """Answer a submission or a press that discord.py dropped: nothing here handles it.

        Without an answer the member would see "This interaction failed". A form was shown
        before a restart, or over :data:`~bot.discord.tree.FORM_SECONDS` ago; a button's
        custom id matches none of the registered templates (a button of an older version,
        whose view lived in that process's memory). Every button the bot sends is one of
        those ``DynamicItem`` classes (``tests/discord/test_admission.py``).
        """
        data: dict[str, Any] = dict(interaction.data or {})
        custom_id = str(data.get("custom_id", ""))
        kind = interaction.type
        if kind is discord.InteractionType.modal_submit and not self.forms.is_open(custom_id):
            with using(member_locale(interaction)):
                await send_ephemeral(interaction, _(FORM_EXPIRED))
        elif kind is discord.InteractionType.component and not self._answers(custom_id):
            with using(member_locale(interaction)):
                await send_ephemeral(interaction, _(BUTTON_GONE))

    def _answers(self, custom_id: str) -> bool:
        """Whether a registered button class answers a press of ``custom_id``."""
        return any(b.__discord_ui_compiled_template__.fullmatch(custom_id) for b in self._buttons)

    async def on_message(self, message: discord.Message, /) -> None:
        """Members' messages go to the cogs' listeners only: the bot has no prefix commands.

        (``commands.Bot`` would parse a mention as a command prefix and log every message as
        an unknown command.)
        """

    async def setup_hook(self) -> None:
        """Load the cogs, sync if needed, then resume pending jobs and start the poller."""
        self.add_dynamic_items(ChoiceButton)
        for extension in EXTENSIONS:
            await self.load_extension(extension)
        # Before the sync: the localized descriptions are part of what is registered.
        await self.tree.set_translator(CatalogueTranslator())
        await self.sync_commands(force=self._sync in ("force", "only"))
        if self._sync == "only":
            return
        # The registered commands, which the buttons' checks need, unless the sync gave them.
        self.command_access.warm()
        if self.services.settings.poller_enabled:
            self._poller_task = self._start(self.poller.run, "poller")
        else:
            log.info("POLLER_ENABLED=false: jobs are polled and delivered by workers")
        self._start(self.services.catalogue.run, "catalogue-refresh")
        self._start(self._sweep_reservations, "reservation-sweep")
        self._start(build_retention(self.services).run, "retention-sweep")
        if self.services.credits.packs:  # CREDIT_PACKS: purchases settled with Discord
            self.services.credits.set_desk(DiscordEntitlements(self))
            self._start(self._reconcile_credits, "credit-reconcile")
        await self._prime_catalogue()

    async def _prime_catalogue(self) -> None:
        """Fetch the catalogue before going online, so the first autocomplete has choices."""
        key = self.services.default_key
        if key is None:
            return
        self.services.catalogue.use_key(key)
        try:
            async with asyncio.timeout(PRIME_CATALOGUE_SECONDS):
                # Interactive: start-up waits on it, so it must not queue behind the polls'
                # floor when the key's recorded window is full (genapi/ratelimit.py).
                await self.services.catalogue.refresh(key, priority=Priority.INTERACTIVE)
        except TimeoutError:
            log.warning(
                "catalogue not loaded within %.0f s of start-up (a slow service, or the key's "
                "window full); autocomplete waits for it",
                PRIME_CATALOGUE_SECONDS,
            )
        except GenAPIError as exc:
            log.warning("catalogue not loaded at start-up (%s); autocomplete waits for it", exc)

    def _start(self, run: Callable[[], Coroutine[Any, Any, None]], name: str) -> asyncio.Task[None]:
        """Run a background task for as long as the bot runs, restarted if it fails."""
        task = asyncio.create_task(supervise(name, run, clock=self.services.clock), name=name)
        self._tasks.append(task)
        return task

    @property
    def metrics(self) -> Metrics:
        """The process's metrics (the services'), for the command tree."""
        return self.services.metrics

    @property
    def closing(self) -> bool:
        """True once a shutdown began: new commands are refused (``/readyz`` says 503)."""
        return self._closing

    def admit_command(self) -> bool:
        """Count the command running in the current task as in flight, unless shutting down.

        Called by the command tree before every command; :meth:`close` waits for the admitted
        ones, so that a command that reached the service records its charge and answers.

        Returns:
            False while shutting down: the command must not run.
        """
        if self._closing:
            return False
        task = asyncio.current_task()
        if task is not None:
            self._commands.add(task)
            task.add_done_callback(self._commands.discard)
        return True

    def close_on_signal(self, name: str) -> None:
        """Start a graceful :meth:`close` (a SIGTERM or SIGINT handler; see ``__main__``)."""
        if self._closing:
            log.warning("%s received: already shutting down", name)
            return
        self._closing = True
        running = len(self._commands)
        log.warning(
            "%s received: taking no new commands; waiting up to %.0f s for %d running %s",
            name,
            self._shutdown_grace,
            running,
            "command" if running == 1 else "commands",
        )
        self._shutdown = asyncio.create_task(self.close(), name="shutdown")

    async def close(self) -> None:
        """Shut down: refuse new commands, let running ones finish, stop the tasks, disconnect.

        Commands already running get up to ``shutdown_grace`` seconds, the gateway and REST
        still open, so that a charge the service reported is recorded and its result shown.
        The poller stops claiming at once and drains its polls and deliveries in the same
        grace (:meth:`bot.jobs.poller.Poller.stop`), releasing the leases of what it cut short.
        """
        self._closing = True
        self.poller.stop()
        running = set(self._commands)
        if running:
            _, unfinished = await asyncio.wait(running, timeout=self._shutdown_grace)
            if unfinished:
                log.error(
                    "shutting down with %d commands still running after %.0f s: cancelled; a "
                    "charge they were settling goes to the settlement spool, replayed at the "
                    "next start",
                    len(unfinished),
                    self._shutdown_grace,
                )
                # Cancelled now, while the loop is whole: a settlement under way spools its
                # charge and job on cancellation (bot.services.billing), then ends.
                for task in unfinished:
                    task.cancel()
                await asyncio.wait(unfinished, timeout=SPOOL_ON_CANCEL_SECONDS)
        if self._poller_task is not None and not self._poller_task.done():
            # The poller's own grace bounds its drain; the margin covers releasing its leases.
            await asyncio.wait({self._poller_task}, timeout=self._shutdown_grace + 5.0)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await super().close()

    async def on_guild_remove(self, guild: discord.Guild) -> None:
        """The bot was removed from a server (``GUILD_DELETE`` without ``unavailable``).

        Its results go straight to the requesters' DMs: requests there would only answer
        403 Missing Access (50001), which Discord counts toward banning the bot.
        """
        log.info("removed from guild %s; its results go by DM", guild.id)
        self.announcer.guild_removed(guild.id)

    async def on_guild_join(self, guild: discord.Guild) -> None:
        """The bot joined a server (again): its channels are delivered to as usual."""
        self.announcer.guild_joined(guild.id)
        self.command_access.warm(guild.id)
        await self.check_permissions(guild)

    async def on_guild_available(self, guild: discord.Guild) -> None:
        """A server's ``GUILD_CREATE``: read its command permissions before anyone clicks.

        A button's click is acknowledged before any REST call; what its check needs is read
        here (:meth:`bot.discord.command_access.CommandAccess.warm`).
        """
        self.command_access.warm(guild.id)

    async def on_ready(self) -> None:
        """Every shard is ready: check the bot's permissions in each of its servers."""
        for guild in self.guilds:
            await self.check_permissions(guild)

    async def check_permissions(self, guild: discord.Guild) -> list[str]:
        """Warn when the bot's roles in ``guild`` lack a permission the commands need.

        Checks ``guild.me``'s role permissions against the one list
        (:data:`bot.discord.permissions.COMMAND_PERMISSIONS`); channel overwrites are each
        command's own check. Logs one warning per server naming what is missing (again only if that
        changes) and, where the server has an admin channel, posts one sentence there at most
        once per process, so the admins learn what to grant without a flood of posts.

        Returns:
            The missing permissions' discord.py names (empty when none, or before the bot's
            member is known).
        """
        me = guild.me
        if me is None:
            return []
        missing = missing_permissions(me.guild_permissions)
        if not missing:
            self._permissions_warned.pop(guild.id, None)
            return []
        if self._permissions_warned.get(guild.id) != tuple(missing):
            self._permissions_warned[guild.id] = tuple(missing)
            log.warning(
                "guild %s: my roles lack %s; the commands need them (python -m bot invite "
                "lists every permission)",
                guild.id,
                permission_names(missing),
            )
        if guild.id not in self._permissions_told:
            self._permissions_told.add(guild.id)
            channel_id = await self.guild_config.admin_channel(guild.id)
            if channel_id is not None:
                with using(await self.locales.of(guild.id)):
                    notice = missing_permissions_notice(permission_names(missing))
                await self.post_admin_line(guild.id, channel_id, notice)
        return missing

    async def sync_commands(self, *, force: bool = False) -> bool:
        """Sync the command tree if its definitions changed since the last sync, or if forced.

        Syncing on every start would burn Discord's daily command-create limit. Commands go to
        ``DEV_GUILD_ID`` when it is set (instant), else globally.

        Returns:
            Whether a sync was made.
        """
        guild_id = self.services.settings.dev_guild_id
        guild = discord.Object(guild_id) if guild_id else None
        if guild is not None:
            self.tree.copy_global_to(guild=guild)
        # With their localizations, as the sync sends them: a changed translation re-syncs.
        payload = await translated_payload(self.tree, guild)
        digest = hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest()
        scope = f"{self.application_id}:{guild_id or 'global'}"
        if not force and await self.services.command_sync.unchanged(scope, digest):
            log.info("application commands unchanged; not syncing")
            return False
        synced = await self.tree.sync(guild=guild)
        self.command_access.set_commands(synced)
        await self.services.command_sync.record(scope, digest)
        log.info("synced %d application commands to %s", len(synced), guild_id or "all guilds")
        return True

    async def _command_permissions_updated(
        self, event: discord.RawAppCommandPermissionsUpdateEvent
    ) -> None:
        if event.application_id == self.application_id:
            entries = [Override(p.id, p.type.value, p.permission) for p in event.permissions]
            self.command_access.updated(event.guild.id, event.target_id, entries)

    async def _shard_ready(self, shard_id: int) -> None:
        # A new session (not a resume) may have missed permission updates: read them again,
        # now rather than at the next click (discord.py announces the shard's guilds first).
        self.command_access.forget()
        for guild in self.guilds:
            self.command_access.warm(guild.id)

    async def _reconcile_credits(self) -> None:
        await reconcile_forever(self.services.credits, self.services.clock)

    async def _sweep_reservations(self) -> None:
        await sweep_stale(self.services)

    async def _notify_admins(self, guild_id: int, channel_id: int, problem: KeyProblem) -> None:
        shared = not await self.guild_config.has_own_key(guild_id)
        with using(await self.locales.of(guild_id)):
            text = key_problem_notice(problem, shared=shared)
        channel = self.get_partial_messageable(channel_id, guild_id=guild_id)
        try:
            await channel.send(text)
        except discord.HTTPException as exc:
            log.warning("could not post an admin notice in guild %s: %s", guild_id, exc)

    async def _missing_key_notice(self, guild_id: int, key_fingerprint: str) -> None:
        await post_missing_key_notice(self, self.guild_config, guild_id, key_fingerprint)

    async def post_admin_line(self, guild_id: int, channel_id: int, text: str) -> None:
        """Post ``text`` (at most 2,000 characters kept) in a guild's admin channel.

        Mentions are never pinged (the bot's ``allowed_mentions`` is none); a failure is
        logged, never raised: the admin log must not break the command it reports on.
        """
        if isinstance(text, Later):  # a service's line: in the server's language
            with using(await self.locales.of(guild_id)):
                text = text.translated()
        await post_admin_line(self, guild_id, channel_id, text)

    async def cached_catalogue(self, guild_id: int | None) -> Catalogue | None:
        """Return the cached catalogue without waiting on the network (for autocomplete).

        When nothing is cached yet, a background fetch starts with the guild's key and None is
        returned: Discord allows autocomplete no deferral, so it must answer now.
        """
        return await self.generation.cached_catalogue(guild_id)

    async def post_takes_placeholder(self, jobs: Sequence[Job]) -> str:
        """Post the one card of a request's takes and hand every take to the poller.

        As :meth:`post_placeholder`, the card a channel message of the bot's own; each take's
        job points at it, and each delivery edits it (:mod:`bot.discord.render.takes`).

        Returns:
            A link to the card, or a sentence saying the results will be posted later.
        """
        first = jobs[0]
        locale = await self.locales.of(first.guild_id)  # a public card: the server's language
        parts = takes_card(jobs, sandbox=self.services.sandbox, locale=locale)
        channel = self.get_partial_messageable(first.channel_id, guild_id=first.guild_id)
        try:
            message = await send_card(channel, parts)
        except discord.HTTPException as exc:
            log.warning(
                "takes of job %s: card not posted (%s); results will be posted", first.id, exc
            )
            return posted_later(first.channel_id)
        for job in jobs:
            await self.generation.attach_message(job, message.id)
        self.poller.wake()
        return message.jump_url

    async def post_placeholder(self, job: Job) -> str:
        """Post ``job``'s public placeholder in its channel and hand the job to the poller.

        The placeholder is an ordinary message, edited later with the bot's own token: an
        interaction token dies after 15 minutes (Discord: 401, code 50027).

        Returns:
            A link to the placeholder, or a sentence saying the result will be posted later.
        """
        now = self.services.clock.time()
        ready_at = await self.services.schedule.estimated_finish(job, now=now)
        locale = await self.locales.of(job.guild_id)  # a public card: the server's language
        sandbox = self.services.sandbox
        parts = job_placeholder(job, now=now, sandbox=sandbox, ready_at=ready_at, locale=locale)
        channel = self.get_partial_messageable(job.channel_id, guild_id=job.guild_id)
        try:
            message = await send_card(channel, parts)
        except discord.HTTPException as exc:
            log.warning("job %s: placeholder not posted (%s); result will be posted", job.id, exc)
            return posted_later(job.channel_id)
        await self.generation.attach_message(job, message.id)
        self.poller.wake()
        return message.jump_url
