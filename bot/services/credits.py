"""Members' credit packs bought in Discord, their balances, and commands paid from them.

Two parts, no discord import (``docs/credits.md``):

* :class:`CreditService`: purchases and refunds. A purchase (an entitlement of a pack's SKU,
  reported by ``ENTITLEMENT_CREATE``, an interaction, or a listing) is **credited** in one
  transaction (the entry keyed by its entitlement id, UNIQUE, and the balance) and then
  **consumed** through the :class:`EntitlementDesk` the Discord adapter implements. At
  start-up and every hour :meth:`CreditService.reconcile` lists the entitlements of the pack
  SKUs, deleted ones included, and settles each unconsumed one the same way: a purchase made
  while the bot was stopped is credited, and one credited before a crash is consumed without
  being credited again. A refund (``ENTITLEMENT_DELETE`` of a credited purchase, or a credited
  purchase the listing shows deleted: refunded while the bot was stopped) takes the amount
  back once; the balance may go below zero, and then pays nothing until topped up. A purchase
  is recorded in the server it was made in: the interaction's, else the one where the member
  was last shown the packs (:meth:`CreditService.offered`), else none.
* :class:`MemberCredits`: the balance as a payer, called by :class:`bot.services.billing.Billing`
  inside its own transactions: whether the balance pays a request (the server's billing mode),
  the hold (checked under the member's row lock, so concurrent commands cannot overdraw), the
  spend when the charge is settled (the service's price plus ``CREDIT_MARKUP_PERCENT``, both
  kept), and the hold's release.

Money is exact Decimal cents (micro-cents in storage); times UTC epoch seconds.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Protocol

from bot.clock import Clock
from bot.config import Settings
from bot.domain import (
    AuditEntry,
    BillingMode,
    Charge,
    CreditBalance,
    CreditEntry,
    CreditEntryKind,
    Entitlement,
    Reservation,
)
from bot.errors import BudgetExceeded, CreditsNeeded
from bot.i18n import SOURCE, money
from bot.services.personal import is_personal
from bot.storage import Database, Repositories
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.credits import BalanceSpend, CreditStore

log = logging.getLogger(__name__)

RECONCILE_SECONDS = 3600.0
"""Seconds between two reconciliations of purchases with Discord (the first at start-up)."""

HISTORY = 10
"""Purchases and refunds ``/credits`` lists, newest first."""


class EntitlementDesk(Protocol):
    """Discord's side of purchases, implemented by the adapter (``bot/discord/credits.py``)."""

    async def listed(self, sku_ids: Collection[int]) -> list[Entitlement]:
        """The application's entitlements of ``sku_ids``, deleted ones too (every page)."""

    async def consume(self, entitlement_id: int) -> None:
        """Mark an entitlement consumed. Raises: Exception: Discord did not confirm it."""


@dataclass(frozen=True, slots=True)
class Settled:
    """What settling one purchase did.

    Attributes:
        credited: the balance was credited now (False: before, or not a pack).
        consumed: Discord confirmed it consumed (now or before).
    """

    credited: bool
    consumed: bool


@dataclass(frozen=True, slots=True)
class Reconciled:
    """What one reconciliation with Discord did.

    Attributes:
        credited: purchases credited now (made while the bot was stopped).
        refunded: purchases taken back now (refunded while the bot was stopped).
    """

    credited: int = 0
    refunded: int = 0


@dataclass(frozen=True, slots=True)
class CreditsView:
    """What ``/credits`` shows a member.

    Attributes:
        offered: whether the bot offers packs at all (``CREDIT_PACKS``).
        balance: the balance and what requests in flight hold of it.
        packs: ``(SKU id, cents credited)`` in the order configured.
        history: the latest purchases and refunds, newest first.
        month_paid_cents: what the balance paid this UTC month, the markup included.
    """

    offered: bool
    balance: CreditBalance
    packs: tuple[tuple[int, int], ...]
    history: list[CreditEntry]
    month_paid_cents: Decimal


def with_markup(cost_cents: Decimal | int, markup_percent: int) -> Decimal:
    """What a balance pays for ``cost_cents``: the price plus ``markup_percent``, exact cents.

    Rounded up to a micro-cent (the ledger's unit) when finer: never less than the price.
    """
    return from_micro(to_micro(Decimal(cost_cents) * (100 + markup_percent) / 100))


