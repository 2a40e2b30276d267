"""Rate windows: :class:`bot.genapi.rate_window.RateWindowRepository` for both engines.

The tables ``rate_requests`` and ``rate_blocks``, timed by the database's clock so that
processes on several machines agree on time without synchronised clocks. The
engines differ in two places, each a small branch: the clock's SQL expression (:data:`NOW`)
and how :meth:`RateWindowStore.take` excludes other processes (PostgreSQL: per-key advisory
locks; SQLite: its writer lock).

A take runs once per request to the service, so its round trips are most of the database's
load per poll (docs/benchmarks.md, sections 8 and 11). The limiter gives takes that arrive
together in one batch (``bot.genapi.group_commit``): one lock statement, one read and one
insert for all their keys, however many there are.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from sqlalchemy import (
    Boolean,
    Double,
    Integer,
    String,
    and_,
    any_,
    bindparam,
    case,
    delete,
    func,
    insert,
    literal_column,
    null,
    select,
    text,
    union_all,
)
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import ARRAY

from bot.genapi.rate_window import RateSnapshot, RateTake
from bot.storage.repos.dialect import upsert
from bot.storage.schema import rate_blocks, rate_requests
from bot.storage.sql import DialectName, Sql

NOW: Final[dict[DialectName, ColumnElement[float]]] = {
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
_KEYS: Final[dict[DialectName, Any]] = {
    # A batch's keys. PostgreSQL: one array parameter, so that the statement's text (and the
    # server's prepared statement) is the same whatever the batch's size; SQLite has no arrays
    # and prepares cheaply, so an IN list expanded per call.
    "sqlite": bindparam("p_keys", type_=String, expanding=True),
    "postgresql": bindparam("p_keys", type_=ARRAY(String)),
}


def _of_keys(column: ColumnElement[str], dialect: DialectName) -> ColumnElement[bool]:
    """``column`` is one of the batch's keys (``p_keys``)."""
    if dialect == "postgresql":
        return column == any_(_KEYS[dialect])
    return column.in_(_KEYS[dialect])


_SPAN: Final = bindparam("p_span", type_=Double)


def _window(dialect: DialectName) -> Any:
    """The clock, and the blocks and requests of the last ``p_span`` seconds of ``p_keys``.

    One read. Rows ``(now, key_id, at, background)``: a block has ``background`` NULL and its
    ``blocked_until`` in ``at``; a request, its time. There is always a row, the clock's (with
    NULLs when no key is blocked). The clock is read once: the ``head`` CTE is materialised
    (PostgreSQL does so anyway for ``clock_timestamp()``, a volatile function; SQLite would
    otherwise evaluate it per reference).
    """
    head = select(NOW[dialect].label("now")).cte("head").prefix_with("MATERIALIZED")
    blocks = select(
        head.c.now,
        rate_blocks.c.key_id,
        rate_blocks.c.blocked_until.label("at"),
        null().label("background"),
    ).select_from(head.outerjoin(rate_blocks, _of_keys(rate_blocks.c.key_id, dialect)))
    sent = select(
        head.c.now, rate_requests.c.key_id, rate_requests.c.at, rate_requests.c.background
    ).select_from(
        head.join(
            rate_requests,
            and_(
                _of_keys(rate_requests.c.key_id, dialect), rate_requests.c.at > head.c.now - _SPAN
            ),
        )
    )
    return union_all(blocks, sent).order_by(literal_column("at"))


_WINDOW: Final = {dialect: _window(dialect) for dialect in NOW}
_BACKGROUND: Final = bindparam("p_background", type_=Boolean)
_RECORD: Final = {
    dialect: insert(rate_requests).values(key_id=_KEY, at=now, background=_BACKGROUND)
    for dialect, now in NOW.items()
}
_INSERT_AT: Final = insert(rate_requests).values(
    key_id=_KEY, at=bindparam("p_at", type_=Double), background=_BACKGROUND
)


