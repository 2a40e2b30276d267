"""The web dashboard's rules: sign-ins, sessions, and the read-only views of a server.

No HTTP and no Discord here: the web adapter (``bot/dashboard``) asks this service, which reads
and writes through the dashboard's repositories (``bot/storage/repos/dashboard.py``).

- **Sign-in** (Discord's OAuth2 authorization code grant with PKCE, RFC 7636, and a ``state``
  bound to a pre-login cookie, RFC 6749 section 10.12): kept by the browser in a signed cookie
  (``bot.dashboard.oauth.LoginCookie``), never in the database, for :data:`LOGIN_SECONDS`.
- **Sessions**: a new random id per sign-in (stored hashed), idle after
  :data:`SESSION_IDLE_SECONDS`, at most :data:`SESSION_MAX_SECONDS` old; one row each, so a
  member can be signed out everywhere.
- **Views**: money stays integer micro-cents until shown (:func:`usd`), so the pages' totals and
  the CSV export are exact, and equal ``/usage``'s (the same ledger rows).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from base64 import urlsafe_b64encode
from collections import deque
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field, replace
from decimal import Decimal
from typing import Final

from bot.clock import Clock
from bot.domain import (
    AuditEntry,
    DashboardSession,
    GuildRef,
    JobCounts,
    LedgerFilter,
    LedgerLine,
    ResultItem,
    SpendBucket,
)
from bot.errors import ValidationFailed
from bot.i18n import SOURCE, money
from bot.services.billing import day_start, month_start
from bot.storage import Database
from bot.storage.repos.dashboard import DAY

LOGIN_SECONDS: Final = 600.0
"""How long a sign-in may take between ``/auth/login`` and the callback (10 minutes, as long as
Discord keeps an authorization code valid)."""

SESSION_IDLE_SECONDS: Final = 12 * 3600.0
"""A session unused this long is over (12 hours): a forgotten browser stops being signed in."""

SESSION_MAX_SECONDS: Final = 30 * DAY
"""A session is over this long after sign-in, used or not (30 days)."""

TOUCH_SECONDS: Final = 60.0
"""A session's last use is written at most once a minute (a page is several requests)."""

PERIODS: Final = (7, 30, 90)
"""The Spend page's periods, days."""

MICRO_PER_DOLLAR: Final = 10**8
"""Micro-cents per US dollar (10**6 per cent, 100 cents)."""


class LoginRefused(ValidationFailed):
    """The callback's ``state`` is unknown, used already, too old or another browser's."""


