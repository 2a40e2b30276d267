"""The spend guard: admins hear of money trouble early, once, and a runaway can stop itself.

After each committed charge (:meth:`SpendGuard.after_charge`, Billing's watcher):

* **thresholds** — the server's spend this UTC month crossing a percentage of its monthly
  budget (50, 80, 100 % by default; ``/config guard set thresholds``) tells the admins; one
  tier's members together crossing 80 % of it too. A member crossing 80 % and 100 % of their
  own daily or monthly allowance reads a note in the answer to the command
  (:meth:`SpendGuard.take_note`, in their language).
* **the key's runway** — the balance each charge reports (``remaining_credits_cents``) is kept
  per key; with the key's charges over the last 7 days (every server), the days until it runs
  dry. Below ``runway-days``, or credits below ``credits-floor``: the admins of each server
  charging on its own key are told, once per key and day; a member's personal key tells its
  owner by DM when they turned DM notices on (``/settings notify dm``). The bot's shared key
  (``GENAPI_API_KEY``) is its owner's: its balance is told to no server and no member.
* **anomalies** — the last hour's spend above ``anomaly-factor`` × the median hourly spend of
  the 14 days before and above ``anomaly-floor``; or one member spending more than
  ``member-10min`` in 10 minutes. Told with the members and models that drove it; with
  ``pause-on-anomaly``, the server's new paid requests are paused (Billing's admission refuses
  them with :class:`~bot.errors.SpendingPaused`) until an admin resumes.

Every alert is one ``INSERT`` into ``guard_alerts``, whose unique key (server, kind, period,
threshold) lets it win once: an alert fires once per threshold and period across restarts and
processes. The checks read the dashboard's daily sums (``ledger_daily``) and the guard's own
hourly table, never the whole ledger (``python -m bench guard``). A failure of the guard is
logged, never raised over the charge (Billing's watcher). docs/guard.md.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import statistics
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from bot.clock import Clock, utc_datetime
from bot.config import Settings
from bot.domain import AuditEntry, Charge, GuardAlert, GuardSettings, Runway
from bot.domain.guard import DESTINATIONS, OWNER_DM
from bot.errors import ValidationFailed
from bot.genapi.client import key_fingerprint
from bot.i18n import N_, SOURCE, Later, _, money
from bot.services.billing import Allowances, Billing, day_start, month_start
from bot.services.guard_tally import BURST_SECONDS, BurstTally, GuildTally, MemberTally
from bot.services.personal import is_personal
from bot.storage import Database
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.guard import HOUR, SETTING_COLUMNS, hour_of

log = logging.getLogger(__name__)

MEMBER_THRESHOLDS = (80, 100)
"""Percentages of a member's own allowance at which they read a note."""

NOTE_KINDS = frozenset({"member_day", "member_month"})
"""Alerts that are a member's note in their answer, not an admin's line."""

TIER_THRESHOLD = 80
"""Percentage of the server's monthly budget one tier's members spending together alerts at."""

ANOMALY_DAYS = 14
"""Days of hourly spend whose median the last hour is compared with."""

BURN_DAYS = 7
"""Days of a key's charges its burn rate is measured over."""

CACHE_SECONDS = 120.0
"""How long a server's guard settings and budget are kept in memory (a change made in another
process shows within this; in this one at once; the pause itself is always read afresh)."""

BURN_CACHE_SECONDS = 300.0
"""How long a key's burn rate (its 7 days' average) is kept in memory."""

GUARD_ACTOR = 0
"""The ``paused_by`` and audit ``user_id`` of a pause the guard made itself."""

AdminLog = Callable[[int, int, str], Awaitable[None]]
"""Posts a line in a server's admin channel: ``(guild id, channel id, text)``."""

OwnerDm = Callable[[int, str], Awaitable[None]]
"""Sends a DM to a server's owner: ``(guild id, text)``."""

MemberDm = Callable[[int, str], Awaitable[None]]
"""Sends a DM to a member: ``(user id, text)``; the text a :class:`~bot.i18n.Later`, translated
by the outlet."""


class GuardLine(Later):
    """An alert line whose Decimal values are amounts of cents, formatted for its reader.

    Reads as the English line (logs, tests); :meth:`translated` formats the amounts with
    :func:`bot.i18n.money` in the reader's locale.
    """

    def __new__(cls, template: str, /, **values: object) -> GuardLine:
        """The English line, amounts in dollars."""
        line = super().__new__(cls, template, **_shown(values, translated=False))
        line.values = values
        return line  # type: ignore[return-value]  # Later.__new__ builds a cls

    def translated(self) -> str:
        """The line in the current locale, amounts (and lines within it) in it too."""
        return _(self.template, **_shown(self.values, translated=True))


def _shown(values: dict[str, object], *, translated: bool) -> dict[str, object]:
    """``values`` for a line: amounts of cents as money, lines within it translated or not."""
    shown: dict[str, object] = {}
    for name, value in values.items():
        if isinstance(value, Decimal):
            value = money(value) if translated else money(value, SOURCE)
        elif isinstance(value, Later):
            value = value.translated() if translated else str(value)
        elif isinstance(value, _Amounts):
            value = ", ".join(
                f"{label} {money(from_micro(m)) if translated else money(from_micro(m), SOURCE)}"
                for label, m in value
            )
        shown[name] = value
    return shown


class _Amounts(tuple[tuple[str, int], ...]):
    """``(label, micro-cents)`` pairs, shown ``"<@1> $0.50, <@2> $0.10"`` in the reader's locale.

    An anomaly's members and models.
    """


