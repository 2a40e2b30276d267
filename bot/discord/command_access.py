"""Whether a member may use an application command here: Discord's command permissions, for clicks.

Discord applies a server's command permissions (Server Settings → Integrations → the app) to
application commands only; a button or a modal is never checked. A result's button that spends
(Again, Animate, Edit, Vary on a text) is the command behind it run again, so it must be allowed
only where the clicker could run that command in that channel.

The rule, :func:`may_use_command`, is pure. :class:`CommandAccess` keeps what it needs: the
application's registered commands (id and ``default_member_permissions``) and each guild's
permission overrides, read with the bot token from
``GET /applications/{app}/guilds/{guild}/commands/permissions`` on first use and replaced by the
gateway event ``APPLICATION_COMMAND_PERMISSIONS_UPDATE`` (which carries a target's whole new
list). A new gateway session (READY, not RESUME) may have missed events, so it forgets them all.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import discord
from discord.ext.commands import AutoShardedBot

from bot.errors import ValidationFailed
from bot.i18n import N_, _

log = logging.getLogger(__name__)

ROLE: Final = 1
USER: Final = 2
CHANNEL: Final = 3
"""Application command permission types (Discord: Application Command Permission Type)."""

ADMINISTRATOR: Final = 1 << 3
"""Discord's Administrator permission bit: "Members with the Administrator permission can use
all commands" (Application Commands → Permissions)."""

USE_APPLICATION_COMMANDS: Final = 1 << 31
"""Discord's Use Application Commands permission bit: without it in a channel (its overwrites
included), Discord's client offers the member no command there (Permissions)."""

TIMED_OUT = N_("You are timed out in this server, so this is not available to you until it ends.")
NO_APPLICATION_COMMANDS = N_(
    "This channel does not let you use application commands (Use Application Commands), so "
    "this is not available to you here."
)


@dataclass(frozen=True, slots=True)
class Override:
    """One entry of a command's (or the app's) permissions in a guild.

    Attributes:
        id: a role, user or channel id, or a constant: the guild id is @everyone (type
            :data:`ROLE`), the guild id − 1 is All Channels (type :data:`CHANNEL`).
        type: :data:`ROLE`, :data:`USER` or :data:`CHANNEL`.
        permission: True allows, False denies.
    """

    id: int
    type: int
    permission: bool


@dataclass(frozen=True, slots=True)
class Invoker:
    """Who uses a command, and where.

    Attributes:
        guild_id: the guild.
        channel_id: the channel; for a thread, its parent (Discord: a channel's command
            permissions apply to the threads it contains).
        user_id: the member.
        role_ids: the member's roles (without @everyone).
        permissions: the member's permissions in that channel (the interaction's
            ``member.permissions`` bitfield, overwrites included).
    """

    guild_id: int
    channel_id: int
    user_id: int
    role_ids: frozenset[int]
    permissions: int


def parse_overrides(entries: Iterable[Mapping[str, Any]]) -> tuple[Override, ...]:
    """Discord's application command permissions objects (``id``, ``type``, ``permission``)."""
    return tuple(
        Override(int(entry["id"]), int(entry["type"]), bool(entry["permission"]))
        for entry in entries
    )


def _channel_verdict(overrides: Sequence[Override], invoker: Invoker) -> bool | None:
    """The channel entry for this channel, else the All Channels entry; None: neither."""
    all_channels = invoker.guild_id - 1
    for wanted in (invoker.channel_id, all_channels):
        for entry in overrides:
            if entry.type == CHANNEL and entry.id == wanted:
                return entry.permission
    return None


def _member_verdict(overrides: Sequence[Override], invoker: Invoker) -> bool | None:
    """The user's entry, else its roles' (allowed if at least one allows), else @everyone's."""
    for entry in overrides:
        if entry.type == USER and entry.id == invoker.user_id:
            return entry.permission
    roles = [
        e.permission
        for e in overrides
        if e.type == ROLE and e.id in invoker.role_ids and e.id != invoker.guild_id
    ]
    if roles:
        return any(roles)
    for entry in overrides:
        if entry.type == ROLE and entry.id == invoker.guild_id:
            return entry.permission
    return None


