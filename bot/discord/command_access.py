"""Whether a member may use an application command here: Discord's command permissions, for clicks.

Discord applies a server's command permissions (Server Settings → Integrations → the app) to
application commands only; a button or a modal is never checked. A result's button that spends
(Again, Animate, Edit, Vary on a text) is the command behind it run again, so it must be allowed
only where the clicker could run that command in that channel (issue 20, E5).

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
from typing import Any, Final

import discord
from discord.ext.commands import AutoShardedBot

from bot.errors import ValidationFailed

log = logging.getLogger(__name__)

ROLE: Final = 1
USER: Final = 2
CHANNEL: Final = 3
"""Application command permission types (Discord: Application Command Permission Type)."""

ADMINISTRATOR: Final = 1 << 3
"""Discord's Administrator permission bit: "Members with the Administrator permission can use
all commands" (Application Commands → Permissions)."""


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


@dataclass(frozen=True, slots=True)
class RegisteredCommand:
    """An application command as Discord has it registered: its id and default permissions."""

    id: int
    default_member_permissions: int | None


def refusal(command: str) -> str:
    """The sentence a member barred from ``/command`` hears on a button that would run it."""
    return (
        f"This server does not let you use `/{command}` here (Server Settings → Integrations), "
        "so this button is not available to you."
    )


UNCHECKED = "I could not check this server's command permissions just now; try again in a moment."


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
        """Apply ``APPLICATION_COMMAND_PERMISSIONS_UPDATE``: ``target_id``'s whole new list."""
        # A read under way may predate this update: it is then not kept (read again next time).
        self._updates += 1
        guild = self._guilds.get(guild_id)
        if guild is None:
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
        data = await self._bot.http.get_guild_application_command_permissions(
            application_id, guild_id
        )
        found = {int(item["id"]): parse_overrides(item["permissions"]) for item in data}
        found = {target: entries for target, entries in found.items() if entries}
        if updates == self._updates:
            self._guilds[guild_id] = found
        return found

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
            raise ValidationFailed("This works in servers only.")
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
