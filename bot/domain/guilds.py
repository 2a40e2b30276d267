"""A guild's own settings and keys, and the "value, None or keep" of a limit's change.

Budgets admins set are whole ``int`` cents. ``None`` in a :class:`GuildSettings` limit means
"use the default from Settings". Times are UTC epoch seconds (``float``).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Final, TypeAlias


@dataclass(frozen=True, slots=True)
class GuildSettings:
    """A guild's own settings; a guild without a row gets :meth:`default`.

    Attributes:
        guild_id: the Discord guild id.
        api_key_ciphertext: the guild's API key, Fernet-encrypted; None when not set.
        api_key_last4: the key's last four characters, for display; None when not set.
        monthly_budget_cents: guild budget per UTC calendar month; None = Settings default.
        user_daily_budget_cents: per-user budget per UTC day; None = Settings default.
        max_pending_videos_per_user: cap on a user's pending videos; None = Settings default.
        max_pending_videos_per_guild: cap on the guild's pending videos; None = Settings default.
        allowed_channel_ids: channels the commands may be used in; empty = everywhere.
        admin_channel_id: channel for admin notices; None = none.
        notified_problem: the last problem admins were told about (to notify once).
        locale: the language an admin chose for the server's public messages (a Discord
            locale code, ``/config language``); None = Discord's preferred locale.
    """

    guild_id: int
    api_key_ciphertext: bytes | None = None
    api_key_last4: str | None = None
    monthly_budget_cents: int | None = None
    user_daily_budget_cents: int | None = None
    max_pending_videos_per_user: int | None = None
    max_pending_videos_per_guild: int | None = None
    allowed_channel_ids: frozenset[int] = frozenset()
    admin_channel_id: int | None = None
    notified_problem: str | None = None
    locale: str | None = None

    @classmethod
    def default(cls, guild_id: int) -> GuildSettings:
        """Return the settings of a guild that never changed any."""
        return cls(guild_id=guild_id)


@dataclass(frozen=True, slots=True)
class RetiredKey:
    """A guild's replaced or removed API key, kept until its last pending job ends.

    Attributes:
        id: the row id.
        fingerprint: :func:`bot.services.keys.fingerprint` of the key; None when it could not
            be decrypted when it was retired.
        ciphertext: the key, Fernet-encrypted as in :class:`GuildSettings`.
        last4: the key's last four characters, for display.
        retired_at: UTC epoch seconds.
    """

    id: int
    guild_id: int
    fingerprint: str | None
    ciphertext: bytes
    last4: str
    retired_at: float


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Sentinel of a limit's change (``GuildConfigService.set_budgets``): leave it as it is."""

Unset: TypeAlias = _Unset
"""The type of :data:`UNSET`, for other "value, None or keep" parameters."""

LimitUpdate: TypeAlias = int | _Unset | None
"""A new limit: a value, None (back to the Settings default) or :data:`UNSET` (unchanged)."""
