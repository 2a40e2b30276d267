"""What the web dashboard asks Discord, with the bot's token over REST.

The dashboard decides who may see a server from what the bot reads there now (the bot is a
member; the member's roles and permissions), never from what the member's own OAuth2 token said
at sign-in. REST only, so that a gateway process and ``python -m bot worker`` (no gateway
cache) answer alike; the dashboard caches the answers (about a minute).

It is also how a decision on the dashboard's Review page reaches the member
(:meth:`RestDirectory.settle_review`): by the same code as the review channel's buttons
(:mod:`bot.discord.safety_review`).
"""

from __future__ import annotations

import logging
from typing import Any, Final

import discord

from bot.discord.locales import GuildLocales
from bot.discord.safety_review import ReviewSettler, downloader
from bot.domain import MemberAccess, MemberProfile, MessageUnreachable, SafetyRecord
from bot.wiring import Services

log = logging.getLogger(__name__)

ADMINISTRATOR = 1 << 3
"""Discord's ADMINISTRATOR permission bit: every permission (developer docs, "Permissions")."""

TEXT_CHANNEL_TYPES = frozenset({0, 5})
"""GUILD_TEXT and GUILD_ANNOUNCEMENT (developer docs, "Channel Types"): where commands run and
notices are posted."""

UNKNOWN_MESSAGE = 10008
"""Discord's JSON error code of a 404 for a message that is gone (developer docs, "JSON Error
Codes"); the channel's own 404 is 10003 Unknown Channel."""

ALL_PERMISSIONS = (1 << 53) - 1
"""Every permission bit, for the server's owner (who has them all, whatever their roles)."""


CDN: Final = "https://cdn.discordapp.com"
"""Discord's CDN, where avatars live (developer docs, "Image Formatting")."""

AVATAR_SIZE: Final = 64
"""The avatar's pixels asked of the CDN (a power of two; shown at 24 px, sharp at 2x)."""


def _display_name(member: dict[str, Any]) -> str:
    user = member.get("user") or {}
    return str(member.get("nick") or user.get("global_name") or user.get("username") or "")


def avatar_url(guild_id: int, member: dict[str, Any]) -> str:
    """The member's avatar on Discord's CDN (developer docs, "Image Formatting").

    The server's own avatar of the member first, else the account's, else Discord's default
    avatar: ``(user id >> 22) % 6`` for the new usernames, ``discriminator % 5`` for legacy.
    """
    user = member.get("user") or {}
    user_id = int(user.get("id", 0))
    if member.get("avatar"):
        return (
            f"{CDN}/guilds/{guild_id}/users/{user_id}/avatars/{member['avatar']}.png"
            f"?size={AVATAR_SIZE}"
        )
    if user.get("avatar"):
        return f"{CDN}/avatars/{user_id}/{user['avatar']}.png?size={AVATAR_SIZE}"
    discriminator = str(user.get("discriminator") or "0")
    index = (user_id >> 22) % 6 if discriminator in ("0", "0000") else int(discriminator) % 5
    return f"{CDN}/embed/avatars/{index}.png"


