"""Money as the ledger holds it: charges the service reported, anomalies, holds, usage.

Money is :class:`~decimal.Decimal` cents, exact as the service reported it (the database holds
integer micro-cents; see ``docs/storage.md``). Times are UTC epoch seconds (``float``).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Final

from bot.domain.jobs import Kind


@dataclass(frozen=True, slots=True)
class Charge:
    """One charge the service reported (``cost_cents`` of a generate response).

    Attributes:
        task_id: the service's task id; None for text, which has none. A charge with a
            task id is recorded at most once per kind.
        cost_cents: what the service charged, cents, exactly as reported.
        remaining_credits_cents: the balance the service reported after the charge, cents;
            None when it reported no usable number.
        key_fingerprint: :func:`bot.services.keys.fingerprint` of the key charged.
        at: when the charge was reported, UTC epoch seconds.
        tier_role_id: the role of the member's tier when they asked (see
            :class:`Tier`), for ``/usage`` by tier; None = the server defaults.
        prompt_summary: the prompt's summary of a charge without a job (``/text``, a
            conversation's turn), for the dashboard's Ledger; None for a job's charge (its
            job keeps it).
        stage: :data:`DRAFT` for a draft's charge, :data:`FINAL` for its Final's (Draft →
            Final, docs/creative.md); None for any other charge.
    """

    guild_id: int
    channel_id: int
    user_id: int
    kind: Kind
    model: str
    task_id: str | None
    cost_cents: Decimal
    remaining_credits_cents: Decimal | None
    key_fingerprint: str
    at: float
    tier_role_id: int | None = None
    prompt_summary: str | None = None
    stage: str | None = None


DRAFT: Final = "draft"
"""The stage of a draft's charge (``/image draft:true``, ``/video draft:true``)."""

FINAL: Final = "final"
"""The stage of a Final's charge: a draft's take made again on the member's model."""

STAGES: Final = (DRAFT, FINAL)
"""The stages a charge may have besides none (``ledger.stage``)."""


TASK_ID_REUSED: Final = "task id given again by the service"
"""The reason of the anomaly recorded when a charged task's id is stored for another task.

A task id is unique only within the account that made it (tasks are private to the key that
paid for them: ``docs/genapi-choices.md``, error for an unknown task id), and a service that
lost its id sequence may give one again even there: the new task is stored and
charged on its own (a charge is identified by its key, kind, task id and time), never merged
with the earlier one (of any key, guild or wallet), and this anomaly tells the admins.
"""


@dataclass(frozen=True, slots=True)
class ChargeAnomaly:
    """A reported charge that breaks the protocol, kept for the admins (not summed in budgets).

    Attributes:
        reported_cost: ``cost_cents`` as the service reported it (``str`` of the Decimal).
        reported_remaining: ``remaining_credits_cents`` as reported.
        reason: what is wrong with it, e.g. ``"negative cost_cents"``.
        at: when it was reported, UTC epoch seconds.

    The other fields are those of the :class:`Charge` it came with.
    """

    guild_id: int
    channel_id: int
    user_id: int
    kind: Kind
    model: str
    task_id: str | None
    reported_cost: str
    reported_remaining: str
    reason: str
    key_fingerprint: str
    at: float

    @classmethod
    def of(cls, charge: Charge, reported_remaining: Decimal | None, reason: str) -> ChargeAnomaly:
        """Build the anomaly of ``charge``, keeping the reported amounts' exact text."""
        return cls(
            charge.guild_id,
            charge.channel_id,
            charge.user_id,
            charge.kind,
            charge.model,
            charge.task_id,
            str(charge.cost_cents),
            str(reported_remaining),
            reason,
            charge.key_fingerprint,
            charge.at,
        )


@dataclass(frozen=True, slots=True)
class UsageRow:
    """Ledger charges grouped by user, kind and model: ``count`` charges, ``cents`` in total."""

    user_id: int
    kind: Kind
    model: str
    count: int
    cents: Decimal


@dataclass(frozen=True, slots=True)
class Reservation:
    """Budget held for a request in flight, until settled, released or expired.

    Attributes:
        amount_cents: cents held (known video cost, or the learned estimate).
        created_at: UTC epoch seconds.
        expires_at: UTC epoch seconds; after it the hold no longer counts.
        key_fingerprint: the fingerprint of the key the request is sent with: while the
            reservation lives that key is kept; None when not known (made before
            schema 0011, SQLite / 0006, PostgreSQL: it then keeps every key of its guild).
    """

    id: int
    guild_id: int
    user_id: int
    kind: Kind
    model: str
    amount_cents: Decimal
    created_at: float
    expires_at: float
    key_fingerprint: str | None = None