def _from_arrays(*, stamped: bool) -> Any:
    """PostgreSQL: ``INSERT … SELECT … FROM unnest(arrays)``, one statement for any number of rows.

    An executemany is one round trip per row there, and a multi-row ``VALUES`` is compiled and
    prepared once per size. ``stamped``: the rows carry their time (``p_at``); else each is
    stamped with the database's clock.
    """
    names = ("p_key", "p_at", "p_background") if stamped else ("p_key", "p_background")
    types: dict[str, Any] = {"p_key": String, "p_at": Double, "p_background": Boolean}
    rows = (
        func.unnest(*(bindparam(name, type_=ARRAY(types[name])) for name in names))
        .table_valued(*names)
        .render_derived()
    )
    at = rows.c.p_at if stamped else NOW["postgresql"]
    return insert(rate_requests).from_select(
        ["key_id", "at", "background"], select(rows.c.p_key, at, rows.c.p_background)
    )


_INSERT_ARRAYS: Final = {True: _from_arrays(stamped=True), False: _from_arrays(stamped=False)}


async def _insert(tx: Sql, rows: Sequence[dict[str, Any]], *, stamped: bool) -> None:
    """Record ``rows`` (``p_key``, ``p_background``, and ``p_at`` when ``stamped``) at once."""
    if tx.dialect == "postgresql":
        arrays = {name: [row[name] for row in rows] for name in rows[0]}
        await tx.run(_INSERT_ARRAYS[stamped], [arrays])
    else:
        await tx.run(_INSERT_AT if stamped else _RECORD[tx.dialect], rows)


_AGE: Final = bindparam("p_age", type_=Double)
_PRUNE: Final = {
    dialect: delete(rate_requests).where(
        rate_requests.c.key_id == _KEY, rate_requests.c.at <= now - _AGE
    )
    for dialect, now in NOW.items()
}


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
# last slot of a key's window; held to the end of the transaction. A batch locks its keys in
# one order, that of the locks' own numbers, so that two processes locking overlapping sets
# cannot deadlock (DISTINCT: two keys whose hashes collide share one lock, taken once).
_RATE_LOCKS: Final = text(
    "SELECT pg_advisory_xact_lock(:p_namespace, h) FROM "
    "(SELECT DISTINCT hashtext(k) AS h FROM unnest(CAST(:p_keys AS text[])) AS k "
    "ORDER BY h) AS locks"
).bindparams(bindparam("p_namespace", RATE_LOCK_NAMESPACE, type_=Integer))


