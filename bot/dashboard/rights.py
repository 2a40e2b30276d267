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
import weakref
from collections.abc import Awaitable, Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol, TypeVar
from urllib.parse import parse_qs, urlsplit

from bot.clock import Clock
from bot.dashboard.limits import Bounded
from bot.domain import MemberAccess, MemberProfile, MessageUnreachable, SafetyRecord

log = logging.getLogger(__name__)

MANAGE_GUILD: Final = 1 << 5
"""Discord's MANAGE_GUILD permission bit ("Manage Server")."""

ADMINISTRATOR: Final = 1 << 3
"""Discord's ADMINISTRATOR permission bit."""

MANAGE_MESSAGES: Final = 1 << 13
"""Discord's MANAGE_MESSAGES permission bit: with Manage Server, who reviews held results."""

RIGHTS_SECONDS: Final = 60.0
"""How long a member's rights in a server are reused before the bot is asked again."""

NAME_SECONDS: Final = 600.0
"""How long a member's name and avatar are reused (every page that shows a member)."""

NAME_FAILED_SECONDS: Final = 30.0
"""How long Discord's failure to tell a member's name is remembered (the id is shown)."""

NAME_QUESTIONS: Final = 8
"""The most members' names one page asks Discord for at once (the rest wait their turn)."""

KEPT: Final = 10_000
"""The most (server, member) rights, or names, or messages' files a cache keeps (least recently
used leave first): what a visitor asks about cannot grow the process."""

LISTS_SECONDS: Final = 30.0
"""How long a server's roles and channels (the settings pages' choices) are reused."""

URLS_SECONDS: Final = 600.0
"""How long a message's attachment URLs are reused when they carry no expiry (``ex``)."""

URLS_MARGIN: Final = 60.0
"""Signed attachment URLs are used until this long before their ``ex`` expiry."""

URLS_MOST_SECONDS: Final = 6 * 3600.0
"""The longest a message's attachment URLs are reused, whatever their expiry."""

UNREACHABLE_SECONDS: Final = 600.0
"""How long a 403 or 404 of a message or a channel is remembered (no question to Discord)."""

FAILED_SECONDS: Final = 30.0
"""How long Discord's failure to show a message (5xx, timeout) is remembered."""


