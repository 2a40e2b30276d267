"""Budgets, reservations and the credit ledger.

Flow of a paid call::

    reservation = await billing.reserve(...)      # BudgetExceeded / ConcurrencyLimitReached
    try:
        result = await client.generate(...)
    except NoChargeError:                          # the call failed and nothing was charged
        await billing.release(reservation)
        raise
    job = await billing.settle(reservation, charge, new_job)   # committed before replying

The check and the reservation happen in one write transaction, so concurrent requests can
never both pass a budget that fits only one. A reservation that is neither settled nor released
(a crash, a lost task) stops counting at ``expires_at`` and is deleted by the next reservation.

Budgets: a guild's per UTC calendar month, a user's per UTC day (within the guild). What counts
against them is the ledger since the period's start plus the unexpired reservations.

Money is :class:`~decimal.Decimal` cents, exact, end to end (the spec types amounts as numbers:
``0.35`` is a valid charge); budgets admins set are whole cents and are compared as Decimal.
A reported charge that breaks the protocol (see :func:`charge_anomaly`) is recorded for the
admins and never summed into budgets, and the paid result it came with is kept all the same.
Times are UTC epoch seconds.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
from collections import defaultdict
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from fractions import Fraction
from functools import lru_cache
from typing import TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from bot.clock import Clock, utc_datetime
from bot.config import Settings
from bot.domain import (
    TASK_ID_REUSED,
    Charge,
    ChargeAnomaly,
    ConstraintError,
    GuildSettings,
    Job,
    Kind,
    NewJob,
    Reservation,
)
from bot.errors import (
    BudgetExceeded,
    ConcurrencyLimitReached,
    CooldownActive,
    SettlementDeferred,
    SpendingPaused,
    ValidationFailed,
)
from bot.i18n import N_, _
from bot.ops.metrics import Metrics
from bot.services.credits import MemberCredits
from bot.services.personal import PERSONAL_ALLOWANCE, PERSONAL_POOL_LOCK, is_personal
from bot.services.policy import Allowance, MemberPolicy, member_policy
from bot.services.settlement_spool import SettlementSpool, SpooledSettlement
from bot.storage import Database, Repositories
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.ledger import Settlement
from bot.storage.transient import is_transient

log = logging.getLogger(__name__)

_T = TypeVar("_T")

Allowances = tuple[int | None, int | None]
"""A member's daily and monthly allowances when a request was held, whole cents (None:
unlimited): what the spend guard measures the member's spend against."""

ChargeWatcher = Callable[[Charge, Allowances | None], Awaitable[None]]
"""Told of each charge once it is committed (the spend guard, :mod:`bot.services.guard`); it
must not raise (a failure there is logged here all the same, never raised over a charge)."""

ESTIMATE_WINDOW = 20

"""How many of a model's latest charges its hold looks at (image: their highest; text: their
price per token)."""

TEXT_PRICE_KEY = "text_rates:"
"""Meta key prefix (``db.meta``) of a text model's last positive charges on one account:
``text_rates:<key fingerprint>:<model>``, a JSON list of ``[cost_cents as text, prompt_tokens,
completion_tokens]``, newest last, at most :data:`ESTIMATE_WINDOW` (:func:`text_rate_bound`)."""

DEFAULT_RESERVATION_TTL = 900.0
"""Seconds after which an unsettled reservation stops holding budget (15 minutes)."""

MAX_CHARGE_CENTS = Decimal(10_000_000)
"""A single reported charge above this ($100,000) is absurd: recorded as an anomaly, not summed."""

SETTLE_ATTEMPTS = 6
"""Tries of a settlement whose database error is transient, the first included; with the
backoff (0.25 s doubling to 4 s) and SQLite's 5 s busy timeout per try, about 40 s at most."""

SETTLE_BACKOFF = wait_exponential(multiplier=0.25, max=4.0)
"""Between two tries of a settlement: 0.25 s, 0.5 s, 1 s... up to 4 s."""

MAX_BALANCE_CENTS = Decimal(10**12)
"""A reported balance beyond +/- this is unusable (and would not fit the micro-cent column)."""


def month_start(now: float) -> float:
    """Return the start of ``now``'s UTC calendar month, UTC epoch seconds."""
    moment = utc_datetime(now)
    return moment.replace(day=1, hour=0, minute=0, second=0, microsecond=0).timestamp()


def day_start(now: float) -> float:
    """Return the start of ``now``'s UTC day, UTC epoch seconds."""
    moment = utc_datetime(now)
    return moment.replace(hour=0, minute=0, second=0, microsecond=0).timestamp()


def video_cost_cents(cost_cents_per_5s: Decimal | float, duration_seconds: float) -> Decimal | None:
    """Return the hold for a video: ``cost_cents_per_5s * duration / 5`` cents, rounded up.

    Rounded up to whole cents: a reservation is a hold, never the ledger, and holding at least
    the price is the safe side (the charge recorded is the one reported, exactly). Computed with
    exact fractions of the decimal values so that e.g. 0.7 x 5 / 5 is 1, not 2.

    Returns:
        The cents to hold; None when the catalogue's price is not a finite number >= 0 (the
        caller then holds the model's learned estimate).
    """
    price = Decimal(str(cost_cents_per_5s))
    if not price.is_finite() or price < 0:
        return None
    exact = Fraction(price) * Fraction(str(duration_seconds)) / 5
    return Decimal(math.ceil(exact))


@dataclass(frozen=True, slots=True)
class TextTokens:
    """Tokens of a text call, the prompt's and the answer's apart (docs/genapi.md §2.5 ``usage``).

    Before a call, upper bounds (:func:`text_tokens_bound`); after it, what the service
    reported it charged for (``usage.prompt_tokens``, ``usage.completion_tokens``).
    """

    prompt: int
    completion: int


def text_tokens_bound(prompt: str, system: str | None, max_tokens: int | None) -> TextTokens:
    """Return upper bounds of the tokens a text call may be charged for (docs/genapi.md §2.5, §4.5).

    The answer is at most ``max_tokens`` tokens (1000 when omitted, docs/genapi.md §8.2); the
    prompt and system prompt count as their UTF-8 bytes, since a byte-level tokenizer never
    makes more tokens than bytes (the real count is unknown before the call: the spec does not
    show the tokenizer).
    """
    sent = len(prompt.encode()) + (len(system.encode()) if system else 0)
    return TextTokens(prompt=sent, completion=1000 if max_tokens is None else max_tokens)


TextCharge = tuple[Decimal, int, int]
"""One positive text charge: ``(cost_cents, prompt_tokens, completion_tokens)``."""


def text_rate_bound(charges: Sequence[TextCharge], tokens: TextTokens) -> Fraction | None:
    """The most a call of ``tokens`` can cost at any prompt and answer rates the charges allow.

    A text call is charged for its prompt tokens at one rate ``a`` and its answer tokens at
    another ``b`` (cents per token, unknown: the spec shows no price of text calls), rounded
    up per call, so every charge ``c`` of ``p`` prompt and ``k`` answer tokens proves
    ``a * p + b * k <= c``. The highest ``a * P + b * K`` over every ``a, b >= 0`` that all
    the charges allow (a linear program in two unknowns: its optimum is at a corner of the
    allowed region) is an upper bound of what the call can be charged, before rounding. A
    long answer to a short prompt is bounded by what answers are known to cost, however
    cheap long prompts were.

    Args:
        charges: positive charges of one model on one account (free answers prove nothing).
        tokens: the call's bounds.

    Returns:
        Cents (not rounded); None when no charge bounds a rate the call needs (e.g. no
        charge with answer tokens, for a call that may answer).
    """
    rows = tuple((Fraction(c), p, k) for c, p, k in charges if c > 0 and (p > 0 or k > 0))
    if (tokens.prompt > 0 and not any(p > 0 for _, p, _ in rows)) or (
        tokens.completion > 0 and not any(k > 0 for _, _, k in rows)
    ):
        return None
    return max(a * tokens.prompt + b * tokens.completion for a, b in _rate_corners(rows))


