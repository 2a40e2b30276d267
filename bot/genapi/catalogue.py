"""The model catalogue, cached per account so that autocomplete never waits on the network.

``GET /models`` is free but still counts against the key's 30 requests a minute, and Discord
gives autocomplete no way to defer: so commands read a cached catalogue and refresh it in the
background once it is older than ``ttl`` seconds.

Accounts may see different catalogues (a provider can enable models per account), so each key
that fetched one has its own, by :func:`~bot.genapi.client.key_fingerprint`. Only shared keys
do this shared work: the bot's default key and servers' own keys. A member's personal key is
never given to this cache (``GenerationService`` serves personal use from the shared
catalogue): a member's key must not be spent on, nor remembered for, work done for everyone.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field

from pydantic import SecretStr

from bot.clock import Clock
from bot.genapi.client import GenAPIClient, key_fingerprint
from bot.genapi.errors import GenAPIError
from bot.genapi.ratelimit import Priority
from bot.genapi.wire import Catalogue

log = logging.getLogger(__name__)


@dataclass(slots=True)
class _Entry:
    """One account's catalogue: the last fetched, when (monotonic seconds), its refresh.

    The lock is the account's own: one account's slow fetch never holds up another's.
    """

    catalogue: Catalogue | None = None
    fetched_at: float = float("-inf")
    task: asyncio.Task[None] | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class CatalogueCache:
    """Holds the last catalogue fetched per account (key) and refreshes them.

    The key given to :meth:`use_key` (the bot's default key) is refreshed every ``ttl`` seconds
    by :meth:`run`; every other account's catalogue is refreshed in the background when it is
    read stale (:meth:`get`, :meth:`peek`).

    Args:
        client: the API client.
        clock: monotonic time for the TTL.
        ttl: seconds after which a catalogue is refreshed.
    """

    def __init__(self, client: GenAPIClient, clock: Clock, *, ttl: float = 300.0) -> None:
        self._client = client
        self._clock = clock
        self._ttl = ttl
        self._entries: dict[str, _Entry] = {}
        self._key: SecretStr | None = None
        self._latest: str | None = None

    @property
    def current(self) -> Catalogue | None:
        """The shared catalogue, possibly stale: the default key's, else the latest fetched.

        For readers that serve no one account (a member's own settings, a conversation's
        model check); None until a first fetch succeeded.
        """
        for fingerprint in (self._refresh_fingerprint(), self._latest):
            entry = self._entries.get(fingerprint or "")
            if entry is not None and entry.catalogue is not None:
                return entry.catalogue
        return None

    def use_key(self, key: SecretStr) -> None:
        """Refresh the catalogue of ``key`` every ``ttl`` seconds (the bot's default key)."""
        self._key = key

    def forget_key(self, fingerprint: str, fallback: SecretStr | None) -> None:
        """Drop the catalogue of the key with ``fingerprint``: a guild removed or replaced it.

        Args:
            fingerprint: :func:`~bot.genapi.client.key_fingerprint` of the key to forget.
            fallback: the key :meth:`run` refreshes instead if it was that one (the bot's
                default), or None.
        """
        entry = self._entries.pop(fingerprint, None)
        if entry is not None and entry.task is not None:
            entry.task.cancel()
        if self._latest == fingerprint:
            self._latest = None
        if self._key is None or key_fingerprint(self._key) == fingerprint:
            self._key = fallback

    def cached(self, key: SecretStr) -> Catalogue | None:
        """Return the account's cached catalogue, possibly stale, or None; starts nothing."""
        entry = self._entries.get(key_fingerprint(key))
        return None if entry is None else entry.catalogue

    def peek(self, key: SecretStr) -> Catalogue | None:
        """Return the account's cached catalogue without waiting; None if none yet.

        A missing or stale one is fetched in the background (for autocomplete, which Discord
        allows no deferral).
        """
        entry = self._entries.get(key_fingerprint(key))
        if entry is None or self._stale(entry):
            self.refresh_soon(key)
        return None if entry is None else entry.catalogue

    async def get(self, key: SecretStr) -> Catalogue:
        """Return the account's catalogue, fetching it (interactive priority) if none is cached.

        A stale catalogue is returned at once and refreshed in the background.

        Args:
            key: a shared key (the bot's default or a server's own), never a member's.

        Raises:
            GenAPIError: only when nothing is cached for the account and the fetch fails.
        """
        entry = self._entries.get(key_fingerprint(key))
        if entry is None or entry.catalogue is None:
            return await self.refresh(key, priority=Priority.INTERACTIVE)
        if self._stale(entry):
            self.refresh_soon(key)
        return entry.catalogue

    def refresh_soon(self, key: SecretStr) -> None:
        """Start a background refresh of the account's catalogue unless one is running."""
        entry = self._entries.setdefault(key_fingerprint(key), _Entry())
        if entry.task is None or entry.task.done():
            entry.task = asyncio.create_task(self._refresh_quietly(key))

    async def refresh(
        self, key: SecretStr, *, priority: Priority = Priority.BACKGROUND
    ) -> Catalogue:
        """Fetch the account's catalogue now and cache it.

        Raises:
            GenAPIError: the fetch failed; the account's previous catalogue stays cached.
        """
        fingerprint = key_fingerprint(key)
        entry = self._entries.setdefault(fingerprint, _Entry())
        async with entry.lock:
            catalogue = await self._client.list_models(key, priority=priority)
            entry.catalogue = catalogue
            entry.fetched_at = self._clock.monotonic()
            self._latest = fingerprint
            return catalogue

    async def run(self) -> None:
        """Refresh the :meth:`use_key` key's catalogue every ``ttl`` seconds, forever."""
        while True:
            await self._clock.sleep(self._ttl)
            if self._key is not None:
                await self._refresh_quietly(self._key)

    def _stale(self, entry: _Entry) -> bool:
        return self._clock.monotonic() - entry.fetched_at > self._ttl

    def _refresh_fingerprint(self) -> str | None:
        return None if self._key is None else key_fingerprint(self._key)

    async def _refresh_quietly(self, key: SecretStr) -> None:
        try:
            await self.refresh(key)
        except GenAPIError as exc:
            log.warning("catalogue refresh failed (%s); keeping the cached one", exc)
