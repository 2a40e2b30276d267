"""Rate windows: :class:`bot.genapi.rate_window.RateWindowRepository` for both engines.

The tables ``rate_requests`` and ``rate_blocks``, timed by the database's clock so that
processes on several machines agree on time without synchronised clocks (issue 10). The
engines differ in two places, each a small branch: the clock's SQL expression (:data:`NOW`)
and how :meth:`RateWindowStore.take` excludes other processes (PostgreSQL: a per-key
advisory lock; SQLite: its writer lock).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    Double,
    Integer,
    String,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    select,
)
from sqlalchemy.sql.elements import ColumnElement

from bot.genapi.rate_window import RateDecision, RateSnapshot
from bot.storage.repos.dialect import upsert
from bot.storage.schema import rate_blocks, rate_requests
from bot.storage.sql import Engine, Sql

NOW: Final[dict[Engine, ColumnElement[float]]] = {
    # SQLite: millisecond resolution (``unixepoch('subsec')`` needs SQLite 3.42, and Debian 12
    # ships 3.40). PostgreSQL: clock_timestamp(), the time of the call, not of the
    # transaction's start (now()), so that a process that waited for a lock decides with the
    # time it actually sends at.
    "sqlite": literal_column("((julianday('now') - 2440587.5) * 86400.0)", Double),
    "postgresql": literal_column("extract(epoch FROM clock_timestamp())::float8", Double),
}
"""The database's clock, UTC epoch seconds, per engine."""

RATE_LOCK_NAMESPACE: Final = 0x67656E72
"""First half of PostgreSQL's per-key advisory lock (the second is ``hashtext(key_id)``);
distinct from the guild locks (one-argument form) and the migration lock."""

RETAINED_WINDOWS: Final = 10
"""Rows are kept this many windows (for operators' inspection), then deleted."""

PRUNE_EVERY: Final = 100
"""A key's old rows are deleted once every this many of its recorded writes."""

_KEY: Final = bindparam("p_key", type_=String)
_SINCE: Final = bindparam("p_since", type_=Double)

_SENT: Final = (
    select(rate_requests.c.at, rate_requests.c.background)
    .where(rate_requests.c.key_id == _KEY, rate_requests.c.at > _SINCE)
    .order_by(rate_requests.c.at)
)
_BLOCKED: Final = select(rate_blocks.c.blocked_until).where(rate_blocks.c.key_id == _KEY)
_SNAPSHOT_HEAD: Final = {
    dialect: select(now.label("now"), _BLOCKED.scalar_subquery().label("blocked"))
    for dialect, now in NOW.items()
}
_NOW_ROW: Final = {dialect: select(now.label("now")) for dialect, now in NOW.items()}
_BACKGROUND: Final = bindparam("p_background", type_=Boolean)
_RECORD: Final = {
    dialect: insert(rate_requests).values(key_id=_KEY, at=now, background=_BACKGROUND)
    for dialect, now in NOW.items()
}
_INSERT_AT: Final = insert(rate_requests).values(
    key_id=_KEY, at=bindparam("p_at", type_=Double), background=_BACKGROUND
)
_AGE: Final = bindparam("p_age", type_=Double)
_PRUNE: Final = {
    dialect: delete(rate_requests).where(
        rate_requests.c.key_id == _KEY, rate_requests.c.at <= now - _AGE
    )
    for dialect, now in NOW.items()
}
_PRUNE_BEFORE: Final = delete(rate_requests).where(
    rate_requests.c.key_id == _KEY, rate_requests.c.at <= bindparam("p_before", type_=Double)
)