_SLACK = 1e-9
"""Relative slack of the float pre-check of a corner (float arithmetic errs by ~1e-15)."""


@lru_cache(maxsize=256)
def _rate_corners(
    rows: tuple[tuple[Fraction, int, int], ...],
) -> tuple[tuple[Fraction, Fraction], ...]:
    """The corners ``(a, b)`` of the rates ``rows`` allow (:func:`text_rate_bound`), exact.

    A corner is ``(0, 0)``, one on an axis, or where two charges' lines cross, kept when
    ``a, b >= 0`` and every charge allows it. Every candidate is first checked in floats,
    which rejects only those that break a charge by far more than a float's error; the few
    left (about the region's corners) are checked again in exact fractions: a hold rounded
    from a float could be a cent short, or a cent too many on an exact price. Cached by the
    history: every hold of a burst reads the same one (checking all ~230 corners
    of a full history in fractions held the event loop ~16 ms a ``/text``).
    """
    loose = [(float(c), p, k) for c, p, k in rows]

    def allowed(a: float, b: float) -> bool:
        return all(a * p + b * k - c <= _SLACK * (a * p + b * k + c) for c, p, k in loose)

    zero = Fraction(0)
    found: list[tuple[Fraction, Fraction]] = [(zero, zero)]
    found += [
        (c / p, zero)
        for (c, p, _), (f, _, _) in zip(rows, loose, strict=True)
        if p > 0 and allowed(f / p, 0.0)
    ]
    found += [
        (zero, c / k)
        for (c, _, k), (f, _, _) in zip(rows, loose, strict=True)
        if k > 0 and allowed(0.0, f / k)
    ]
    for i, (c1, p1, k1) in enumerate(loose):
        for j in range(i + 1, len(loose)):
            c2, p2, k2 = loose[j]
            det = p1 * k2 - p2 * k1
            if not det:
                continue
            a_num, b_num = c1 * k2 - c2 * k1, p1 * c2 - p2 * c1
            a_slack = _SLACK * (abs(c1 * k2) + abs(c2 * k1))
            b_slack = _SLACK * (abs(p1 * c2) + abs(p2 * c1))
            if det < 0:
                a_num, b_num, det = -a_num, -b_num, -det
            if a_num < -a_slack or b_num < -b_slack or not allowed(a_num / det, b_num / det):
                continue
            (e1, q1, l1), (e2, q2, l2) = rows[i], rows[j]
            exact_det = q1 * l2 - q2 * l1
            a = (e1 * l2 - e2 * l1) / exact_det
            b = (q1 * e2 - q2 * e1) / exact_det
            if a >= 0 and b >= 0:
                found.append((a, b))
    return tuple((a, b) for a, b in found if all(a * p + b * k <= c for c, p, k in rows))


def charge_anomaly(charge: Charge) -> tuple[Charge | None, ChargeAnomaly | None]:
    """Split a reported charge into what the ledger may hold and what breaks the protocol.

    Rules (docs/genapi.md §6.1 types amounts as numbers, nothing more; the bounds are ours):

    * ``cost_cents`` NaN, infinite, negative or above :data:`MAX_CHARGE_CENTS`: no ledger
      row; an anomaly with the reported text.
    * ``cost_cents`` finer than a micro-cent: the ledger holds it rounded up to the next
      micro-cent, and an anomaly keeps the exact reported text.
    * ``remaining_credits_cents`` not finite or beyond :data:`MAX_BALANCE_CENTS`: the ledger
      row has no balance (None) and an anomaly says so.

    Returns:
        ``(charge for the ledger or None, anomaly or None)``.
    """
    # Decimal() also takes the int a caller may pass; it is exact either way.
    cost = Decimal(charge.cost_cents)
    remaining = (
        None if charge.remaining_credits_cents is None else Decimal(charge.remaining_credits_cents)
    )
    reasons: list[str] = []
    ledger: Charge | None = charge
    if not cost.is_finite():
        reasons.append("cost_cents is not a finite number")
        ledger = None
    elif cost < 0:
        reasons.append("negative cost_cents")
        ledger = None
    elif cost > MAX_CHARGE_CENTS:
        reasons.append(f"cost_cents above the sane ceiling of {MAX_CHARGE_CENTS} cents")
        ledger = None
    elif from_micro(to_micro(cost)) != cost:
        reasons.append("cost_cents finer than a micro-cent; the ledger holds it rounded up")
    if remaining is not None and (not remaining.is_finite() or abs(remaining) > MAX_BALANCE_CENTS):
        reasons.append("remaining_credits_cents is not a usable number")
        if ledger is not None:
            ledger = replace(ledger, remaining_credits_cents=None)
    if not reasons:
        return charge, None
    return ledger, ChargeAnomaly.of(charge, remaining, "; ".join(reasons))


@dataclass(frozen=True, slots=True)
class Limits:
    """A guild's effective limits: its own settings, else the Settings defaults.

    Attributes:
        monthly_budget_cents: guild budget per UTC calendar month; None = unlimited.
        user_daily_budget_cents: per-user budget per UTC day; None = unlimited.
        max_pending_videos_per_user: cap on a user's pending videos.
        max_pending_videos_per_guild: cap on the guild's pending videos.
    """

    monthly_budget_cents: int | None
    user_daily_budget_cents: int | None
    max_pending_videos_per_user: int
    max_pending_videos_per_guild: int


@dataclass(frozen=True, slots=True)
class UsageReport:
    """A guild's (or one user's) spending, from the ledger.

    Attributes:
        month_cents: charged since the start of the UTC month.
        today_cents: charged since the start of the UTC day.
        reserved_cents: held right now by requests in flight (not yet charged).
        by_user: ``(user_id, cents)`` this month, largest first.
        by_kind: cents this month per kind (every kind present, 0 if unused).
        by_model: ``(model, count, cents)`` this month, largest first.
        last_remaining_credits_cents: the balance the service last reported for the key in
            use; None if unknown.
        anomalies: charges reported this month that broke the protocol (see
            :func:`charge_anomaly`), for the admins to check with the provider.
        reused_task_ids: tasks this month whose id was already stored for another task, of
            any key (:data:`~bot.storage.TASK_ID_REUSED`): each was charged and kept on its own.
        by_tier: ``(tier name, cents)`` this month, largest first (whole-server reports only;
            ``"no tier"`` for members without a tier role).
        by_stage: Draft → Final this month: ``"draft"`` / ``"final"`` -> ``(charges, cents)``
            (docs/creative.md); only the stages charged.

    Amounts are exact Decimal cents.
    """

    month_cents: Decimal
    today_cents: Decimal
    reserved_cents: Decimal
    by_user: list[tuple[int, Decimal]]
    by_kind: dict[Kind, Decimal]
    by_model: list[tuple[str, int, Decimal]]
    last_remaining_credits_cents: Decimal | None
    anomalies: int = 0
    by_tier: list[tuple[str, Decimal]] = field(default_factory=list)
    reused_task_ids: int = 0
    by_stage: dict[str, tuple[int, Decimal]] = field(default_factory=dict)