class RestDirectory:
    """The dashboard's view of Discord through a logged-in client's REST (``client.http``).

    Args:
        client: a discord.py client that logged in (``login``), with or without a gateway.
        reviews: what follows a review's decision on the member's side (:meth:`settle_review`).
    """

    def __init__(self, client: discord.Client, *, reviews: ReviewSettler) -> None:
        self._client = client
        self._reviews = reviews

    @classmethod
    def over(
        cls, client: discord.Client, services: Services, locales: GuildLocales | None = None
    ) -> RestDirectory:
        """The directory of a process's ``services`` on ``client`` (the gateway's or a worker's).

        Args:
            client: the logged-in client.
            services: the process's services (results' jobs and requests, downloads).
            locales: the servers' languages (the gateway's bot's own); None: read by REST.
        """
        if locales is None:
            locales = GuildLocales(client, services.guild_config, services.clock, rest=True)
        reviews = ReviewSettler(
            client, services.generation, locales, downloader(services.downloads)
        )
        return cls(client, reviews=reviews)

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        """Return the member's permissions and roles in the server, as the bot reads them.

        None when the bot is not in the server (403 Missing Access, 404 Unknown Guild) or the
        user is not a member (404 Unknown Member). The permissions are the base permissions
        of Discord's computation: @everyone's and every role's, all of them for the owner or
        with ADMINISTRATOR (developer docs, "Permissions", "Permission Hierarchy").

        Raises:
            discord.HTTPException: Discord failed otherwise (5xx, 429 after retries).
        """
        http = self._client.http
        try:
            guild = await http.get_guild(guild_id, with_counts=False)
            member = await http.get_member(guild_id, user_id)
        except (discord.NotFound, discord.Forbidden):
            return None
        roles = {int(r["id"]): int(r.get("permissions", 0)) for r in guild.get("roles", [])}
        role_ids = frozenset(int(r) for r in member.get("roles", []))
        permissions = roles.get(guild_id, 0)  # @everyone's id is the guild's
        for role_id in role_ids:
            permissions |= roles.get(role_id, 0)
        if int(guild.get("owner_id", 0)) == user_id or permissions & ADMINISTRATOR:
            permissions = ALL_PERMISSIONS
        return MemberAccess(str(guild.get("name", "")), permissions, role_ids)

    async def member_profile(self, guild_id: int, user_id: int) -> MemberProfile | None:
        """Return the member's name in the server (nickname, else display name) and avatar.

        One ``GET /guilds/{id}/members/{user}``. None when they are not a member (left, or
        their account was deleted) or the bot cannot see the server.

        Raises:
            discord.HTTPException: Discord failed otherwise (5xx, 429 after retries).
        """
        try:
            member = dict(await self._client.http.get_member(guild_id, user_id))
        except (discord.NotFound, discord.Forbidden):
            return None
        return MemberProfile(_display_name(member), avatar_url(guild_id, member))

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        """Return the message's attachment URLs, freshly signed by Discord.

        Discord's attachment URLs expire (their ``ex`` parameter); fetching the message again
        gives URLs signed anew (developer docs, "Attachment Object", signed URLs).

        Raises:
            MessageUnreachable: 403 (the channel is out of the bot's reach: the whole channel),
                404 Unknown Message (this message), or another 404 (the channel is gone).
            discord.HTTPException: Discord failed otherwise.
        """
        try:
            message = await self._client.http.get_message(channel_id, message_id)
        except discord.Forbidden:
            raise MessageUnreachable(whole_channel=True) from None
        except discord.NotFound as exc:
            raise MessageUnreachable(whole_channel=exc.code != UNKNOWN_MESSAGE) from None
        return [str(a["url"]) for a in message.get("attachments", []) if a.get("url")]

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """Return the server's roles a tier may name, highest first: (id, name).

        @everyone (whose id is the guild's: Discord never lists it among a member's roles, so
        a tier on it would never apply) and integrations' managed roles are left out.

        Raises:
            discord.HTTPException: Discord failed.
        """
        return [(i, n) for i, n, _ in await self.coloured_roles(guild_id)]

    async def coloured_roles(self, guild_id: int) -> list[tuple[int, str, int]]:
        """:meth:`roles` with each role's colour: (id, name, 0xRRGGBB; 0 for none).

        Raises:
            discord.HTTPException: Discord failed.
        """
        found = await self._client.http.get_roles(guild_id)
        kept = [r for r in found if int(r["id"]) != guild_id and not r.get("managed", False)]
        kept.sort(key=lambda r: -int(r.get("position", 0)))
        return [(int(r["id"]), str(r.get("name", "")), int(r.get("color", 0))) for r in kept]

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """Return the server's text and announcement channels, in its order: (id, name).

        Raises:
            discord.HTTPException: Discord failed.
        """
        found = await self._client.http.get_all_guild_channels(guild_id)
        text = [c for c in found if int(c.get("type", -1)) in TEXT_CHANNEL_TYPES]
        text.sort(key=lambda c: (int(c.get("position", 0)), int(c["id"])))
        return [(int(c["id"]), str(c.get("name", ""))) for c in text]

    async def delete_message(self, channel_id: int, message_id: int) -> None:
        """Delete one of the bot's messages (a removed showcase entry's post in its channel).

        Failures are logged, never raised: the entry is removed from the showcase whatever
        Discord answers (the post may be gone already).
        """
        try:
            await self._client.http.delete_message(channel_id, message_id)
        except discord.HTTPException as exc:
            log.info("could not delete message %s in %s: %s", message_id, channel_id, exc)

    async def settle_review(self, decision: SafetyRecord) -> None:
        """Act on the member's side of a decision made on the Review page; never raises.

        As the review channel's Approve and Reject do (:mod:`bot.discord.safety_review`): an
        approved synchronous image is posted as a reply to its card with its files, pinging
        the member (an approved job is delivered again by the poller); a rejected result's
        card says so and the member is pinged in a reply. Failures are logged.
        """
        await self._reviews.settle(decision)
