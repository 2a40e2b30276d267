"""The spend guard's types: a server's guard settings, an alert it fired, a key's runway.

docs/guard.md. Amounts are whole cents (settings) or exact Decimal cents (measurements);
times UTC epoch seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

ADMIN_CHANNEL = "admin-channel"
OWNER_DM = "owner-dm"
DESTINATIONS = (ADMIN_CHANNEL, OWNER_DM)
"""Where a server's guard alerts go: its admin channel, or a DM to the server's owner."""


@dataclass(frozen=True, slots=True)
class GuardSettings:
    """A server's spend guard; a server that set nothing gets these defaults.

    Attributes:
        thresholds: percentages of the monthly budget that alert, ascending.
        member_notes: members read it when they cross 80 % and 100 % of their allowance.
        destination: :data:`ADMIN_CHANNEL` or :data:`OWNER_DM`.
        runway_days: alert when the key's forecast runs dry within this many days.
        credits_floor_cents: alert when the key's credits fall below this; None = off.
        anomaly_factor: the last hour above this many times the median hour is an anomaly.
        anomaly_floor_cents: ... and above this amount (a quiet server is not alarmed by one
            video).
        member_10min_cents: one member spending more than this in 10 minutes is an anomaly;
            None = off.
        pause_on_anomaly: an anomaly pauses the server's new paid requests.
        paused_at: when the server's paid requests were paused; None = not paused.
        paused_by: who paused them (0: the guard itself, on an anomaly).
        pause_reason: what the guard measured, or who paused.
    """

    thresholds: tuple[int, ...] = (50, 80, 100)
    member_notes: bool = True
    destination: str = ADMIN_CHANNEL
    runway_days: int = 3
    credits_floor_cents: int | None = None
    anomaly_factor: float = 5.0
    anomaly_floor_cents: int = 500
    member_10min_cents: int | None = None
    pause_on_anomaly: bool = False
    paused_at: float | None = None
    paused_by: int | None = None
    pause_reason: str | None = None


@dataclass(frozen=True, slots=True)
class GuardAlert:
    """An alert the guard fired (once per threshold and period).

    Attributes:
        guild_id: the server.
        kind: ``month``, ``tier``, ``member_day``, ``member_month``, ``runway``, ``credits``,
            ``anomaly`` or ``member_burst``.
        period: the period and subject it belongs to (``"2026-01"``, ``"2026-01-15 u42"``).
        threshold: the percentage crossed, or ``""``.
        at: when it fired.
        amount_cents: what was measured (spend, credits).
        limit_cents: what it was measured against (the budget); None when nothing.
        figures: what it measured beyond the amounts, for its description in the reader's
            language (``bot.services.guard.describe_alert``): ``user``, ``role``, ``key``,
            ``days``, ``rate`` (micro-cents a day), ``members`` and ``models`` (``[id or
            name, micro-cents]``); ``text`` for an alert stored before them (English).
    """

    guild_id: int
    kind: str
    period: str
    threshold: str
    at: float
    amount_cents: Decimal
    limit_cents: Decimal | None
    figures: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Runway:
    """A key's last reported credits and when they run dry at this week's pace.

    Attributes:
        remaining_cents: the balance the service last reported (``remaining_credits_cents``).
        reported_at: when it was reported.
        burn_cents_per_day: the key's charges over the last 7 days (every server), per day.
        days_left: ``remaining / burn``; None when nothing was spent this week.
    """

    remaining_cents: Decimal
    reported_at: float
    burn_cents_per_day: Decimal
    days_left: float | None