_DESCRIPTIONS = {
    "month": N_("The month's spend {amount} of the {limit} budget ({threshold} %)"),
    "tier": N_("Members of <@&{role}> spent {amount} of the {limit} monthly budget"),
    "member_day": N_("<@{user}> spent {amount} of a {limit} daily allowance ({threshold} %)"),
    "member_month": N_("<@{user}> spent {amount} of a {limit} monthly allowance ({threshold} %)"),
    "credits": N_("The key {key}… has {amount} of credits, below the {limit} floor"),
    "runway": N_("The key {key}… has {amount} left: about {days} days at {rate} a day"),
    "anomaly": N_(
        "{amount} in the last hour against a usual hour of {limit}; members: {members};"
        " models: {models}"
    ),
    "member_burst": N_("<@{user}> spent {amount} in 10 minutes (more than {limit})"),
}
"""What each kind of alert measured, filled with its figures when read."""


def figures_of(stored: str | None) -> dict[str, Any]:
    """An alert's figures from its ``guard_alerts.measured`` column (JSON).

    A row written before the figures were stored holds an English sentence: it is kept as
    ``{"text": ...}`` and shown as it is.
    """
    if not stored:
        return {}
    try:
        figures = json.loads(stored)
    except ValueError:
        return {"text": stored}
    return figures if isinstance(figures, dict) else {"text": stored}


def describe_alert(alert: GuardAlert) -> Later:
    """What an alert measured, for people: English as a ``str``, translated when read.

    :meth:`~bot.i18n.Later.translated` gives the reader's language, amounts formatted in its
    conventions. Built from the figures stored with the alert (``amount_cents``,
    ``limit_cents``, the threshold and :attr:`~bot.domain.GuardAlert.figures`), never from a
    stored sentence, so each reader reads it in their own language (issue 38).
    """
    figures = alert.figures
    template = _DESCRIPTIONS.get(alert.kind)
    if template is None or "text" in figures:
        return Later("{text}", text=str(figures.get("text", alert.kind)))
    rate = figures.get("rate")
    return GuardLine(
        template,
        amount=alert.amount_cents,
        limit=alert.limit_cents if alert.limit_cents is not None else Decimal(0),
        threshold=alert.threshold,
        user=figures.get("user", ""),
        role=figures.get("role", ""),
        key=figures.get("key", ""),
        days=figures.get("days", ""),
        rate=from_micro(int(rate)) if rate is not None else Decimal(0),
        members=_Amounts((f"<@{u}>", int(m)) for u, m in figures.get("members", [])),
        models=_Amounts((f"`{n}`", int(m)) for n, m in figures.get("models", [])),
    )


def parse_thresholds(text: str) -> tuple[int, ...]:
    """Read a list of percentages typed by an admin: ``"50,80,100"``.

    Returns:
        The percentages, ascending, without repeats (1 to 1000 each; at most 10).

    Raises:
        ValidationFailed: not such a list.
    """
    try:
        values = sorted({int(part.strip().rstrip("%")) for part in text.split(",") if part.strip()})
    except ValueError:
        values = []
    if not values or len(values) > 10 or not all(1 <= v <= 1000 for v in values):
        raise ValidationFailed(
            N_("Thresholds are percentages from 1 to 1000, such as `50,80,100`.")
        )
    return tuple(values)


def describe_thresholds(thresholds: tuple[int, ...]) -> str:
    """``"50 %, 80 %, 100 %"``: how the thresholds read in ``/config`` and the audit."""
    return ", ".join(f"{t} %" for t in thresholds)


def audit_values(config: GuardSettings) -> dict[str, str]:
    """The guard's settings as the audit log shows them (English, for people)."""

    def dollars(cents: int | None) -> str:
        return "off" if cents is None else money(Decimal(cents), SOURCE)

    return {
        "guard thresholds": describe_thresholds(config.thresholds),
        "guard member notes": "on" if config.member_notes else "off",
        "guard alerts to": config.destination,
        "guard runway days": str(config.runway_days),
        "guard credits floor": dollars(config.credits_floor_cents),
        "guard anomaly factor": f"{config.anomaly_factor:g}",
        "guard anomaly floor": dollars(config.anomaly_floor_cents),
        "guard member 10 minutes": dollars(config.member_10min_cents),
        "guard pause on anomaly": "on" if config.pause_on_anomaly else "off",
        "spending": "on" if config.paused_at is None else "paused",
    }


def settings_of(row: Any) -> GuardSettings:
    """A server's :class:`GuardSettings` from its ``guard_settings`` row (None: defaults)."""
    default = GuardSettings()
    if row is None:
        return default

    def pick(name: str, fallback: Any) -> Any:
        value = row[name]
        return fallback if value is None else value

    thresholds = default.thresholds
    if row["thresholds"]:
        thresholds = tuple(int(t) for t in str(row["thresholds"]).split(","))
    return GuardSettings(
        thresholds=thresholds,
        member_notes=bool(pick("member_notes", 1)),
        destination=pick("destination", default.destination),
        runway_days=int(pick("runway_days", default.runway_days)),
        credits_floor_cents=row["credits_floor_cents"],
        anomaly_factor=float(pick("anomaly_factor", default.anomaly_factor)),
        anomaly_floor_cents=int(pick("anomaly_floor_cents", default.anomaly_floor_cents)),
        member_10min_cents=row["member_10min_cents"],
        pause_on_anomaly=bool(pick("pause_on_anomaly", 0)),
        paused_at=row["paused_at"],
        paused_by=row["paused_by"],
        pause_reason=row["pause_reason"],
    )


