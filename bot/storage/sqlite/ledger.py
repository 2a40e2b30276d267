"""SQLite ledger: :class:`bot.storage.repositories.LedgerRepository` over an :class:`Executor`.

The money columns hold INTEGER micro-cents (:mod:`bot.storage.money`); sums are exact in SQL.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from bot.storage.models import Charge, ChargeAnomaly, Kind, Reservation, UsageRow
from bot.storage.money import from_micro, to_micro
from bot.storage.rows import anomaly_from_row
from bot.storage.sqlite.engine import Executor


def _for_user(sql: str, params: list[Any], user_id: int | None) -> tuple[str, list[Any]]:
    if user_id is None:
        return sql, params
    return sql + " AND user_id = ?", [*params, user_id]


class SqliteLedger:
    """Ledger, anomalies and reservations (contract: ``LedgerRepository``)."""

    def __init__(self, sql: Executor) -> None:
        self._sql = sql

    async def insert_charge(self, charge: Charge) -> bool:
        """Append the charge to the ledger; return False if its task was already recorded.

        Only that uniqueness conflict is ignored: any other constraint violation (a negative
        cost...) raises, never passing for "already recorded".

        Raises:
            ConstraintError: the charge breaks a constraint of the ledger.
            ValueError: an amount is not a finite number.
        """
        remaining = charge.remaining_credits_cents
        changed = await self._sql.run(
            "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id,"
            " cost_micro, remaining_credits_micro, key_fingerprint, at, tier_role_id)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (kind, task_id) WHERE task_id IS NOT NULL DO NOTHING",
            (
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
            ),
        )
        return changed > 0

    async def insert_anomaly(self, anomaly: ChargeAnomaly) -> bool:
        """Record a charge that breaks the protocol; False if its task was recorded already."""
        changed = await self._sql.run(
            "INSERT INTO charge_anomalies (guild_id, channel_id, user_id, kind, model, task_id,"
            " reported_cost, reported_remaining, reason, key_fingerprint, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (kind, task_id) WHERE task_id IS NOT NULL DO NOTHING",
            (
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
            ),
        )
        return changed > 0

    async def spent_since(
        self, guild_id: int, since: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents charged to the guild (or one member) at or after ``since``."""
        sql, params = _for_user(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = ? AND at >= ?",
            [guild_id, since],
            user_id,
        )
        return await self._sql.cents(sql, params)

    async def recent_costs(self, model: str, limit: int = 20) -> list[Decimal]:
        """Return the cents of the model's last ``limit`` charges, newest first."""
        rows = await self._sql.all(
            "SELECT cost_micro FROM ledger WHERE model = ? ORDER BY at DESC, id DESC LIMIT ?",
            (model, limit),
        )
        return [from_micro(r[0]) for r in rows]

    async def usage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[UsageRow]:
        """Return the guild's charges at or after ``since``, per user, kind and model."""
        sql, params = _for_user(
            "SELECT user_id, kind, model, COUNT(*) AS n, SUM(cost_micro) AS micro FROM ledger"
            " WHERE guild_id = ? AND at >= ?",
            [guild_id, since],
            user_id,
        )
        sql += " GROUP BY user_id, kind, model ORDER BY micro DESC, user_id, kind, model"
        return [
            UsageRow(r["user_id"], Kind(r["kind"]), r["model"], r["n"], from_micro(r["micro"]))
            for r in await self._sql.all(sql, params)
        ]

    async def total(self, guild_id: int) -> Decimal:
        """Return all cents ever charged to the guild."""
        return await self._sql.cents(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = ?", (guild_id,)
        )

    async def last_remaining_credits(self, key_fingerprint: str) -> Decimal | None:
        """Return the balance, cents, the service last reported for the key; None if never."""
        row = await self._sql.one(
            "SELECT remaining_credits_micro FROM ledger WHERE key_fingerprint = ?"
            " AND remaining_credits_micro IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1",
            (key_fingerprint,),
        )
        return None if row is None else from_micro(row[0])

    async def anomalies(self, guild_id: int, since: float) -> list[ChargeAnomaly]:
        """Return the guild's protocol anomalies reported at or after ``since``, oldest first."""
        rows = await self._sql.all(
            "SELECT * FROM charge_anomalies WHERE guild_id = ? AND at >= ? ORDER BY at, id",
            (guild_id, since),
        )
        return [anomaly_from_row(r) for r in rows]

    async def anomaly_count(self, guild_id: int, since: float) -> int:
        """Return how many protocol anomalies the guild had at or after ``since``."""
        return await self._sql.integer(
            "SELECT COUNT(*) FROM charge_anomalies WHERE guild_id = ? AND at >= ?",
            (guild_id, since),
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
        """Hold ``amount_cents`` for a request until ``expires_at`` (UTC epoch seconds)."""
        reservation_id = await self._sql.insert(
            "INSERT INTO reservations"
            " (guild_id, user_id, kind, model, amount_micro, created_at, expires_at,"
            " key_fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                guild_id,
                user_id,
                kind.value,
                model,
                to_micro(amount_cents),
                created_at,
                expires_at,
                key_fingerprint,
            ),
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
        return await self._sql.run("DELETE FROM reservations WHERE id = ?", (reservation_id,)) > 0

    async def expire_reservations(self, now: float) -> int:
        """Drop reservations expired at ``now``; return how many."""
        return await self._sql.run("DELETE FROM reservations WHERE expires_at <= ?", (now,))

    async def reserved_cents(
        self, guild_id: int, now: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents held by the guild's (or a member's) reservations live at ``now``."""
        sql, params = _for_user(
            "SELECT COALESCE(SUM(amount_micro), 0) FROM reservations"
            " WHERE guild_id = ? AND expires_at > ?",
            [guild_id, now],
            user_id,
        )
        return await self._sql.cents(sql, params)

    async def active_reservations(
        self, guild_id: int, now: float, *, kind: Kind, user_id: int | None = None
    ) -> int:
        """Return how many reservations of ``kind`` the guild (or a member) holds at ``now``."""
        sql, params = _for_user(
            "SELECT COUNT(*) FROM reservations WHERE guild_id = ? AND expires_at > ? AND kind = ?",
            [guild_id, now, kind.value],
            user_id,
        )
        return await self._sql.integer(sql, params)
