"""Members' credit balances and the credit ledger (``credit_*``, ``guild_billing``), both engines.

A purchase is a row of ``credit_entries`` keyed by its entitlement id (``entry_key``, UNIQUE)
and written in the transaction that adds it to the balance: crediting it twice is impossible
by construction, whatever the order events, interactions and listings report it in. A refund
is keyed ``<entitlement id>:refund`` the same way. A spend (a command paid from the balance)
is keyed by its settlement (``spend:<settlement id>``): it happens once, whether the
settlement, a retry of it or a replay of the settlement spool writes it. A purchase and its
refund carry the server they were made in (``guild_id``; ``credit_offers`` remembers where a
member last saw the packs, for a purchase Discord reports without one). Amounts are micro-cents
in the columns, Decimal cents here (:mod:`bot.storage.money`); times UTC epoch seconds.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from decimal import Decimal

from sqlalchemy import delete, func, select, update

from bot.domain import BillingMode, Charge, CreditEntry, CreditEntryKind
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.dialect import upsert
from bot.storage.schema import (
    credit_balances,
    credit_entries,
    credit_holds,
    credit_offers,
    guild_billing,
)
from bot.storage.sql import Row, Sql

IN_CHUNK = 500
"""Ids one ``IN (...)`` list holds at most (SQLite's and PostgreSQL's limits are far above)."""


def refund_key(entitlement_id: int) -> str:
    """The ``entry_key`` of a purchase's refund: ``"<entitlement id>:refund"``."""
    return f"{entitlement_id}:refund"


def spend_key(settlement_id: str) -> str:
    """The ``entry_key`` of a settlement's spend: ``"spend:<settlement id>"``.

    The settlement's id is the random one its spool entry carries
    (:class:`bot.services.settlement_spool.SpooledSettlement`), made before its first try:
    unique, where a reservation id may be used again once its row is gone.
    """
    return f"spend:{settlement_id}"


def _entry(row: Row) -> CreditEntry:
    cost = row["cost_micro"]
    return CreditEntry(
        kind=CreditEntryKind(row["kind"]),
        amount_cents=from_micro(row["amount_micro"]),
        cost_cents=None if cost is None else from_micro(cost),
        at=row["at"],
        entitlement_id=row["entitlement_id"],
        sku_id=row["sku_id"],
        guild_id=row["guild_id"],
        model=row["model"],
        consumed_at=row["consumed_at"],
    )


@dataclass(frozen=True, slots=True)
class BalanceSpend:
    """A member balance's part of one settlement (:meth:`CreditStore.settle_hold`).

    Attributes:
        paid_cents: what the balance pays for the charge: its price with the markup
            (``MemberCredits.paid``); None when there is no charge (nothing is spent).
        at: UTC epoch seconds.
        payer: the member whose balance held the reservation, as billing remembered at the
            hold; used when the hold is gone (expired and swept before a spool replay). None:
            the hold alone tells (no hold: the server paid).
        settlement_id: the settlement's id (its spool entry's), which keys the spend so a
            retry or a replay takes it once; None: not keyed (once per hold only).
    """

    paid_cents: Decimal | None
    at: float
    payer: int | None = None
    settlement_id: str | None = None


