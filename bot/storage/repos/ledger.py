"""The ledger, charge anomalies and reservations: :class:`LedgerStore`, both engines.

Tables ``ledger``, ``charge_anomalies`` and ``reservations``. The money columns hold integer
micro-cents (:mod:`bot.storage.money`, the only conversion): a sum is ``COALESCE(SUM(col), 0)``
in SQL, exact on both engines (SQLite: an integer; PostgreSQL: ``SUM(bigint)`` is ``numeric``),
made Decimal cents once by :func:`_cents`.

The writes that move money between the sums a budget check reads (a charge, a reservation) take
the guild's lock first, so that a check in another transaction sees them all or none
(``Sql.lock_guild``: PostgreSQL's advisory lock; SQLite's writer lock already serialises).
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from sqlalchemy import Select, delete, exists, func, insert, or_, select

from bot.domain import (
    TASK_ID_REUSED,
    Charge,
    ChargeAnomaly,
    Job,
    Kind,
    NewJob,
    Reservation,
    UsageRow,
)
from bot.storage import schema
from bot.storage.money import from_micro, to_micro
from bot.storage.repos.credits import BalanceSpend, CreditStore
from bot.storage.repos.dashboard import add_to_daily
from bot.storage.repos.dialect import upsert
from bot.storage.repos.guard import add_to_hours
from bot.storage.repos.jobs import JobStore
from bot.storage.sql import Row, Sql

_ledger = schema.ledger
_anomalies = schema.charge_anomalies
_reservations = schema.reservations


def _cents(micro: Any) -> Decimal:
    """A ``COALESCE(SUM(<micro-cent column>), 0)`` as exact Decimal cents.

    PostgreSQL's sum is a ``numeric`` (Decimal), SQLite's an integer: both integral, made an
    ``int`` before the one conversion.
    """
    return from_micro(int(micro))


def _for_user(stmt: Select[Any], user_column: Any, user_id: int | None) -> Select[Any]:
    """``stmt`` narrowed to one member when ``user_id`` is given."""
    return stmt if user_id is None else stmt.where(user_column == user_id)


def anomaly_from_row(row: Row) -> ChargeAnomaly:
    """Build a :class:`ChargeAnomaly` from a row of ``charge_anomalies`` (either engine)."""
    return ChargeAnomaly(
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        user_id=row["user_id"],
        kind=Kind(row["kind"]),
        model=row["model"],
        task_id=row["task_id"],
        reported_cost=row["reported_cost"],
        reported_remaining=row["reported_remaining"],
        reason=row["reason"],
        key_fingerprint=row["key_fingerprint"],
        at=row["at"],
    )


@dataclass(frozen=True, slots=True)
class Settlement:
    """What one settled request writes, as one unit (:meth:`LedgerStore.settle`).

    Attributes:
        guild_id: the guild (or wallet) whose lock the settlement holds.
        reservation_id: the reservation it settles (dropped); None: none was made.
        charge: the charge the service reported; None: a protocol anomaly, no charge.
        job: the job to store (an asynchronous request's); None: none.
        anomaly: a protocol anomaly to keep for the admins; None.
        reused: the anomaly to keep when the charged task's id is already stored for another
            task (``TASK_ID_REUSED``); None when the request has no task id.
        spend: the member balance's part (its hold replaced by the spend).
        again: an earlier try failed: whether it recorded the charge after all is read from
            the ledger (:meth:`LedgerStore.has_charge`), never from the reservation.
    """

    guild_id: int
    reservation_id: int | None
    charge: Charge | None
    job: NewJob | None
    anomaly: ChargeAnomaly | None
    reused: ChargeAnomaly | None
    spend: BalanceSpend
    again: bool = False


@dataclass(frozen=True, slots=True)
class Settled:
    """What :meth:`LedgerStore.settle` wrote.

    Attributes:
        job: the stored job; None when the settlement had none.
        earlier: an earlier try (or a replay of the spool) had recorded the charge: only the
            anomaly, the hold and the job were written now.
        duplicate: the charge's task was in the ledger already (this very charge): not
            counted again.
        reused: the charged task's id was already stored for another task (its anomaly kept).
    """

    job: Job | None
    earlier: bool = False
    duplicate: bool = False
    reused: bool = False


class LedgerStore:
    """The ledger (charges the service reported), protocol anomalies, and reservations.

    The ledger and the anomalies are append-only. Sums are exact Decimal cents.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def has_charge(self, charge: Charge) -> bool:
        """Whether this very charge is in the ledger (a replay's check of an earlier attempt).

        The same guild, member, kind, model, key, task id, ``at`` and amount.
        """
        task = (
            _ledger.c.task_id.is_(None)
            if charge.task_id is None
            else _ledger.c.task_id == charge.task_id
        )
        stmt = (
            select(_ledger.c.id)
            .where(
                _ledger.c.guild_id == charge.guild_id,
                _ledger.c.user_id == charge.user_id,
                _ledger.c.kind == charge.kind.value,
                _ledger.c.model == charge.model,
                _ledger.c.key_fingerprint == charge.key_fingerprint,
                task,
                _ledger.c.at == charge.at,
                _ledger.c.cost_micro == to_micro(charge.cost_cents),
            )
            .limit(1)
        )
        return await self._sql.scalar(stmt) is not None

    async def insert_charge(self, charge: Charge) -> bool:
        """Append the charge to the ledger; return False if its task was already recorded.

        A charge is identified by its key's fingerprint, kind, task id and time (the partial
        unique index ``ledger_task``): a task id is unique only within the key that made it,
        and a service may give one again, so a charge of another key, server or time under a
        known task id is appended. Only that uniqueness conflict, this very charge recorded
        again, is ignored: any other constraint violation (a negative cost...) raises, never
        passing for "already recorded".

        Raises:
            ConstraintError: the charge breaks another constraint of the ledger.
            ValueError: an amount is not a finite number.
        """
        remaining = charge.remaining_credits_cents
        micro = to_micro(charge.cost_cents)
        values = {
            "guild_id": charge.guild_id,
            "channel_id": charge.channel_id,
            "user_id": charge.user_id,
            "kind": charge.kind.value,
            "model": charge.model,
            "task_id": charge.task_id,
            "cost_micro": micro,
            "remaining_credits_micro": None if remaining is None else to_micro(remaining),
            "key_fingerprint": charge.key_fingerprint,
            "at": charge.at,
            "tier_role_id": charge.tier_role_id,
            "prompt_summary": charge.prompt_summary,
            "stage": charge.stage,
        }
        stmt = (
            upsert(self._sql, _ledger)
            .values(values)
            .on_conflict_do_nothing(
                index_elements=[
                    _ledger.c.key_fingerprint,
                    _ledger.c.kind,
                    _ledger.c.task_id,
                    _ledger.c.at,
                ],
                index_where=_ledger.c.task_id.is_not(None),
            )
        )
        async with self._sql.write() as tx:
            await tx.lock_guild(charge.guild_id)
            if await tx.run(stmt) == 0:
                return False
            # The dashboard's daily sums, in the same transaction: exactly the ledger's.
            await add_to_daily(
                tx,
                guild_id=charge.guild_id,
                at=charge.at,
                user_id=charge.user_id,
                kind=charge.kind.value,
                model=charge.model,
                tier_role_id=charge.tier_role_id,
                micro=micro,
                stage=charge.stage,
            )
            # The spend guard's hours, likewise: a retried settlement adds nothing twice.
            await add_to_hours(
                tx,
                guild_id=charge.guild_id,
                key_fingerprint=charge.key_fingerprint,
                at=charge.at,
                micro=micro,
            )
            return True

    async def settle(self, settlement: Settlement) -> Settled:
        """Write a settlement as one unit: one transaction under the guild's lock.

        The reservation is dropped and a member balance that held it pays the charge (once:
        keyed by the settlement); the charge is appended to the ledger (with the dashboard's
        and the guard's sums), the anomalies kept, the job stored. A budget check of the guild
        sees the reservation or the charge, never both nor neither.

        Raises:
            ConstraintError: a row breaks a constraint (nothing is kept).
            ValueError: an amount is not a finite number.
        """
        s = settlement
        async with self._sql.write() as tx:
            await tx.lock_guild(s.guild_id)
            ledger = LedgerStore(tx)
            if s.reservation_id is not None:
                await ledger.delete_reservation(s.reservation_id)
                await CreditStore(tx).settle_hold(s.reservation_id, s.charge, s.spend)
            if s.again and s.charge is not None and await ledger.has_charge(s.charge):
                if s.anomaly is not None:
                    await ledger.insert_anomaly(s.anomaly)
                return Settled(await _stored(tx, s.job), earlier=True)
            clash = s.reused  # the reported task's own fields, with TASK_ID_REUSED
            reused = (
                clash is not None
                and clash.task_id is not None
                and await ledger.task_given_before(
                    clash.key_fingerprint, clash.kind, clash.task_id, clash.at
                )
            )
            duplicate = s.charge is not None and not await ledger.insert_charge(s.charge)
            if s.anomaly is not None:
                await ledger.insert_anomaly(s.anomaly)
            if reused and clash is not None:
                await ledger.insert_anomaly(clash)
            return Settled(await _stored(tx, s.job), duplicate=duplicate, reused=reused)

    async def insert_anomaly(self, anomaly: ChargeAnomaly) -> bool:
        """Record a reported charge that breaks the protocol (not summed into budgets).

        Identified by the key's fingerprint, kind, task id, time and reason (the partial unique
        index ``charge_anomalies_task``).

        Returns:
            False if this anomaly was recorded already.
        """
        stmt = (
            upsert(self._sql, _anomalies)
            .values(
                guild_id=anomaly.guild_id,
                channel_id=anomaly.channel_id,
                user_id=anomaly.user_id,
                kind=anomaly.kind.value,
                model=anomaly.model,
                task_id=anomaly.task_id,
                reported_cost=anomaly.reported_cost,
                reported_remaining=anomaly.reported_remaining,
                reason=anomaly.reason,
                key_fingerprint=anomaly.key_fingerprint,
                at=anomaly.at,
            )
            .on_conflict_do_nothing(
                index_elements=[
                    _anomalies.c.key_fingerprint,
                    _anomalies.c.kind,
                    _anomalies.c.task_id,
                    _anomalies.c.at,
                    _anomalies.c.reason,
                ],
                index_where=_anomalies.c.task_id.is_not(None),
            )
        )
        return await self._sql.run(stmt) > 0

    async def task_given_before(
        self, key_fingerprint: str, kind: Kind, task_id: str, at: float
    ) -> bool:
        """Whether ``task_id`` of ``kind`` is already stored for another task.

        Another task: one charged at another time, or under another key (another guild's, a
        member's wallet's, a retired one). Read from the unique indexes ``ledger_task`` and
        ``charge_anomalies_task``, whose leading columns are the kind and the task id.
        """
        given = [
            exists().where(
                table.c.kind == kind.value,
                table.c.task_id == task_id,
                or_(table.c.key_fingerprint != key_fingerprint, table.c.at != at),
            )
            for table in (_ledger, _anomalies)
        ]
        return bool(await self._sql.scalar(select(or_(*given))))

    async def spent_since(
        self, guild_id: int, since: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents charged to the guild (or one member in it) at or after ``since``."""
        stmt = select(func.coalesce(func.sum(_ledger.c.cost_micro), 0)).where(
            _ledger.c.guild_id == guild_id, _ledger.c.at >= since
        )
        return _cents(await self._sql.scalar(_for_user(stmt, _ledger.c.user_id, user_id)))

    async def personal_spent_since(self, key_fingerprint: str | None, since: float) -> Decimal:
        """Return the cents charged to every member's wallet on the key at or after ``since``.

        ``key_fingerprint`` None: on any key.
        """
        stmt = select(func.coalesce(func.sum(_ledger.c.cost_micro), 0)).where(
            _ledger.c.guild_id < 0, _ledger.c.at >= since
        )
        if key_fingerprint is not None:
            stmt = stmt.where(_ledger.c.key_fingerprint == key_fingerprint)
        return _cents(await self._sql.scalar(stmt))

    async def recent_costs(self, model: str, limit: int = 20) -> list[Decimal]:
        """Return the cents of the model's last ``limit`` charges, newest first."""
        rows = await self._sql.all(
            select(_ledger.c.cost_micro)
            .where(_ledger.c.model == model)
            .order_by(_ledger.c.at.desc(), _ledger.c.id.desc())
            .limit(limit)
        )
        return [from_micro(row["cost_micro"]) for row in rows]

    async def usage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[UsageRow]:
        """Return the guild's (or a member's) charges at or after ``since``, per user, kind, model.

        Rows are ordered by cents, largest first, then user id, kind and model.
        """
        micro = func.sum(_ledger.c.cost_micro).label("micro")
        by = (_ledger.c.user_id, _ledger.c.kind, _ledger.c.model)
        stmt = select(*by, func.count().label("n"), micro).where(
            _ledger.c.guild_id == guild_id, _ledger.c.at >= since
        )
        stmt = _for_user(stmt, _ledger.c.user_id, user_id).group_by(*by)
        rows = await self._sql.all(stmt.order_by(micro.desc(), *by))
        return [
            UsageRow(r["user_id"], Kind(r["kind"]), r["model"], int(r["n"]), _cents(r["micro"]))
            for r in rows
        ]

    async def spent_by_stage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> dict[str, tuple[int, Decimal]]:
        """Return the guild's (or a member's) drafts' and Finals' charges at or after ``since``.

        Returns:
            ``stage -> (charges, cents)`` for the stages charged (``"draft"``, ``"final"``);
            charges of no stage are left out.
        """
        micro = func.sum(_ledger.c.cost_micro).label("micro")
        stmt = select(_ledger.c.stage, func.count().label("n"), micro).where(
            _ledger.c.guild_id == guild_id, _ledger.c.at >= since, _ledger.c.stage.is_not(None)
        )
        stmt = _for_user(stmt, _ledger.c.user_id, user_id).group_by(_ledger.c.stage)
        rows = await self._sql.all(stmt)
        return {r["stage"]: (int(r["n"]), _cents(r["micro"])) for r in rows}

    async def total(self, guild_id: int) -> Decimal:
        """Return all cents ever charged to the guild."""
        stmt = select(func.coalesce(func.sum(_ledger.c.cost_micro), 0)).where(
            _ledger.c.guild_id == guild_id
        )
        return _cents(await self._sql.scalar(stmt))

    async def last_remaining_credits(self, key_fingerprint: str) -> Decimal | None:
        """Return the balance, cents, the service last reported for the key; None if never.

        Charges whose reported balance was unusable (NULL) are skipped.
        """
        micro = await self._sql.scalar(
            select(_ledger.c.remaining_credits_micro)
            .where(
                _ledger.c.key_fingerprint == key_fingerprint,
                _ledger.c.remaining_credits_micro.is_not(None),
            )
            .order_by(_ledger.c.at.desc(), _ledger.c.id.desc())
            .limit(1)
        )
        return None if micro is None else from_micro(int(micro))

    async def anomalies(self, guild_id: int, since: float) -> list[ChargeAnomaly]:
        """Return the guild's protocol anomalies reported at or after ``since``, oldest first."""
        rows = await self._sql.all(
            select(_anomalies)
            .where(_anomalies.c.guild_id == guild_id, _anomalies.c.at >= since)
            .order_by(_anomalies.c.at, _anomalies.c.id)
        )
        return [anomaly_from_row(row) for row in rows]

    async def anomaly_count(self, guild_id: int, since: float) -> int:
        """Return how many charges of the guild at or after ``since`` had an absurd amount."""
        stmt = select(func.count()).where(
            _anomalies.c.guild_id == guild_id,
            _anomalies.c.at >= since,
            _anomalies.c.reason != TASK_ID_REUSED,
        )
        return int(await self._sql.scalar(stmt))

    async def reused_task_count(self, guild_id: int, since: float) -> int:
        """Return how many of the guild's tasks at or after ``since`` had an id given before."""
        stmt = select(func.count()).where(
            _anomalies.c.guild_id == guild_id,
            _anomalies.c.at >= since,
            _anomalies.c.reason == TASK_ID_REUSED,
        )
        return int(await self._sql.scalar(stmt))

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
        """Hold ``amount_cents`` (>= 0) for a request in flight until ``expires_at``.

        ``key_fingerprint`` names the key the request is sent with: while the reservation
        exists (expired or not, until deleted) that key is not dropped by
        :meth:`GuildStore.replace_api_key` nor released, since its task may
        be stored a moment later. None: unknown, every key of the guild is kept meanwhile.

        Raises:
            ConstraintError: a negative amount.
        """
        stmt = (
            insert(_reservations)
            .values(
                guild_id=guild_id,
                user_id=user_id,
                kind=kind.value,
                model=model,
                amount_micro=to_micro(amount_cents),
                created_at=created_at,
                expires_at=expires_at,
                key_fingerprint=key_fingerprint,
            )
            .returning(_reservations.c.id)
        )
        async with self._sql.write() as tx:
            await tx.lock_guild(guild_id)
            reservation_id = int(await tx.scalar(stmt))
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
        stmt = delete(_reservations).where(_reservations.c.id == reservation_id)
        return await self._sql.run(stmt) > 0

    async def expire_reservations(self, now: float) -> int:
        """Drop the reservations with ``expires_at <= now``; return how many."""
        return await self._sql.run(delete(_reservations).where(_reservations.c.expires_at <= now))

    async def reserved_cents(
        self, guild_id: int, now: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents held by the guild's (or a member's) reservations live at ``now``."""
        stmt = select(func.coalesce(func.sum(_reservations.c.amount_micro), 0)).where(
            _reservations.c.guild_id == guild_id, _reservations.c.expires_at > now
        )
        return _cents(await self._sql.scalar(_for_user(stmt, _reservations.c.user_id, user_id)))

    async def personal_reserved_cents(self, key_fingerprint: str | None, now: float) -> Decimal:
        """Return the cents held by every member's wallet's live reservations on the key.

        ``key_fingerprint`` None: on any key.
        """
        stmt = select(func.coalesce(func.sum(_reservations.c.amount_micro), 0)).where(
            _reservations.c.guild_id < 0, _reservations.c.expires_at > now
        )
        if key_fingerprint is not None:
            stmt = stmt.where(_reservations.c.key_fingerprint == key_fingerprint)
        return _cents(await self._sql.scalar(stmt))

    async def active_reservations(
        self, guild_id: int, now: float, *, kind: Kind, user_id: int | None = None
    ) -> int:
        """Return how many unexpired reservations of ``kind`` the guild (or a member) holds."""
        stmt = select(func.count()).where(
            _reservations.c.guild_id == guild_id,
            _reservations.c.expires_at > now,
            _reservations.c.kind == kind.value,
        )
        return int(await self._sql.scalar(_for_user(stmt, _reservations.c.user_id, user_id)))


async def _stored(sql: Sql, job: NewJob | None) -> Job | None:
    """``job`` stored in the settlement's transaction; None for none."""
    return None if job is None else await JobStore(sql).insert(job)