def may_use_command(
    *,
    application_id: int,
    command_id: int,
    default_member_permissions: int | None,
    overrides: Mapping[int, Sequence[Override]],
    invoker: Invoker,
) -> bool:
    """Whether ``invoker`` may use the command ``command_id`` where they are.

    Discord's rules ("Permissions v2": the change log's flowchart for command permissions, and
    Application Commands → Permissions):

    0. Administrators may use every command.
    1. Channel: the command's entry for the channel, else its All Channels entry, else the
       app's entry for the channel, else the app's All Channels entry; False refuses.
    2. Member: the command's entry for the user, else for the member's roles (allowed when at
       least one allows), else for @everyone decides, and an allow skips step 3. Without one,
       the app's entries in the same order: False refuses, True goes on to step 3.
    3. ``default_member_permissions``: None allows; 0 refuses (admins only); else the member
       needs every one of those permissions in the channel.

    Args:
        application_id: the application's id (the key of the app-level entries).
        command_id: the command's id.
        default_member_permissions: the command's registered bitfield, or None.
        overrides: a guild's entries by target: a command id, or ``application_id``.
        invoker: who, where, with which roles and permissions.

    Returns:
        True when Discord would let the member run the command there.
    """
    if invoker.permissions & ADMINISTRATOR:
        return True
    command = overrides.get(command_id, ())
    app = overrides.get(application_id, ())
    channel = _channel_verdict(command, invoker)
    if channel is None:
        channel = _channel_verdict(app, invoker)
    if channel is False:
        return False
    member = _member_verdict(command, invoker)
    if member is not None:
        return member
    if _member_verdict(app, invoker) is False:
        return False
    if default_member_permissions is None:
        return True
    if default_member_permissions == 0:
        return False
    return default_member_permissions & ~invoker.permissions == 0


def member_refusal(permissions: int, timed_out_until: datetime | None, now: datetime) -> str | None:
    """Why Discord would refuse the member every command here, or None when it would not.

    Discord refuses application commands to a timed-out member (``communication_disabled_until``
    in the future; Guild Member Object, "Timeouts") and where the member lacks Use Application
    Commands in the channel; an administrator is never refused (nor can be timed out). A
    button, a form or a conversation turn spends as the command behind it does, so it is held
    to the same rule.

    Args:
        permissions: the member's permissions in the channel, overwrites included (bitfield).
        timed_out_until: the end of the member's timeout (UTC), or None.
        now: the current time (UTC).

    Returns:
        :data:`TIMED_OUT`, :data:`NO_APPLICATION_COMMANDS`, or None.
    """
    if permissions & ADMINISTRATOR:
        return None
    if timed_out_until is not None and timed_out_until > now:
        return _(TIMED_OUT)
    if not permissions & USE_APPLICATION_COMMANDS:
        return _(NO_APPLICATION_COMMANDS)
    return None


def interaction_refusal(interaction: discord.Interaction[Any]) -> str | None:
    """:func:`member_refusal` for an interaction's member where it happens (None outside a guild).

    For a component or a modal submission the member's permissions in the channel are the
    interaction's ``member.permissions`` (overwrites included; Interaction Object), which
    discord.py gives as ``interaction.permissions``; ``app_permissions`` are the bot's.
    """
    user = interaction.user
    if interaction.guild_id is None or not isinstance(user, discord.Member):
        return None
    return member_refusal(
        interaction.permissions.value, user.timed_out_until, discord.utils.utcnow()
    )


@dataclass(frozen=True, slots=True)
class RegisteredCommand:
    """An application command as Discord has it registered: its id and default permissions."""

    id: int
    default_member_permissions: int | None


def refusal(command: str) -> str:
    """The sentence a member barred from ``/command`` hears on a button that would run it."""
    name = f"`/{command}`"
    return _(
        "This server does not let you use {command} here (Server Settings → Integrations), "
        "so this button is not available to you.",
        command=name,
    )


WARM_CONCURRENCY: Final = 4
"""Reads of guilds' command permissions at once when warming (a session starts with every
guild's ``GUILD_CREATE``; Discord's global limit is 50 requests a second)."""