def _reused_anomaly(charge: Charge | None, anomaly: ChargeAnomaly | None) -> ChargeAnomaly | None:
    """The anomaly to record if a charged task's id is already stored for another task.

    A task id is known to be unique only within the key that made it, and a service that lost
    its id sequence may give one again even there. The new task is charged and stored on its
    own either way (the ledger and the jobs identify a task by key, kind, task id and time,
    never by the id alone, so it is never merged with another guild's, wallet's or key's);
    this anomaly tells the admins of the clash, kept by ``LedgerStore.settle`` when the id
    was given before. None for a request without a task id.
    """
    reported = charge if charge is not None else anomaly
    if reported is None or reported.task_id is None:
        return None
    if charge is not None:
        return ChargeAnomaly.of(charge, charge.remaining_credits_cents, TASK_ID_REUSED)
    assert anomaly is not None
    return replace(anomaly, reason=TASK_ID_REUSED)


class EffectiveLimits:
    """A guild's limits and a member's policy as they apply: its settings, else the defaults.

    Read by :class:`Billing` when it admits a request, and by whoever shows them.

    Args:
        db: the database.
        defaults: the Settings whose ``default_*`` fields apply where a guild set nothing.
    """

    def __init__(self, db: Database, defaults: Settings) -> None:
        self._db = db
        self._defaults = defaults

    def of(self, settings: GuildSettings) -> Limits:
        """The limits of the guild whose settings are ``settings``."""
        d = self._defaults
        if is_personal(settings.guild_id):
            # A member's wallet: on their own key, their money, no bot budget; on the
            # bot's default key, the owner's personal allowance per member per UTC day.
            own_key = settings.api_key_ciphertext is not None
            return Limits(
                monthly_budget_cents=None,
                user_daily_budget_cents=None if own_key else d.personal_daily_budget_cents,
                max_pending_videos_per_user=d.default_max_pending_videos_per_user,
                max_pending_videos_per_guild=d.default_max_pending_videos_per_user,
            )
        return Limits(
            monthly_budget_cents=_first(
                settings.monthly_budget_cents, d.default_guild_monthly_budget_cents
            ),
            user_daily_budget_cents=_first(
                settings.user_daily_budget_cents, d.default_user_daily_budget_cents
            ),
            max_pending_videos_per_user=_first(
                settings.max_pending_videos_per_user, d.default_max_pending_videos_per_user
            ),
            max_pending_videos_per_guild=_first(
                settings.max_pending_videos_per_guild, d.default_max_pending_videos_per_guild
            ),
        )

    async def limits(self, guild_id: int) -> Limits:
        """Return the guild's effective limits."""
        return self.of(await self._db.guilds.settings(guild_id))

    async def member_policy(
        self, guild_id: int, role_ids: Collection[int], repos: Repositories | None = None
    ) -> MemberPolicy:
        """Return a member's effective policy: the most generous of their role tiers per limit.

        Args:
            guild_id: the guild.
            role_ids: the member's role ids (Discord's interaction member object).
            repos: read within this transaction; None reads committed data.
        """
        db = repos if repos is not None else self._db
        limits = self.of(await db.guilds.settings(guild_id))
        policy = member_policy(
            await db.policy.tiers(guild_id),
            role_ids,
            daily_default=limits.user_daily_budget_cents,
            videos_default=limits.max_pending_videos_per_user,
            lists=await db.policy.model_lists(guild_id),
        )
        if is_personal(guild_id):  # no server's default: the owner's personal allowance
            policy = replace(policy, daily=Allowance(policy.daily.value, PERSONAL_ALLOWANCE))
        return policy