def _block(sql: Sql) -> Any:
    # Built per call: a block follows a 429, rare.
    stmt = upsert(sql, rate_blocks).values(
        key_id=_KEY, blocked_until=NOW[sql.dialect] + bindparam("p_seconds", type_=Double)
    )
    # A longer block stays (CASE: the two-value max is MAX on SQLite, GREATEST on PostgreSQL).
    longer = case(
        (rate_blocks.c.blocked_until > stmt.excluded.blocked_until, rate_blocks.c.blocked_until),
        else_=stmt.excluded.blocked_until,
    )
    return stmt.on_conflict_do_update(
        index_elements=[rate_blocks.c.key_id], set_={"blocked_until": longer}
    )


# PostgreSQL only: transactions run concurrently, and two processes must never both take the
# last slot of a key's window; held to the end of the transaction.
_RATE_LOCK: Final = select(
    func.pg_advisory_xact_lock(
        bindparam("p_namespace", RATE_LOCK_NAMESPACE, type_=Integer), func.hashtext(_KEY)
    )
)


class RateWindowStore:
    """The ``rate_requests`` and ``rate_blocks`` tables of the database (both engines)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._pruned: dict[str, int] = {}

    async def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        """The key's requests of the last ``window`` seconds and its block (database's clock)."""
        row = await self._sql.one(_SNAPSHOT_HEAD[self._sql.dialect], {"p_key": key_id})
        assert row is not None
        now = float(row["now"])
        rows = await self._sql.all(_SENT, {"p_key": key_id, "p_since": now - window})
        return RateSnapshot(
            now=now,
            sent=[(float(r["at"]), bool(r["background"])) for r in rows],
            blocked_until=0.0 if row["blocked"] is None else float(row["blocked"]),
        )

    async def record(self, requests: Sequence[tuple[str, bool]], *, window: float) -> None:
        """Record ``requests`` at the database's now, in one transaction (one executemany)."""
        if not requests:
            return
        dialect = self._sql.dialect
        rows = [{"p_key": key_id, "p_background": bg} for key_id, bg in requests]
        async with self._sql.write() as tx:
            await tx.run(_RECORD[dialect], rows)
            # Old rows go with the first write of a key and then every PRUNE_EVERY writes, so
            # the delete is not paid per request.
            for key_id in {key_id for key_id, _ in requests}:
                count = self._pruned.get(key_id, 0)
                self._pruned[key_id] = count + 1
                if count % PRUNE_EVERY == 0:
                    row = {"p_key": key_id, "p_age": RETAINED_WINDOWS * window}
                    await tx.run(_PRUNE[dialect], [row])

    async def take(
        self, key_id: str, *, background: bool, window: float, decide: RateDecision
    ) -> float:
        """Record a request now if ``decide`` allows; else return the seconds to wait.

        One write transaction, atomic per key across processes: SQLite's ``BEGIN IMMEDIATE``
        serialises every process on the file; PostgreSQL takes the key's advisory lock first
        (held to the end of the transaction), then reads its clock, so a process that waited
        for the lock decides with the time it actually sends at.
        """
        async with self._sql.write() as tx:
            if tx.dialect == "postgresql":
                await tx.all(_RATE_LOCK, {"p_key": key_id})
            now = float(await tx.scalar(_NOW_ROW[tx.dialect]))
            before = now - RETAINED_WINDOWS * window
            await tx.run(_PRUNE_BEFORE, [{"p_key": key_id, "p_before": before}])
            rows = await tx.all(_SENT, {"p_key": key_id, "p_since": now - window})
            sent = [(float(r["at"]), bool(r["background"])) for r in rows]
            blocked = await tx.scalar(_BLOCKED, {"p_key": key_id})
            delay = decide(now, sent, 0.0 if blocked is None else float(blocked))
            if delay > 0:
                return delay
            row = {"p_key": key_id, "p_at": now, "p_background": background}
            await tx.run(_INSERT_AT, [row])
            return 0.0

    async def block(self, key_id: str, seconds: float) -> None:
        """Block the key for ``seconds`` from the database's now (a longer block stays)."""
        await self._sql.run(_block(self._sql), [{"p_key": key_id, "p_seconds": seconds}])
