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
    and_,
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

_BLOCKED: Final = select(rate_blocks.c.blocked_until).where(rate_blocks.c.key_id == _KEY)
_SPAN: Final = bindparam("p_span", type_=Double)


def _window(now: ColumnElement[float]) -> Any:
    """The key's clock, block and recorded requests of the last ``p_span`` seconds, one read.

    One row per request, oldest first (``at`` NULL when there is none), each carrying ``now``
    and ``blocked``. The clock is read once, in the ``head`` CTE: PostgreSQL materialises a
    CTE with a volatile function (``clock_timestamp()``), and SQLite computes the join's range
    from the one head row before it walks the index.
    """
    head = select(now.label("now"), _BLOCKED.scalar_subquery().label("blocked")).cte("head")
    joined = head.outerjoin(
        rate_requests,
        and_(rate_requests.c.key_id == _KEY, rate_requests.c.at > head.c.now - _SPAN),
    )
    return (
        select(head.c.now, head.c.blocked, rate_requests.c.at, rate_requests.c.background)
        .select_from(joined)
        .order_by(rate_requests.c.at)
    )


_WINDOW: Final = {dialect: _window(now) for dialect, now in NOW.items()}
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
        return _snapshot(
            await self._sql.all(_WINDOW[self._sql.dialect], _args(key_id, window)), window
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
                if self._due_for_pruning(key_id):
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
                # Its own statement: under READ COMMITTED each statement reads a new snapshot,
                # so the window read next sees what the lock's previous holder committed.
                await tx.all(_RATE_LOCK, {"p_key": key_id})
            seen = _snapshot(await tx.all(_WINDOW[tx.dialect], _args(key_id, window)), window)
            delay = decide(seen.now, seen.sent, seen.blocked_until)
            if delay > 0:
                return delay
            row = {"p_key": key_id, "p_at": seen.now, "p_background": background}
            await tx.run(_INSERT_AT, [row])
            if self._due_for_pruning(key_id):
                before = seen.now - RETAINED_WINDOWS * window
                await tx.run(_PRUNE_BEFORE, [{"p_key": key_id, "p_before": before}])
            return 0.0

    def _due_for_pruning(self, key_id: str) -> bool:
        """True on a key's first recorded write in this process, then every PRUNE_EVERY."""
        count = self._pruned.get(key_id, 0)
        self._pruned[key_id] = count + 1
        return count % PRUNE_EVERY == 0

    async def block(self, key_id: str, seconds: float) -> None:
        """Block the key for ``seconds`` from the database's now (a longer block stays)."""
        await self._sql.run(_block(self._sql), [{"p_key": key_id, "p_seconds": seconds}])


_SLACK: Final = 1.0
"""Seconds read beyond the window, then cut in Python against the reported clock: exact even
if an engine evaluated the join's bound a moment after the head's clock."""


def _args(key_id: str, window: float) -> dict[str, Any]:
    return {"p_key": key_id, "p_span": window + _SLACK}


def _snapshot(rows: Sequence[Any], window: float) -> RateSnapshot:
    """:data:`_WINDOW`'s rows as a snapshot, keeping the requests after ``now - window``."""
    now = float(rows[0]["now"])
    blocked = rows[0]["blocked"]
    since = now - window
    return RateSnapshot(
        now=now,
        sent=[
            (float(r["at"]), bool(r["background"]))
            for r in rows
            if r["at"] is not None and float(r["at"]) > since
        ],
        blocked_until=0.0 if blocked is None else float(blocked),
    )
