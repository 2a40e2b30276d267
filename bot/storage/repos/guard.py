"""The spend guard's tables, both engines: :class:`GuardStore`.

``guard_settings`` (a server's guard settings and its pause), ``guard_alerts`` (each alert
fired; its unique key makes "once per threshold and period" one ``INSERT`` that wins once) and
``guard_hourly`` (spend per UTC hour of a server or a key, written by :func:`add_to_hours` in
the charge's own transaction). A key's last reported balance is read from the ledger's rows
(``ledger_key_at``). Money in integer micro-cents
(:mod:`bot.storage.money`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sqlalchemy import and_, bindparam, func, or_, select, update
from sqlalchemy.dialects import postgresql, sqlite

from bot.storage.repos.dashboard import DAY
from bot.storage.repos.dialect import upsert
from bot.storage.schema import (
    guard_alerts,
    guard_hourly,
    guard_settings,
    ledger,
    ledger_daily,
)
from bot.storage.sql import Row, Sql

HOUR = 3600
"""Seconds in an hour bucket of ``guard_hourly``."""

SETTING_COLUMNS = (
    "thresholds",
    "member_notes",
    "destination",
    "runway_days",
    "credits_floor_cents",
    "anomaly_factor",
    "anomaly_floor_cents",
    "member_10min_cents",
    "pause_on_anomaly",
)
"""The columns of ``guard_settings`` an admin sets (the pause columns are the guard's)."""


def _hourly_upsert(insert: sqlite.Insert | postgresql.Insert) -> Any:
    return insert.on_conflict_do_update(
        index_elements=[guard_hourly.c.scope, guard_hourly.c.hour],
        set_={"micro": guard_hourly.c.micro + insert.excluded.micro},
    )


# Built once per engine (the hot path of every charge: a statement built per call costs about
# 0.1 ms of CPU more, docs/benchmarks.md).
_HOURLY = {
    "sqlite": _hourly_upsert(sqlite.insert(guard_hourly)),
    "postgresql": _hourly_upsert(postgresql.insert(guard_hourly)),
}
_MONTH_SUMS = select(ledger_daily.c.day, ledger_daily.c.dimension, ledger_daily.c.micro).where(
    ledger_daily.c.guild_id == bindparam("guild_id"),
    ledger_daily.c.day >= bindparam("since"),
    or_(
        and_(ledger_daily.c.dimension == "total", ledger_daily.c.bucket == ""),
        and_(ledger_daily.c.dimension == "member", ledger_daily.c.bucket == bindparam("member")),
        and_(ledger_daily.c.dimension == "tier", ledger_daily.c.bucket == bindparam("tier")),
    ),
)
_MONTH_TOTAL = select(func.coalesce(func.sum(ledger_daily.c.micro), 0)).where(
    ledger_daily.c.guild_id == bindparam("guild_id"),
    ledger_daily.c.day >= bindparam("since"),
    ledger_daily.c.dimension == "total",
    ledger_daily.c.bucket == "",
)
_CREDITS = (
    select(ledger.c.remaining_credits_micro, ledger.c.at)
    .where(
        ledger.c.key_fingerprint == bindparam("key_fingerprint"),
        ledger.c.remaining_credits_micro.is_not(None),
    )
    .order_by(ledger.c.at.desc(), ledger.c.id.desc())
    .limit(1)
)
_SETTINGS = select(guard_settings).where(guard_settings.c.guild_id == bindparam("guild_id"))


def hour_of(at: float) -> int:
    """The UTC hour ``at`` falls in, epoch seconds of its start."""
    return int(at // HOUR) * HOUR


async def add_to_hours(
    sql: Sql, *, guild_id: int, key_fingerprint: str | None, at: float, micro: int
) -> None:
    """Add one charge to its server's (and key's) UTC hour in ``guard_hourly``: one statement.

    Called by :meth:`bot.storage.repos.ledger.LedgerStore.insert_charge` in the charge's own
    transaction, only when the charge was appended (beside ``add_to_daily``): a settlement
    retried or replayed after it committed finds the charge recorded and adds nothing, so the
    hours stay exactly the ledger's (issue 38).
    """
    hour = hour_of(at)
    rows = [{"scope": f"g{guild_id}", "hour": hour, "micro": micro}]
    if key_fingerprint is not None:
        rows.append({"scope": f"k{key_fingerprint}", "hour": hour, "micro": micro})
    await sql.run(_HOURLY[sql.dialect], rows)


class GuardStore:
    """The guard's settings, alerts, keys' balances and hourly spend.

    Args:
        sql: the database's executor, or one transaction's.
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    # -- settings and the pause ----------------------------------------------------------

    async def settings(self, guild_id: int) -> Row | None:
        """Return the server's ``guard_settings`` row (None: every default, not paused)."""
        return await self._sql.one(_SETTINGS, {"guild_id": guild_id})

    async def set(self, guild_id: int, values: Mapping[str, Any]) -> None:
        """Write the given columns of the server's settings (others kept).

        Args:
            guild_id: the server.
            values: column name (:data:`SETTING_COLUMNS` or the pause's) to value; None = the
                default.
        """
        if not values:
            return
        stmt = upsert(self._sql, guard_settings).values(guild_id=guild_id, **values)
        await self._sql.run(
            stmt.on_conflict_do_update(
                index_elements=[guard_settings.c.guild_id], set_=dict(values)
            )
        )

    async def pause(self, guild_id: int) -> tuple[float, int] | None:
        """Return ``(paused_at, paused_by)`` while the server's paid requests are paused."""
        row = await self._sql.one(
            select(guard_settings.c.paused_at, guard_settings.c.paused_by).where(
                guard_settings.c.guild_id == guild_id, guard_settings.c.paused_at.is_not(None)
            )
        )
        return None if row is None else (row["paused_at"], int(row["paused_by"] or 0))

    async def set_pause(self, guild_id: int, at: float, by: int, reason: str) -> bool:
        """Pause the server's paid requests; return False when it was paused already."""
        stmt = upsert(self._sql, guard_settings).values(guild_id=guild_id)
        await self._sql.run(stmt.on_conflict_do_nothing())
        done = await self._sql.run(
            update(guard_settings)
            .where(guard_settings.c.guild_id == guild_id, guard_settings.c.paused_at.is_(None))
            .values(paused_at=at, paused_by=by, pause_reason=reason)
        )
        return done > 0

    async def clear_pause(self, guild_id: int) -> bool:
        """Resume the server's paid requests; return False when they were not paused."""
        done = await self._sql.run(
            update(guard_settings)
            .where(guard_settings.c.guild_id == guild_id, guard_settings.c.paused_at.is_not(None))
            .values(paused_at=None, paused_by=None, pause_reason=None)
        )
        return done > 0

    # -- alerts --------------------------------------------------------------------------

    async def fire(
        self,
        guild_id: int,
        kind: str,
        period: str,
        threshold: str,
        *,
        at: float,
        amount_micro: int,
        limit_micro: int | None,
        measured: str,
    ) -> bool:
        """Record an alert; return True only for the one ``INSERT`` that won.

        The unique key ``(guild_id, kind, period, threshold)`` makes every other attempt, in
        this process, after a restart or in another process, a no-op that returns False.
        """
        stmt = (
            upsert(self._sql, guard_alerts)
            .values(
                guild_id=guild_id,
                kind=kind,
                period=period,
                threshold=threshold,
                at=at,
                amount_micro=amount_micro,
                limit_micro=limit_micro,
                measured=measured,
            )
            .on_conflict_do_nothing(
                index_elements=[
                    guard_alerts.c.guild_id,
                    guard_alerts.c.kind,
                    guard_alerts.c.period,
                    guard_alerts.c.threshold,
                ]
            )
        )
        return await self._sql.run(stmt) > 0

    async def alerts(self, guild_id: int, limit: int = 50) -> Sequence[Row]:
        """Return the server's latest alerts, newest first."""
        return await self._sql.all(
            select(guard_alerts)
            .where(guard_alerts.c.guild_id == guild_id)
            .order_by(guard_alerts.c.at.desc(), guard_alerts.c.id.desc())
            .limit(limit)
        )

    # -- keys' balances and hourly spend ----------------------------------------------------

    async def add_to_hours(
        self, guild_id: int, key_fingerprint: str | None, at: float, micro: int
    ) -> None:
        """:func:`add_to_hours` in a transaction of its own (a test's or a backfill's hours)."""
        async with self._sql.write() as tx:
            await add_to_hours(
                tx, guild_id=guild_id, key_fingerprint=key_fingerprint, at=at, micro=micro
            )

    async def credits(self, key_fingerprint: str) -> tuple[int, float] | None:
        """Return the key's last reported balance, ``(micro-cents, at)``; None if never.

        The latest charge of the key whose balance was usable, through ``ledger_key_at``: a
        balance reported earlier but recorded late is older news.
        """
        row = await self._sql.one(_CREDITS, {"key_fingerprint": key_fingerprint})
        return None if row is None else (int(row["remaining_credits_micro"]), float(row["at"]))

    async def hourly(self, scope: str, since_hour: int, until_hour: int) -> dict[int, int]:
        """Return ``{hour: micro}`` of a scope's hours in ``[since_hour, until_hour)``.

        Hours without a charge are absent (0). ``scope``: ``"g<guild id>"`` or ``"k<fp>"``.
        """
        rows = await self._sql.all(
            select(guard_hourly.c.hour, guard_hourly.c.micro).where(
                guard_hourly.c.scope == scope,
                guard_hourly.c.hour >= since_hour,
                guard_hourly.c.hour < until_hour,
            )
        )
        return {int(r["hour"]): int(r["micro"]) for r in rows}

    # -- the sums the thresholds read (the dashboard's daily table) --------------------------

    async def month_total(self, guild_id: int, month_start: float) -> int:
        """Return the server's spend since ``month_start`` from ``ledger_daily``, micro-cents."""
        return int(
            await self._sql.scalar(_MONTH_TOTAL, {"guild_id": guild_id, "since": int(month_start)})
        )

    async def month_sums(
        self, guild_id: int, month_start: float, day_start: float, user_id: int, tier: str
    ) -> dict[tuple[str, str, bool], int]:
        """Return the server's month sums from ``ledger_daily``, micro-cents.

        Keys ``(dimension, bucket, today)``: ``("total", "", False)`` the month,
        ``("total", "", True)`` the day, and the same of ``("member", str(user_id))`` and
        ``("tier", tier)``. At most 93 rows (31 days x 3 buckets), through the primary key.
        """
        rows = await self._sql.all(
            _MONTH_SUMS,
            {"guild_id": guild_id, "since": int(month_start), "member": str(user_id), "tier": tier},
        )
        sums: dict[tuple[str, str, bool], int] = {}
        today = int(day_start)
        for r in rows:
            dimension = r["dimension"]
            bucket = {"total": "", "member": str(user_id), "tier": tier}[dimension]
            for is_today in (False, True):
                if is_today and int(r["day"]) != today:
                    continue
                key = (dimension, bucket, is_today)
                sums[key] = sums.get(key, 0) + int(r["micro"])
        return sums

    async def member_spent_since(self, guild_id: int, user_id: int, since: float) -> int:
        """Return a member's charges in the server at or after ``since``, micro-cents.

        Served by the ledger's index ``ledger_guild_user_at`` (a few minutes' rows).
        """
        return int(
            await self._sql.scalar(
                select(func.coalesce(func.sum(ledger.c.cost_micro), 0)).where(
                    ledger.c.guild_id == guild_id,
                    ledger.c.user_id == user_id,
                    ledger.c.at >= since,
                )
            )
        )

    async def drivers(
        self, guild_id: int, since: float, limit: int = 3
    ) -> tuple[list[tuple[int, int]], list[tuple[str, int]]]:
        """Return the members and the models that spent most at or after ``since``.

        Returns:
            ``([(user_id, micro)], [(model, micro)])``, largest first, ``limit`` of each.
        """
        micro = func.sum(ledger.c.cost_micro).label("micro")
        recent = and_(ledger.c.guild_id == guild_id, ledger.c.at >= since)
        users = await self._sql.all(
            select(ledger.c.user_id, micro)
            .where(recent)
            .group_by(ledger.c.user_id)
            .order_by(micro.desc())
            .limit(limit)
        )
        models = await self._sql.all(
            select(ledger.c.model, micro)
            .where(recent)
            .group_by(ledger.c.model)
            .order_by(micro.desc())
            .limit(limit)
        )
        return (
            [(int(r["user_id"]), int(r["micro"])) for r in users],
            [(str(r["model"]), int(r["micro"])) for r in models],
        )


__all__ = ["DAY", "HOUR", "SETTING_COLUMNS", "GuardStore", "add_to_hours", "hour_of"]