class MemberCredits:
    """The member's balance as a payer, inside billing's transactions.

    Args:
        packs: ``{SKU id: cents}`` (``CREDIT_PACKS``), named in a refusal.
        markup_percent: ``CREDIT_MARKUP_PERCENT``.
    """

    def __init__(self, packs: dict[int, int], markup_percent: int) -> None:
        self._packs = tuple(packs.items())
        self._markup = markup_percent

    def paid(self, cost_cents: Decimal | int) -> Decimal:
        """What the balance pays for a price of ``cost_cents`` (:func:`with_markup`)."""
        return with_markup(cost_cents, self._markup)

    async def admit(
        self,
        tx: Repositories,
        *,
        guild_id: int,
        user_id: int,
        needed_cents: Decimal,
        now: float,
        server_checks: Callable[[], Awaitable[None]],
    ) -> bool:
        """Decide who pays a request: the server (its budgets checked) or the member's balance.

        ``server``: ``server_checks`` (the budgets and allowances) alone. ``members``: the
        balance, the server's budgets not asked. ``server-then-members``: ``server_checks``,
        and when they refuse with :class:`~bot.errors.BudgetExceeded`, the balance. A member's
        personal wallet is always ``server`` (their own key or the owner's allowance).

        Returns:
            Whether the balance pays (then :meth:`hold` must be called in the same ``tx``).

        Raises:
            BudgetExceeded: (server) as ``server_checks``.
            CreditsNeeded: the balance, less live holds, cannot cover ``needed_cents`` plus
                the markup, or is not above zero.
        """
        store = tx.credits
        mode = BillingMode.SERVER if is_personal(guild_id) else await store.mode(guild_id)
        if mode is BillingMode.SERVER:
            await server_checks()
            return False
        if mode is BillingMode.SERVER_THEN_MEMBERS:
            try:
                await server_checks()
                return False
            except BudgetExceeded:
                pass
        await self._check(store, user_id, self.paid(needed_cents), now)
        return True

    async def _check(self, store: CreditStore, user_id: int, needed: Decimal, now: float) -> None:
        # The member's row lock first: the sum of holds read next cannot change before this
        # transaction's own hold is written (PostgreSQL; SQLite has one writer anyway).
        balance = await store.lock_member(user_id, now) or Decimal(0)
        available = balance - await store.held(user_id, now)
        if available <= 0 or needed > available:
            raise CreditsNeeded(available, needed, self._packs)

    async def hold(
        self, tx: Repositories, user_id: int, reservations: Sequence[Reservation]
    ) -> None:
        """Hold each reservation's amount, plus the markup, of the member's balance."""
        store = tx.credits
        for reservation in reservations:
            await store.add_hold(
                reservation.id, user_id, self.paid(reservation.amount_cents), reservation.expires_at
            )

    async def settle(
        self,
        tx: Repositories,
        reservation_id: int,
        charge: Charge | None,
        at: float,
        payer: int | None = None,
        settlement_id: str | None = None,
    ) -> None:
        """Replace a reservation's hold by the spend of its charge (none: the hold is dropped).

        Once per settlement: the spend is keyed by ``settlement_id``
        (:func:`~bot.storage.repos.credits.spend_key`), so a settlement tried again, or
        replayed from the settlement spool after it committed, takes nothing more. The spend
        may exceed the hold (a charge above its estimate): the balance then goes below zero,
        as a budget is overrun.

        Args:
            tx: billing's transaction.
            reservation_id: the reservation settled.
            charge: its charge; None (a protocol anomaly): nothing is spent.
            at: UTC epoch seconds.
            payer: the member whose balance held it, as billing remembered at the hold; used
                when the hold is gone (expired and swept before a spool replay). None: the
                hold alone tells (no hold: the server paid).
            settlement_id: the settlement's id (its spool entry's); None: the spend is not
                keyed (once per hold only).
        """
        spend = self.balance_spend(charge, at, payer, settlement_id)
        await tx.credits.settle_hold(reservation_id, charge, spend)

    def balance_spend(
        self,
        charge: Charge | None,
        at: float,
        payer: int | None = None,
        settlement_id: str | None = None,
    ) -> BalanceSpend:
        """A settlement's part for a member's balance: the charge's price with the markup.

        Args: as :meth:`settle` (``charge`` None: nothing is spent).
        """
        paid = None if charge is None else self.paid(charge.cost_cents)
        return BalanceSpend(paid, at, payer, settlement_id)

    async def release(self, tx: Repositories, reservation: Reservation) -> None:
        """Drop a reservation's hold (its call failed without a charge)."""
        await tx.credits.take_hold(reservation.id)