READ_ATTEMPTS: Final = 3
"""Reads of one guild's permissions while updates keep arriving during the read."""

UNCHECKED = N_(
    "I could not check this server's command permissions just now; try again in a moment."
)


class CommandAccess:
    """The cache behind :func:`may_use_command` for interactions in the guilds of this process.

    Args:
        bot: the bot (its REST client, application id and command tree).
        dev_guild_id: where the commands are registered when ``DEV_GUILD_ID`` is set (None:
            globally).
    """

    def __init__(self, bot: AutoShardedBot, *, dev_guild_id: int | None = None) -> None:
        self._bot = bot
        self._dev_guild_id = dev_guild_id
        self._commands: dict[str, RegisteredCommand] | None = None
        self._guilds: dict[int, dict[int, tuple[Override, ...]]] = {}
        self._loading: dict[int, asyncio.Task[dict[int, tuple[Override, ...]]]] = {}
        self._updates = 0
        self._commands_loading: asyncio.Task[dict[str, RegisteredCommand]] | None = None
        # Warming every guild at a session's start must not burst Discord's rate limits.
        self._reads = asyncio.Semaphore(WARM_CONCURRENCY)
        self._warming: set[asyncio.Task[None]] = set()
        self._warm_guilds: set[int] = set()

    def set_commands(self, commands: Iterable[discord.app_commands.AppCommand]) -> None:
        """Remember the registered commands (``tree.sync`` or ``tree.fetch_commands`` result)."""
        self._commands = {
            c.name: RegisteredCommand(
                c.id,
                None
                if c.default_member_permissions is None
                else c.default_member_permissions.value,
            )
            for c in commands
            if c.type is discord.AppCommandType.chat_input
        }

    def forget(self) -> None:
        """Drop every guild's overrides (a new gateway session may have missed updates)."""
        self._updates += 1
        self._guilds.clear()

    def updated(self, guild_id: int, target_id: int, entries: Iterable[Override]) -> None:
        """Apply ``APPLICATION_COMMAND_PERMISSIONS_UPDATE``: ``target_id``'s whole new list.

        A guild not known yet is read now (:meth:`warm`), so that its next click need not.
        """
        # A read under way may predate this update: it is then not kept (it reads again).
        self._updates += 1
        guild = self._guilds.get(guild_id)
        if guild is None:
            self.warm(guild_id)
            return
        found = tuple(entries)
        if found:
            guild[target_id] = found
        else:
            guild.pop(target_id, None)

    async def _fetch_commands(self) -> dict[str, RegisteredCommand]:
        dev_guild = self._dev_guild_id
        guild = discord.Object(dev_guild) if dev_guild else None
        self.set_commands(await self._bot.tree.fetch_commands(guild=guild))
        assert self._commands is not None
        return self._commands

    async def _fetch_guild(self, guild_id: int) -> dict[int, tuple[Override, ...]]:
        application_id = self._bot.application_id
        assert application_id is not None
        updates = self._updates
        async with self._reads:
            data = await self._bot.http.get_guild_application_command_permissions(
                application_id, guild_id
            )
        found = {int(item["id"]): parse_overrides(item["permissions"]) for item in data}
        found = {target: entries for target, entries in found.items() if entries}
        if updates == self._updates:
            self._guilds[guild_id] = found
        return found

    def warm(self, guild_id: int | None = None) -> None:
        """Read in the background what a click would otherwise read before it could answer.

        Discord allows an interaction 3 seconds for its acknowledgement; a button's check must
        not wait on a REST call first (Interactions, "Responding to an Interaction"). Called
        at start-up (the registered commands: ``guild_id`` None), at ``GUILD_CREATE`` and on
        a permissions update for a guild not known yet. A failure is logged; the click then
        reads it after its acknowledgement.

        Args:
            guild_id: the guild whose overrides to read; None: the registered commands only.
        """
        if guild_id is not None and (guild_id in self._guilds or guild_id in self._warm_guilds):
            return
        if guild_id is not None:
            self._warm_guilds.add(guild_id)
        task = asyncio.create_task(self._warm(guild_id))
        self._warming.add(task)
        task.add_done_callback(self._warming.discard)

    async def _warm(self, guild_id: int | None) -> None:
        try:
            await self._registered()
            # A read overtaken by an update is not kept (_fetch_guild): read again.
            for _ in range(READ_ATTEMPTS):
                if guild_id is None or guild_id in self._guilds:
                    return
                await self._overrides(guild_id)
        except discord.HTTPException as exc:
            log.warning("command permissions of guild %s not read ahead: %s", guild_id, exc)
        except RuntimeError:
            # aiohttp's "Session is closed": the bot closed while reading ahead, for nobody.
            if not self._bot.is_closed():
                raise
        finally:
            self._warm_guilds.discard(guild_id or 0)

    def cached(self, command: str, invoker: Invoker) -> bool | None:
        """:meth:`allows` from what is already known, without asking Discord; None: unknown.

        For a form's opening, whose answer (the form) must come first: a member known to be
        barred is refused at once, the rest are checked when the form is submitted.
        """
        registered = None if self._commands is None else self._commands.get(command)
        overrides = self._guilds.get(invoker.guild_id)
        application_id = self._bot.application_id
        if registered is None or overrides is None or application_id is None:
            return None
        return may_use_command(
            application_id=application_id,
            command_id=registered.id,
            default_member_permissions=registered.default_member_permissions,
            overrides=overrides,
            invoker=invoker,
        )

    async def _registered(self) -> dict[str, RegisteredCommand]:
        if self._commands is not None:
            return self._commands
        if self._commands_loading is None or self._commands_loading.done():
            self._commands_loading = asyncio.create_task(self._fetch_commands())
        return await asyncio.shield(self._commands_loading)

    async def _overrides(self, guild_id: int) -> dict[int, tuple[Override, ...]]:
        cached = self._guilds.get(guild_id)
        if cached is not None:
            return cached
        task = self._loading.get(guild_id)
        if task is None or task.done():
            task = asyncio.create_task(self._fetch_guild(guild_id))
            self._loading[guild_id] = task
        try:
            return await asyncio.shield(task)
        finally:
            if task.done() and self._loading.get(guild_id) is task:
                del self._loading[guild_id]

    async def allows(self, command: str, invoker: Invoker) -> bool:
        """Whether ``invoker`` may use ``/command`` where they are (see :func:`may_use_command`).

        Raises:
            ValidationFailed: Discord could not be asked (fails closed: money is at stake), or
                the command is not registered.
        """
        try:
            registered = (await self._registered()).get(command)
            overrides = await self._overrides(invoker.guild_id)
        except discord.HTTPException as exc:
            log.warning("command permissions of guild %s not read: %s", invoker.guild_id, exc)
            raise ValidationFailed(UNCHECKED) from None
        if registered is None:
            raise ValidationFailed(UNCHECKED)
        application_id = self._bot.application_id
        assert application_id is not None
        return may_use_command(
            application_id=application_id,
            command_id=registered.id,
            default_member_permissions=registered.default_member_permissions,
            overrides=overrides,
            invoker=invoker,
        )

    async def require(self, interaction: discord.Interaction[Any], command: str) -> None:
        """Refuse ``interaction`` unless its member may use ``/command`` in its channel.

        Raises:
            ValidationFailed: the member may not (:func:`refusal`), or it could not be checked.
        """
        if interaction.guild_id is None or interaction.channel_id is None:
            raise ValidationFailed(N_("This works in servers only."))
        if not await self.allows(command, invoker_of(interaction)):
            raise ValidationFailed(refusal(command))


def invoker_of(interaction: discord.Interaction[Any]) -> Invoker:
    """The :class:`Invoker` of a guild interaction (member, roles, channel permissions)."""
    assert interaction.guild_id is not None
    assert interaction.channel_id is not None
    channel = interaction.channel
    parent = channel.parent_id if isinstance(channel, discord.Thread) else None
    user = interaction.user
    roles: Collection[int] = user._roles if isinstance(user, discord.Member) else ()
    return Invoker(
        guild_id=interaction.guild_id,
        channel_id=parent or interaction.channel_id,
        user_id=user.id,
        role_ids=frozenset(int(r) for r in roles),
        permissions=interaction.permissions.value,
    )
