"""Discord permission bits and channel permission computation."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .models import Channel, Guild

CREATE_INSTANT_INVITE = 1 << 0
ADMINISTRATOR = 1 << 3
ADD_REACTIONS = 1 << 6
VIEW_CHANNEL = 1 << 10
SEND_MESSAGES = 1 << 11
SEND_TTS_MESSAGES = 1 << 12
MANAGE_MESSAGES = 1 << 13
EMBED_LINKS = 1 << 14
ATTACH_FILES = 1 << 15
READ_MESSAGE_HISTORY = 1 << 16
MENTION_EVERYONE = 1 << 17
USE_EXTERNAL_EMOJIS = 1 << 18
CONNECT = 1 << 20
SPEAK = 1 << 21
CHANGE_NICKNAME = 1 << 26
USE_APPLICATION_COMMANDS = 1 << 31
MANAGE_THREADS = 1 << 34
CREATE_PUBLIC_THREADS = 1 << 35
USE_EXTERNAL_STICKERS = 1 << 37
SEND_MESSAGES_IN_THREADS = 1 << 38

ALL_PERMISSIONS = (1 << 51) - 1

#: What an ordinary member has (Discord's default @everyone permissions, roughly).
DEFAULT_MEMBER_PERMISSIONS = (
    CREATE_INSTANT_INVITE
    | ADD_REACTIONS
    | VIEW_CHANNEL
    | SEND_MESSAGES
    | EMBED_LINKS
    | ATTACH_FILES
    | READ_MESSAGE_HISTORY
    | USE_EXTERNAL_EMOJIS
    | CONNECT
    | SPEAK
    | CHANGE_NICKNAME
    | USE_APPLICATION_COMMANDS
    | CREATE_PUBLIC_THREADS
    | USE_EXTERNAL_STICKERS
    | SEND_MESSAGES_IN_THREADS
)

#: The bot's managed role: "admin-like" minus Administrator.
DEFAULT_BOT_PERMISSIONS = (
    DEFAULT_MEMBER_PERMISSIONS
    | SEND_TTS_MESSAGES
    | MANAGE_MESSAGES
    | MENTION_EVERYONE
    | MANAGE_THREADS
)


def compute_permissions(guild: Guild, channel: Channel | None, user_id: int) -> int:
    """Compute a member's permissions in a channel the way Discord does.

    Args:
        guild: The guild.
        channel: The channel, or ``None`` for guild-level permissions.
        user_id: The member's user id.

    Returns:
        The permission bitfield.
    """
    if user_id == guild.owner_id:
        return ALL_PERMISSIONS
    member = guild.members.get(user_id)
    role_ids = set(member.role_ids) if member else set()
    base = guild.roles[guild.id].permissions
    for role_id in role_ids:
        if role_id in guild.roles:
            base |= guild.roles[role_id].permissions
    if base & ADMINISTRATOR:
        return ALL_PERMISSIONS
    if channel is None:
        return base
    overwrites = channel.overwrites
    everyone = overwrites.get(guild.id)
    if everyone:
        base = (base & ~everyone.deny) | everyone.allow
    allow = deny = 0
    for role_id in role_ids:
        ow = overwrites.get(role_id)
        if ow and ow.type == 0:
            allow |= ow.allow
            deny |= ow.deny
    base = (base & ~deny) | allow
    own = overwrites.get(user_id)
    if own and own.type == 1:
        base = (base & ~own.deny) | own.allow
    if not base & VIEW_CHANNEL:
        return 0
    return base


def with_overwrites(
    permissions: int, guild: Guild, channel: Channel | None, role_ids: list[int], user_id: int
) -> int:
    """``permissions`` with a channel's overwrites applied: @everyone's, the roles', the member's.

    Discord computes an interaction's ``member.permissions`` this way ("Permissions",
    Permission Overwrites); a thread takes its parent's overwrites. Administrators keep all.
    """
    if channel is None or permissions & ADMINISTRATOR:
        return permissions
    overwrites = channel.overwrites
    everyone = overwrites.get(guild.id)
    if everyone:
        permissions = (permissions & ~everyone.deny) | everyone.allow
    allow = deny = 0
    for role_id in role_ids:
        ow = overwrites.get(role_id)
        if ow and ow.type == 0:
            allow |= ow.allow
            deny |= ow.deny
    permissions = (permissions & ~deny) | allow
    own = overwrites.get(user_id)
    if own and own.type == 1:
        permissions = (permissions & ~own.deny) | own.allow
    return permissions


#: What anyone may do in a DM (there are no overwrites there).
DM_PERMISSIONS = (
    VIEW_CHANNEL | SEND_MESSAGES | EMBED_LINKS | ATTACH_FILES | READ_MESSAGE_HISTORY | ADD_REACTIONS
)


#: ``app_permissions`` of a user install's interaction in a server without the bot (Discord,
#: Interaction Object: ATTACH_FILES | EMBED_LINKS | MENTION_EVERYONE); it cannot read or post
#: in the channel, only answer the interaction.
USER_INSTALL_APP_PERMISSIONS = ATTACH_FILES | EMBED_LINKS | MENTION_EVERYONE


#: Application command permission types (Discord: Application Command Permission Type).
COMMAND_PERMISSION_ROLE, COMMAND_PERMISSION_USER, COMMAND_PERMISSION_CHANNEL = 1, 2, 3


def command_permitted(
    entries_by_target: dict[int, list[dict[str, Any]]],
    *,
    application_id: int,
    command: dict[str, Any],
    guild_id: int,
    channel_id: int,
    user_id: int,
    role_ids: list[int],
    permissions: int,
) -> bool:
    """Whether Discord's client lets a member run ``command`` in a channel.

    Discord's "Permissions v2" (the change log's flowchart, and Application Commands ->
    Permissions): administrators always; then channel entries (the command's for the channel,
    its All Channels entry ``guild_id - 1``, then the app's, whose id is the application id) where
    false refuses; then the command's user, role (one allowing role suffices), @everyone (the
    guild id) entries, which decide outright; else the app's, where false refuses; and last
    ``default_member_permissions`` (null: everyone, "0": nobody but admins).

    Args:
        entries_by_target: the guild's permissions by command id or application id.
        application_id: the application's id.
        command: the registered command (``id``, ``default_member_permissions``).
        guild_id: the guild.
        channel_id: where (a thread's parent: its channel's entries apply to it).
        user_id: the member.
        role_ids: the member's roles.
        permissions: the member's permissions in the channel.
    """
    if permissions & ADMINISTRATOR:
        return True
    levels = (
        entries_by_target.get(int(command["id"]), []),
        entries_by_target.get(application_id, []),
    )

    def find(entries: list[dict[str, Any]], kind: int, ids: set[int]) -> list[bool]:
        return [
            bool(e["permission"]) for e in entries if int(e["type"]) == kind and int(e["id"]) in ids
        ]

    for entries in levels:
        for wanted in (channel_id, guild_id - 1):
            found = find(entries, COMMAND_PERMISSION_CHANNEL, {wanted})
            if found:
                if not found[0]:
                    return False
                break
        else:
            continue
        break
    for level, entries in enumerate(levels):
        verdict: bool | None = None
        user = find(entries, COMMAND_PERMISSION_USER, {user_id})
        roles = find(entries, COMMAND_PERMISSION_ROLE, set(role_ids) - {guild_id})
        everyone = find(entries, COMMAND_PERMISSION_ROLE, {guild_id})
        if user:
            verdict = user[0]
        elif roles:
            verdict = any(roles)
        elif everyone:
            verdict = everyone[0]
        if verdict is None:
            continue
        if level == 0 or not verdict:
            return verdict
        break
    required = command.get("default_member_permissions")
    if required is None:
        return True
    return int(required) != 0 and int(required) & ~permissions == 0