class Billing:
    """Enforces budgets and pending-video caps and records charges.

    Args:
        db: the database.
        defaults: the Settings whose ``default_*`` fields apply where a guild set nothing.
        clock: the wall clock (UTC epoch seconds) that defines months, days and expiries.
        reservation_ttl: seconds an unsettled reservation holds budget.
        metrics: counts cents reserved, charged and released; None counts nothing.
        spool: where a settlement goes when the database cannot take it
            (:mod:`bot.services.settlement_spool`); None: the error is raised.
        settle_attempts: tries of a settlement whose error is transient.
        credits: the member's balance as a payer where a server lets members pay
            (:mod:`bot.services.credits`); None: no packs, every server pays.
    """

    def __init__(
        self,
        db: Database,
        defaults: Settings,
        clock: Clock,
        reservation_ttl: float = DEFAULT_RESERVATION_TTL,
        metrics: Metrics | None = None,
        spool: SettlementSpool | None = None,
        settle_attempts: int = SETTLE_ATTEMPTS,
        credits: MemberCredits | None = None,
    ) -> None:
        self._db = db
        self._credits = credits if credits is not None else MemberCredits({}, 0)
        self._writer: SettlementWriter = SettlementWriter(
            db, self._credits, clock, spool, settle_attempts
        )
        self._reports = UsageReports(db, clock)
        self._effective = EffectiveLimits(db, defaults)
        self._metrics = metrics
        self._defaults = defaults
        self._clock = clock
        self._ttl = reservation_ttl
        # The tier each reservation was made under, until it is settled or released: the
        # charge is recorded with it (for /usage by tier). Lost with the process, as are the
        # reservations' callers.
        self._tiers: dict[int, tuple[int | None, float]] = {}
        # The cooldown use each reservation recorded, (recorded at, the use before), so that a
        # release takes it back.
        self._uses: dict[int, tuple[float, float | None]] = {}
        # The member's allowances each reservation was checked against, for the spend guard.
        self._allowances: dict[int, Allowances] = {}
        # Reservation id -> the member whose credit balance holds it (docs/credits.md).
        self._payers: dict[int, int] = {}
        self._watcher: ChargeWatcher | None = None

    def set_watcher(self, watcher: ChargeWatcher | None) -> None:
        """Set who is told of each committed charge (the spend guard); None: nobody."""
        self._watcher = watcher

    async def _watch(self, charge: Charge, allowances: Allowances | None) -> None:
        """Tell the watcher of a committed charge; its failure is logged, never raised."""
        if self._watcher is None:
            return
        try:
            await self._watcher(charge, allowances)
        except Exception as exc:
            if not is_transient(exc):
                log.exception("the spend guard failed on a charge in guild %s", charge.guild_id)
                return
            # A locked database (an operator's session, a shutdown's last seconds) or a dropped
            # connection: the charge is recorded; one line, with the driver's own error.
            log.warning(
                "the spend guard skipped a charge in guild %s: the database did not answer (%r)",
                charge.guild_id,
                getattr(exc, "orig", None) or exc,
            )

    async def limits(self, guild_id: int) -> Limits:
        """Return the guild's effective limits (:meth:`EffectiveLimits.limits`)."""
        return await self._effective.limits(guild_id)

    async def member_policy(
        self, guild_id: int, role_ids: Collection[int], repos: Repositories | None = None
    ) -> MemberPolicy:
        """Return a member's effective policy (:meth:`EffectiveLimits.member_policy`)."""
        return await self._effective.member_policy(guild_id, role_ids, repos)

    async def reserve(
        self,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        cost_cents: Decimal | int | None,
        role_ids: Collection[int] = (),
        cooldown_exempt: bool = False,
        key_fingerprint: str | None = None,
        tokens: TextTokens | None = None,
    ) -> Reservation:
        """Check and hold one request (:meth:`reserve_many` of one); see it for the rules."""
        (reservation,) = await self.reserve_many(
            guild_id=guild_id,
            user_id=user_id,
            kind=kind,
            model=model,
            cost_cents=cost_cents,
            role_ids=role_ids,
            cooldown_exempt=cooldown_exempt,
            key_fingerprint=key_fingerprint,
            tokens=tokens,
        )
        return reservation

    async def reserve_many(
        self,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        cost_cents: Decimal | int | None,
        role_ids: Collection[int] = (),
        cooldown_exempt: bool = False,
        key_fingerprint: str | None = None,
        tokens: TextTokens | None = None,
        count: int = 1,
    ) -> list[Reservation]:
        """Check the policy, budgets and caps and hold the request's cost, atomically.

        The member's policy is the most generous of their role tiers per limit, or
        the server defaults: model access, the command's cooldown, their pending-video cap,
        their daily and monthly allowances; the server's monthly budget and video cap apply to
        everyone. A refused request holds nothing and starts no cooldown. The use is recorded
        here, so two concurrent requests cannot both pass a cooldown, and taken back by
        :meth:`release` when the service refused the call for free.

        Args:
            guild_id: the guild paying.
            user_id: the requesting user.
            kind: what is generated (also the command whose cooldown applies).
            model: the model id (``/text`` without one uses the first its tiers allow).
            cost_cents: the known price (videos: :meth:`video_hold`); None when unknown
                (text, image): an amount that bounds the charge is held instead
                (:meth:`_hold`; docs/architecture.md, Money rules).
            role_ids: the member's role ids, for their tiers.
            cooldown_exempt: skip the cooldown (members with Manage Server).
            key_fingerprint: the key the request is sent with; it is kept while the
                reservation lives. None: unknown.
            tokens: (text) the most tokens the call may be charged for, prompt and answer
                apart (:func:`text_tokens_bound`); None for other kinds.
            count: requests held together (takes): the budgets must have room for all of
                them and the video caps for as many more pending videos; one use of the
                command (cooldown), taken back only with the first reservation.

        Returns:
            ``count`` reservations, each to :meth:`settle` or :meth:`release`.

        Raises:
            ConcurrencyLimitReached: (videos) the user's or the guild's pending videos, counting
                reservations in flight, are at the cap.
            BudgetExceeded: the guild's monthly budget or the member's daily or monthly
                allowance is spent, or has less left than the cost (estimate); for a member
                on the shared key, also all members' personal total for the day.
            ValidationFailed: the member's tiers (or the server's model list) do not allow
                ``model``.
            CooldownActive: the member used the command less than its cooldown ago.
            ValueError: ``cost_cents`` is negative.
        """
        if cost_cents is not None and cost_cents < 0:
            raise ValueError(f"negative cost: {cost_cents}")
        now = self._clock.time()
        async with self._db.transaction() as tx:
            await tx.guilds.lock(guild_id)
            await tx.ledger.expire_reservations(now)
            policy, seconds, last, each, balance_pays = await self._admit(
                tx,
                guild_id=guild_id,
                user_id=user_id,
                kind=kind,
                model=model,
                cost_cents=cost_cents,
                role_ids=role_ids,
                cooldown_exempt=cooldown_exempt,
                key_fingerprint=key_fingerprint,
                tokens=tokens,
                count=count,
                now=now,
            )
            needed = each * count
            if seconds is not None:
                await tx.policy.record_use(guild_id, user_id, kind, now)
            reservations = [
                await tx.ledger.add_reservation(
                    guild_id=guild_id,
                    user_id=user_id,
                    kind=kind,
                    model=model,
                    amount_cents=each,
                    created_at=now,
                    expires_at=now + self._ttl,
                    key_fingerprint=key_fingerprint,
                )
                for _ in range(count)
            ]
            if balance_pays:
                await self._credits.hold(tx, user_id, reservations)
        if balance_pays:  # kept for the settlement spool: a replay must know who pays
            for reservation in reservations:
                self._payers[reservation.id] = user_id
        self._count("reserved", kind, needed)
        # A reservation neither settled nor released (a call that may have been charged) is
        # forgotten one TTL after it expired: no call of ours outlives that.
        stale = [rid for rid, (_, expires) in self._tiers.items() if expires + self._ttl < now]
        for rid in stale:
            del self._tiers[rid]
            self._uses.pop(rid, None)
            self._allowances.pop(rid, None)
            self._payers.pop(rid, None)
        for reservation in reservations:
            self._tiers[reservation.id] = (policy.tier_role_id, reservation.expires_at)
            self._allowances[reservation.id] = (policy.daily.value, policy.monthly.value)
        if seconds is not None:
            self._uses[reservations[0].id] = (now, last)
        return reservations

    async def check(
        self,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        cost_cents: Decimal | int,
        role_ids: Collection[int] = (),
        cooldown_exempt: bool = False,
        key_fingerprint: str | None = None,
    ) -> None:
        """Refuse now what :meth:`reserve` would refuse, holding and recording nothing.

        For work a request does before it is reserved, which must not be spent on a request
        bound to be refused: Continue downloads and decodes a clip before its video is
        reserved. The same rules as :meth:`reserve_many` (model access, cooldown,
        video caps, budgets and allowances), read without the guild's lock: :meth:`reserve`
        checks them again, atomically, when the request is made.

        Raises:
            CooldownActive, BudgetExceeded, ConcurrencyLimitReached, ValidationFailed: as
                :meth:`reserve_many`.
            ValueError: ``cost_cents`` is negative.
        """
        if cost_cents < 0:
            raise ValueError(f"negative cost: {cost_cents}")
        async with self._db.transaction() as tx:
            await self._admit(
                tx,
                guild_id=guild_id,
                user_id=user_id,
                kind=kind,
                model=model,
                cost_cents=cost_cents,
                role_ids=role_ids,
                cooldown_exempt=cooldown_exempt,
                key_fingerprint=key_fingerprint,
                tokens=None,
                count=1,
                now=self._clock.time(),
            )

    async def _admit(
        self,
        tx: Repositories,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        cost_cents: Decimal | int | None,
        role_ids: Collection[int],
        cooldown_exempt: bool,
        key_fingerprint: str | None,
        tokens: TextTokens | None,
        count: int,
        now: float,
    ) -> tuple[MemberPolicy, float | None, float | None, Decimal, bool]:
        """The checks of :meth:`reserve_many`, in ``tx``; what it records with them.

        Returns:
            The member's policy, the command's cooldown and the member's last use of it
            (:func:`_check_cooldown`), what each request holds, cents, and whether the
            member's credit balance pays (:meth:`MemberCredits.admit`).
        """
        settings = await tx.guilds.settings(guild_id)
        limits = self._effective.of(settings)
        policy = await self.member_policy(guild_id, role_ids, tx)
        _check_model_access(policy, model)
        if not is_personal(guild_id) and await tx.guard.pause(guild_id) is not None:
            raise SpendingPaused
        seconds, last = await _check_cooldown(
            tx, guild_id, user_id, kind, now, exempt=cooldown_exempt
        )
        if kind is Kind.VIDEO:
            caps = replace(limits, max_pending_videos_per_user=policy.videos_at_once.value or 0)
            await _check_video_caps(tx, caps, guild_id, user_id, now, count)
        each = (
            Decimal(cost_cents)
            if cost_cents is not None
            else await self._hold(tx, kind, model, tokens, key_fingerprint)
        )
        needed = each * count

        async def server_checks() -> None:
            await _check_guild_budget(tx, limits, guild_id, needed, now)
            await _check_member_allowances(tx, policy, guild_id, user_id, needed, now)

        # Who pays: the server (its budgets), or the member's credit balance (docs/credits.md).
        balance_pays = await self._credits.admit(
            tx,
            guild_id=guild_id,
            user_id=user_id,
            needed_cents=needed,
            now=now,
            server_checks=server_checks,
        )
        if is_personal(guild_id) and settings.api_key_ciphertext is None:
            total = self._defaults.personal_total_budget_cents
            await _check_personal_total(tx, key_fingerprint, needed, now, total)
        return policy, seconds, last, each, balance_pays

    def video_hold(self, cost_cents_per_5s: Decimal | float, duration_seconds: float) -> Decimal:
        """Return what a video holds: its catalogue price, else the configured ceiling.

        An unusable catalogue price (NaN, infinite, negative: :func:`video_cost_cents` gives
        None) is unknown, not free: ``VIDEO_HOLD_CEILING_CENTS_PER_5S`` per 5 s is held.

        Returns:
            Whole cents (rounded up).
        """
        price = video_cost_cents(cost_cents_per_5s, duration_seconds)
        if price is not None:
            return price
        ceiling = video_cost_cents(self._defaults.video_hold_ceiling_cents_per_5s, duration_seconds)
        assert ceiling is not None  # the setting is a whole number >= 0
        return ceiling

    async def _hold(
        self,
        tx: Repositories,
        kind: Kind,
        model: str,
        tokens: TextTokens | None,
        key_fingerprint: str | None,
    ) -> Decimal:
        """What a request of unknown price holds: an amount that bounds its charge.

        * image: the highest of the model's last :data:`ESTIMATE_WINDOW` charges (an image is
          priced per request), else ``IMAGE_HOLD_CEILING_CENTS``;
        * text: the most the call's prompt and answer tokens can cost at the rates the
          model's last positive charges on this account allow (:func:`text_rate_bound`),
          rounded up to a cent (at least 1, the service's smallest charge), else, while no
          positive charge bounds the rates, ``TEXT_HOLD_CEILING_CENTS``: a free or cached
          answer (0 cents) proves no price and never lowers a hold;
        * video (a price always comes with it; this is the safety net): the highest charge,
          else the ceiling for 5 s.
        """
        d = self._defaults
        if kind is Kind.TEXT:
            history = await _text_history(tx, key_fingerprint, model) if model else []
            bound = None if tokens is None else text_rate_bound(history, tokens)
            if bound is None:
                return Decimal(d.text_hold_ceiling_cents)
            return Decimal(max(1, math.ceil(bound)))
        costs = await tx.ledger.recent_costs(model, ESTIMATE_WINDOW)
        if costs:
            return max(costs)
        if kind is Kind.IMAGE:
            return Decimal(d.image_hold_ceiling_cents)
        return Decimal(d.video_hold_ceiling_cents_per_5s)

    async def settle(
        self,
        reservation: Reservation,
        charge: Charge,
        job: NewJob | None = None,
        *,
        tokens: TextTokens | None = None,
    ) -> Job | None:
        """Replace the reservation by the charge the service reported (and store the job).

        One transaction: when this returns, the charge is committed to the ledger, or, if it
        broke the protocol (:func:`charge_anomaly`), recorded as an anomaly for the admins; the
        job is stored either way, since its result is paid for. The hold's excess over the
        charge is given back with the reservation.

        A transient database error (:func:`bot.storage.transient.is_transient`: a busy SQLite
        writer, a dropped PostgreSQL connection) is retried with backoff
        (:data:`SETTLE_ATTEMPTS`). If it still fails, the settlement goes to the spool
        (:mod:`bot.services.settlement_spool`), which the next start replays: a text or
        synchronous image then returns as if settled (the member has the answer), and a job
        raises :class:`~bot.errors.SettlementDeferred` (the member is told it went through
        and where the result will come).

        Args:
            reservation: from :meth:`reserve`.
            charge: what the service reported.
            job: the job to store (asynchronous results).
            tokens: (text) the call's ``usage`` (prompt and completion tokens), to learn the
                rates of the model on the charge's account (:func:`text_rate_bound`); None,
                no tokens or a charge of 0 (free, cached) learns nothing.

        Returns:
            The stored job, or None when ``job`` is None.

        Raises:
            ConstraintError: a constraint failed other than "task already recorded"; nothing
                of the transaction is kept.
            SettlementDeferred: (a job) the settlement is in the spool, not the database.
            Exception: the database's error, when there is no spool or it could not be written
                (the settlement is then logged in full, for the operator).
        """
        tier, _ = self._tiers.pop(reservation.id, (None, 0.0))
        self._uses.pop(reservation.id, None)
        allowances = self._allowances.pop(reservation.id, None)
        payer = self._payers.pop(reservation.id, None)
        charge = replace(charge, tier_role_id=tier)
        ledger, anomaly = charge_anomaly(charge)
        _log_screening(charge, ledger, anomaly, reservation)
        if job is not None and ledger is None:
            job = replace(job, cost_cents=Decimal(0))  # what the ledger counts for it
        learned = _learned(charge, ledger, tokens)
        try:
            stored = await self._writer.write(
                reservation, charge.guild_id, ledger, job, anomaly, learned, payer=payer
            )
        except SettlementDeferred:
            if ledger is not None:  # charged all the same: counted once, here
                self._count("charged", charge.kind, ledger.cost_cents)
            raise
        if ledger is not None:
            self._count("charged", charge.kind, ledger.cost_cents)
            await self._watch(ledger, allowances)
        return stored

    def balance_price(self, reservation: Reservation, cost_cents: Decimal) -> Decimal | None:
        """What the member's credit balance pays for ``reservation`` at ``cost_cents``.

        Read before :meth:`settle` (which forgets who held it), to show the member what they
        paid: the price plus ``CREDIT_MARKUP_PERCENT`` (:meth:`MemberCredits.paid`).

        Returns:
            Exact cents; None when the server (or the member's wallet) pays.
        """
        if reservation.id not in self._payers:
            return None
        return self._credits.paid(cost_cents)

    async def release(self, reservation: Reservation) -> None:
        """Give back a reservation whose call failed without a charge.

        The cooldown use :meth:`reserve` recorded is taken back too (a request the service
        refused for free, such as a 429, a 400 or ``GENERATION_FAILED``, is no use of the
        command), unless a later use replaced it.
        """
        self._tiers.pop(reservation.id, None)
        self._allowances.pop(reservation.id, None)
        self._payers.pop(reservation.id, None)
        use = self._uses.pop(reservation.id, None)
        async with self._db.transaction() as tx:
            await tx.guilds.lock(reservation.guild_id)
            await tx.ledger.delete_reservation(reservation.id)
            await self._credits.release(tx, reservation)
            if use is not None:
                recorded, previous = use
                kind = reservation.kind
                if await tx.policy.last_use(reservation.guild_id, reservation.user_id, kind) == (
                    recorded
                ):
                    # No previous use: 0 (1970) is as good as none for any cooldown.
                    await tx.policy.record_use(
                        reservation.guild_id,
                        reservation.user_id,
                        kind,
                        0.0 if previous is None else previous,
                    )
        self._count("released", reservation.kind, reservation.amount_cents)

    def _count(self, what: str, kind: Kind, cents: Decimal) -> None:
        if self._metrics is not None:
            self._metrics.credits(what, kind.value, cents)

    async def record_charge(self, charge: Charge) -> None:
        """Record a charge made without a reservation (committed when this returns).

        Screened by :func:`charge_anomaly` like :meth:`settle`.
        """
        ledger, anomaly = charge_anomaly(charge)
        await self._writer.write(None, charge.guild_id, ledger, None, anomaly)
        if ledger is not None:
            self._count("charged", charge.kind, ledger.cost_cents)
            await self._watch(ledger, None)

    async def replay_spool(self) -> int:
        """Record the settlements waiting in the spool (:meth:`SettlementWriter.replay`).

        Returns:
            How many entries were settled.
        """
        return await self._writer.replay()

    async def expire_stale(self) -> int:
        """Delete the reservations expired by now; return how many (for a periodic sweep)."""
        return await self._db.ledger.expire_reservations(self._clock.time())

    async def report(
        self, guild_id: int, user_id: int | None = None, *, key_fingerprint: str | None = None
    ) -> UsageReport:
        """Summarise the guild's (or one user's) spending this UTC month and day.

        See :meth:`UsageReports.report`.
        """
        return await self._reports.report(guild_id, user_id, key_fingerprint=key_fingerprint)


