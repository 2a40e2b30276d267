"""Members' credit balances: purchases of credit packs in Discord, refunds, spends.

A pack is a consumable SKU of the application (Discord's Premium Apps) mapped to the cents it
credits (``CREDIT_PACKS``); a purchase is an entitlement. Money is exact Decimal cents; times
are UTC epoch seconds; ids are Discord snowflakes. ``docs/credits.md``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from decimal import Decimal


class BillingMode(enum.StrEnum):
    """Who pays a server's paid commands (``/config billing``).

    ``SERVER``: the server's key and budgets, as always (the default). ``MEMBERS``: every paid
    command is held and settled against the member's credit balance. ``SERVER_THEN_MEMBERS``:
    the server's budgets first; a request they refuse is paid from the member's balance.
    """

    SERVER = "server"
    MEMBERS = "members"
    SERVER_THEN_MEMBERS = "server-then-members"


class CreditEntryKind(enum.StrEnum):
    """What changed a member's balance: a pack bought, a purchase refunded, a command paid."""

    PURCHASE = "purchase"
    REFUND = "refund"
    SPEND = "spend"


@dataclass(frozen=True, slots=True)
class Entitlement:
    """A purchase as Discord reports it (an entitlement of a consumable SKU).

    Attributes:
        id: the entitlement's snowflake: the purchase's identity, credited once.
        sku_id: the SKU bought.
        user_id: the member who bought it.
        consumed: whether Discord already marks it consumed.
        deleted: whether Discord deleted it (a refund: listed only with
            ``exclude_deleted=false``).
    """

    id: int
    sku_id: int
    user_id: int
    consumed: bool = False
    deleted: bool = False


@dataclass(frozen=True, slots=True)
class CreditEntry:
    """One change of a member's balance, as the credit ledger keeps it.

    Attributes:
        kind: purchase, refund or spend.
        amount_cents: the change of the balance, signed (a purchase adds, the others take).
        cost_cents: (spend) the service's price the command was charged, before the markup;
            None otherwise.
        at: when it was recorded (a purchase: when it was credited).
        entitlement_id: (purchase, refund) the entitlement; None for a spend.
        sku_id: (purchase, refund) the pack's SKU.
        guild_id: (spend) the server the command ran in; (purchase, refund) the server the
            purchase was made in (its Ledger shows both), None when not known.
        model: (spend) the model charged.
        consumed_at: (purchase) when Discord confirmed it consumed; None until then.
        user_id: the member whose balance changed (given where the reader does not know it).
    """

    kind: CreditEntryKind
    amount_cents: Decimal
    cost_cents: Decimal | None
    at: float
    entitlement_id: int | None = None
    sku_id: int | None = None
    guild_id: int | None = None
    model: str | None = None
    consumed_at: float | None = None
    user_id: int | None = None


@dataclass(frozen=True, slots=True)
class CreditBalance:
    """A member's balance: what they own, and what requests in flight hold of it (cents).

    ``available_cents`` is what a new request may hold; it may be below zero after a refund.
    """

    balance_cents: Decimal
    held_cents: Decimal

    @property
    def available_cents(self) -> Decimal:
        """The balance less live holds, cents."""
        return self.balance_cents - self.held_cents
