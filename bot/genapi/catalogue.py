"""The model catalogue, cached so that autocomplete never waits on the network.

``GET /models`` is free but still counts against the key's 30 requests a minute, and Discord
gives autocomplete no way to defer: so commands read :attr:`CatalogueCache.current` and a
background task refreshes it every ``ttl`` seconds.
"""

from __future__ import annotations

import asyncio
import logging

from pydantic import SecretStr

from bot.clock import Clock
from bot.genapi.client import GenAPIClient, key_fingerprint
from bot.genapi.errors import GenAPIError
from bot.genapi.models import Catalogue
from bot.genapi.ratelimit import Priority

log = logging.getLogger(__name__)


class CatalogueCache:
    """Holds the last catalogue fetched and refreshes it in the background.

    Args:
        client: the API client.
        clock: monotonic time for the TTL.
        ttl: seconds after which the catalogue is refreshed.
    """

    def __init__(self, client: GenAPIClient, clock: Clock, *, ttl: float = 300.0) -> None:
        self._client = client
        self._clock = clock
        self._ttl = ttl
        self._catalogue: Catalogue | None = None
        self._fetched_at = float("-inf")
        self._key: SecretStr | None = None
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None

    @property
    def current(self) -> Catalogue | None:
        """The cached catalogue, possibly stale; None until the first fetch succeeded."""
        return self._catalogue

    def use_key(self, key: SecretStr) -> None:
        """Remember a key the background refresh may use (the bot's default, or a guild's)."""
        self._key = key

    def forget_key(self, fingerprint: str, fallback: SecretStr | None) -> None:
        """Stop using the key with ``fingerprint`` for refreshes: a guild removed or replaced it.

        Args:
            fingerprint: :func:`~bot.genapi.client.key_fingerprint` of the key to forget.
            fallback: the key to refresh with instead (the bot's default), or None.
        """
        if self._key is not None and key_fingerprint(self._key) == fingerprint:
            self._key = fallback

    async def get(self, key: SecretStr) -> Catalogue:
        """Return the catalogue, fetching it (interactive priority) if none is cached yet.

        A stale catalogue is returned at once and refreshed in the background.

        Raises:
            GenAPIError: only when nothing is cached and the fetch fails.
        """
        self._key = self._key or key
        if self._catalogue is None:
            return await self.refresh(key, priority=Priority.INTERACTIVE)
        if self._clock.monotonic() - self._fetched_at > self._ttl:
            self.refresh_soon(key)
        return self._catalogue

    def refresh_soon(self, key: SecretStr) -> None:
        """Start a background refresh unless one is already running."""
        self._key = self._key or key
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._refresh_quietly(key))

    async def refresh(
        self, key: SecretStr, *, priority: Priority = Priority.BACKGROUND
    ) -> Catalogue:
        """Fetch the catalogue now and cache it.

        Raises:
            GenAPIError: the fetch failed; the previous catalogue stays cached.
        """
        async with self._lock:
            catalogue = await self._client.list_models(key, priority=priority)
            self._catalogue = catalogue
            self._fetched_at = self._clock.monotonic()
            self._key = key
            return catalogue

    async def run(self) -> None:
        """Refresh every ``ttl`` seconds with the remembered key, forever (a background task)."""
        while True:
            await self._clock.sleep(self._ttl)
            if self._key is not None:
                await self._refresh_quietly(self._key)

    async def _refresh_quietly(self, key: SecretStr) -> None:
        try:
            await self.refresh(key)
        except GenAPIError as exc:
            log.warning("catalogue refresh failed (%s); keeping the cached one", exc)