class Directory(Protocol):
    """What the dashboard asks Discord with the bot's token (``bot.discord``'s RestDirectory)."""

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        """The member's permissions and roles; None if the bot or the member is not there."""
        ...

    async def member_profile(self, guild_id: int, user_id: int) -> MemberProfile | None:
        """The member's name and avatar in the server; None if they are not a member.

        Raises:
            Exception: Discord failed (not a refusal).
        """
        ...

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        """The message's attachment URLs, freshly signed.

        Raises:
            MessageUnreachable: Discord refused it (403) or has it no more (404).
        """
        ...

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's roles a tier or dashboard access may name: (id, name), highest first.

        Without @everyone and the roles of integrations (bots' own roles).
        """
        ...

    async def coloured_roles(self, guild_id: int) -> list[tuple[int, str, int]]:
        """:meth:`roles` with each role's colour: (id, name, 0xRRGGBB; 0 for none)."""
        ...

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's text channels: (id, name), in the server's order."""
        ...

    async def delete_message(self, channel_id: int, message_id: int) -> None:
        """Delete one of the bot's messages (a removed showcase entry's post); never raises."""
        ...

    async def settle_review(self, decision: SafetyRecord) -> None:
        """Act on the member's side of a review decided on the dashboard; never raises.

        Exactly as the review channel's Approve and Reject: an approved synchronous image is
        posted on its card, pinging the member; a rejected result's card says so and the
        member is told (docs/safety.md, "Reviews").
        """
        ...


@dataclass(frozen=True, slots=True)
class Person:
    """A member as the pages show them (the ``member`` macro of ``_member.html``).

    Attributes:
        user_id: their Discord id (shown on hover).
        name: their server nickname or name; empty when unknown (Discord failed) or gone.
        avatar_url: their avatar on Discord's CDN; empty when unknown or gone.
        gone: they are no member of the server any more (left, or their account deleted):
            shown as "former member".
    """

    user_id: int
    name: str = ""
    avatar_url: str = ""
    gone: bool = False


@dataclass(frozen=True, slots=True)
class Rights:
    """What a member may do with a server's pages.

    Attributes:
        guild_name: the server's name (as the bot reads it).
        admin: Manage Server, Administrator or owner.
        role_access: the highest access a dashboard role gives (``view``, ``edit``), or None.
        moderator: Manage Messages (with :attr:`admin`, a reviewer of held results).
    """

    guild_name: str
    admin: bool
    role_access: str | None = None
    moderator: bool = False

    @property
    def may_review(self) -> bool:
        """Whether the member reviews held and withheld results (Manage Server or Messages).

        As the review channel's Approve and Reject (``cogs/safety.py``); docs/safety.md.
        """
        return self.admin or self.moderator

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
        monotonic = clock.monotonic
        # Bounded (KEPT, least recently used leave first): a member asking about many servers
        # cannot grow them. A tuple, so that "may not see" (None) is remembered too.
        self._rights: Bounded[tuple[int, int], tuple[Rights | None]] = Bounded(
            KEPT, RIGHTS_SECONDS, monotonic
        )
        self._people: Bounded[tuple[int, int], Person] = Bounded(KEPT, NAME_SECONDS, monotonic)
        # A lock lives while someone holds or waits on it, no longer.
        self._locks: weakref.WeakValueDictionary[tuple[int, int], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )
        self._person_locks: weakref.WeakValueDictionary[tuple[int, int], asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def of(self, guild_id: int, user_id: int) -> Rights | None:
        """Return the member's rights in the server; None when they may not see it.

        Raises:
            Exception: Discord failed (not a refusal): the page answers an error, not a 404.
        """
        key = (guild_id, user_id)
        cached = self._rights.get(key)
        if cached is not None:
            return cached[0]
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one request to Discord for a burst of the member's pages
            cached = self._rights.get(key)
            if cached is not None:
                return cached[0]
            rights = await self._read(guild_id, user_id)
            self._rights.put(key, (rights,))
        return rights if rights is not None and rights.may_view else None

    async def _read(self, guild_id: int, user_id: int) -> Rights | None:
        access = await self._directory.member_access(guild_id, user_id)
        if access is None:
            return None
        admin = bool(access.permissions & (MANAGE_GUILD | ADMINISTRATOR))
        granted = await self._access_roles(guild_id)
        levels = {granted[r] for r in access.role_ids if r in granted}
        role_access = "edit" if "edit" in levels else ("view" if levels else None)
        moderator = bool(access.permissions & MANAGE_MESSAGES)
        rights = Rights(access.guild_name, admin, role_access, moderator)
        return rights if rights.may_view else None

    async def person(self, guild_id: int, user_id: int) -> Person:
        """Return the member as the pages show them, cached :data:`NAME_SECONDS`.

        One question to Discord per member at most (then the cache); a failure is remembered
        :data:`NAME_FAILED_SECONDS` and shows the id alone.
        """
        key = (guild_id, user_id)
        cached = self._people.get(key)
        if cached is not None:
            return cached
        lock = self._person_locks.setdefault(key, asyncio.Lock())
        async with lock:  # the same member twice on a page, or two pages: one question
            cached = self._people.get(key)
            if cached is not None:
                return cached
            try:
                profile = await self._directory.member_profile(guild_id, user_id)
            except Exception as exc:  # a name is a nicety: the id is always shown
                log.debug("member %s in %s not read: %s", user_id, guild_id, exc)
                self._people.put(key, Person(user_id), NAME_FAILED_SECONDS)
                return Person(user_id)
            if profile is None:
                person = Person(user_id, gone=True)
            else:
                person = Person(user_id, profile.name, profile.avatar_url)
            self._people.put(key, person)
            return person

    async def people(self, guild_id: int, user_ids: Iterable[int]) -> dict[int, Person]:
        """Return the members of a page, each asked of Discord once (then cached).

        At most :data:`NAME_QUESTIONS` questions at once: only the distinct members of the
        page are asked about, never one question per row.
        """
        ids = sorted(set(user_ids))
        gate = asyncio.Semaphore(NAME_QUESTIONS)

        async def one(user_id: int) -> Person:
            async with gate:
                return await self.person(guild_id, user_id)

        found = await asyncio.gather(*(one(u) for u in ids))
        return dict(zip(ids, found, strict=True))

    async def name(self, guild_id: int, user_id: int) -> str | None:
        """Return the member's name in the server (:meth:`person`); None if unknown or gone."""
        return (await self.person(guild_id, user_id)).name or None

    def forget_guild(self, guild_id: int) -> None:
        """Drop every member's cached rights in a server (its dashboard roles changed)."""
        for key in self._rights.kept():
            if key[0] == guild_id:
                self._rights.pop(key)

    def forget(self, user_id: int) -> None:
        """Drop the member's cached rights (they signed out)."""
        for key in self._rights.kept():
            if key[1] == user_id:
                self._rights.pop(key)


def expires_at(url: str) -> float | None:
    """Return a signed Discord attachment URL's expiry (its ``ex``: hex UTC epoch seconds).

    None without one, or when it is not hex (developer docs, "Attachment Object", signed URLs).
    """
    found = parse_qs(urlsplit(url).query).get("ex")
    if not found:
        return None
    try:
        return float(int(found[0], 16))
    except ValueError:
        return None


T = TypeVar("T")
Key = TypeVar("Key", bound=Hashable)