def refund_audit(entry: CreditEntry, guild_id: int, user_id: int) -> AuditEntry:
    """The audit log's line of a refund: the pack, what it credited and what was taken back.

    Written in English for people, as every audit value is (``bot.i18n.money`` in the source
    locale); ``via`` is ``"discord"``, where the refund came from.
    """
    amount = money(-entry.amount_cents, SOURCE)
    return AuditEntry(
        guild_id=guild_id,
        user_id=user_id,
        what=f"credit pack {entry.sku_id} refunded",
        old=f"{amount} credited",
        new=f"{amount} taken back",
        at=entry.at,
        via="discord",
    )


class CreditService:
    """Purchases, refunds and balances (no discord import: Discord is the desk handed in).

    Args:
        db: the database.
        clock: stamps entries (UTC epoch seconds).
        settings: ``CREDIT_PACKS`` (``credit_pack_cents``) and ``CREDIT_MARKUP_PERCENT``.
    """

    def __init__(self, db: Database, clock: Clock, settings: Settings) -> None:
        self._db = db
        self._clock = clock
        self._packs = settings.credit_pack_cents
        self._markup = settings.credit_markup_percent
        self._desk: EntitlementDesk | None = None
        # One settlement per entitlement at a time in this process (an event and an
        # interaction may report the same purchase together): one consume call.
        self._settling: weakref.WeakValueDictionary[int, asyncio.Lock] = (
            weakref.WeakValueDictionary()
        )

    @property
    def packs(self) -> dict[int, int]:
        """``{SKU id: cents credited}``; empty when the bot offers none."""
        return dict(self._packs)

    @property
    def markup_percent(self) -> int:
        """``CREDIT_MARKUP_PERCENT``."""
        return self._markup

    def set_desk(self, desk: EntitlementDesk | None) -> None:
        """Set Discord's side (the adapter's); None: purchases are credited, not consumed."""
        self._desk = desk

    async def settle(self, entitlement: Entitlement, guild_id: int | None = None) -> Settled:
        """Credit a purchase once, then consume it.

        The credit is one transaction (the entry keyed by the entitlement id, UNIQUE, and the
        balance): a second report of the same purchase credits nothing. The consumption comes
        after, so a crash between the two leaves a credited, unconsumed purchase, which
        :meth:`reconcile` consumes without crediting it again. A failed consume is logged and
        left for the next reconciliation. Not a pack's SKU, or deleted (refunded before it was
        ever credited): nothing happens.

        Args:
            entitlement: the purchase.
            guild_id: the server of the interaction that carried it; None (an event, the
                listing, a DM): the server where the member was last shown the packs, if any.
                Its Ledger shows the purchase (docs/credits.md).
        """
        cents = self._packs.get(entitlement.sku_id)
        if cents is None or entitlement.deleted:
            return Settled(credited=False, consumed=entitlement.consumed)
        lock = self._settling.get(entitlement.id)
        if lock is None:  # kept while some settlement of it holds a reference
            lock = self._settling[entitlement.id] = asyncio.Lock()
        async with lock:
            return await self._settle(entitlement, cents, guild_id)

    async def _settle(self, entitlement: Entitlement, cents: int, guild_id: int | None) -> Settled:
        now = self._clock.time()
        async with self._db.transaction() as tx:
            store = tx.credits
            if guild_id is None or is_personal(guild_id):
                guild_id = await store.offered_in(entitlement.user_id)
            credited = await store.credit_purchase(
                entitlement_id=entitlement.id,
                sku_id=entitlement.sku_id,
                user_id=entitlement.user_id,
                cents=cents,
                at=now,
                guild_id=guild_id,
            )
            entry = await store.purchase(entitlement.id)
        if credited:
            log.info(
                "credit pack bought: entitlement %s, SKU %s, member %s, %s cents credited",
                entitlement.id,
                entitlement.sku_id,
                entitlement.user_id,
                cents,
            )
        if entry is not None and entry.consumed_at is not None:
            return Settled(credited=credited, consumed=True)
        if not entitlement.consumed:
            if self._desk is None:
                return Settled(credited=credited, consumed=False)
            try:
                await self._desk.consume(entitlement.id)
            except Exception as exc:
                log.warning(
                    "entitlement %s credited, not consumed yet (%r); the next reconciliation"
                    " consumes it",
                    entitlement.id,
                    exc,
                )
                return Settled(credited=credited, consumed=False)
        await self._db.credits.mark_consumed(entitlement.id, self._clock.time())
        return Settled(credited=credited, consumed=True)

    async def reconcile(self) -> Reconciled:
        """Settle purchases and refunds with what Discord lists (start-up, then hourly).

        The pack SKUs' entitlements are listed, deleted ones included. Each live, unconsumed
        one is credited if it never was (by its unique key) and consumed. Each deleted one
        credited here and not refunded yet (a refund while the bot was stopped, its
        ``ENTITLEMENT_DELETE`` never seen) is taken back, once (the refund's unique key). A
        purchase credited here that Discord no longer lists unconsumed was consumed after all
        (the process stopped before it wrote so), or refunded: nothing is left to consume, so
        it is marked consumed.

        Returns:
            How many purchases were credited, and refunded, now.
        """
        if not self._packs or self._desk is None:
            return Reconciled()
        listed = await self._desk.listed(list(self._packs))
        credited = 0
        for entitlement in listed:
            if entitlement.deleted or entitlement.consumed:
                continue
            if (await self.settle(entitlement)).credited:
                credited += 1
        store = self._db.credits
        refunded = 0
        for entitlement_id in await store.unrefunded([e.id for e in listed if e.deleted]):
            if await self.refund(entitlement_id) is not None:
                refunded += 1
        open_ids = {e.id for e in listed if not e.deleted and not e.consumed}
        for entitlement_id in await store.unconsumed():
            if entitlement_id not in open_ids:
                await store.mark_consumed(entitlement_id, self._clock.time())
        if credited:
            log.info("reconciliation credited %d purchase(s) made while the bot was away", credited)
        if refunded:
            log.warning(
                "reconciliation took back %d purchase(s) refunded while the bot was away", refunded
            )
        return Reconciled(credited=credited, refunded=refunded)

    async def offered(self, user_id: int, guild_id: int | None) -> None:
        """Remember where the member was shown the packs (premium buttons), for their purchase.

        A purchase Discord reports without a server (``ENTITLEMENT_CREATE``, the listing) is
        recorded in the server where its member last saw the packs. None or a member's own
        wallet (a DM, a user install): nothing is remembered.
        """
        if guild_id is None or is_personal(guild_id) or not self._packs:
            return
        await self._db.credits.offer(user_id, guild_id, self._clock.time())

    async def expire_holds(self) -> int:
        """Delete the holds whose reservation expired (they stopped counting then).

        Run by the bot's periodic sweep with the reservations' (``bot.wiring``): a request
        that never settled (a crash, a lost task) leaves no row behind.

        Returns:
            How many holds were deleted.
        """
        return await self._db.credits.expire_holds(self._clock.time())

    async def refund(self, entitlement_id: int) -> CreditEntry | None:
        """Take a refunded purchase back from its member's balance, once.

        The balance may go below zero (credits already spent); a member below zero pays
        nothing more until topped up. The refund is in the ledger of credits and, when the
        purchase's server is known, in that server's audit log (in the same transaction), where
        its admins read it beside the purchase on the dashboard's Ledger (docs/credits.md).

        Returns:
            The refund's entry; None when the purchase was never credited, or already refunded.
        """
        async with self._db.transaction() as tx:
            entry = await tx.credits.refund(entitlement_id, self._clock.time())
            if entry is not None and entry.guild_id is not None and entry.user_id is not None:
                await tx.policy.add_audit(refund_audit(entry, entry.guild_id, entry.user_id))
        if entry is not None:
            log.warning(
                "credit pack refunded: entitlement %s, %s cents taken back",
                entitlement_id,
                -entry.amount_cents,
            )
        return entry

    async def balance(self, user_id: int) -> CreditBalance:
        """The member's balance and what requests in flight hold of it, cents."""
        store = self._db.credits
        return CreditBalance(
            balance_cents=await store.balance(user_id),
            held_cents=await store.held(user_id, self._clock.time()),
        )

    async def view(self, user_id: int, month_start: float) -> CreditsView:
        """What ``/credits`` shows: balance, packs, the latest purchases and refunds."""
        store = self._db.credits
        paid, _cost = await store.spent_since(user_id, month_start)
        return CreditsView(
            offered=bool(self._packs),
            balance=await self.balance(user_id),
            packs=tuple(self._packs.items()),
            history=await store.entries(
                user_id, HISTORY, (CreditEntryKind.PURCHASE, CreditEntryKind.REFUND)
            ),
            month_paid_cents=paid,
        )

    async def history(self, user_id: int, limit: int = 20) -> list[CreditEntry]:
        """The member's latest purchases, refunds and spends, newest first (the dashboard's)."""
        return await self._db.credits.entries(user_id, limit)

    async def spent_since(self, user_id: int, since: float) -> tuple[Decimal, Decimal]:
        """What the member's balance paid since ``since``: (with the markup, service price)."""
        return await self._db.credits.spent_since(user_id, since)

    async def mode(self, guild_id: int) -> BillingMode:
        """Who pays the server's commands."""
        return await self._db.credits.mode(guild_id)
