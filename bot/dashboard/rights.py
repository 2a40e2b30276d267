"""Who may see which server's pages: read through the bot, cached about a minute.

A server's pages are for the members who have Manage Server there (or Administrator, or own
it), and for those with a role an admin granted dashboard access; everyone else, and anyone
when the bot is not in the server, gets a plain 404 (no oracle of which servers exist). The
rule is read from Discord with the bot's token at each page (cached :data:`RIGHTS_SECONDS`),
never from the member's OAuth2 token, so a member who lost a role loses the page within a
minute.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final, Protocol

from bot.clock import Clock
from bot.domain import AuditEntry, MemberAccess

log = logging.getLogger(__name__)

MANAGE_GUILD: Final = 1 << 5
"""Discord's MANAGE_GUILD permission bit ("Manage Server")."""

ADMINISTRATOR: Final = 1 << 3
"""Discord's ADMINISTRATOR permission bit."""

RIGHTS_SECONDS: Final = 60.0
"""How long a member's rights in a server are reused before the bot is asked again."""

NAME_SECONDS: Final = 600.0
"""How long a member's name is reused (the ledger's ``member`` column)."""


class Directory(Protocol):
    """What the dashboard asks Discord with the bot's token (``bot.discord``'s RestDirectory)."""

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        """The member's permissions and roles; None if the bot or the member is not there."""
        ...

    async def member_name(self, guild_id: int, user_id: int) -> str | None:
        """The member's name in the server; None if unknown."""
        ...

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        """The message's attachment URLs, freshly signed; empty if it is gone."""
        ...

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's roles a tier or dashboard access may name: (id, name), highest first.

        Without @everyone and the roles of integrations (bots' own roles).
        """
        ...

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's text channels: (id, name), in the server's order."""
        ...

    async def delete_message(self, channel_id: int, message_id: int) -> None:
        """Delete one of the bot's messages (a removed showcase entry's post); never raises."""
        ...

    async def post_changes(self, guild_id: int, channel_id: int, entries: list[AuditEntry]) -> None:
        """Post audited changes in the admin channel, as ``/config`` posts its own.

        Never raises: a notice must not break the change it reports on.
        """
        ...


@dataclass(frozen=True, slots=True)
class Rights:
    """What a member may do with a server's pages.

    Attributes:
        guild_name: the server's name (as the bot reads it).
        admin: Manage Server, Administrator or owner.
        role_access: the highest access a dashboard role gives (``view``, ``edit``), or None.
    """

    guild_name: str
    admin: bool
    role_access: str | None = None

    @property
    def may_view(self) -> bool:
        """Whether the member may open the server's pages."""
        return self.admin or self.role_access is not None

    @property
    def may_edit(self) -> bool:
        """Whether the member may change the server's settings (Manage Server, or ``edit``)."""
        return self.admin or self.role_access == "edit"


class RightsCache:
    """The members' rights per server, read through the bot and kept :data:`RIGHTS_SECONDS`.

    Args:
        directory: Discord, through the bot's token.
        access_roles: the server's dashboard roles (role id -> access), from the database.
        clock: monotonic time for the cache.
    """

    def __init__(
        self,
        directory: Directory,
        access_roles: Callable[[int], Awaitable[dict[int, str]]],
        clock: Clock,
    ) -> None:
        self._directory = directory
        self._access_roles = access_roles
        self._clock = clock
        self._rights: dict[tuple[int, int], tuple[float, Rights | None]] = {}
        self._names: dict[tuple[int, int], tuple[float, str | None]] = {}
        self._locks: dict[tuple[int, int], asyncio.Lock] = {}

    async def of(self, guild_id: int, user_id: int) -> Rights | None:
        """Return the member's rights in the server; None when they may not see it.

        Raises:
            Exception: Discord failed (not a refusal): the page answers an error, not a 404.
        """
        key = (guild_id, user_id)
        now = self._clock.monotonic()
        cached = self._rights.get(key)
        if cached is not None and now - cached[0] < RIGHTS_SECONDS:
            return cached[1]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one request to Discord for a burst of the member's pages
            cached = self._rights.get(key)
            if cached is not None and self._clock.monotonic() - cached[0] < RIGHTS_SECONDS:
                return cached[1]
            rights = await self._read(guild_id, user_id)
            self._rights[key] = (self._clock.monotonic(), rights)
        self._locks.pop(key, None)
        return rights if rights is not None and rights.may_view else None

    async def _read(self, guild_id: int, user_id: int) -> Rights | None:
        access = await self._directory.member_access(guild_id, user_id)
        if access is None:
            return None
        admin = bool(access.permissions & (MANAGE_GUILD | ADMINISTRATOR))
        granted = await self._access_roles(guild_id)
        levels = {granted[r] for r in access.role_ids if r in granted}
        role_access = "edit" if "edit" in levels else ("view" if levels else None)
        rights = Rights(access.guild_name, admin, role_access)
        return rights if rights.may_view else None

    async def name(self, guild_id: int, user_id: int) -> str | None:
        """Return the member's name in the server, cached :data:`NAME_SECONDS`.

        None if unknown or if Discord failed (the id is always shown beside it).
        """
        key = (guild_id, user_id)
        now = self._clock.monotonic()
        cached = self._names.get(key)
        if cached is not None and now - cached[0] < NAME_SECONDS:
            return cached[1]
        try:
            name = await self._directory.member_name(guild_id, user_id)
        except Exception as exc:  # a name is a nicety: the id is always beside it
            log.debug("member name of %s in %s not read: %s", user_id, guild_id, exc)
            name = None
        self._names[key] = (now, name)
        return name

    def forget_guild(self, guild_id: int) -> None:
        """Drop every member's cached rights in a server (its dashboard roles changed)."""
        for key in [k for k in self._rights if k[0] == guild_id]:
            del self._rights[key]

    def forget(self, user_id: int) -> None:
        """Drop the member's cached rights (they signed out)."""
        for key in [k for k in self._rights if k[1] == user_id]:
            del self._rights[key]