def _hash(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _token() -> str:
    return secrets.token_urlsafe(32)


def pkce_challenge(verifier: str) -> str:
    """Return the S256 code challenge of a PKCE verifier (RFC 7636, section 4.2)."""
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


def usd(micro: int) -> str:
    """Micro-cents as the dashboard's pages show them: exact US dollars, in English.

    A thin use of the one money formatter (:func:`bot.i18n.money`, unrounded), so a page's
    figure is exact to the micro-cent (10**-8 dollars): ``usd(350_000) == "$0.0035"``,
    ``usd(-1) == "-$0.00000001"``.
    """
    return money(Decimal(micro).scaleb(-6), SOURCE, exact=True)


def cents_to_micro(cents: Decimal) -> int:
    """Return exact Decimal cents (a ledger sum, ``/usage``'s figures) as micro-cents."""
    return int(cents.scaleb(6))


@dataclass(frozen=True, slots=True)
class SpendReport:
    """A server's spend over a period and the period before it (micro-cents).

    Attributes:
        days: the period's length, days.
        since: its start (UTC midnight), UTC epoch seconds; it ends now.
        total: ``(charges, micro-cents)`` of the period.
        previous: the same for the period before it.
        by_day: every day of the period (zero days included), oldest first.
        by_day_kind: each day's micro-cents by kind (day's UTC midnight -> kind -> micro);
            days and kinds without charges left out.
        by_model, by_kind, by_tier, by_member: ``(bucket, micro-cents the period before)``.
        tier_names: tier role id -> name (current tiers).
        by_stage: Draft → Final (docs/creative.md): the ``draft`` and ``final`` buckets,
            as ``by_model``; charges of neither are left out.
    """

    days: int
    since: float
    total: tuple[int, int]
    previous: tuple[int, int]
    by_day: list[SpendBucket]
    by_model: list[tuple[SpendBucket, int]]
    by_kind: list[tuple[SpendBucket, int]]
    by_tier: list[tuple[SpendBucket, int]]
    by_member: list[tuple[SpendBucket, int]]
    tier_names: dict[int, str]
    by_day_kind: dict[int, dict[str, int]] = field(default_factory=dict)
    by_stage: list[tuple[SpendBucket, int]] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Overview:
    """A server's money now (micro-cents).

    Attributes:
        month_micro: charged this UTC month (``/usage``'s "this month").
        today_micro: charged this UTC day.
        reserved_micro: held by requests in flight.
        balance_micro: the server key's balance as the service last reported it; None when
            unknown or not the server's own key.
        anomalies: charges this month that broke the protocol.
    """

    month_micro: int
    today_micro: int
    reserved_micro: int
    balance_micro: int | None
    anomalies: int


class DashboardService:
    """Sign-ins, sessions and the views of the web dashboard.

    Args:
        db: the database.
        clock: the wall clock (UTC epoch seconds): expiries, periods.
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._db = db
        self._store = db.dashboard
        # Its reads are reports: they never make the bot's own reads wait (issue 35).
        self._views = db.reports.dashboard_views
        self._clock = clock

    # -- signing in ------------------------------------------------------------------------

    async def open_session(self, user_id: int, user_name: str, guilds: Sequence[GuildRef]) -> str:
        """Start a session for a member Discord just identified; return the cookie's value."""
        now = self._clock.time()
        await self._store.purge_sessions(now - SESSION_IDLE_SECONDS)
        token = _token()
        await self._store.add_session(_hash(token), user_id, user_name, guilds, now)
        return token

    async def session(self, token: str | None) -> DashboardSession | None:
        """Return the session of a cookie's value; None when unknown, idle or too old.

        An expired session's row is deleted; a live one's last use is recorded (at most once
        a minute).
        """
        if not token:
            return None
        key = _hash(token)
        found = await self._store.session(key)
        if found is None:
            return None
        now = self._clock.time()
        if (
            now - found.last_seen_at > SESSION_IDLE_SECONDS
            or now - found.created_at > SESSION_MAX_SECONDS
        ):
            await self._store.delete_session(key)
            return None
        if now - found.last_seen_at >= TOUCH_SECONDS:
            await self._store.touch(key, now)
        return found

    async def sign_out(self, token: str) -> None:
        """End one session (the browser's)."""
        await self._store.delete_session(_hash(token))

    async def sign_out_everywhere(self, user_id: int) -> int:
        """End every session of the member; return how many there were."""
        return await self._store.delete_user_sessions(user_id)

    @staticmethod
    def form_token(token: str) -> str:
        """Return the session's token for forms (CSRF).

        Derived from the secret cookie, so it needs no storage and changes with every sign-in.
        """
        return hmac.new(token.encode(), b"dashboard form", hashlib.sha256).hexdigest()

    # -- access ----------------------------------------------------------------------------

    async def access_roles(self, guild_id: int) -> dict[int, str]:
        """Return the roles an admin let see the server's pages: role id -> access."""
        return await self._store.roles(guild_id)

    async def set_access_role(self, guild_id: int, role_id: int, access: str | None) -> None:
        """Let a role see the server's pages (``view``), or no longer (None)."""
        if access not in (None, "view", "edit"):
            raise ValidationFailed("Access is view or edit.")
        await self._store.set_role(guild_id, role_id, access)

    async def guilds_with_roles(self, guild_ids: Sequence[int]) -> set[int]:
        """Return which of the servers granted any role access to their pages."""
        return await self._store.guilds_with_roles(guild_ids)

    # -- views -----------------------------------------------------------------------------

    async def job_counts(self, guild_id: int) -> JobCounts:
        """Return the server's jobs today, pending, failed in the last day, and in flight."""
        now = self._clock.time()
        today, pending, failed, in_flight, failures = await self._views.job_counts(
            guild_id, now, day_start(now)
        )
        return JobCounts(today, pending, failed, in_flight, tuple(failures))

    async def spend(self, guild_id: int, days: int) -> SpendReport:
        """Return the server's spend over the last ``days`` UTC days (today included).

        Raises:
            ValidationFailed: ``days`` is not one of :data:`PERIODS`.
        """
        if days not in PERIODS:
            raise ValidationFailed("The period is 7, 30 or 90 days.")
        now = self._clock.time()
        until = day_start(now) + DAY  # today is whole: its charges so far
        since = until - days * DAY
        before = since - days * DAY
        views = self._views
        whole = LedgerFilter(since=since, until=until)
        total = await views.total(guild_id, whole)
        previous = await views.total(guild_id, LedgerFilter(since=before, until=since))
        charged = {b.key: b for b in await views.daily(guild_id, since, until, "day")}
        by_day = [
            charged.get(int(since + i * DAY), SpendBucket(int(since + i * DAY), 0, 0))
            for i in range(days)
        ]

        async def compared(by: str) -> list[tuple[SpendBucket, int]]:
            earlier = {b.key: b.micro for b in await views.daily(guild_id, before, since, by)}
            return [
                (b, earlier.get(b.key, 0)) for b in await views.daily(guild_id, since, until, by)
            ]

        tiers = {t.role_id: t.role_name for t in await self._db.policy.tiers(guild_id)}
        return SpendReport(
            days=days,
            since=since,
            total=total,
            previous=previous,
            by_day=by_day,
            by_model=await compared("model"),
            by_kind=await compared("kind"),
            by_tier=await compared("tier"),
            by_member=await compared("member"),
            tier_names=tiers,
            by_day_kind=await views.daily_kinds(guild_id, since, until),
            by_stage=[(b, before) for b, before in await compared("stage") if b.key],
        )

    async def overview(self, guild_id: int, key_fingerprint: str | None) -> Overview:
        """Return the server's money now: this month, today, held, the key's balance.

        The month and the day are the ledger's own sums (``/usage``'s figures, to the
        micro-cent), read from its daily sums.

        Args:
            guild_id: the server.
            key_fingerprint: the server's own key, for its last reported balance; None to
                skip it (the bot's shared key's balance is its owner's business).
        """
        now = self._clock.time()
        today = day_start(now)
        month = month_start(now)
        _, month_micro = await self._views.total(guild_id, LedgerFilter(since=month))
        _, today_micro = await self._views.total(guild_id, LedgerFilter(since=today))
        reserved = await self._db.ledger.reserved_cents(guild_id, now)
        balance = (
            None
            if key_fingerprint is None
            else await self._db.ledger.last_remaining_credits(key_fingerprint)
        )
        return Overview(
            month_micro=month_micro,
            today_micro=today_micro,
            reserved_micro=cents_to_micro(reserved),
            balance_micro=None if balance is None else cents_to_micro(balance),
            anomalies=await self._db.ledger.anomaly_count(guild_id, month),
        )

    async def ledger(
        self,
        guild_id: int,
        where: LedgerFilter,
        before: tuple[float, int] | None,
        limit: int,
        *,
        private_hidden_from: int | None = None,
    ) -> tuple[list[LedgerLine], tuple[int, int]]:
        """Return a page of ledger lines (newest first) and the filter's ``(count, micro)``.

        Args:
            guild_id: the server.
            where: the filters.
            before: ``(at, id)`` of the last line of the previous page; None for the first.
            limit: at most this many lines.
            private_hidden_from: a viewer who is not an admin: the prompts of the other
                members who keep their results private are hidden (the lines and their
                amounts stay); None for an admin.
        """
        lines = await self._views.lines(guild_id, where, before=before, limit=limit)
        return await self._hide_prompts(lines, private_hidden_from), await self._views.total(
            guild_id, where
        )

    async def export(
        self, guild_id: int, where: LedgerFilter, *, private_hidden_from: int | None = None
    ) -> AsyncIterator[list[LedgerLine]]:
        """Yield every ledger line ``where`` keeps, oldest first, a batch at a time.

        ``private_hidden_from``: as :meth:`ledger`'s.
        """
        async for batch in self._views.export(guild_id, where):
            yield await self._hide_prompts(batch, private_hidden_from)

    async def credit_lines(
        self, guild_id: int, where: LedgerFilter, limit: int | None = None
    ) -> list[LedgerLine]:
        """Members' credit packs bought and refunded in the server, newest first (its admins').

        ``kind`` ``credit_purchase`` or ``credit_refund``, the SKU as ``model``, the
        entitlement as ``task_id``, the change of the balance as ``cost_micro``
        (:meth:`~bot.storage.repos.dashboard.DashboardViews.credit_lines`). Not charges of the
        server: its totals leave them out. ``limit``: at most this many; None: all.
        """
        return await self._views.credit_lines(guild_id, where, limit=limit, newest_first=True)

    async def export_with_credits(
        self, guild_id: int, where: LedgerFilter
    ) -> AsyncIterator[list[LedgerLine]]:
        """:meth:`export` (an admin's) with the server's credit purchases and refunds.

        Each purchase or refund comes in time order among the charges (oldest first); there
        are few (one per pack bought), so they are read at once.
        """
        pending = deque(
            await self._views.credit_lines(guild_id, where, limit=None, newest_first=False)
        )
        async for batch in self.export(guild_id, where):
            merged: list[LedgerLine] = []
            for line in batch:
                while pending and pending[0].at <= line.at:
                    merged.append(pending.popleft())
                merged.append(line)
            yield merged
        if pending:
            yield list(pending)

    async def _hide_prompts(
        self, lines: list[LedgerLine], viewer_id: int | None
    ) -> list[LedgerLine]:
        """``lines`` with the prompts of private members' (not the viewer's) hidden."""
        if viewer_id is None:
            return lines
        others = [line.user_id for line in lines if line.prompt and line.user_id != viewer_id]
        private = await self._views.private_members(others)
        if not private:
            return lines
        return [
            replace(line, prompt="", private=True)
            if line.user_id in private and line.user_id != viewer_id
            else line
            for line in lines
        ]

    async def card_file(self, item: ResultItem, index: int) -> tuple[int, int | None] | None:
        """Where the result's file ``index`` is among its card message's files.

        A job's own card holds its files in order, as many as fitted: ``(index, None)``. The
        takes of one request share one card holding each finished take's first file, in the
        takes' order: ``(position, files)``, where ``files`` is how many the card holds when
        every one fitted (fewer on the message: a position is not known, so None is better
        than another take's file). None: the card does not hold that file.
        """
        if item.message_id is None:
            return None
        group = [
            (job_id, done)
            for job_id, message_id, done in await self._views.card_takes(item.job_id)
            if message_id == item.message_id
        ]
        if len(group) <= 1:  # no take, or a take with a card of its own (a private one)
            return index, None
        if index != 0:
            return None
        done = [job_id for job_id, finished in group if finished]
        if item.job_id not in done:
            return None
        return done.index(item.job_id), len(done)

    async def hidden_from(self, item: ResultItem, viewer_id: int, admin: bool) -> bool:
        """Whether ``item`` is hidden from a viewer of its server's pages.

        As ``/jobs show``: a member who keeps their results private (``/settings``) shows
        them to the server's admins (Manage Server) and to no one else.
        """
        if admin or item.user_id == viewer_id:
            return False
        return bool(await self._views.private_members([item.user_id]))

    async def models(self, guild_id: int) -> list[str]:
        """Return the models charged in the server in the last 90 days (filter choices)."""
        return await self._views.models(guild_id, self._clock.time() - 90 * DAY)

    async def audit(
        self,
        guild_id: int,
        *,
        user_id: int | None = None,
        what: str | None = None,
        since: float | None = None,
        until: float | None = None,
        before: int | None = None,
        limit: int | None = 50,
    ) -> list[tuple[int, AuditEntry]]:
        """Return the server's audit log, newest first (see :meth:`DashboardViews.audit`)."""
        return await self._views.audit(
            guild_id,
            user_id=user_id,
            what=what,
            since=since,
            until=until,
            before=before,
            limit=limit,
        )

    async def results(
        self,
        *,
        guild_id: int | None,
        user_id: int | None,
        kind: str | None = None,
        model: str | None = None,
        since: float | None = None,
        until: float | None = None,
        before: tuple[float, int] | None = None,
        limit: int = 24,
        private_hidden_from: int | None = None,
    ) -> list[ResultItem]:
        """Return finished results, newest first (see :meth:`DashboardViews.results`).

        ``private_hidden_from``: a viewer who is not an admin: the results of the other
        members who keep their results private are left out (as ``/jobs show`` does).
        """
        return await self._views.results(
            guild_id=guild_id,
            user_id=user_id,
            kind=kind,
            model=model,
            since=since,
            until=until,
            before=before,
            limit=limit,
            private_hidden_from=private_hidden_from,
        )

    async def result(self, job_id: int) -> ResultItem | None:
        """Return a finished result by its job id, or None."""
        return await self._views.result(job_id)

    async def member_spend(self, user_id: int, since: float) -> list[SpendBucket]:
        """Return what the member spent since ``since``, per server, largest first.

        The buckets' key is the guild id (negative: the member's own wallet).
        """
        return await self._views.member_spend(user_id, since)
