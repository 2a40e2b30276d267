"""Serialisation of the world into Discord's JSON shapes (see discord/types/*.py)."""

from __future__ import annotations

from typing import Any

from .models import (
    FORUM_CHANNEL,
    Attachment,
    Channel,
    Guild,
    Member,
    Message,
    Role,
    UrlSigner,
    User,
    World,
    iso_now,
)


def user_payload(user: User) -> dict[str, Any]:
    """A user object."""
    data: dict[str, Any] = {
        "id": str(user.id),
        "username": user.username,
        "discriminator": "0",
        "global_name": user.global_name,
        "avatar": user.avatar,
        "avatar_decoration_data": None,
        "public_flags": 0,
        "banner": None,
        "accent_color": None,
        "primary_guild": None,
        "collectibles": None,
    }
    if user.bot:
        data["bot"] = True
    return data


def me_payload(user: User) -> dict[str, Any]:
    """The ``/users/@me`` object of the bot."""
    return {
        **user_payload(user),
        "flags": 0,
        "verified": True,
        "mfa_enabled": False,
        "email": None,
        "locale": "en-US",
        "bio": "",
    }


def role_payload(role: Role) -> dict[str, Any]:
    """A role object."""
    data: dict[str, Any] = {
        "id": str(role.id),
        "name": role.name,
        "color": role.colour,
        "colors": {"primary_color": role.colour, "secondary_color": None, "tertiary_color": None},
        "hoist": False,
        "icon": None,
        "unicode_emoji": None,
        "position": role.position,
        "permissions": str(role.permissions),
        "managed": role.managed,
        "mentionable": role.mentionable,
        "flags": 0,
    }
    if role.bot_id is not None:
        data["tags"] = {"bot_id": str(role.bot_id)}
    return data


def channel_payload(channel: Channel, permissions: int | None = None) -> dict[str, Any]:
    """A guild text channel object (``permissions`` is added in interaction payloads)."""
    data: dict[str, Any] = {
        "id": str(channel.id),
        "type": channel.type,
        "guild_id": str(channel.guild_id),
        "name": channel.name,
        "position": channel.position,
        "permission_overwrites": [
            {"id": str(o.id), "type": o.type, "allow": str(o.allow), "deny": str(o.deny)}
            for o in channel.overwrites.values()
        ],
        "parent_id": str(channel.parent_id) if channel.parent_id else None,
        "nsfw": channel.nsfw,
        "topic": channel.topic,
        "last_message_id": str(channel.last_message_id) if channel.last_message_id else None,
        "rate_limit_per_user": 0,
        "default_thread_rate_limit_per_user": 0,
        "flags": 0,
    }
    if channel.is_thread:
        data.update(
            owner_id=str(channel.guild_id),
            message_count=0,
            member_count=0,
            thread_metadata={
                "archived": channel.archived,
                "auto_archive_duration": 1440,
                "archive_timestamp": iso_now(),
                "locked": False,
            },
        )
        del data["permission_overwrites"]
    elif channel.type == FORUM_CHANNEL:
        data.update(available_tags=[], default_forum_layout=0, default_sort_order=None)
    if permissions is not None:
        data["permissions"] = str(permissions)
    return data


def member_payload(
    world: World, member: Member, *, with_user: bool = True, permissions: int | None = None
) -> dict[str, Any]:
    """A guild member object (``permissions`` only inside interactions)."""
    data: dict[str, Any] = {
        "nick": member.nick,
        "avatar": member.avatar,
        "banner": None,
        "roles": [str(r) for r in member.role_ids],
        "joined_at": member.joined_at,
        "premium_since": None,
        "deaf": False,
        "mute": False,
        "flags": 0,
        "pending": False,
        "communication_disabled_until": member.communication_disabled_until,
        "unusual_dm_activity_until": None,
        "avatar_decoration_data": None,
    }
    if with_user:
        data["user"] = user_payload(world.users[member.user_id])
    if permissions is not None:
        data["permissions"] = str(permissions)
    return data


def guild_payload(world: World, guild: Guild) -> dict[str, Any]:
    """A REST guild object."""
    general = next(iter(guild.channels), None)
    return {
        "id": str(guild.id),
        "name": guild.name,
        "icon": None,
        "icon_hash": None,
        "splash": None,
        "discovery_splash": None,
        "owner_id": str(guild.owner_id),
        "afk_channel_id": None,
        "afk_timeout": 300,
        "widget_enabled": False,
        "verification_level": 0,
        "default_message_notifications": 0,
        "explicit_content_filter": 0,
        "roles": [role_payload(r) for r in guild.roles.values()],
        "emojis": [],
        "stickers": [],
        "features": [],
        "mfa_level": 0,
        "application_id": None,
        "system_channel_id": str(general) if general else None,
        "system_channel_flags": 0,
        "rules_channel_id": None,
        "public_updates_channel_id": None,
        "safety_alerts_channel_id": None,
        "max_members": 500000,
        "max_video_channel_users": 25,
        "vanity_url_code": None,
        "description": None,
        "banner": None,
        "premium_tier": 0,
        "premium_subscription_count": 0,
        "preferred_locale": guild.preferred_locale,
        "nsfw_level": 0,
        "premium_progress_bar_enabled": False,
        "region": "deprecated",
    }


