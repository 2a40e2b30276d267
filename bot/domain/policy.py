"""A guild's policy: role tiers, the server's model list, and the audit of ``/config``.

Allowances are whole ``int`` cents; times are UTC epoch seconds (``float``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

UNLIMITED: Final = -1
"""A tier's allowance that is unlimited (stored as -1; None in a :class:`Tier` = server default)."""


@dataclass(frozen=True, slots=True)
class Tier:
    """A role tier of a guild's policy: what members with ``role_id`` may spend and use.

    Attributes:
        guild_id: the guild.
        role_id: the Discord role whose members get this tier.
        role_name: the role's name when the tier was last set, for messages.
        daily_per_user_cents: whole cents per member per UTC day; :data:`UNLIMITED`; None =
            the server's daily budget per member.
        monthly_per_user_cents: whole cents per member per UTC calendar month;
            :data:`UNLIMITED`; None = the server default (unlimited: the server has none).
        videos_at_once: cap on a member's pending videos; None = the server's cap per member.
        models: model ids or prefixes (``"motion-pro/"``) this tier may use, ``("*",)`` for
            all; None = the server's model list.
    """

    guild_id: int
    role_id: int
    role_name: str
    daily_per_user_cents: int | None = None
    monthly_per_user_cents: int | None = None
    videos_at_once: int | None = None
    models: tuple[str, ...] | None = None


@dataclass(frozen=True, slots=True)
class ModelLists:
    """A guild's server-wide model list, for members without a tier.

    Attributes:
        allowed: ids or prefixes members may use; empty = every model.
        blocked: ids or prefixes members may not use, even if ``allowed`` matches them.
    """

    allowed: tuple[str, ...] = ()
    blocked: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Actor:
    """Who changes a server's settings, and through which surface: the audit log's who and via.

    Attributes:
        user_id: the member (an admin), or the bot's own id for an automatic change.
        via: the surface: ``"discord"`` (``/config``), ``"web"`` (the dashboard) or
            ``"guard"`` (the spend guard's automatic pause).
    """

    user_id: int
    via: str = "discord"


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """One change made through ``/config`` or the dashboard, as kept in the database (never a key).

    Attributes:
        guild_id: the guild.
        user_id: the admin who made it.
        what: the setting, e.g. ``"tier Patron: daily per member"``.
        old: its value before, for people; ``"—"`` when it had none.
        new: its value after.
        at: UTC epoch seconds.
        via: where it was made (:attr:`Actor.via`): ``"discord"`` (``/config``), ``"web"``
            (the dashboard) or ``"guard"`` (the spend guard).
    """

    guild_id: int
    user_id: int
    what: str
    old: str
    new: str
    at: float
    via: str = "discord"