class RateWindowStore:
    """The ``rate_requests`` and ``rate_blocks`` tables of the database (both engines)."""

    def __init__(self, sql: Sql) -> None:
        self._sql = sql
        self._pruned: dict[str, int] = {}

    async def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        """The key's requests of the last ``window`` seconds and its block (database's clock)."""
        seen = _Seen(await self._sql.all(_WINDOW[self._sql.dialect], _args([key_id], window)))
        return seen.snapshot(key_id, window)

    async def record(self, requests: Sequence[tuple[str, bool]], *, window: float) -> None:
        """Record ``requests`` at the database's now, in one transaction (one statement)."""
        if not requests:
            return
        rows = [{"p_key": key_id, "p_background": bg} for key_id, bg in requests]
        async with self._sql.write() as tx:
            await _insert(tx, rows, stamped=False)
            await self._prune(tx, {key_id for key_id, _ in requests}, window)

    async def take(self, takes: Sequence[RateTake]) -> list[float]:
        """Decide ``takes`` in order and record those allowed; per take, the seconds to wait.

        One write transaction, atomic per key across processes: SQLite's ``BEGIN IMMEDIATE``
        serialises every process on the file; PostgreSQL takes the keys' advisory locks first
        (held to the end of the transaction), then reads its clock, so a process that waited
        for a lock decides with the time it actually sends at. A second take of a key sees
        the first one's request. Five round trips on PostgreSQL however many takes.
        """
        if not takes:
            return []
        keys = sorted({take.key_id for take in takes})
        window = max(take.window for take in takes)
        async with self._sql.write() as tx:
            if tx.dialect == "postgresql":
                # Its own statement: under READ COMMITTED each statement reads a new snapshot,
                # so the read next sees what the locks' previous holders committed.
                await tx.all(_RATE_LOCKS, {"p_keys": keys})
            seen = _Seen(await tx.all(_WINDOW[tx.dialect], _args(keys, window)))
            delays: list[float] = []
            rows: list[dict[str, Any]] = []
            for take in takes:
                now, sent, blocked = seen.view(take.key_id, take.window)
                delay = take.decide(now, sent, blocked)
                delays.append(delay)
                if delay <= 0:
                    seen.add(take.key_id, take.background)
                    rows.append(
                        {"p_key": take.key_id, "p_at": now, "p_background": take.background}
                    )
            if rows:
                await _insert(tx, rows, stamped=True)
            await self._prune(tx, {row["p_key"] for row in rows}, window)
        return delays

    async def _prune(self, tx: Sql, written: Iterable[str], window: float) -> None:
        """Delete old rows of the keys just written to, now and then.

        A key's first write in this process, then every PRUNE_EVERY of its writes (a batch
        counts once), so the delete is not paid per request.
        """
        due = []
        for key_id in written:
            count = self._pruned.get(key_id, 0)
            self._pruned[key_id] = count + 1
            if count % PRUNE_EVERY == 0:
                due.append({"p_key": key_id, "p_age": RETAINED_WINDOWS * window})
        if due:
            await tx.run(_PRUNE[tx.dialect], due)

    async def block(self, key_id: str, seconds: float) -> None:
        """Block the key for ``seconds`` from the database's now (a longer block stays)."""
        await self._sql.run(_block(self._sql), [{"p_key": key_id, "p_seconds": seconds}])

    async def forget(self, key_id: str) -> None:
        """Delete the key's requests and block (a key the service rejected), one transaction."""
        self._pruned.pop(key_id, None)
        async with self._sql.write() as tx:
            await tx.run(delete(rate_requests).where(rate_requests.c.key_id == key_id))
            await tx.run(delete(rate_blocks).where(rate_blocks.c.key_id == key_id))


def _args(keys: Iterable[str], window: float) -> dict[str, Any]:
    return {"p_keys": list(keys), "p_span": window}


class _Seen:
    """:data:`_WINDOW`'s rows by key: the clock, each key's block and requests (oldest first)."""

    def __init__(self, rows: Sequence[Any]) -> None:
        self.now = float(rows[0]["now"])
        self._blocked: dict[str, float] = {}
        self._sent: dict[str, list[tuple[float, bool]]] = {}
        for row in rows:
            key_id, at = row["key_id"], row["at"]
            if key_id is None or at is None:
                continue
            if row["background"] is None:
                self._blocked[key_id] = float(at)
            else:
                self._sent.setdefault(key_id, []).append((float(at), bool(row["background"])))

    def view(self, key_id: str, window: float) -> tuple[float, list[tuple[float, bool]], float]:
        """``(now, sent, blocked_until)`` for a :data:`RateDecision` over ``window`` seconds."""
        since = self.now - window
        sent = [request for request in self._sent.get(key_id, ()) if request[0] > since]
        return self.now, sent, self._blocked.get(key_id, 0.0)

    def add(self, key_id: str, background: bool) -> None:
        """Count a request recorded now by this transaction (the next take of the key sees it)."""
        self._sent.setdefault(key_id, []).append((self.now, background))

    def snapshot(self, key_id: str, window: float) -> RateSnapshot:
        now, sent, blocked = self.view(key_id, window)
        return RateSnapshot(now=now, sent=sent, blocked_until=blocked)
