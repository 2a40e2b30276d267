"""The Overview's spend guard panel: meters, the key's credits and runway, latest alerts.

The meters show the month and the day with the thresholds marked (docs/guard.md).

Meters are HTML ``<meter>`` elements with their figures in text beside them (the thresholds
listed, each "crossed" or not): colour is never the only signal.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Final

from bot.dashboard.app import Dashboard
from bot.domain import GuardAlert, Runway
from bot.errors import BotError
from bot.services.guard import describe_alert


@dataclass(frozen=True, slots=True)
class MeterView:
    """One meter: spend against a limit, with the guard's thresholds marked.

    Attributes:
        label: what it measures ("This month", "Today").
        spent_micro: the spend, micro-cents.
        limit_micro: the limit, micro-cents; None: no limit (no meter drawn).
        thresholds: ``(percent, crossed)`` of each threshold marked on it.
    """

    label: str
    spent_micro: int
    limit_micro: int | None
    thresholds: tuple[tuple[int, bool], ...]

    @property
    def percent(self) -> int:
        """The spend as a whole percentage of the limit (0 without a limit)."""
        if not self.limit_micro:
            return 0
        return self.spent_micro * 100 // self.limit_micro

    @property
    def high(self) -> int:
        """The ``<meter>``'s ``high``: the first threshold short of 100 % (or 80 %)."""
        below = [t for t, _ in self.thresholds if t < 100]
        return below[-1] if below else 80


@dataclass(frozen=True, slots=True)
class AlertView:
    """An alert as the pages list it: when, what kind, and what it measured (English)."""

    at: float
    kind: str
    period: str
    threshold: str
    measured: str


KINDS: Final = {
    "month": "Monthly budget",
    "tier": "A tier's spend",
    "member_day": "A member's daily allowance",
    "member_month": "A member's monthly allowance",
    "runway": "The key's runway",
    "credits": "The key's credits",
    "anomaly": "Unusual hour",
    "member_burst": "A member in 10 minutes",
}
"""Each kind of alert, as the pages name it."""


def alert_view(alert: GuardAlert) -> AlertView:
    """An alert for the pages (the dashboard is in English: the description's source)."""
    return AlertView(
        alert.at,
        KINDS.get(alert.kind, alert.kind),
        alert.period,
        alert.threshold,
        str(describe_alert(alert)),
    )


def _meter(label: str, spent: int, limit: int | None, thresholds: tuple[int, ...]) -> MeterView:
    marks = tuple(
        (t, limit is not None and limit > 0 and spent * 100 >= t * limit) for t in thresholds
    )
    return MeterView(label, spent, limit, marks)


async def guard_panel(app: Dashboard, guild_id: int, fingerprint: str | None) -> dict[str, Any]:
    """The Overview's guard panel: meters, the key's credits and runway, latest alerts.

    Args:
        app: the dashboard.
        guild_id: the server.
        fingerprint: the server's own key; None: no key, or the shared key (``GENAPI_API_KEY``,
            whose balance no server reads).

    Returns:
        Template values: ``guard_meters`` (:class:`MeterView`), ``guard_runway``
        (:class:`~bot.domain.Runway` or None), ``guard_alerts`` (the 5 latest
        :class:`AlertView`), ``guard_paused`` (the settings when paused, else None).
    """
    guard = app.services.guard
    config = await guard.settings(guild_id)
    overview = await app.dashboard.overview(guild_id, None)
    budget = (await app.services.billing.limits(guild_id)).monthly_budget_cents
    limit = None if budget is None else budget * 10**6
    meters = [
        _meter("This month", overview.month_micro, limit, config.thresholds),
        # The server has a monthly budget only: the day is read against its 30th part.
        _meter(
            "Today, against a 30th of the monthly budget",
            overview.today_micro,
            None if limit is None else limit // 30,
            config.thresholds,
        ),
    ]
    runway: Runway | None = None
    if fingerprint is not None:
        with contextlib.suppress(BotError):
            runway = await guard.runway(fingerprint)
    return {
        "guard_meters": meters,
        "guard_runway": runway,
        "guard_alerts": [alert_view(a) for a in await guard.alerts(guild_id, 5)],
        "guard_paused": config if config.paused_at is not None else None,
    }


__all__ = ["KINDS", "AlertView", "MeterView", "alert_view", "guard_panel"]
