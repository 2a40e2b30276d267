"""The language of a server's public messages: an admin's choice, else Discord's.

A public card or message (a job's placeholder and result, the admin channel's notices) is read
by everyone in the channel, so it is written in the server's language: the one an admin chose
with ``/config language`` (``guild_settings.locale``), else the server's preferred locale in
Discord (Server Settings → Community; ``guild.preferred_locale``, ``interaction.guild_locale``).
An answer only the member sees is written in the member's own locale instead
(``bot.discord.tree.admit``).
"""

from __future__ import annotations

import logging
from collections import OrderedDict

import discord

from bot.clock import Clock
from bot.services.guild_config import GuildConfigService

log = logging.getLogger(__name__)

PREFERRED_SECONDS = 3600.0
"""Seconds a server's preferred locale fetched by REST is kept (a worker has no guild cache)."""

FETCHED_REMEMBERED = 1024
"""Servers whose language read by REST is remembered at once, the least recently used dropped
first: a worker delivers to any server, and would otherwise keep every one it ever met."""


class GuildLocales:
    """Finds the locale of a server's public messages, with or without a gateway cache.

    Args:
        client: the logged-in client (the gateway's bot, or a worker's REST-only client).
        guild_config: where an admin's choice is kept.
        clock: the process's clock (monotonic seconds, for the REST cache).
        rest: read a server missing from the client's cache by REST (a worker, which has no
            gateway cache); False for the gateway, whose cache holds every server it is in.
    """

    def __init__(
        self,
        client: discord.Client,
        guild_config: GuildConfigService,
        clock: Clock,
        *,
        rest: bool = True,
    ) -> None:
        self._client = client
        self._guild_config = guild_config
        self._clock = clock
        self._rest = rest
        # Guild id -> (its preferred locale, or None where it could not be read; until when).
        # Least recently used first, at most FETCHED_REMEMBERED.
        self._fetched: OrderedDict[int, tuple[str | None, float]] = OrderedDict()

    @property
    def held(self) -> int:
        """How many servers' languages read by REST are remembered."""
        return len(self._fetched)

    async def of(self, guild_id: int | None) -> str | None:
        """The Discord locale code of ``guild_id``'s public messages; None outside a server.

        Never raises: the language must not stop a paid result from being delivered, so a
        server whose language cannot be read now (the database or Discord failing, the bot
        removed) reads None: English.
        """
        if not guild_id:
            return None
        try:
            return await self._lookup(guild_id)
        except Exception as exc:
            log.info("guild %s: language not read (%s); English", guild_id, exc)
            return None

    async def _lookup(self, guild_id: int) -> str | None:
        chosen = await self._guild_config.locale(guild_id)
        if chosen is not None:
            return chosen
        guild = self._client.get_guild(guild_id)
        if guild is not None:
            return guild.preferred_locale.value
        if not self._rest:
            return None  # not in the gateway's cache: the bot is not in that server
        now = self._clock.monotonic()
        cached = self._fetched.get(guild_id)
        if cached is not None and cached[1] > now:
            self._fetched.move_to_end(guild_id)
            return cached[0]
        # Remembered either way: a server that removed the bot answers 403 every time.
        self._remember(guild_id, None, now + PREFERRED_SECONDS)
        fetched = await self._client.fetch_guild(guild_id, with_counts=False)
        self._remember(guild_id, fetched.preferred_locale.value, now + PREFERRED_SECONDS)
        return fetched.preferred_locale.value

    def _remember(self, guild_id: int, locale: str | None, until: float) -> None:
        self._fetched[guild_id] = (locale, until)
        self._fetched.move_to_end(guild_id)
        while len(self._fetched) > FETCHED_REMEMBERED:
            self._fetched.popitem(last=False)