def guild_create_payload(world: World, guild: Guild) -> dict[str, Any]:
    """The GUILD_CREATE dispatch (only the bot's member: no GUILD_MEMBERS chunking needed)."""
    bot_member = guild.members[world.bot_user.id]
    return {
        **guild_payload(world, guild),
        "joined_at": bot_member.joined_at,
        "large": False,
        "unavailable": False,
        "lazy": True,
        "member_count": len(guild.members),
        "voice_states": [],
        "members": [member_payload(world, bot_member)],
        "channels": [
            {k: v for k, v in channel_payload(c).items() if k != "guild_id"}
            for c in guild.channels.values()
            if not c.is_thread
        ],
        # Only active threads (Gateway docs, Guild Create: "threads").
        "threads": [
            channel_payload(c) for c in guild.channels.values() if c.is_thread and not c.archived
        ],
        "presences": [],
        "stage_instances": [],
        "guild_scheduled_events": [],
        "soundboard_sounds": [],
        "embedded_activities": [],
        "application_command_counts": {},
    }


def attachment_payload(attachment: Attachment, signer: UrlSigner | None = None) -> dict[str, Any]:
    """An attachment object; its URL signed by ``signer`` (bare without one)."""
    url = attachment.url if signer is None else signer.sign(attachment)
    data: dict[str, Any] = {
        "id": str(attachment.id),
        "filename": attachment.filename,
        "size": attachment.size,
        "url": url,
        "proxy_url": url + ("&" if "?" in url else "?") + "proxy=1",
        "content_type": attachment.content_type,
    }
    if attachment.description is not None:
        data["description"] = attachment.description
    if attachment.ephemeral:
        data["ephemeral"] = True
    return data


def message_payload(world: World, message: Message) -> dict[str, Any]:
    """A message object as returned by REST."""
    author = world.users[message.author_id]
    data: dict[str, Any] = {
        "id": str(message.id),
        "type": message.type,
        "channel_id": str(message.channel_id),
        "author": user_payload(author),
        "content": message.content,
        "timestamp": message.timestamp,
        "edited_timestamp": message.edited_timestamp,
        "tts": message.tts,
        "mention_everyone": message.mentions.everyone,
        "mentions": [user_payload(world.users[u]) for u in sorted(message.mentions.users)],
        "mention_roles": [str(r) for r in sorted(message.mentions.roles)],
        "attachments": [attachment_payload(a, world.url_signer) for a in message.attachments],
        "embeds": [{"type": "rich", **e} for e in message.embeds],
        "pinned": message.pinned,
        "flags": message.flags,
        "components": message.components,
    }
    if message.reactions:
        data["reactions"] = [
            {
                "count": 1,
                "count_details": {"burst": 0, "normal": 1},
                "me": True,
                "me_burst": False,
                "burst_colors": [],
                "emoji": {"id": None, "name": emoji},
            }
            for emoji in message.reactions
        ]
    if message.webhook_id is not None:
        data["webhook_id"] = str(message.webhook_id)
    if message.application_id is not None:
        data["application_id"] = str(message.application_id)
    if message.interaction_metadata is not None:
        meta = message.interaction_metadata
        data["interaction_metadata"] = meta
        if "name" in meta:
            keys = ("id", "type", "name", "user")
            data["interaction"] = {k: meta[k] for k in keys}
    if message.message_reference is not None:
        data["message_reference"] = message.message_reference
        ref_id = int(message.message_reference.get("message_id", 0))
        ref = world.messages.get(ref_id)
        data["referenced_message"] = (
            message_payload(world, ref) if ref is not None and not ref.deleted else None
        )
    return data


def gateway_message_payload(world: World, message: Message) -> dict[str, Any]:
    """A MESSAGE_CREATE/MESSAGE_UPDATE dispatch body (adds guild_id and member)."""
    data = message_payload(world, message)
    if message.guild_id is not None:
        data["guild_id"] = str(message.guild_id)
        member = world.guilds[message.guild_id].members.get(message.author_id)
        if member is not None:
            data["member"] = member_payload(world, member, with_user=False)
    return data


def command_permissions_payload(
    world: World, guild_id: int, target_id: int, entries: list[dict[str, Any]]
) -> dict[str, Any]:
    """A guild application command permissions object (Application Commands docs): ``id`` is
    the command's id, or the application's for the entries of all its commands."""
    return {
        "id": str(target_id),
        "application_id": str(world.application_id),
        "guild_id": str(guild_id),
        "permissions": [dict(e) for e in entries],
    }
