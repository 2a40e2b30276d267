"""What a delivery can reach: servers that removed the bot, channels it cannot see, upload limits.

A server that removed the bot (``GUILD_DELETE``, or 403 Missing Access to ``GET /guilds/{id}``)
is skipped: its routes fail at once, without a request, and the result goes by DM. So is a
channel that answered 403 Missing Access or 404 Unknown Channel, for a while.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict

import discord

from bot.clock import Clock
from bot.discord.delivery.sending import (
    MISSING_ACCESS,
    REQUEST_ERRORS,
    UNKNOWN_CHANNEL,
    UNKNOWN_GUILD,
)
from bot.domain import Job

log = logging.getLogger(__name__)

DEFAULT_UPLOAD_LIMIT = 10 * 1024 * 1024
"""Bytes a bot may upload per message where the guild is unknown (Discord: 10 MiB)."""

DM_UPLOAD_LIMIT = DEFAULT_UPLOAD_LIMIT
"""Bytes a bot may upload per direct message (Discord: 10 MiB, whatever the server's boosts)."""

UPLOAD_LIMIT_TTL = 3600.0
"""Seconds a guild's upload limit fetched by REST is kept (it changes with its boost tier)."""

UPLOAD_LIMIT_RETRY = 300.0
"""Seconds a failed upload-limit lookup is remembered (10 MiB assumed meanwhile), so that a
failing ``GET /guilds/{id}`` is not repeated by every route and every job (Discord bans
clients making too many invalid requests)."""

UNREACHABLE_TTL = 3600.0
"""Seconds a server that answered 403 Missing Access (or 404 Unknown Guild) to
``GET /guilds/{id}``, or a channel that answered 403 Missing Access or 404 Unknown Channel, is
skipped by deliveries. ``GUILD_DELETE`` marks a server until the bot joins it again."""

BOT_LEFT = "the bot is no longer in this server"
"""Why a server's routes are skipped after ``GUILD_DELETE`` or a 403 Missing Access on it."""

GONE_CHANNELS_REMEMBERED = 4096
"""Channels marked out of reach at once; past it the oldest mark goes first (that channel is
then tried once more, and marked again if it still refuses). Marks also go when they expire,
whether or not a delivery looks them up."""

CHANNEL_UNSEEN = "the bot cannot see this channel"
"""Why a channel's routes are skipped after a 403 Missing Access or 404 Unknown Channel."""


class Reach:
    """Which servers and channels a delivery may try, and each server's upload limit.

    Args:
        client: the logged-in client (its guild cache, when it has a gateway connection).
        clock: wall time, for how long a server or channel is skipped and a limit kept.
    """

    def __init__(self, client: discord.Client, clock: Clock) -> None:
        self._client = client
        self._clock = clock
        self._upload_limits: dict[int, tuple[int, float]] = {}
        self._lookups: dict[int, asyncio.Future[int]] = {}
        # Servers that removed the bot and channels it cannot see: id -> until (clock time).
        self._gone_guilds: dict[int, float] = {}
        self._gone_channels: OrderedDict[int, float] = OrderedDict()  # oldest mark first

    @property
    def held(self) -> tuple[int, int]:
        """How many servers and channels are marked out of reach now (expired ones included)."""
        return len(self._gone_guilds), len(self._gone_channels)

    def guild_removed(self, guild_id: int) -> None:
        """The bot was removed from ``guild_id``: its routes are skipped until it joins again."""
        self._gone_guilds[guild_id] = float("inf")
        self._upload_limits.pop(guild_id, None)

    def guild_joined(self, guild_id: int) -> None:
        """The bot is (again) in ``guild_id``: its routes are tried again."""
        self._gone_guilds.pop(guild_id, None)
        self._upload_limits.pop(guild_id, None)

    def unreachable(self, job: Job) -> str | None:
        """Why the job's server or channel cannot be reached now; None if it may be."""
        now = self._clock.time()
        for gone, key, why in (
            (self._gone_guilds, job.guild_id, BOT_LEFT),
            (self._gone_channels, job.channel_id, CHANNEL_UNSEEN),
        ):
            until = gone.get(key)
            if until is not None:
                if until > now:
                    return why
                del gone[key]
        return None

    def note_failure(self, job: Job, exc: BaseException) -> None:
        """Remember a channel that answered Missing Access or Unknown Channel.

        The channel route would post there and fail the same way.
        """
        if not isinstance(exc, discord.HTTPException) or exc.code not in (
            MISSING_ACCESS,
            UNKNOWN_CHANNEL,
        ):
            return
        now = self._clock.time()
        gone = self._gone_channels
        gone.pop(job.channel_id, None)
        gone[job.channel_id] = now + UNREACHABLE_TTL
        # Every mark lasts UNREACHABLE_TTL, so the oldest expires first.
        while len(gone) > GONE_CHANNELS_REMEMBERED or next(iter(gone.values())) <= now:
            gone.popitem(last=False)

    async def upload_limit(self, guild_id: int) -> int:
        """Bytes the bot may attach to a message in ``guild_id`` (``Guild.filesize_limit``).

        From the gateway's guild cache; a process without a gateway connection (``python -m
        bot worker``) fetches the guild by REST (``GET /guilds/{id}``, which carries its boost
        tier) and keeps the limit for :data:`UPLOAD_LIMIT_TTL` seconds. If that fails:
        Discord's default for any guild, 10 MiB, kept :data:`UPLOAD_LIMIT_RETRY` seconds;
        a 403 Missing Access (or 404 Unknown Guild) also marks the server as gone (the bot
        was removed) for :data:`UNREACHABLE_TTL` seconds.
        """
        guild = self._client.get_guild(guild_id)
        if guild is not None:
            return guild.filesize_limit
        cached = self._upload_limits.get(guild_id)
        if cached is not None and cached[1] > self._clock.time():
            return cached[0]
        # Deliveries to one server at the same moment share one lookup.
        lookup = self._lookups.get(guild_id)
        if lookup is None:
            lookup = asyncio.ensure_future(self._fetch_upload_limit(guild_id))
            self._lookups[guild_id] = lookup
            lookup.add_done_callback(lambda _: self._lookups.pop(guild_id, None))
        return await asyncio.shield(lookup)

    async def _fetch_upload_limit(self, guild_id: int) -> int:
        now = self._clock.time()
        try:
            limit = (await self._client.fetch_guild(guild_id)).filesize_limit
        except REQUEST_ERRORS as exc:
            log.info("upload limit of guild %s unknown (%s); using 10 MiB", guild_id, exc)
            self._upload_limits[guild_id] = (DEFAULT_UPLOAD_LIMIT, now + UPLOAD_LIMIT_RETRY)
            if isinstance(exc, discord.HTTPException) and exc.code in (
                MISSING_ACCESS,
                UNKNOWN_GUILD,
            ):
                log.info("guild %s: the bot is no longer there; results go by DM", guild_id)
                self._gone_guilds[guild_id] = now + UNREACHABLE_TTL
            return DEFAULT_UPLOAD_LIMIT
        self._upload_limits[guild_id] = (limit, now + UPLOAD_LIMIT_TTL)
        return limit