class CreditStore:
    """Balances, their entries, holds and servers' billing modes.

    Args:
        sql: the database's executor, or a transaction's (the writes that must go together,
            an entry and its balance, are made in one: ``tx.credits``).
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def _add_to_balance(self, user_id: int, micro: int, at: float) -> None:
        stmt = upsert(self._sql, credit_balances).values(
            user_id=user_id, balance_micro=micro, updated_at=at
        )
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[credit_balances.c.user_id],
                set_={
                    "balance_micro": credit_balances.c.balance_micro + micro,
                    "updated_at": at,
                },
            )
        )

    async def credit_purchase(
        self,
        *,
        entitlement_id: int,
        sku_id: int,
        user_id: int,
        cents: int,
        at: float,
        guild_id: int | None = None,
    ) -> bool:
        """Record a purchase and add ``cents`` to the member's balance, once per entitlement.

        Call inside one transaction (the entry and the balance go together). ``guild_id``:
        the server it was made in (its Ledger shows it); None: none known.

        Returns:
            True when credited now; False when this entitlement was credited before (nothing
            changes).
        """
        micro = to_micro(cents)
        stmt = upsert(self._sql, credit_entries).values(
            user_id=user_id,
            kind=CreditEntryKind.PURCHASE.value,
            entry_key=str(entitlement_id),
            entitlement_id=entitlement_id,
            sku_id=sku_id,
            amount_micro=micro,
            guild_id=guild_id,
            at=at,
        )
        if not await self._sql.run(stmt.on_conflict_do_nothing(index_elements=["entry_key"])):
            return False
        await self._add_to_balance(user_id, micro, at)
        return True

    async def offer(self, user_id: int, guild_id: int, at: float) -> None:
        """Remember that the member was shown the packs in ``guild_id`` at ``at`` (the latest)."""
        stmt = upsert(self._sql, credit_offers).values(user_id=user_id, guild_id=guild_id, at=at)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[credit_offers.c.user_id], set_={"guild_id": guild_id, "at": at}
            )
        )

    async def offered_in(self, user_id: int) -> int | None:
        """The server where the member was last shown the packs; None if never (or not known)."""
        value = await self._sql.scalar(
            select(credit_offers.c.guild_id).where(credit_offers.c.user_id == user_id)
        )
        return None if value is None else int(value)

    async def unrefunded(self, entitlement_ids: Collection[int]) -> list[int]:
        """Those of ``entitlement_ids`` credited here and not refunded yet, ascending."""
        ids = sorted(set(entitlement_ids))
        found: set[int] = set()
        refunded: set[int] = set()
        for start in range(0, len(ids), IN_CHUNK):
            chunk = ids[start : start + IN_CHUNK]
            rows = await self._sql.all(
                select(credit_entries.c.entitlement_id, credit_entries.c.kind).where(
                    credit_entries.c.entitlement_id.in_(chunk),
                    credit_entries.c.kind.in_(
                        [CreditEntryKind.PURCHASE.value, CreditEntryKind.REFUND.value]
                    ),
                )
            )
            for row in rows:
                purchase = row["kind"] == CreditEntryKind.PURCHASE.value
                (found if purchase else refunded).add(int(row["entitlement_id"]))
        return sorted(found - refunded)

    async def purchase(self, entitlement_id: int) -> CreditEntry | None:
        """The purchase of ``entitlement_id``; None if it was never credited."""
        row = await self._sql.one(
            select(credit_entries).where(credit_entries.c.entry_key == str(entitlement_id))
        )
        return None if row is None else _entry(row)

    async def purchase_user(self, entitlement_id: int) -> int | None:
        """The member credited for ``entitlement_id``; None if it was never credited."""
        value = await self._sql.scalar(
            select(credit_entries.c.user_id).where(
                credit_entries.c.entry_key == str(entitlement_id)
            )
        )
        return None if value is None else int(value)

    async def mark_consumed(self, entitlement_id: int, at: float) -> None:
        """Record that Discord consumed the purchase (kept the first time)."""
        await self._sql.run(
            update(credit_entries)
            .where(
                credit_entries.c.entry_key == str(entitlement_id),
                credit_entries.c.consumed_at.is_(None),
            )
            .values(consumed_at=at)
        )

    async def unconsumed(self) -> list[int]:
        """Entitlement ids credited but not known consumed (a crash between the two steps)."""
        rows = await self._sql.all(
            select(credit_entries.c.entitlement_id).where(
                credit_entries.c.kind == CreditEntryKind.PURCHASE.value,
                credit_entries.c.consumed_at.is_(None),
            )
        )
        return [row["entitlement_id"] for row in rows]

    async def refund(self, entitlement_id: int, at: float) -> CreditEntry | None:
        """Take a credited purchase back from its member's balance, once (may go below zero).

        Call inside one transaction.

        Returns:
            The refund's entry; None when the purchase was never credited or was refunded
            before (nothing changes).
        """
        purchase = await self._sql.one(
            select(credit_entries).where(credit_entries.c.entry_key == str(entitlement_id))
        )
        if purchase is None:
            return None
        micro = -int(purchase["amount_micro"])
        stmt = upsert(self._sql, credit_entries).values(
            user_id=purchase["user_id"],
            kind=CreditEntryKind.REFUND.value,
            entry_key=refund_key(entitlement_id),
            entitlement_id=entitlement_id,
            sku_id=purchase["sku_id"],
            amount_micro=micro,
            guild_id=purchase["guild_id"],
            at=at,
        )
        if not await self._sql.run(stmt.on_conflict_do_nothing(index_elements=["entry_key"])):
            return None
        await self._add_to_balance(purchase["user_id"], micro, at)
        return CreditEntry(
            kind=CreditEntryKind.REFUND,
            amount_cents=from_micro(micro),
            cost_cents=None,
            at=at,
            entitlement_id=entitlement_id,
            sku_id=purchase["sku_id"],
            guild_id=purchase["guild_id"],
            user_id=purchase["user_id"],
        )

    async def lock_member(self, user_id: int, at: float) -> Decimal | None:
        """Lock the member's balance row until the transaction ends; return the balance.

        PostgreSQL: the row's lock (an ``UPDATE``), so two transactions holding against one
        balance run one after the other; SQLite's writer lock already does that.

        Returns:
            The balance, cents; None for a member who never had one (nothing to lock).
        """
        await self._sql.run(
            update(credit_balances)
            .where(credit_balances.c.user_id == user_id)
            .values(updated_at=credit_balances.c.updated_at)
        )
        value = await self._sql.scalar(
            select(credit_balances.c.balance_micro).where(credit_balances.c.user_id == user_id)
        )
        return None if value is None else from_micro(int(value))

    async def balance(self, user_id: int) -> Decimal:
        """The member's balance, cents (0 for a member who never bought)."""
        value = await self._sql.scalar(
            select(credit_balances.c.balance_micro).where(credit_balances.c.user_id == user_id)
        )
        return Decimal(0) if value is None else from_micro(int(value))

    async def held(self, user_id: int, now: float) -> Decimal:
        """What live holds keep of the member's balance, cents."""
        value = await self._sql.scalar(
            select(func.coalesce(func.sum(credit_holds.c.amount_micro), 0)).where(
                credit_holds.c.user_id == user_id, credit_holds.c.expires_at > now
            )
        )
        return from_micro(int(value))

    async def add_hold(
        self, reservation_id: int, user_id: int, cents: Decimal, expires_at: float
    ) -> None:
        """Hold ``cents`` of the member's balance for a reservation (checked by the caller)."""
        await self._sql.run(
            credit_holds.insert().values(
                reservation_id=reservation_id,
                user_id=user_id,
                amount_micro=to_micro(cents),
                expires_at=expires_at,
            )
        )

    async def take_hold(self, reservation_id: int) -> int | None:
        """Remove a reservation's hold; return its member, or None if it held nothing here."""
        user = await self._sql.scalar(
            select(credit_holds.c.user_id).where(credit_holds.c.reservation_id == reservation_id)
        )
        if user is None:
            return None
        deleted = await self._sql.run(
            delete(credit_holds).where(credit_holds.c.reservation_id == reservation_id)
        )
        return int(user) if deleted else None

    async def settle_hold(
        self, reservation_id: int, charge: Charge | None, spend: BalanceSpend
    ) -> None:
        """Replace a reservation's hold by the spend of its charge (none: the hold is dropped).

        Once per settlement: the spend is keyed by ``spend.settlement_id``
        (:func:`spend_key`). The spend may exceed the hold (a charge above its estimate): the
        balance then goes below zero, as a budget is overrun. Call inside the settlement's
        transaction.
        """
        user_id = await self.take_hold(reservation_id)
        if user_id is None:
            user_id = spend.payer
        if user_id is None or charge is None or spend.paid_cents is None:
            return
        await self.spend(
            user_id=user_id,
            paid_cents=spend.paid_cents,
            cost_cents=charge.cost_cents,
            guild_id=charge.guild_id,
            model=charge.model,
            task_id=charge.task_id,
            at=spend.at,
            settlement_id=spend.settlement_id,
        )

    async def expire_holds(self, now: float) -> int:
        """Delete the holds expired by ``now``; return how many."""
        return await self._sql.run(delete(credit_holds).where(credit_holds.c.expires_at <= now))

    async def spend(
        self,
        *,
        user_id: int,
        paid_cents: Decimal,
        cost_cents: Decimal,
        guild_id: int,
        model: str,
        task_id: str | None,
        at: float,
        settlement_id: str | None = None,
    ) -> bool:
        """Take a command's price (with the markup) from the balance, recorded as a spend.

        Call inside the transaction that removes the hold (:meth:`take_hold`).

        Args:
            user_id: the member whose balance pays.
            paid_cents: what the balance pays (the price with the markup).
            cost_cents: the service's price.
            guild_id: the server the command ran in.
            model: the model charged.
            task_id: the service's task id; None for text.
            at: UTC epoch seconds.
            settlement_id: the settlement it belongs to: the spend is keyed by it
                (:func:`spend_key`), once; None: not keyed.

        Returns:
            True when taken now; False when this settlement's spend was taken before.
        """
        micro = to_micro(paid_cents)
        stmt = upsert(self._sql, credit_entries).values(
            user_id=user_id,
            entry_key=None if settlement_id is None else spend_key(settlement_id),
            kind=CreditEntryKind.SPEND.value,
            amount_micro=-micro,
            cost_micro=to_micro(cost_cents),
            guild_id=guild_id,
            model=model,
            task_id=task_id,
            at=at,
        )
        if not await self._sql.run(stmt.on_conflict_do_nothing(index_elements=["entry_key"])):
            return False
        await self._add_to_balance(user_id, -micro, at)
        return True

    async def entries(
        self, user_id: int, limit: int, kinds: Sequence[CreditEntryKind] | None = None
    ) -> list[CreditEntry]:
        """The member's latest entries, newest first (of ``kinds`` only, when given)."""
        stmt = select(credit_entries).where(credit_entries.c.user_id == user_id)
        if kinds is not None:
            stmt = stmt.where(credit_entries.c.kind.in_([k.value for k in kinds]))
        rows = await self._sql.all(
            stmt.order_by(credit_entries.c.at.desc(), credit_entries.c.id.desc()).limit(limit)
        )
        return [_entry(row) for row in rows]

    async def spent_since(self, user_id: int, since: float) -> tuple[Decimal, Decimal]:
        """What the member's balance paid since ``since``: (paid with markup, service price)."""
        row = await self._sql.one(
            select(
                func.coalesce(func.sum(credit_entries.c.amount_micro), 0).label("paid"),
                func.coalesce(func.sum(credit_entries.c.cost_micro), 0).label("cost"),
            ).where(
                credit_entries.c.user_id == user_id,
                credit_entries.c.kind == CreditEntryKind.SPEND.value,
                credit_entries.c.at >= since,
            )
        )
        assert row is not None
        return from_micro(-int(row["paid"])), from_micro(int(row["cost"]))

    async def mode(self, guild_id: int) -> BillingMode:
        """Who pays the server's commands (``server`` when it never chose)."""
        value = await self._sql.scalar(
            select(guild_billing.c.mode).where(guild_billing.c.guild_id == guild_id)
        )
        return BillingMode.SERVER if value is None else BillingMode(value)

    async def set_mode(self, guild_id: int, mode: BillingMode) -> None:
        """Set who pays the server's commands (``server`` removes the row)."""
        await self._sql.run(delete(guild_billing).where(guild_billing.c.guild_id == guild_id))
        if mode is not BillingMode.SERVER:
            await self._sql.run(guild_billing.insert().values(guild_id=guild_id, mode=mode.value))