class SettlementWriter:
    """Writes settlements durably for :class:`Billing`: retried, else spooled, then replayed.

    Args:
        db: the database.
        credits: the member's balance that pays a charge its hold covered.
        clock: the wall clock (UTC epoch seconds); its ``sleep`` paces the retries.
        spool: where a settlement goes when the database cannot take it
            (:mod:`bot.services.settlement_spool`); None: the error is raised.
        settle_attempts: tries of a settlement whose error is transient.
    """

    def __init__(
        self,
        db: Database,
        credits: MemberCredits,
        clock: Clock,
        spool: SettlementSpool | None,
        settle_attempts: int,
    ) -> None:
        self._db = db
        self._credits = credits
        self._clock = clock
        self._spool = spool
        self._settle_attempts = settle_attempts
        # One replay at a time in this process (appends need no lock of ours: the file's
        # flock, taken in a thread, orders them).
        self._replay_lock = asyncio.Lock()

    async def write(
        self,
        reservation: Reservation | None,
        guild_id: int,
        charge: Charge | None,
        job: NewJob | None,
        anomaly: ChargeAnomaly | None,
        learned: tuple[str | None, str, TextCharge] | None = None,
        *,
        payer: int | None = None,
    ) -> Job | None:
        """:meth:`_settle`, tried again on a transient error, else spooled (:meth:`Billing.settle`).

        ``payer``: the member whose credit balance held ``reservation`` (None: the server
        pays); the spooled entry keeps it with the reservation, so a replay takes the charge
        from that balance, once.

        The entry is spooled when the first try fails, before the retry waits, and when this
        task is cancelled before the settlement is known committed (then the
        :class:`asyncio.CancelledError` goes on): a process stopped during the retries keeps
        the charge and the job for the next start. A retry that succeeds removes the entry.
        """
        entry = SpooledSettlement.new(
            guild_id,
            charge,
            anomaly,
            job,
            reservation_id=None if reservation is None else reservation.id,
            payer_user_id=payer,
        )
        spooled = False
        tries = 0

        async def spool(error: BaseException) -> bool:
            nonlocal spooled
            if not spooled:
                spooled = await self._spool_entry(entry, error)
            return spooled

        async def before_sleep(state: RetryCallState) -> None:
            error = state.outcome.exception() if state.outcome else None
            log.warning("settlement in guild %s failed (%r); trying again", guild_id, error)
            if state.attempt_number == 1:  # once: an unwritable spool is tried again at the end
                await spool(error or RuntimeError("settlement failed"))

        async def once() -> Job | None:
            nonlocal tries
            tries += 1
            return await self._settle(
                reservation,
                guild_id,
                charge,
                job,
                anomaly,
                learned,
                again=tries > 1,
                payer=payer,
                settlement_id=entry.id,
            )

        try:
            stored: Job | None = await self._retrying(before_sleep)(once)
        except asyncio.CancelledError as cancelled:
            # A shutdown (or a lost interaction) cut the settlement short: the try under way
            # may or may not have committed; the replay records it once either way.
            await spool(cancelled)
            raise
        except (ConstraintError, ValueError):
            raise  # the settlement itself is wrong: a replay would fail the same way
        except Exception as exc:
            if not await spool(exc):
                raise
            self._log_spooled(entry, tries, exc)
            if job is not None:
                raise SettlementDeferred(job.kind.value) from exc
            return None
        if spooled:
            await self._unspool(entry, tries)
        return stored

    def _retrying(self, before_sleep: Callable[[RetryCallState], Awaitable[None]]) -> AsyncRetrying:
        """The retry policy of a settlement: transient errors, :data:`SETTLE_BACKOFF` apart."""
        return AsyncRetrying(
            stop=stop_after_attempt(self._settle_attempts),
            wait=SETTLE_BACKOFF,
            retry=retry_if_exception(is_transient),
            sleep=self._clock.sleep,
            before_sleep=before_sleep,
            reraise=True,
        )

    def _log_spooled(self, entry: SpooledSettlement, tries: int, exc: Exception) -> None:
        """Log a settlement the database did not take after ``tries``, left in the spool."""
        log.error(
            "settlement %s in guild %s left in the spool %s after %d tries (%r); replayed"
            " when the database answers",
            entry.id,
            entry.guild_id,
            self._spool.path if self._spool else None,
            tries,
            exc,
        )

    async def _unspool(self, entry: SpooledSettlement, tries: int) -> None:
        """Remove from the spool an entry whose settlement a retry recorded after all."""
        if self._spool is None:
            return
        log.info(
            "settlement %s in guild %s recorded after %d tries", entry.id, entry.guild_id, tries
        )
        try:
            await asyncio.to_thread(self._spool.remove, (entry.id,))
        except OSError as exc:  # replaying it again records nothing twice
            log.warning("settlement %s left in the spool (%s)", entry.id, exc)

    async def _spool_entry(self, entry: SpooledSettlement, error: BaseException) -> bool:
        """Append ``entry`` to the spool, in a thread (its lock may be held by another process).

        The write goes on to its end even if this task is cancelled while it waits (shielded):
        a shutdown cannot leave half an intention.

        Returns:
            Whether it is on disk; False (logged in full, critical) when there is no spool or
            it could not be written.
        """
        if self._spool is None:
            log.critical(
                "settlement lost with the database's error (%r): %s", error, entry.to_json()
            )
            return False
        writing = asyncio.ensure_future(asyncio.to_thread(self._spool.append, entry))
        try:
            await asyncio.shield(writing)
        except asyncio.CancelledError:
            # Cancelled again while writing: the thread finishes the write regardless.
            writing.add_done_callback(_log_late_spool_error)
            raise
        except OSError as spool_error:
            log.critical(
                "settlement neither recorded (%r) nor spooled (%s): %s",
                error,
                spool_error,
                entry.to_json(),
            )
            return False
        log.error(
            "settlement %s in guild %s spooled to %s (%r); replayed at the next start if the"
            " database does not take it",
            entry.id,
            entry.guild_id,
            self._spool.path,
            error,
        )
        return True

    async def replay(self) -> int:
        """Record the settlements waiting in the spool (at start-up, then every minute).

        The entries are read under the spool's lock, replayed without it (each one
        transaction, idempotent: :mod:`bot.services.settlement_spool`), then the settled ones
        are removed under it again. An entry that fails stays for the next replay, logged.
        One replay at a time in this process.

        Returns:
            How many entries were settled.
        """
        spool = self._spool
        if spool is None or not spool.pending():
            return 0
        settled: list[str] = []
        async with self._replay_lock:
            try:
                entries = await asyncio.to_thread(spool.read)
            except OSError as exc:
                # Kept as it is; the operator must make it readable (the charges are in it).
                log.critical("cannot replay the settlement spool %s: %s", spool.path, exc)
                return 0
            for entry in entries:
                try:
                    await self._replay(entry)
                except Exception as exc:
                    log.error("spooled settlement %s not recorded yet: %r", entry.id, exc)
                else:
                    settled.append(entry.id)
            if settled:
                try:
                    await asyncio.to_thread(spool.remove, settled)
                except OSError as exc:  # replayed again next time: recorded once all the same
                    log.critical("settled entries left in the spool %s: %s", spool.path, exc)
        if settled:
            log.info("recorded %d spooled settlement(s) from %s", len(settled), spool.path)
        return len(settled)

    async def _replay(self, entry: SpooledSettlement) -> None:
        async with self._db.transaction() as tx:
            await tx.guilds.lock(entry.guild_id)
            charge = entry.charge
            if charge is not None and not await tx.ledger.has_charge(charge):
                # Counted in the metrics when it was spooled, not again.
                await tx.ledger.insert_charge(charge)
            if entry.anomaly is not None:
                # For the admins' count only; after a lost commit it may be counted twice.
                await tx.ledger.insert_anomaly(entry.anomaly)
            if entry.reservation_id is not None:
                # The hold goes, and a balance that held it pays: keyed by the settlement,
                # so once, even if the settlement itself committed before it was spooled.
                await self._credits.settle(
                    tx,
                    entry.reservation_id,
                    charge,
                    self._clock.time(),
                    entry.payer_user_id,
                    entry.id,
                )
            if entry.job is not None:
                await tx.jobs.insert(entry.job)

    async def _settle(
        self,
        reservation: Reservation | None,
        guild_id: int,
        charge: Charge | None,
        job: NewJob | None,
        anomaly: ChargeAnomaly | None,
        learned: tuple[str | None, str, TextCharge] | None = None,
        *,
        again: bool = False,
        payer: int | None = None,
        settlement_id: str | None = None,
    ) -> Job | None:
        """Drop the reservation, record the charge (or anomaly) and store the job: one unit.

        The settlement is one repository call (:meth:`bot.storage.repos.ledger.LedgerStore.settle`:
        one transaction under the guild's lock, so a budget check of the guild sees both the
        reservation and the charge, or neither, never one without the other); this method
        prepares it (the balance's part, the anomaly for a task id given before) and logs
        what it found.

        ``learned``: ``(key fingerprint, model, charge)`` of a positive text charge, added to
        the model's history on that account (:data:`TEXT_PRICE_KEY`) once the settlement is
        written (not when an earlier try had written it).

        ``again``: an earlier try failed. Whether it (or a replay of the spool) recorded the
        charge after all (its connection dropped as it committed) is read from the ledger:
        this very charge (:meth:`~bot.storage.repos.ledger.LedgerStore.has_charge`), never
        from the reservation, which a sweep may have removed while nothing was recorded. The
        charge is then not recorded twice, nor its price learnt twice.

        ``payer`` and ``settlement_id``: the member whose credit balance held the reservation
        (None: the server pays) and the settlement's id, which keys the balance's spend, so
        a retry or a replay of the spool takes it once (:meth:`MemberCredits.settle`).
        """
        settled = await self._db.ledger.settle(
            Settlement(
                guild_id,
                None if reservation is None else reservation.id,
                charge,
                job,
                anomaly,
                reused=_reused_anomaly(charge, anomaly),
                spend=self._credits.balance_spend(charge, self._clock.time(), payer, settlement_id),
                again=again,
            )
        )
        if settled.earlier:
            log.warning("charge of guild %s was recorded before; not again", guild_id)
            return settled.job
        if settled.reused:
            reported = charge if charge is not None else anomaly
            assert reported is not None
            log.warning(
                "task id %s (key %s, guild %s) is already stored for another task; charged and"
                " kept as a task of its own",
                reported.task_id,
                reported.key_fingerprint,
                reported.guild_id,
            )
        if settled.duplicate and charge is not None:
            log.info("charge of task %s already in the ledger; not counted again", charge.task_id)
        if learned is not None:
            await self._learn(*learned)
        return settled.job

    async def _learn(self, key_fingerprint: str | None, model: str, charge: TextCharge) -> None:
        """Learn a text charge's price once its settlement is written; a failure is logged.

        After the settlement's own transaction: a price history that could not be updated
        loses one observation, never the charge (:func:`_learn_text_price`).
        """
        try:
            await _learn_text_price(self._db, key_fingerprint, model, charge)
        except Exception as exc:
            log.warning("the price of %s was not learnt from a charge (%r)", model, exc)