@functools.lru_cache(maxsize=64)
def _periods(hour_index: int) -> tuple[str, str, str]:
    """The UTC month, day and hour of an hour (``at // 3600``), as the alerts' periods."""
    at = utc_datetime(hour_index * HOUR)
    return at.strftime("%Y-%m"), at.strftime("%Y-%m-%d"), at.strftime("%Y-%m-%dT%H")


def _month(at: float) -> str:
    return _periods(int(at // HOUR))[0]


def _day(at: float) -> str:
    return _periods(int(at // HOUR))[1]


def _hour(at: float) -> str:
    return _periods(int(at // HOUR))[2]


def _pct(amount: int, limit: int) -> int:
    return amount * 100 // limit if limit > 0 else 0


@dataclass(frozen=True, slots=True)
class _Fired:
    """One alert to record and, if its INSERT wins, to post."""

    kind: str
    period: str
    threshold: str
    amount_micro: int
    limit_micro: int | None
    figures: dict[str, Any]
    line: Later | None

    def measured(self, guild_id: int) -> Later:
        """What it measured, for people (:func:`describe_alert`)."""
        return describe_alert(
            GuardAlert(
                guild_id,
                self.kind,
                self.period,
                self.threshold,
                0.0,
                from_micro(self.amount_micro),
                None if self.limit_micro is None else from_micro(self.limit_micro),
                self.figures,
            )
        )


class SpendGuard:
    """Thresholds, the key's runway and anomalies after each charge; the server's pause.

    Args:
        db: the database.
        clock: UTC epoch seconds (periods, the runway, anomalies' hours).
        billing: the servers' effective budgets (:meth:`Billing.limits`).
        settings: ``DASHBOARD_PUBLIC_URL`` for the Spend page's link, and ``GENAPI_API_KEY``
            (the shared key, whose balance no server or member is told); None: neither.
    """

    def __init__(
        self, db: Database, clock: Clock, billing: Billing, settings: Settings | None = None
    ) -> None:
        self._db = db
        self._store = db.guard
        self._clock = clock
        self._billing = billing
        self._dashboard = None if settings is None else settings.dashboard_public_url
        shared = None if settings is None else settings.genapi_api_key
        # Per key fingerprint: whether it is the shared key (the current GENAPI_API_KEY, or a
        # previous one kept while its jobs end).
        self._shared: dict[str, bool] = {}
        if shared is not None and shared.get_secret_value():
            self._shared[key_fingerprint(shared)] = True
        self._outlets = AlertOutlets(db)
        # Per server: (read at, guard settings, monthly budget cents or None).
        self._config: dict[int, tuple[float, GuardSettings, int | None]] = {}
        # Per server and hour: (median hourly micro of the 14 days before, the hour before's).
        self._baseline: dict[tuple[int, int], tuple[float, int]] = {}
        # Per key: (read at, micro over the burn window, seconds it spans).
        self._burn: dict[str, tuple[float, int, float]] = {}
        # Per server: its sums in memory (bot.services.guard_tally).
        self._tallies: dict[int, GuildTally] = {}
        # Alerts this process knows are recorded (won here or elsewhere): no INSERT again.
        self._known: set[tuple[int, str, str, str]] = set()
        # Notes waiting for the member's answer: (guild, user) -> (line, at).
        self._notes: dict[tuple[int, int], tuple[Later, float]] = {}

    def set_outlets(
        self,
        admin_log: AdminLog | None,
        owner_dm: OwnerDm | None,
        member_dm: MemberDm | None = None,
    ) -> None:
        """Set where alerts go (the bot's outlets; None: that outlet is silent).

        ``admin_log`` the admin channel's poster, ``owner_dm`` the server owner's DM,
        ``member_dm`` a member's DM (their personal key's alerts).
        """
        self._outlets.set(admin_log, owner_dm, member_dm)

    # -- settings ----------------------------------------------------------------------------

    async def settings(self, guild_id: int) -> GuardSettings:
        """Return the server's guard settings (defaults where it set nothing), read afresh."""
        return settings_of(await self._store.settings(guild_id))

    async def update(self, guild_id: int, **changes: Any) -> GuardSettings:
        """Change some of the server's guard settings; the others are kept.

        Args:
            guild_id: the server.
            changes: :class:`GuardSettings` fields (not the pause's): ``thresholds`` a tuple of
                percentages (:func:`parse_thresholds`), ``destination`` one of
                :data:`~bot.domain.guard.DESTINATIONS`, ``runway_days`` 1 to 365, amounts whole
                cents >= 0 (None: off or the default), ``anomaly_factor`` 1 to 100.

        Raises:
            ValidationFailed: a value out of its range.
        """
        values: dict[str, Any] = {}
        for name, value in changes.items():
            if name not in SETTING_COLUMNS:
                raise ValueError(f"not a guard setting: {name}")
            if name == "thresholds":
                value = None if value is None else ",".join(str(t) for t in value)
            elif name == "destination" and value not in (None, *DESTINATIONS):
                raise ValidationFailed(N_("Alerts go to `admin-channel` or `owner-dm`."))
            elif name == "runway_days" and value is not None and not 1 <= value <= 365:
                raise ValidationFailed(N_("Runway days are 1 to 365."))
            elif name == "anomaly_factor" and value is not None and not 1 <= value <= 100:
                raise ValidationFailed(N_("The anomaly factor is 1 to 100."))
            elif name in ("member_notes", "pause_on_anomaly") and value is not None:
                value = int(bool(value))
            elif isinstance(value, int) and value < 0:
                raise ValidationFailed(N_("Amounts cannot be negative."))
            values[name] = value
        await self._store.set(guild_id, values)
        self._config.pop(guild_id, None)
        return await self.settings(guild_id)

    async def paused(self, guild_id: int) -> bool:
        """Whether the server's new paid requests are paused."""
        return await self._store.pause(guild_id) is not None

    async def resume(self, guild_id: int) -> bool:
        """Resume the server's paid requests (audited by the caller's ``/config`` path).

        Returns:
            False when they were not paused.
        """
        done = await self._store.clear_pause(guild_id)
        self._config.pop(guild_id, None)
        return done

    async def alerts(self, guild_id: int, limit: int = 50) -> list[GuardAlert]:
        """Return the server's latest alerts, newest first."""
        return [
            GuardAlert(
                guild_id=r["guild_id"],
                kind=r["kind"],
                period=r["period"],
                threshold=r["threshold"],
                at=r["at"],
                amount_cents=from_micro(int(r["amount_micro"])),
                limit_cents=None if r["limit_micro"] is None else from_micro(int(r["limit_micro"])),
                figures=figures_of(r["measured"]),
            )
            for r in await self._store.alerts(guild_id, limit)
        ]

    async def runway(self, key_fingerprint: str) -> Runway | None:
        """The key's last reported credits and the days they last at this week's pace.

        Returns:
            None when no charge reported the key's balance yet.
        """
        credits = await self._store.credits(key_fingerprint)
        if credits is None:
            return None
        remaining, at = credits
        return self._runway(remaining, at, *await self._burn_of(key_fingerprint, fresh=True))

    def _runway(self, remaining: int, at: float, micro: int, span: float) -> Runway:
        per_day = Decimal(micro) * Decimal(86_400) / Decimal(span) if span > 0 else Decimal(0)
        days = None if micro <= 0 else max(0.0, remaining / float(per_day))
        return Runway(
            remaining_cents=from_micro(remaining),
            reported_at=at,
            burn_cents_per_day=from_micro(int(per_day)),
            days_left=days,
        )

    async def _burn_of(self, key_fingerprint: str, *, fresh: bool = False) -> tuple[int, float]:
        """The key's spend over the burn window, micro-cents, and the seconds it spans."""
        now = self._clock.time()
        cached = self._burn.get(key_fingerprint)
        if not fresh and cached is not None and now - cached[0] < BURN_CACHE_SECONDS:
            return cached[1], cached[2]
        since = hour_of(now) - BURN_DAYS * 24 * HOUR
        hours = await self._store.hourly(f"k{key_fingerprint}", since, hour_of(now) + HOUR)
        micro = sum(hours.values())
        # A key younger than the window burns over the time it has been charged, not 7 days,
        # and over a day at least: one charge is no pace.
        span = now - min(hours) if hours else 0.0
        span = min(max(span, 86_400.0), BURN_DAYS * 86_400.0)
        if len(self._burn) > 10_000:
            self._burn.clear()
        self._burn[key_fingerprint] = (now, micro, span)
        return micro, span

    # -- member notes ----------------------------------------------------------------------

    def take_note(self, guild_id: int, user_id: int) -> Later | None:
        """Return (and forget) the note the member's last charge earned, if any.

        The Discord side shows it in the answer to the command that crossed the threshold,
        translated into the member's language (:meth:`~bot.i18n.Later.translated`).
        """
        taken = self._notes.pop((guild_id, user_id), None)
        return None if taken is None else taken[0]

    # -- after each charge -------------------------------------------------------------------

    async def after_charge(self, charge: Charge, allowances: Allowances | None) -> None:
        """Check every rule on a committed charge; alerts recorded before this returns.

        Billing's watcher (:meth:`Billing.set_watcher`), called after the charge's transaction,
        which wrote its hours (``guard_hourly``) and daily sums itself. The sums the rules read
        are kept in memory (:mod:`bot.services.guard_tally`) and read from the database only
        near a limit, on a new period, or every minute (another process's charges): in the common
        case a charge costs the guard no statement. Alerts are posted in the background.
        """
        if is_personal(charge.guild_id):
            await self._personal_key(charge)  # no server's budget, anomalies or pause
            return
        now = self._clock.time()
        micro = to_micro(charge.cost_cents)
        remaining = charge.remaining_credits_cents
        config, budget = await self._config_of(charge.guild_id)
        tally, fresh = await self._tally_of(charge.guild_id, now)
        if not fresh and _month(charge.at) == tally.month:
            tally.add(micro)  # a total just read holds the charge already
        _count(tally, charge, micro)
        fired: list[_Fired] = []
        fired += await self._thresholds(charge, config, budget, allowances, tally, micro, now)
        if remaining is not None and not await self._is_shared(charge.key_fingerprint):
            fired += await self._key(charge, config, to_micro(remaining), now)
        anomalies = await self._anomalies(charge, config, tally, micro, now)
        fired += anomalies
        won = [alert for alert in fired if await self._fire(charge.guild_id, alert, now)]
        if anomalies and config.pause_on_anomaly and any(a in won for a in anomalies):
            first = next(a for a in anomalies if a in won)
            await self._pause(charge.guild_id, str(first.measured(charge.guild_id)), now)
        for alert in won:
            if alert.kind in NOTE_KINDS and alert.line is not None:
                if config.member_notes:
                    self._notes[(charge.guild_id, charge.user_id)] = (alert.line, now)
            elif alert.line is not None:
                self._outlets.post(charge.guild_id, config, alert.line)
        if len(self._notes) > 10_000:  # notes no answer took (a button's charge, a crash)
            self._notes = {k: v for k, v in self._notes.items() if now - v[1] < 900}

    async def _personal_key(self, charge: Charge) -> None:
        """A personal key's runway and floor, told to its owner by DM if their notices are on.

        Once per key and day, as a server's (``guard_alerts`` under the wallet's id); recorded
        whether or not the DM is sent. A charge on the shared key (the owner's personal
        allowance) tells nothing: that balance is not the member's.
        """
        remaining = charge.remaining_credits_cents
        if remaining is None or await self._is_shared(charge.key_fingerprint):
            return
        now = self._clock.time()
        config, _budget = await self._config_of(charge.guild_id)
        fired = await self._key(charge, config, to_micro(remaining), now)
        won = [alert for alert in fired if await self._fire(charge.guild_id, alert, now)]
        if not won or not self._outlets.dm_members:
            return
        if not (await self._db.members.get(charge.user_id)).notify_dm:
            return
        for alert in won:
            if alert.line is not None:
                line = GuardLine(
                    N_("About your own API key (personal use): {alert}"), alert=alert.line
                )
                self._outlets.dm_member(charge.user_id, line)

    async def _is_shared(self, fingerprint: str | None) -> bool:
        """Whether a charge's key is the shared key (``GENAPI_API_KEY``, current or kept).

        A previous shared key is known by its stored copy (``GuildStore.default_key``, kept
        while its jobs end); the answer is kept per fingerprint.
        """
        if fingerprint is None:
            return True  # no key to speak of
        shared = self._shared.get(fingerprint)
        if shared is None:
            shared = await self._db.guilds.default_key(fingerprint) is not None
            if len(self._shared) > 10_000:
                self._shared = {k: v for k, v in self._shared.items() if v}
            self._shared[fingerprint] = shared
        return shared

    async def _tally_of(self, guild_id: int, now: float) -> tuple[GuildTally, bool]:
        """The server's tally, its month total read again when stale; True: read just now."""
        month = _month(now)
        tally = self._tallies.get(guild_id)
        if tally is not None and not tally.stale(month, now):
            return tally, False
        total = await self._store.month_total(guild_id, month_start(now))
        if tally is None:
            if len(self._tallies) > 10_000:
                self._tallies.clear()
            tally = self._tallies[guild_id] = GuildTally(month, total, now)
        else:
            tally.refreshed(month, total, now)
        return tally, True

    async def _config_of(self, guild_id: int) -> tuple[GuardSettings, int | None]:
        now = self._clock.time()
        cached = self._config.get(guild_id)
        if cached is not None and now - cached[0] < CACHE_SECONDS:
            return cached[1], cached[2]
        config = await self.settings(guild_id)
        budget = (await self._billing.limits(guild_id)).monthly_budget_cents
        if len(self._config) > 10_000:
            self._config.clear()
        self._config[guild_id] = (now, config, budget)
        return config, budget

    def _link(self, guild_id: int) -> str:
        if self._dashboard is None or is_personal(guild_id):
            return ""
        return f" <{self._dashboard}/servers/{guild_id}/spend>"

    async def _thresholds(
        self,
        charge: Charge,
        config: GuardSettings,
        budget: int | None,
        allowances: Allowances | None,
        tally: GuildTally,
        micro: int,
        now: float,
    ) -> list[_Fired]:
        daily, monthly = allowances if allowances is not None else (None, None)
        if budget is None and daily is None and monthly is None:
            return []
        tier = "" if charge.tier_role_id is None else str(charge.tier_role_id)
        if not self._near(charge, config, budget, (daily, monthly), tally, tier, micro, now):
            return []
        sums = await self._store.month_sums(
            charge.guild_id, month_start(now), day_start(now), charge.user_id, tier
        )
        # What was read is the truth now: the estimates start from it again.
        tally.refreshed(_month(now), sums.get(("total", "", False), 0), now)
        tally.tiers[tier] = (sums.get(("tier", tier, False), 0), tally.others)
        tally.members[charge.user_id] = MemberTally(
            _month(now),
            _day(now),
            sums.get(("member", str(charge.user_id), False), 0),
            sums.get(("member", str(charge.user_id), True), 0),
            tally.others,
        )
        link = self._link(charge.guild_id)
        return [
            *_budget_alerts(config, budget, sums, tier, _month(now), link),
            *_member_alerts(charge.user_id, daily, monthly, sums, now),
        ]

    def _near(
        self,
        charge: Charge,
        config: GuardSettings,
        budget: int | None,
        allowances: Allowances,
        tally: GuildTally,
        tier: str,
        micro: int,
        now: float,
    ) -> bool:
        """Whether a threshold not yet fired may be crossed: the sums must be read.

        True also when a sum it needs was never read, or its day or month is over (a period's
        rollover).
        """
        guild_id, user = charge.guild_id, charge.user_id
        month, day = _month(now), _day(now)
        near = False
        if budget is not None and budget > 0:
            limit = to_micro(budget)
            pending = [
                t
                for t in config.thresholds
                if (guild_id, "month", month, str(t)) not in self._known
            ]
            near = bool(pending) and tally.total * 100 >= pending[0] * limit
            if tier and (guild_id, "tier", f"{month} r{tier}", str(TIER_THRESHOLD)) not in (
                self._known
            ):
                seen = tally.tiers.get(tier)
                bound = None if seen is None else seen[0] + tally.others - seen[1]
                near = near or bound is None or bound * 100 >= TIER_THRESHOLD * limit
        daily, monthly = allowances
        if (daily is None or daily <= 0) and (monthly is None or monthly <= 0):
            return near
        member = tally.members.get(user)
        if member is None or member.day != day or member.month != month:
            return True
        unseen = tally.others - member.others
        for kind, allowance, period, spent in (
            ("member_day", daily, day, member.day_micro),
            ("member_month", monthly, month, member.month_micro),
        ):
            if allowance is None or allowance <= 0:
                continue
            pending = [
                t
                for t in MEMBER_THRESHOLDS
                if (guild_id, kind, f"{period} u{user}", str(t)) not in self._known
            ]
            if pending and (spent + unseen) * 100 >= pending[0] * to_micro(allowance):
                near = True
        return near

    async def _key(
        self, charge: Charge, config: GuardSettings, remaining: int, now: float
    ) -> list[_Fired]:
        assert charge.key_fingerprint is not None
        fp = charge.key_fingerprint
        day = _day(now)
        fired: list[_Fired] = []
        floor = config.credits_floor_cents
        if floor is not None and remaining < to_micro(floor):
            fired.append(
                _floor_alert(f"{day} k{fp}", fp, remaining, floor, self._link(charge.guild_id))
            )
        if (charge.guild_id, "runway", f"{day} k{fp}", "") in self._known:
            return fired
        burn, span = await self._burn_of(fp)
        # Within the runway (remaining / (burn per day) < days), in integers: no Decimal.
        if burn > 0 and remaining * span < config.runway_days * burn * 86_400:
            runway = self._runway(remaining, charge.at, burn, span)
            assert runway.days_left is not None
            days = round(runway.days_left, 1)
            fired.append(
                _Fired(
                    "runway",
                    f"{day} k{fp}",
                    "",
                    remaining,
                    None,
                    {"key": fp[:8], "days": days, "rate": to_micro(runway.burn_cents_per_day)},
                    GuardLine(
                        N_(
                            "The API key runs dry in about {days} days at this week's pace: "
                            "{left} left, {rate} a day.{link}"
                        ),
                        days=days,
                        left=from_micro(remaining),
                        rate=runway.burn_cents_per_day,
                        link=self._link(charge.guild_id),
                    ),
                )
            )
        return fired

    async def _anomalies(
        self, charge: Charge, config: GuardSettings, tally: GuildTally, micro: int, now: float
    ) -> list[_Fired]:
        fired: list[_Fired] = []
        guild_id = charge.guild_id
        hour = hour_of(now)
        period = _hour(now)
        read = tally.hour != hour
        if read:  # a new hour: its spend so far (this charge's included) read once
            await self._read_hour(guild_id, tally, hour)
        elif hour_of(charge.at) == hour:
            tally.hour_micro += micro
        if (guild_id, "anomaly", period, "") not in self._known:
            median, before = await self._baseline_of(guild_id, hour)
            # The last 60 minutes: this hour's spend and the part of the hour before that is
            # still within them.
            share = before * max(0.0, 1.0 - (now - hour) / HOUR)
            floor = to_micro(config.anomaly_floor_cents)
            bar = max(float(floor), config.anomaly_factor * median)
            bound = tally.hour_micro + tally.others - tally.hour_others + share
            if bound > bar and not read:
                await self._read_hour(guild_id, tally, hour)
                bound = tally.hour_micro + share
            if bound > bar:
                fired.append(await self._anomaly(charge, config, int(bound), median, now))
        limit = config.member_10min_cents
        burst_period = f"{period} u{charge.user_id}"
        if limit is not None and (guild_id, "member_burst", burst_period, "") not in self._known:
            spent = await self._burst_of(charge, tally, micro, to_micro(limit), now)
            if spent > to_micro(limit):
                fired.append(
                    _burst_alert(
                        burst_period, charge.user_id, spent, limit, config, self._link(guild_id)
                    )
                )
        return fired

    async def _read_hour(self, guild_id: int, tally: GuildTally, hour: int) -> None:
        hours = await self._store.hourly(f"g{guild_id}", hour, hour + HOUR)
        tally.hour, tally.hour_micro, tally.hour_others = hour, hours.get(hour, 0), tally.others

    async def _burst_of(
        self, charge: Charge, tally: GuildTally, micro: int, limit: int, now: float
    ) -> int:
        """The member's spend in the last 10 minutes: read when its upper bound passes ``limit``.

        Returns:
            What was read, micro-cents; or, when the bound stays within the limit, the bound.
        """
        since = now - BURST_SECONDS
        burst = tally.bursts.get(charge.user_id)
        if burst is not None:
            burst.charges.append((charge.at, micro))
            while burst.charges and burst.charges[0][0] < since:
                burst.charges.popleft()
            bound = sum(m for _, m in burst.charges)
            if burst.seed_at >= since:
                bound += burst.seed_micro + tally.others - burst.others
            else:
                bound += tally.others_since(since)
            if bound <= limit:
                return bound
        spent = await self._store.member_spent_since(charge.guild_id, charge.user_id, since)
        tally.bursts[charge.user_id] = BurstTally(now, spent, tally.others)
        return spent

    async def _anomaly(
        self, charge: Charge, config: GuardSettings, last_hour: int, median: float, now: float
    ) -> _Fired:
        users, models = await self._store.drivers(charge.guild_id, now - HOUR)
        members = _Amounts((f"<@{u}>", m) for u, m in users)
        names = _Amounts((f"`{m}`", c) for m, c in models)
        return _Fired(
            "anomaly",
            _hour(now),
            "",
            last_hour,
            int(median),
            {"members": users, "models": models},
            GuardLine(
                N_(
                    "Unusual spending: {amount} in the last hour, {factor}× the usual hour "
                    "({usual}). Members: {members}. Models: {models}.{paused}{link}"
                ),
                amount=from_micro(last_hour),
                factor=config.anomaly_factor,
                usual=from_micro(int(median)),
                members=members,
                models=names,
                paused=_paused_note(config),
                link=self._link(charge.guild_id),
            ),
        )

    async def _baseline_of(self, guild_id: int, hour: int) -> tuple[float, int]:
        """The median hourly spend of the 14 days before ``hour`` and the hour before's."""
        cached = self._baseline.get((guild_id, hour))
        if cached is not None:
            return cached
        since = hour - ANOMALY_DAYS * 24 * HOUR
        hours = await self._store.hourly(f"g{guild_id}", since, hour)
        values = [hours.get(since + i * HOUR, 0) for i in range(ANOMALY_DAYS * 24)]
        baseline = (float(statistics.median(values)), hours.get(hour - HOUR, 0))
        if len(self._baseline) > 10_000:
            self._baseline.clear()
        self._baseline[(guild_id, hour)] = baseline
        return baseline

    async def _fire(self, guild_id: int, alert: _Fired, now: float) -> bool:
        key = (guild_id, alert.kind, alert.period, alert.threshold)
        if key in self._known:
            return False
        won = await self._store.fire(
            guild_id,
            alert.kind,
            alert.period,
            alert.threshold,
            at=now,
            amount_micro=alert.amount_micro,
            limit_micro=alert.limit_micro,
            measured=json.dumps(alert.figures, separators=(",", ":")),
        )
        if len(self._known) > 100_000:
            self._known.clear()
        self._known.add(key)
        if won:
            log.info("spend guard, guild %s: %s", guild_id, alert.measured(guild_id))
        return won

    async def pause(self, guild_id: int, by: int, reason: str) -> bool:
        """Pause the server's new paid requests (audited: the audit log's ``spending``).

        Returns:
            False when they were paused already.
        """
        now = self._clock.time()
        done = await self._store.set_pause(guild_id, now, by, reason)
        self._config.pop(guild_id, None)
        if done and by == GUARD_ACTOR:
            await self._db.policy.add_audit(
                AuditEntry(guild_id, by, "spending", "on", f"paused: {reason}", now, "guard")
            )
        return done

    async def _pause(self, guild_id: int, reason: str, now: float) -> None:
        if await self.pause(guild_id, GUARD_ACTOR, reason):
            log.warning("spend guard paused paid requests in guild %s: %s", guild_id, reason)

    async def idle(self) -> None:
        """Wait until the alerts being sent are sent (tests, shutdown)."""
        await self._outlets.idle()

    def forget(self) -> None:
        """Drop what this process keeps in memory (a test's "restart" of the process)."""
        self._config.clear()
        self._baseline.clear()
        self._burn.clear()
        self._known.clear()
        self._tallies.clear()


class AlertOutlets:
    """Where the spend guard's alerts go, sent in the background (never raising).

    Args:
        db: the database (a server's admin channel).
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._admin_log: AdminLog | None = None
        self._owner_dm: OwnerDm | None = None
        self._member_dm: MemberDm | None = None
        self._posting: set[asyncio.Task[None]] = set()

    def set(
        self, admin_log: AdminLog | None, owner_dm: OwnerDm | None, member_dm: MemberDm | None
    ) -> None:
        """Set the outlets (:meth:`SpendGuard.set_outlets`); None: that outlet is silent."""
        self._admin_log = admin_log
        self._owner_dm = owner_dm
        self._member_dm = member_dm

    @property
    def dm_members(self) -> bool:
        """Whether a member's DM is an outlet (their personal key's alerts)."""
        return self._member_dm is not None

    def dm_member(self, user_id: int, line: Later) -> None:
        """DM ``line`` to a member, in the background (never raises)."""
        self._spawn(self._dm(user_id, line))

    async def _dm(self, user_id: int, line: Later) -> None:
        try:
            assert self._member_dm is not None
            await self._member_dm(user_id, line)
        except Exception:
            log.exception("could not DM a spend guard alert to a member")

    def post(self, guild_id: int, config: GuardSettings, line: Later) -> None:
        """Send ``line`` where the server's alerts go, in the background (never raises)."""
        self._spawn(self._send(guild_id, config, line))

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work, name="guard-alert")
        self._posting.add(task)
        task.add_done_callback(self._posting.discard)

    async def _send(self, guild_id: int, config: GuardSettings, line: Later) -> None:
        try:
            if config.destination == OWNER_DM:
                if self._owner_dm is not None:
                    await self._owner_dm(guild_id, line)
                return
            channel_id = (await self._db.guilds.settings(guild_id)).admin_channel_id
            if channel_id is not None and self._admin_log is not None:
                await self._admin_log(guild_id, channel_id, line)
        except Exception:
            log.exception("could not send a spend guard alert of guild %s", guild_id)

    async def idle(self) -> None:
        """Wait until the alerts being sent are sent."""
        while self._posting:
            await asyncio.gather(*list(self._posting), return_exceptions=True)


def _count(tally: GuildTally, charge: Charge, micro: int) -> None:
    """Count a charge in its tier's and member's estimates, where they are kept."""
    tier = "" if charge.tier_role_id is None else str(charge.tier_role_id)
    seen = tally.tiers.get(tier)
    if seen is not None and _month(charge.at) == tally.month:
        tally.tiers[tier] = (seen[0] + micro, seen[1])
    member = tally.members.get(charge.user_id)
    if member is not None:
        if member.month == _month(charge.at):
            member.month_micro += micro
        if member.day == _day(charge.at):
            member.day_micro += micro


def _budget_alerts(
    config: GuardSettings,
    budget: int | None,
    sums: dict[tuple[str, str, bool], int],
    tier: str,
    month: str,
    link: str,
) -> list[_Fired]:
    """The monthly budget thresholds crossed, and the tier's share (:data:`TIER_THRESHOLD`).

    Every threshold crossed is an alert recorded; only the highest carries a line to post.
    ``sums`` are micro-cents as read (``GuardStore.month_sums``); ``budget`` whole cents.
    """
    fired: list[_Fired] = []
    if budget is None or budget <= 0:
        return fired
    spent = sums.get(("total", "", False), 0)
    crossed = [t for t in config.thresholds if spent * 100 >= t * to_micro(budget)]
    if crossed:
        left = max(Decimal(0), Decimal(budget) - from_micro(spent))
        line = GuardLine(
            N_(
                "This server has spent {amount} of its {budget} monthly budget "
                "({percent} %); {left} remains.{link}"
            ),
            amount=from_micro(spent),
            budget=Decimal(budget),
            percent=_pct(spent, to_micro(budget)),
            left=left,
            link=link,
        )
        # Every threshold crossed is recorded; one line, of the highest, is posted.
        for t in crossed:
            fired.append(
                _Fired(
                    "month",
                    month,
                    str(t),
                    spent,
                    to_micro(budget),
                    {},
                    line if t == crossed[-1] else None,
                )
            )
    tier_spent = sums.get(("tier", tier, False), 0)
    if tier and tier_spent * 100 >= TIER_THRESHOLD * to_micro(budget):
        fired.append(
            _Fired(
                "tier",
                f"{month} r{tier}",
                str(TIER_THRESHOLD),
                tier_spent,
                to_micro(budget),
                {"role": int(tier)},
                GuardLine(
                    N_(
                        "Members of <@&{role}> have spent {amount} this month, "
                        "{percent} % of the server's {budget} budget.{link}"
                    ),
                    role=tier,
                    amount=from_micro(tier_spent),
                    percent=_pct(tier_spent, to_micro(budget)),
                    budget=Decimal(budget),
                    link=link,
                ),
            )
        )
    return fired


def _member_alerts(
    user_id: int,
    daily: int | None,
    monthly: int | None,
    sums: dict[tuple[str, str, bool], int],
    now: float,
) -> list[_Fired]:
    """A member's daily and monthly allowance thresholds crossed (:data:`MEMBER_THRESHOLDS`).

    ``daily`` and ``monthly`` whole cents (None or 0: none); ``sums`` micro-cents as read.
    """
    fired: list[_Fired] = []
    month, day = _month(now), _day(now)
    for kind, allowance, period, today in (
        ("member_day", daily, day, True),
        ("member_month", monthly, month, False),
    ):
        if allowance is None or allowance <= 0:
            continue
        spent = sums.get(("member", str(user_id), today), 0)
        crossed = [t for t in MEMBER_THRESHOLDS if spent * 100 >= t * to_micro(allowance)]
        for t in crossed:
            template = (
                N_("You have used {percent} % of your daily allowance here ({amount} of {limit}).")
                if today
                else N_(
                    "You have used {percent} % of your monthly allowance here "
                    "({amount} of {limit})."
                )
            )
            fired.append(
                _Fired(
                    kind,
                    f"{period} u{user_id}",
                    str(t),
                    spent,
                    to_micro(allowance),
                    {"user": user_id},
                    GuardLine(
                        template,
                        percent=t,
                        amount=from_micro(spent),
                        limit=Decimal(allowance),
                    )
                    if t == crossed[-1]
                    else None,
                )
            )
    return fired


def _floor_alert(period: str, fp: str, remaining: int, floor: int, link: str) -> _Fired:
    """The key's credits below the server's floor: ``remaining`` micro-cents, ``floor`` cents."""
    return _Fired(
        "credits",
        period,
        "",
        remaining,
        to_micro(floor),
        {"key": fp[:8]},
        GuardLine(
            N_("The API key's credits are down to {left}, below the floor of {floor}.{link}"),
            left=from_micro(remaining),
            floor=Decimal(floor),
            link=link,
        ),
    )


def _burst_alert(
    period: str, user_id: int, spent: int, limit: int, config: GuardSettings, link: str
) -> _Fired:
    """A member's spend over 10 minutes past the limit: ``spent`` micro-cents, ``limit`` cents."""
    return _Fired(
        "member_burst",
        period,
        "",
        spent,
        to_micro(limit),
        {"user": user_id},
        GuardLine(
            N_(
                "Unusual spending: <@{user}> spent {amount} in 10 minutes "
                "(more than {limit}).{paused}{link}"
            ),
            user=user_id,
            amount=from_micro(spent),
            limit=Decimal(limit),
            paused=_paused_note(config),
            link=link,
        ),
    )


def _paused_note(config: GuardSettings) -> str:
    """The sentence an anomaly's line ends with when it pauses the server; "" otherwise."""
    if not config.pause_on_anomaly:
        return ""
    return Later(
        N_(" Paid requests are paused until an admin resumes them with `/config guard resume`.")
    )


__all__ = [
    "GUARD_ACTOR",
    "GuardLine",
    "SpendGuard",
    "audit_values",
    "describe_alert",
    "describe_thresholds",
    "figures_of",
    "parse_thresholds",
    "settings_of",
]