class CachingDirectory:
    """A :class:`Directory` that asks Discord as little as it can.

    - A message's attachment URLs are kept until :data:`URLS_MARGIN` before their ``ex``
      expiry (:data:`URLS_SECONDS` without one, :data:`URLS_MOST_SECONDS` at most).
    - A 403 or 404 is remembered :data:`UNREACHABLE_SECONDS`, per channel when it is the
      channel's (no access, gone), per message otherwise; any other failure
      :data:`FAILED_SECONDS`. Every message of an unreachable channel is answered from it.
    - A server's roles and channels are kept :data:`LISTS_SECONDS`.
    - One question at a time per message or server: a burst of the same request asks once.

    Each cache keeps at most :data:`KEPT` entries. Members' rights and names are the
    :class:`RightsCache`'s, so those questions pass through.

    Args:
        directory: Discord, through the bot's token.
        clock: the wall clock (``ex`` is UTC epoch seconds) and monotonic time.
    """

    def __init__(self, directory: Directory, clock: Clock) -> None:
        self._directory = directory
        self._clock = clock
        monotonic = clock.monotonic
        self._urls: Bounded[tuple[int, int], list[str]] = Bounded(KEPT, URLS_SECONDS, monotonic)
        self._unreachable: Bounded[tuple[int, int], bool] = Bounded(
            KEPT, UNREACHABLE_SECONDS, monotonic
        )
        self._roles: Bounded[int, list[tuple[int, str, int]]] = Bounded(
            KEPT, LISTS_SECONDS, monotonic
        )
        self._channels: Bounded[int, list[tuple[int, str]]] = Bounded(
            KEPT, LISTS_SECONDS, monotonic
        )
        self._locks: weakref.WeakValueDictionary[Hashable, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        """Passed through (the :class:`RightsCache` keeps the answer)."""
        return await self._directory.member_access(guild_id, user_id)

    async def member_profile(self, guild_id: int, user_id: int) -> MemberProfile | None:
        """Passed through (the :class:`RightsCache` keeps the answer)."""
        return await self._directory.member_profile(guild_id, user_id)

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        """The message's attachment URLs, from the cache while they are valid.

        Raises:
            MessageUnreachable: Discord refused the message or its channel, now or within
                :data:`UNREACHABLE_SECONDS`.
            Exception: Discord failed, now or within :data:`FAILED_SECONDS`.
        """
        key = (channel_id, message_id)
        lock = self._locks.setdefault(("message", *key), asyncio.Lock())
        async with lock:
            self._check_reachable(channel_id, message_id)
            cached = self._urls.get(key)
            if cached is not None:
                return cached
            try:
                urls = await self._directory.attachment_urls(channel_id, message_id)
            except MessageUnreachable as exc:
                where = (channel_id, 0) if exc.whole_channel else key
                self._unreachable.put(where, exc.whole_channel)
                raise
            except Exception:
                self._unreachable.put(key, False, FAILED_SECONDS)
                raise
            self._urls.put(key, urls, self._urls_seconds(urls))
            return urls

    def _check_reachable(self, channel_id: int, message_id: int) -> None:
        for where in ((channel_id, 0), (channel_id, message_id)):
            whole = self._unreachable.get(where)
            if whole is not None:
                raise MessageUnreachable(whole_channel=whole)

    def _urls_seconds(self, urls: list[str]) -> float:
        expiries = [e for e in map(expires_at, urls) if e is not None]
        if not expiries:
            return URLS_SECONDS
        left = min(expiries) - URLS_MARGIN - self._clock.time()
        return max(0.0, min(left, URLS_MOST_SECONDS))

    async def _kept(
        self,
        cache: Bounded[Key, T],
        key: Key,
        read: Callable[[], Awaitable[T]],
    ) -> T:
        lock = self._locks.setdefault((id(cache), key), asyncio.Lock())
        async with lock:
            cached = cache.get(key)
            if cached is not None:
                return cached
            value = await read()
            cache.put(key, value)
            return value

    async def roles(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's roles, kept :data:`LISTS_SECONDS`."""
        return [(i, n) for i, n, _ in await self.coloured_roles(guild_id)]

    async def coloured_roles(self, guild_id: int) -> list[tuple[int, str, int]]:
        """The server's roles with their colours, kept :data:`LISTS_SECONDS` (one question)."""
        return await self._kept(
            self._roles, guild_id, lambda: self._directory.coloured_roles(guild_id)
        )

    async def role_colours(self, guild_id: int) -> dict[int, int]:
        """The server's roles' colours (``0xRRGGBB``, 0: none), from :meth:`coloured_roles`."""
        return {i: c for i, _, c in await self.coloured_roles(guild_id)}

    async def channels(self, guild_id: int) -> list[tuple[int, str]]:
        """The server's text channels, kept :data:`LISTS_SECONDS`."""
        return await self._kept(
            self._channels, guild_id, lambda: self._directory.channels(guild_id)
        )

    def forget_lists(self, guild_id: int) -> None:
        """Read the server's roles and channels afresh next time (an admin just signed in)."""
        self._roles.pop(guild_id)
        self._channels.pop(guild_id)

    async def delete_message(self, channel_id: int, message_id: int) -> None:
        """Passed through (an admin's removal of a showcase entry); forgets its files."""
        self._urls.pop((channel_id, message_id))
        await self._directory.delete_message(channel_id, message_id)

    async def settle_review(self, decision: SafetyRecord) -> None:
        """Passed through (a review decided on the Review page)."""
        await self._directory.settle_review(decision)