class UsageReports:
    """The spending summaries of ``/usage`` (:meth:`Billing.report`).

    Args:
        db: the database.
        clock: the wall clock (UTC epoch seconds) that defines the month and the day.
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._clock = clock

    async def report(
        self, guild_id: int, user_id: int | None = None, *, key_fingerprint: str | None = None
    ) -> UsageReport:
        """Summarise the guild's (or one user's) spending this UTC month and day.

        Args:
            guild_id: the guild.
            user_id: restrict the report to this user; None for the whole guild.
            key_fingerprint: fingerprint of the key the guild uses, for the last reported
                balance; None to skip it.
        """
        now = self._clock.time()
        month = await self._db.ledger.usage(guild_id, month_start(now), user_id)
        today = await self._db.ledger.usage(guild_id, day_start(now), user_id)
        reserved = await self._db.ledger.reserved_cents(guild_id, now, user_id=user_id)
        by_user: dict[int, Decimal] = defaultdict(Decimal)
        by_kind = dict.fromkeys(Kind, Decimal(0))
        counts: dict[str, int] = defaultdict(int)
        by_model: dict[str, Decimal] = defaultdict(Decimal)
        for row in month:
            by_user[row.user_id] += row.cents
            by_kind[row.kind] += row.cents
            counts[row.model] += row.count
            by_model[row.model] += row.cents
        remaining = (
            None
            if key_fingerprint is None
            else await self._db.ledger.last_remaining_credits(key_fingerprint)
        )
        return UsageReport(
            month_cents=sum((row.cents for row in month), Decimal(0)),
            today_cents=sum((row.cents for row in today), Decimal(0)),
            reserved_cents=reserved,
            by_user=sorted(by_user.items(), key=lambda item: (-item[1], item[0])),
            by_kind=by_kind,
            by_model=sorted(
                ((model, counts[model], cents) for model, cents in by_model.items()),
                key=lambda item: (-item[2], item[0]),
            ),
            last_remaining_credits_cents=remaining,
            anomalies=await self._db.ledger.anomaly_count(guild_id, month_start(now)),
            by_tier=[] if user_id is not None else await self._by_tier(guild_id, month_start(now)),
            reused_task_ids=await self._db.ledger.reused_task_count(guild_id, month_start(now)),
            by_stage=await self._db.ledger.spent_by_stage(guild_id, month_start(now), user_id),
        )

    @staticmethod
    def _tier_name(names: dict[int, str], role: int | None) -> str:
        # Read by people in /usage, written while its answer is (the member's locale).
        if role is None:
            return _("no tier")
        name = names.get(role)
        mention = f"<@&{role}>"
        return name if name is not None else _("removed tier {role}", role=mention)

    async def _by_tier(self, guild_id: int, since: float) -> list[tuple[str, Decimal]]:
        names = {t.role_id: t.role_name for t in await self._db.policy.tiers(guild_id)}
        return [
            (self._tier_name(names, role), cents)
            for role, cents in await self._db.policy.spent_by_tier(guild_id, since)
        ]


def _log_screening(
    charge: Charge, ledger: Charge | None, anomaly: ChargeAnomaly | None, reservation: Reservation
) -> None:
    """Log a charge that broke the protocol (an error) or went past its hold (for debugging)."""
    if anomaly is not None:
        log.error(
            "protocol anomaly in a charge of %s (task %s, guild %s): %s; reported"
            " cost_cents=%s remaining_credits_cents=%s",
            charge.model,
            charge.task_id,
            charge.guild_id,
            anomaly.reason,
            anomaly.reported_cost,
            anomaly.reported_remaining,
        )
    if ledger is not None and ledger.cost_cents > reservation.amount_cents:
        log.debug(
            "%s charged %s cents, %s were reserved",
            charge.model,
            ledger.cost_cents,
            reservation.amount_cents,
        )


def _learned(
    charge: Charge, ledger: Charge | None, tokens: TextTokens | None
) -> tuple[str | None, str, TextCharge] | None:
    """What a text charge teaches of its model's rates on its account (:data:`TEXT_PRICE_KEY`).

    Returns:
        ``(key fingerprint, model, (cents, prompt tokens, completion tokens))`` of a positive
        charge with tokens reported; None otherwise (nothing learnt).
    """
    return (
        (
            charge.key_fingerprint,
            charge.model,
            (ledger.cost_cents, tokens.prompt, tokens.completion),
        )
        if ledger is not None
        and tokens is not None
        and tokens.prompt + tokens.completion > 0
        and ledger.cost_cents > 0
        and charge.model
        else None
    )


def _log_late_spool_error(writing: asyncio.Future[None]) -> None:
    if not writing.cancelled() and (error := writing.exception()) is not None:
        log.critical("a settlement cancelled while spooled was not written: %s", error)


async def _check_video_caps(
    tx: Repositories, limits: Limits, guild_id: int, user_id: int, now: float, count: int = 1
) -> None:
    # A reserved video is one being submitted right now: it counts as pending, or two
    # concurrent requests could both pass a cap that has room for one. A job the poller
    # stopped watching is no longer progressing: it does not count (jobs.pending_videos).
    user_pending = await tx.jobs.pending_videos(
        guild_id, user_id=user_id
    ) + await tx.ledger.active_reservations(guild_id, now, kind=Kind.VIDEO, user_id=user_id)
    if user_pending + count > limits.max_pending_videos_per_user:
        raise ConcurrencyLimitReached("user", limits.max_pending_videos_per_user)
    guild_pending = await tx.jobs.pending_videos(guild_id) + await tx.ledger.active_reservations(
        guild_id, now, kind=Kind.VIDEO
    )
    if guild_pending + count > limits.max_pending_videos_per_guild:
        raise ConcurrencyLimitReached("guild", limits.max_pending_videos_per_guild)


async def _check_personal_total(
    tx: Repositories, key_fingerprint: str | None, needed: Decimal, now: float, total: int
) -> None:
    """Refuse a member's request on the shared key past all members' daily total.

    ``total`` (``PERSONAL_TOTAL_DAILY_BUDGET_CENTS``) bounds every member's personal use of the key
    together, per UTC day (charges and live holds), besides each member's own allowance.
    Members' wallets each have their own lock, so this check takes the personal pool's
    too (:data:`bot.services.personal.PERSONAL_POOL_LOCK`, always after the wallet's, so
    no two transactions wait on each other): two members cannot both pass it together.

    Raises:
        BudgetExceeded: scope ``"personal_total"``.
    """
    await tx.guilds.lock(PERSONAL_POOL_LOCK)
    spent = await tx.ledger.personal_spent_since(key_fingerprint, day_start(now))
    held = await tx.ledger.personal_reserved_cents(key_fingerprint, now)
    _check_budget("personal_total", total - spent - held, needed, limit=total)


def _first(value: _T | None, default: _T) -> _T:
    return default if value is None else value


def _text_key(key_fingerprint: str | None, model: str) -> str:
    # Accounts may be priced differently: one history per key (an unknown key is one account).
    return f"{TEXT_PRICE_KEY}{key_fingerprint or '-'}:{model}"


async def _text_history(
    tx: Repositories, key_fingerprint: str | None, model: str
) -> list[TextCharge]:
    raw = await tx.meta.get(_text_key(key_fingerprint, model))
    if raw is None:
        return []
    try:
        return [(Decimal(cost), int(p), int(k)) for cost, p, k in json.loads(raw)]
    except (ValueError, TypeError, ArithmeticError):
        log.warning("unreadable price history of %s; starting it again", model)
        return []


async def _learn_text_price(
    tx: Repositories, key_fingerprint: str | None, model: str, charge: TextCharge
) -> None:
    """Add one positive text charge to the model's history on one account (the last 20 kept).

    A charge above what the known rates allow for its own tokens (rounded up as the service
    rounds, at least 1 cent) proves the price was raised: the older charges, made at the old
    price, no longer bound anything and are dropped, so the next hold is at the new price at
    once. A lost update between two processes loses one observation, nothing more.
    """
    history = await _text_history(tx, key_fingerprint, model)
    cost, prompt, completion = charge
    allowed = text_rate_bound(history, TextTokens(prompt, completion)) if history else None
    if allowed is not None and cost > max(1, math.ceil(allowed)):
        log.info("%s charged more than its known rates allow: the price rose", model)
        history = []
    history = [*history, charge][-ESTIMATE_WINDOW:]
    await tx.meta.set(
        _text_key(key_fingerprint, model), json.dumps([[str(c), p, k] for c, p, k in history])
    )


def _check_model_access(policy: MemberPolicy, model: str) -> None:
    """Refuse ``model`` when the member's tiers (or the server's model list) do not allow it.

    Raises:
        ValidationFailed: the model is not the member's here.
    """
    if model and not policy.allows(model):
        raise ValidationFailed(
            N_("`{model}` is not available to your roles here; pick one from the list."),
            model=model,
        )


async def _check_cooldown(
    tx: Repositories, guild_id: int, user_id: int, kind: Kind, now: float, *, exempt: bool
) -> tuple[float | None, float | None]:
    """Refuse a command used again within its cooldown (none for an exempt member).

    Returns:
        The command's cooldown, seconds (None: none applies), and the member's last use of
        it (None: never, or no cooldown), for the use to be recorded and taken back.

    Raises:
        CooldownActive: the member used the command less than its cooldown ago.
    """
    seconds = None if exempt else (await tx.policy.cooldowns(guild_id)).get(kind)
    last = None
    if seconds is not None:
        last = await tx.policy.last_use(guild_id, user_id, kind)
        if last is not None and now < last + seconds:
            raise CooldownActive(kind.value, last + seconds)
    return seconds, last


async def _check_guild_budget(
    tx: Repositories, limits: Limits, guild_id: int, needed: Decimal, now: float
) -> None:
    """Refuse what the guild's monthly budget, less charges and live holds, cannot cover.

    Raises:
        BudgetExceeded: scope ``"guild"``.
    """
    if limits.monthly_budget_cents is not None:
        spent = await tx.ledger.spent_since(guild_id, month_start(now))
        held = await tx.ledger.reserved_cents(guild_id, now)
        _check_budget("guild", limits.monthly_budget_cents - spent - held, needed)


async def _check_member_allowances(
    tx: Repositories,
    policy: MemberPolicy,
    guild_id: int,
    user_id: int,
    needed: Decimal,
    now: float,
) -> None:
    """Refuse what the member's daily or monthly allowance, less charges and holds, cannot cover.

    Raises:
        BudgetExceeded: scope ``"user"`` (the UTC day) or ``"user_month"``.
    """
    for scope, allowance, since in (
        ("user", policy.daily, day_start(now)),
        ("user_month", policy.monthly, month_start(now)),
    ):
        if allowance.value is None:
            continue
        spent = await tx.ledger.spent_since(guild_id, since, user_id=user_id)
        held = await tx.ledger.reserved_cents(guild_id, now, user_id=user_id)
        _check_budget(
            scope,
            allowance.value - spent - held,
            needed,
            limit=allowance.value,
            source=allowance.source,
        )


def _check_budget(
    scope: str,
    remaining: Decimal,
    needed: Decimal,
    *,
    limit: int | None = None,
    source: str | None = None,
) -> None:
    # A spent budget refuses even a request estimated at 0: the estimate may be wrong, the
    # overrun is certain.
    if remaining <= 0 or needed > remaining:
        raise BudgetExceeded(
            scope, max(Decimal(0), remaining), needed, limit_cents=limit, source=source
        )
