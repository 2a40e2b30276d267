"""PostgreSQL ledger: :class:`bot.storage.repositories.LedgerRepository` over an :class:`Executor`.

The money columns hold BIGINT micro-cents; ``SUM`` over them is an exact ``numeric``. Writes that
move money between the sums a budget check reads (a charge, a reservation) take the guild's
lock, so a check in another transaction sees them all or none.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from bot.storage.models import Charge, ChargeAnomaly, Kind, Reservation, UsageRow
from bot.storage.money import from_micro, to_micro
from bot.storage.postgres.engine import Executor
from bot.storage.rows import anomaly_from_row


def _for_user(sql: str, params: list[Any], user_id: int | None) -> tuple[str, list[Any]]:
    if user_id is None:
        return sql, params
    return f"{sql} AND user_id = ${len(params) + 1}", [*params, user_id]


class PgLedger:
    """Ledger, anomalies and reservations (contract: ``LedgerRepository``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def insert_charge(self, charge: Charge) -> bool:
        """Append the charge to the ledger; return False if its task was already recorded.

        Only that uniqueness conflict is ignored (``ON CONFLICT (kind, task_id)``): any other
        constraint violation raises, never passing for "already recorded".

        Raises:
            ConstraintError: the charge breaks another constraint of the ledger.
            ValueError: an amount is not a finite number.
        """
        remaining = charge.remaining_credits_cents
        values = (
            charge.guild_id,
            charge.channel_id,
            charge.user_id,
            charge.kind.value,
            charge.model,
            charge.task_id,
            to_micro(charge.cost_cents),
            None if remaining is None else to_micro(remaining),
            charge.key_fingerprint,
            charge.at,
            charge.tier_role_id,
        )
        async with self._sql.write() as tx:
            await tx.lock_guild(charge.guild_id)
            inserted = await tx.returning(
                "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id,"
                " cost_micro, remaining_credits_micro, key_fingerprint, at, tier_role_id)"
                " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
                " ON CONFLICT (kind, task_id) WHERE task_id IS NOT NULL DO NOTHING RETURNING id",
                *values,
            )
        return inserted is not None

    async def insert_anomaly(self, anomaly: ChargeAnomaly) -> bool:
        """Record a charge that breaks the protocol; False if its task was recorded already."""
        inserted = await self._sql.returning(
            "INSERT INTO charge_anomalies (guild_id, channel_id, user_id, kind, model, task_id,"
            " reported_cost, reported_remaining, reason, key_fingerprint, at)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)"
            " ON CONFLICT (kind, task_id) WHERE task_id IS NOT NULL DO NOTHING RETURNING id",
            anomaly.guild_id,
            anomaly.channel_id,
            anomaly.user_id,
            anomaly.kind.value,
            anomaly.model,
            anomaly.task_id,
            anomaly.reported_cost,
            anomaly.reported_remaining,
            anomaly.reason,
            anomaly.key_fingerprint,
            anomaly.at,
        )
        return inserted is not None

    async def spent_since(
        self, guild_id: int, since: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents charged to the guild (or one member in it) at or after ``since``."""
        sql, params = _for_user(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = $1 AND at >= $2",
            [guild_id, since],
            user_id,
        )
        return await self._sql.cents(sql, *params)

    async def recent_costs(self, model: str, limit: int = 20) -> list[Decimal]:
        """Return the cents of the model's last ``limit`` charges, newest first."""
        rows = await self._sql.all(
            "SELECT cost_micro FROM ledger WHERE model = $1 ORDER BY at DESC, id DESC LIMIT $2",
            model,
            limit,
        )
        return [from_micro(r[0]) for r in rows]

    async def usage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[UsageRow]:
        """Return the guild's (or a member's) charges at or after ``since``, per user, kind, model.

        Rows are ordered by cents, largest first, then user id, kind and model.
        """
        sql, params = _for_user(
            "SELECT user_id, kind, model, COUNT(*) AS n, SUM(cost_micro) AS micro FROM ledger"
            " WHERE guild_id = $1 AND at >= $2",
            [guild_id, since],
            user_id,
        )
        sql += " GROUP BY user_id, kind, model ORDER BY micro DESC, user_id, kind, model"
        return [
            UsageRow(
                r["user_id"], Kind(r["kind"]), r["model"], int(r["n"]), from_micro(int(r["micro"]))
            )
            for r in await self._sql.all(sql, *params)
        ]

    async def total(self, guild_id: int) -> Decimal:
        """Return all cents ever charged to the guild."""
        return await self._sql.cents(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = $1", guild_id
        )

    async def last_remaining_credits(self, key_fingerprint: str) -> Decimal | None:
        """Return the balance, cents, the service last reported for the key; None if never."""
        value = await self._sql.value(
            "SELECT remaining_credits_micro FROM ledger WHERE key_fingerprint = $1"
            " AND remaining_credits_micro IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1",
            key_fingerprint,
        )
        return None if value is None else from_micro(value)

    async def anomalies(self, guild_id: int, since: float) -> list[ChargeAnomaly]:
        """Return the guild's protocol anomalies reported at or after ``since``, oldest first."""
        rows = await self._sql.all(
            "SELECT * FROM charge_anomalies WHERE guild_id = $1 AND at >= $2 ORDER BY at, id",
            guild_id,
            since,
        )
        return [anomaly_from_row(r) for r in rows]

    async def anomaly_count(self, guild_id: int, since: float) -> int:
        """Return how many protocol anomalies the guild had at or after ``since``."""
        return await self._sql.integer(
            "SELECT COUNT(*) FROM charge_anomalies WHERE guild_id = $1 AND at >= $2",
            guild_id,
            since,
        )

    # -- reservations -------------------------------------------------------------------------

    async def add_reservation(
        self,
        *,
        guild_id: int,
        user_id: int,
        kind: Kind,
        model: str,
        amount_cents: Decimal,
        created_at: float,
        expires_at: float,
        key_fingerprint: str | None = None,
    ) -> Reservation:
        """Hold ``amount_cents`` for a request until ``expires_at`` (UTC epoch seconds).

        Raises:
            ConstraintError: a negative amount.
        """
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            reservation_id = await tx.returning(
                "INSERT INTO reservations"
                " (guild_id, user_id, kind, model, amount_micro, created_at, expires_at,"
                " key_fingerprint) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                guild_id,
                user_id,
                kind.value,
                model,
                to_micro(amount_cents),
                created_at,
                expires_at,
                key_fingerprint,
            )
        return Reservation(
            reservation_id,
            guild_id,
            user_id,
            kind,
            model,
            amount_cents,
            created_at,
            expires_at,
            key_fingerprint,
        )

    async def delete_reservation(self, reservation_id: int) -> bool:
        """Drop a reservation; return False if it was already gone (expired or settled)."""
        return await self._sql.run("DELETE FROM reservations WHERE id = $1", reservation_id) > 0

    async def expire_reservations(self, now: float) -> int:
        """Drop reservations with ``expires_at <= now``; return how many."""
        return await self._sql.run("DELETE FROM reservations WHERE expires_at <= $1", now)

    async def reserved_cents(
        self, guild_id: int, now: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents held by the guild's (or a member's) reservations live at ``now``."""
        sql, params = _for_user(
            "SELECT COALESCE(SUM(amount_micro), 0) FROM reservations"
            " WHERE guild_id = $1 AND expires_at > $2",
            [guild_id, now],
            user_id,
        )
        return await self._sql.cents(sql, *params)

    async def active_reservations(
        self, guild_id: int, now: float, *, kind: Kind, user_id: int | None = None
    ) -> int:
        """Return how many unexpired reservations of ``kind`` the guild (or a member) holds."""
        sql, params = _for_user(
            "SELECT COUNT(*) FROM reservations WHERE guild_id = $1 AND expires_at > $2"
            " AND kind = $3",
            [guild_id, now, kind.value],
            user_id,
        )
        return await self._sql.integer(sql, *params)
