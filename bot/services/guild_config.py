"""What ``/config`` changes: a guild's API key, budgets, caps, channels and notice channel."""

from __future__ import annotations

import re
from dataclasses import dataclass

from pydantic import SecretStr

from bot.errors import KeyEncryptionUnavailable, ValidationFailed
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.errors import UnauthorizedError
from bot.services.billing import Billing, Limits
from bot.services.keys import KeyChange, KeyResolver, KeyVault
from bot.storage import UNSET, Database, LimitUpdate

_KEY_SHAPE = re.compile(r"^\S{8,256}$")
"""An API key: one word of 8 to 256 characters (the spec shows only that it has a prefix)."""

_MONEY = re.compile(r"^\$?\s*(\d{1,9})(?:[.,](\d{1,2}))?$")
UNLIMITED_WORDS = frozenset({"none", "unlimited", "off", "default"})


def parse_budget(text: str) -> int | None:
    """Read a budget typed by an admin: ``"12.50"``, ``"$12"``, or ``"unlimited"``.

    Returns:
        Cents, or None for "back to the default" (``none``, ``unlimited``, ``off``, ``default``).

    Raises:
        ValidationFailed: not an amount in dollars.
    """
    cleaned = text.strip().casefold()
    if cleaned in UNLIMITED_WORDS:
        return None
    match = _MONEY.match(cleaned)
    if match is None:
        raise ValidationFailed(f"`{text[:20]}` is not an amount in dollars, such as 25 or 12.50.")
    dollars, cents = match.groups()
    return int(dollars) * 100 + int((cents or "0").ljust(2, "0"))


@dataclass(frozen=True, slots=True)
class GuildConfig:
    """A guild's effective configuration, as ``/config show`` displays it.

    Attributes:
        key_source: whose key requests use: ``"guild"``, ``"default"`` or None (no key).
        key_last4: the guild key's last four characters, when it has one.
        limits: budgets (cents) and caps in force, defaults applied.
        allowed_channel_ids: channels the commands are limited to; empty = everywhere.
        admin_channel_id: where key problems are announced; None = nowhere.
        encryption_available: whether a guild key can be stored at all.
    """

    key_source: str | None
    key_last4: str | None
    limits: Limits
    allowed_channel_ids: frozenset[int]
    admin_channel_id: int | None
    encryption_available: bool


class GuildConfigService:
    """Applies admins' configuration changes; every method is for a guild's admins only.

    Args:
        db: the database.
        keys: stores and resolves keys.
        vault: whether keys can be encrypted.
        billing: the effective limits.
        client: the API client, to check a key before storing it.
        default_key_set: whether ``GENAPI_API_KEY`` is set.
        catalogue: the catalogue cache, told to stop refreshing with a key that is replaced or
            removed (it then uses the default key).
    """

    def __init__(
        self,
        *,
        db: Database,
        keys: KeyResolver,
        vault: KeyVault,
        billing: Billing,
        client: GenAPIClient,
        default_key_set: bool,
        catalogue: CatalogueCache | None = None,
    ) -> None:
        self._db = db
        self._keys = keys
        self._vault = vault
        self._billing = billing
        self._client = client
        self._default_key_set = default_key_set
        self._catalogue = catalogue

    async def set_api_key(self, guild_id: int, api_key: str) -> KeyChange:
        """Check ``api_key`` with a free ``GET /models`` call, then store it encrypted.

        The previous key is kept (encrypted) until the jobs submitted with it end.

        Returns:
            What changed: the new key's last four characters, the jobs left on the old key.

        Raises:
            KeyEncryptionUnavailable: ``KEY_ENCRYPTION_KEY`` is unset; checked before any call.
            ValidationFailed: the key is malformed or the service rejected it; nothing stored.
            GenAPIError: the check could not be made (service down, rate limited).
        """
        api_key = api_key.strip()
        if not self._vault.available:
            raise KeyEncryptionUnavailable
        if not _KEY_SHAPE.match(api_key):
            raise ValidationFailed("That does not look like an API key; nothing was stored.")
        try:
            await self._client.list_models(SecretStr(api_key))
        except UnauthorizedError:
            raise ValidationFailed("The service rejected that key; nothing was stored.") from None
        change = await self._keys.replace_key(guild_id, api_key)
        await self._db.guilds.set_notified_problem(guild_id, None)
        self._forget(change)
        return change

    async def remove_api_key(self, guild_id: int) -> KeyChange:
        """Remove the guild's own key; requests then use ``GENAPI_API_KEY`` if set.

        The key is kept (encrypted) until the jobs submitted with it end.

        Returns:
            What changed, with the jobs left on the removed key.
        """
        change = await self._keys.clear_key(guild_id)
        self._forget(change)
        return change

    def _forget(self, change: KeyChange) -> None:
        if self._catalogue is not None and change.old_fingerprint is not None:
            self._catalogue.forget_key(change.old_fingerprint, self._keys.default_key)

    async def set_budgets(
        self, guild_id: int, *, monthly: LimitUpdate = UNSET, daily_per_user: LimitUpdate = UNSET
    ) -> None:
        """Set the monthly guild budget and the daily per-user budget, in cents."""
        await self._db.guilds.update_limits(
            guild_id, monthly_budget_cents=monthly, user_daily_budget_cents=daily_per_user
        )

    async def set_caps(
        self, guild_id: int, *, per_user: LimitUpdate = UNSET, per_guild: LimitUpdate = UNSET
    ) -> None:
        """Set the caps on concurrently pending videos."""
        await self._db.guilds.update_limits(
            guild_id,
            max_pending_videos_per_user=per_user,
            max_pending_videos_per_guild=per_guild,
        )

    async def allow_channel(
        self, guild_id: int, channel_id: int, *, allowed: bool
    ) -> frozenset[int]:
        """Add a channel to (or remove it from) those the commands are limited to.

        Returns:
            The channels now allowed; empty means every channel.
        """
        current = set((await self._db.guilds.settings(guild_id)).allowed_channel_ids)
        if allowed:
            current.add(channel_id)
        else:
            current.discard(channel_id)
        await self._db.guilds.set_allowed_channels(guild_id, current)
        return frozenset(current)

    async def allow_everywhere(self, guild_id: int) -> None:
        """Let the commands be used in every channel again."""
        await self._db.guilds.set_allowed_channels(guild_id, ())

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (None: clear) the channel where key problems are announced."""
        await self._db.guilds.set_admin_channel(guild_id, channel_id)

    async def show(self, guild_id: int) -> GuildConfig:
        """Return the guild's effective configuration (never the key itself)."""
        settings = await self._db.guilds.settings(guild_id)
        if settings.api_key_ciphertext is not None:
            source: str | None = "guild"
        else:
            source = "default" if self._default_key_set else None
        return GuildConfig(
            key_source=source,
            key_last4=settings.api_key_last4,
            limits=await self._billing.limits(guild_id),
            allowed_channel_ids=settings.allowed_channel_ids,
            admin_channel_id=settings.admin_channel_id,
            encryption_available=self._vault.available,
        )
