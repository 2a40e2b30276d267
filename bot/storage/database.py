"""The one module with SQL: the SQLite store, its migrations and every query.

One database file, opened twice: a *writer* connection whose transactions are serialised by an
:class:`asyncio.Lock` and ``BEGIN IMMEDIATE`` (so a check-then-write such as a budget reservation
is atomic, also against another process on the same file), and a ``query_only`` *reader*
connection that, thanks to WAL, sees only committed data and never waits for the writer.

Migrations are ``migrations/NNNN_name.sql``, applied in order at :meth:`Store.open`, each in
its own transaction together with the ``PRAGMA user_version`` bump, so a crash leaves the
database at the previous version, never in between.

Money: the columns hold INTEGER micro-cents (1 cent = :data:`MICRO_PER_CENT`), so sums are
exact in SQL; every method takes and returns :class:`~decimal.Decimal` cents, converted by
:func:`to_micro` and :func:`from_micro` and nowhere else. Times are UTC epoch seconds
(``float``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sqlite3
from collections.abc import AsyncIterator, Callable, Collection, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from decimal import ROUND_CEILING, Decimal, localcontext
from enum import Enum
from importlib import resources
from pathlib import Path
from typing import Any, Final, TypeAlias

import aiosqlite

from bot.clock import Clock, utc_datetime
from bot.storage.models import (
    Charge,
    ChargeAnomaly,
    DeliveryRoute,
    GuildSettings,
    Job,
    JobStatus,
    Kind,
    NewJob,
    Reservation,
    RetiredKey,
    UsageRow,
)

log = logging.getLogger(__name__)

BUSY_TIMEOUT_MS: Final = 5000
"""How long a connection waits for another one's write lock before failing, milliseconds."""

_MICRO_DIGITS: Final = 6
MICRO_PER_CENT: Final = 10**_MICRO_DIGITS
"""Units of the money columns per cent: a micro-cent, far below any price the spec shows."""


def to_micro(cents: Decimal | int) -> int:
    """Return ``cents`` as integer micro-cents, rounded *up* when finer than a micro-cent.

    Up, because a stored amount counts against budgets: it must never be less than what was
    charged. :func:`bot.services.billing.charge_anomaly` records the exact text of such a value.

    Raises:
        ValueError: ``cents`` is NaN or infinite.
    """
    if isinstance(cents, Decimal) and not cents.is_finite():  # before: no ceiling of NaN
        raise ValueError(f"not a finite amount of cents: {cents}")
    cents = Decimal(cents)
    with localcontext() as ctx:
        # Enough digits that the shift never rounds: the ceiling must see every digit sent.
        ctx.prec = max(ctx.prec, len(cents.as_tuple().digits) + 8)
        return int(cents.scaleb(_MICRO_DIGITS).to_integral_value(rounding=ROUND_CEILING))


def from_micro(micro: int) -> Decimal:
    """Return integer micro-cents as exact Decimal cents (``350_000 -> Decimal("0.35")``)."""
    cents = Decimal(micro).scaleb(-_MICRO_DIGITS)  # exact: a shift of the decimal point
    return cents.to_integral_value() if cents == cents.to_integral_value() else cents.normalize()


_MIGRATION_NAME = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


class _Unset(Enum):
    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Final = _Unset.UNSET
"""Sentinel of :meth:`Store.update_limits`: leave this limit as it is."""

LimitUpdate: TypeAlias = int | _Unset | None
"""A new limit: a value, None (back to the Settings default) or :data:`UNSET` (unchanged)."""


class SchemaTooNewError(RuntimeError):
    """The database was written by a newer version of the bot; start-up must stop.

    Attributes:
        found: the database's schema version (``PRAGMA user_version``).
        supported: the newest version this code knows.
    """

    def __init__(self, found: int, supported: int) -> None:
        super().__init__(
            f"The database has schema version {found}, but this version of the bot only knows "
            f"versions up to {supported}: it was last used by a newer release. Run that release "
            "(or restore a backup taken before the upgrade); refusing to start so that the "
            "data is not damaged."
        )
        self.found = found
        self.supported = supported


@dataclass(frozen=True, slots=True)
class Migration:
    """One numbered schema step: ``version`` is the ``user_version`` after it is applied."""

    version: int
    name: str
    sql: str


def load_migrations() -> list[Migration]:
    """Return the packaged migrations in order.

    Raises:
        RuntimeError: if the files are not numbered 1, 2, 3... without gaps (a packaging bug).
    """
    found: list[Migration] = []
    for entry in resources.files("bot.storage").joinpath("migrations").iterdir():
        match = _MIGRATION_NAME.match(entry.name)
        if match:
            found.append(Migration(int(match[1]), match[2], entry.read_text(encoding="utf-8")))
    found.sort(key=lambda m: m.version)
    if [m.version for m in found] != list(range(1, len(found) + 1)):
        raise RuntimeError(f"migrations are not numbered 1..n: {[m.version for m in found]}")
    return found


def split_statements(script: str) -> list[str]:
    """Split an SQL script into statements.

    ``sqlite3.complete_statement`` decides where a statement ends, so semicolons inside
    strings, comments or trigger bodies do not split. We run statements one by one rather
    than with ``executescript`` because that commits any open transaction first, and a
    migration must share one transaction with its ``user_version`` bump.
    """
    statements: list[str] = []
    pending = ""
    *pieces, tail = script.split(";")
    for piece in pieces:
        pending += piece + ";"
        if sqlite3.complete_statement(pending):
            statements.append(pending.strip())
            pending = ""
    # Text after the last complete statement: whitespace, a comment, or an unterminated
    # statement that SQLite will then report.
    pending += tail
    if pending.strip():
        statements.append(pending.strip())
    return statements


async def _connect(path: Path, *, query_only: bool) -> aiosqlite.Connection:
    # isolation_level=None: the sqlite3 module opens no implicit transactions; we issue
    # BEGIN IMMEDIATE / COMMIT ourselves.
    conn = await aiosqlite.connect(path, isolation_level=None)
    try:
        conn.row_factory = sqlite3.Row
        await conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS:d}")
        async with conn.execute("PRAGMA journal_mode = WAL") as cursor:
            row = await cursor.fetchone()
        if row is None or str(row[0]).lower() != "wal":
            raise RuntimeError(f"cannot put {path} in WAL mode (got {row and row[0]!r})")
        # FULL, not NORMAL: a reported charge must survive a power cut once committed.
        await conn.execute("PRAGMA synchronous = FULL")
        await conn.execute("PRAGMA foreign_keys = ON")
        if query_only:
            await conn.execute("PRAGMA query_only = ON")
    except BaseException:
        await conn.close()
        raise
    return conn


async def _user_version(conn: aiosqlite.Connection) -> int:
    async with conn.execute("PRAGMA user_version") as cursor:
        row = await cursor.fetchone()
    return int(row[0]) if row else 0


async def _rollback(conn: aiosqlite.Connection) -> None:
    # Unconditional: a cancelled BEGIN may still be queued in aiosqlite's thread and run just
    # before this; the queue keeps the order, so this ROLLBACK undoes it. "No transaction is
    # active" is then the harmless outcome of an error that SQLite already rolled back.
    try:
        await conn.execute("ROLLBACK")
    except sqlite3.OperationalError as exc:
        if "no transaction is active" not in str(exc):
            raise


async def _migrate(conn: aiosqlite.Connection, clock: Clock) -> int:
    migrations = load_migrations()
    supported = len(migrations)
    current = await _user_version(conn)
    if current > supported:
        raise SchemaTooNewError(current, supported)
    for migration in migrations[current:]:
        await conn.execute("BEGIN IMMEDIATE")
        try:
            # Another process may have applied it while we waited for the write lock.
            if await _user_version(conn) >= migration.version:
                await conn.execute("ROLLBACK")
                continue
            for statement in split_statements(migration.sql):
                await conn.execute(statement)
            await conn.execute(f"PRAGMA user_version = {migration.version:d}")
            await conn.execute(
                "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)",
                (
                    f"migration.{migration.version:04d}",
                    f"{migration.name} applied {utc_datetime(clock.time()).isoformat()}",
                ),
            )
            await conn.execute("COMMIT")
        except BaseException:
            await _rollback(conn)
            raise
        log.info("database migrated to version %d (%s)", migration.version, migration.name)
    return supported


_JOB_COLUMNS: Final = (
    "id, task_id, provider, poll_url, kind, model, guild_id, channel_id, message_id, user_id, "
    "prompt_summary, details, cost_micro, key_fingerprint, created_at, next_poll_at, status, "
    "finished_at, outputs, error, poll_count, announced_at, last_progress_at, unwatched_at, "
    "delivery_route, delivery_attempts, next_delivery_at, delivery_error"
)

_RESERVATION_COLUMNS: Final = (
    "id, guild_id, user_id, kind, model, amount_micro, created_at, expires_at"
)

_LIMIT_COLUMNS: Final = (
    "monthly_budget_cents",
    "user_daily_budget_cents",
    "max_pending_videos_per_user",
    "max_pending_videos_per_guild",
)


# The hot queries of the poller, named so that tests can check their plans (query_plan).
# Literal 'pending' (not a parameter) is what lets SQLite use the partial indexes of 0002.
_DUE_JOBS_SQL: Final = (
    f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status = 'pending' AND next_poll_at <= ?"
    " AND unwatched_at IS NULL{skip} ORDER BY next_poll_at LIMIT ?"
)
DUE_JOBS_SQL: Final = _DUE_JOBS_SQL.format(skip="")
NEXT_DUE_SQL: Final = (
    "SELECT MIN(next_poll_at) FROM jobs WHERE status = 'pending' AND unwatched_at IS NULL"
)
DUE_DELIVERIES_SQL: Final = (
    f"SELECT {_JOB_COLUMNS} FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
    " AND next_delivery_at <= ? ORDER BY next_delivery_at LIMIT ?"
)
NEXT_DELIVERY_SQL: Final = (
    "SELECT MIN(next_delivery_at) FROM jobs WHERE status <> 'pending' AND announced_at IS NULL"
)
UNANNOUNCED_JOBS_SQL: Final = (
    f"SELECT {_JOB_COLUMNS} FROM jobs"
    " WHERE status <> 'pending' AND announced_at IS NULL ORDER BY finished_at"
)

JOBS_LISTING_SQL: Final = {
    # Keyed by "for one member?"; served by jobs_listing and jobs_guild_listing (0003).
    True: f"SELECT {_JOB_COLUMNS} FROM jobs WHERE guild_id = ? AND user_id = ?"
    " ORDER BY created_at DESC, id DESC LIMIT ?",
    False: f"SELECT {_JOB_COLUMNS} FROM jobs WHERE guild_id = ?"
    " ORDER BY created_at DESC, id DESC LIMIT ?",
}


def _job(row: sqlite3.Row) -> Job:
    return Job(
        id=row["id"],
        task_id=row["task_id"],
        provider=row["provider"],
        poll_url=row["poll_url"],
        kind=Kind(row["kind"]),
        model=row["model"],
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        message_id=row["message_id"],
        user_id=row["user_id"],
        prompt_summary=row["prompt_summary"],
        details=json.loads(row["details"]),
        cost_cents=from_micro(row["cost_micro"]),
        key_fingerprint=row["key_fingerprint"],
        created_at=row["created_at"],
        next_poll_at=row["next_poll_at"],
        status=JobStatus(row["status"]),
        finished_at=row["finished_at"],
        outputs=tuple(json.loads(row["outputs"])),
        error=row["error"],
        poll_count=row["poll_count"],
        announced_at=row["announced_at"],
        last_progress_at=row["last_progress_at"],
        unwatched_at=row["unwatched_at"],
        delivery_route=DeliveryRoute(row["delivery_route"]),
        delivery_attempts=row["delivery_attempts"],
        next_delivery_at=row["next_delivery_at"],
        delivery_error=row["delivery_error"],
    )


def _reservation(row: sqlite3.Row) -> Reservation:
    return Reservation(
        id=row["id"],
        guild_id=row["guild_id"],
        user_id=row["user_id"],
        kind=Kind(row["kind"]),
        model=row["model"],
        amount_cents=from_micro(row["amount_micro"]),
        created_at=row["created_at"],
        expires_at=row["expires_at"],
    )


class Queries:
    """Read queries over one connection; shared by :class:`Store` and :class:`Transaction`."""

    def __init__(self, conn: aiosqlite.Connection) -> None:
        self._conn = conn

    async def _all(self, sql: str, params: Sequence[Any] = ()) -> list[sqlite3.Row]:
        return list(await self._conn.execute_fetchall(sql, params))

    async def _one(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Row | None:
        async with self._conn.execute(sql, params) as cursor:
            row: sqlite3.Row | None = await cursor.fetchone()
        return row

    async def _int(self, sql: str, params: Sequence[Any] = ()) -> int:
        # For aggregates written as COALESCE(..., 0): always exactly one row.
        row = await self._one(sql, params)
        assert row is not None
        return int(row[0])

    async def _cents(self, sql: str, params: Sequence[Any] = ()) -> Decimal:
        # For sums of a micro-cent column written as COALESCE(SUM(...), 0).
        return from_micro(await self._int(sql, params))

    async def query_plan(self, sql: str, params: Sequence[Any] = ()) -> list[str]:
        """Return the ``EXPLAIN QUERY PLAN`` details of ``sql`` (for tests and diagnostics)."""
        rows = await self._all(f"EXPLAIN QUERY PLAN {sql}", params)
        return [str(r["detail"]) for r in rows]

    # -- meta ---------------------------------------------------------------------------------

    async def get_meta(self, key: str) -> str | None:
        """Return the value stored under ``key``, or None."""
        row = await self._one("SELECT value FROM meta WHERE key = ?", (key,))
        return None if row is None else str(row["value"])

    # -- guild settings -----------------------------------------------------------------------

    async def guild_settings(self, guild_id: int) -> GuildSettings:
        """Return the guild's settings; defaults (all None, no channels) if it has none."""
        row = await self._one("SELECT * FROM guild_settings WHERE guild_id = ?", (guild_id,))
        if row is None:
            return GuildSettings.default(guild_id)
        channels = await self._all(
            "SELECT channel_id FROM allowed_channels WHERE guild_id = ?", (guild_id,)
        )
        return GuildSettings(
            guild_id=guild_id,
            api_key_ciphertext=row["api_key_ciphertext"],
            api_key_last4=row["api_key_last4"],
            monthly_budget_cents=row["monthly_budget_cents"],
            user_daily_budget_cents=row["user_daily_budget_cents"],
            max_pending_videos_per_user=row["max_pending_videos_per_user"],
            max_pending_videos_per_guild=row["max_pending_videos_per_guild"],
            allowed_channel_ids=frozenset(r["channel_id"] for r in channels),
            admin_channel_id=row["admin_channel_id"],
            notified_problem=row["notified_problem"],
        )

    # -- budgets --------------------------------------------------------------------------------

    async def retired_keys(self, guild_id: int) -> list[RetiredKey]:
        """Return the guild's retired API keys (migration 0004), most recently retired first."""
        rows = await self._all(
            "SELECT id, guild_id, fingerprint, ciphertext, last4, retired_at FROM retired_keys"
            " WHERE guild_id = ? ORDER BY retired_at DESC, id DESC",
            (guild_id,),
        )
        return [RetiredKey(**dict(row)) for row in rows]

    async def pending_jobs_on_key(self, guild_id: int, key_fingerprint: str) -> dict[Kind, int]:
        """Return how many of the guild's jobs submitted with the key are pending, by kind."""
        rows = await self._all(
            "SELECT kind, COUNT(*) AS n FROM jobs WHERE status = 'pending'"
            " AND guild_id = ? AND key_fingerprint = ? GROUP BY kind",
            (guild_id, key_fingerprint),
        )
        return {Kind(row["kind"]): int(row["n"]) for row in rows}

    async def spent_since(
        self, guild_id: int, since: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents charged to the guild (or one user in it) at or after ``since``."""
        sql = "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = ? AND at >= ?"
        params: list[Any] = [guild_id, since]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        return await self._cents(sql, params)

    async def reserved_cents(
        self, guild_id: int, now: float, *, user_id: int | None = None
    ) -> Decimal:
        """Return the cents held by the guild's (or a user's) reservations unexpired at ``now``."""
        sql = (
            "SELECT COALESCE(SUM(amount_micro), 0) FROM reservations"
            " WHERE guild_id = ? AND expires_at > ?"
        )
        params: list[Any] = [guild_id, now]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        return await self._cents(sql, params)

    async def active_reservations(
        self, guild_id: int, now: float, *, kind: Kind, user_id: int | None = None
    ) -> int:
        """Return how many reservations of ``kind`` the guild (or a user) holds at ``now``."""
        sql = "SELECT COUNT(*) FROM reservations WHERE guild_id = ? AND expires_at > ? AND kind = ?"
        params: list[Any] = [guild_id, now, kind.value]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        return await self._int(sql, params)

    async def pending_video_jobs(self, guild_id: int, *, user_id: int | None = None) -> int:
        """Return how many video jobs of the guild (or a user) are still pending."""
        # The literals must stay literals: they are what lets SQLite use the partial index.
        sql = (
            "SELECT COUNT(*) FROM jobs WHERE status = 'pending' AND kind = 'video' AND guild_id = ?"
        )
        params: list[Any] = [guild_id]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        return await self._int(sql, params)

    async def recent_costs(self, model: str, limit: int = 20) -> list[Decimal]:
        """Return the cents of the model's last ``limit`` charges, newest first."""
        rows = await self._all(
            "SELECT cost_micro FROM ledger WHERE model = ? ORDER BY at DESC, id DESC LIMIT ?",
            (model, limit),
        )
        return [from_micro(r[0]) for r in rows]

    # -- ledger reports -------------------------------------------------------------------------

    async def usage(
        self, guild_id: int, since: float, user_id: int | None = None
    ) -> list[UsageRow]:
        """Return the guild's charges at or after ``since``, per user, kind and model.

        Rows are ordered by cents, largest first.
        """
        sql = (
            "SELECT user_id, kind, model, COUNT(*) AS n, SUM(cost_micro) AS micro FROM ledger"
            " WHERE guild_id = ? AND at >= ?"
        )
        params: list[Any] = [guild_id, since]
        if user_id is not None:
            sql += " AND user_id = ?"
            params.append(user_id)
        sql += " GROUP BY user_id, kind, model ORDER BY micro DESC, user_id, kind, model"
        return [
            UsageRow(r["user_id"], Kind(r["kind"]), r["model"], r["n"], from_micro(r["micro"]))
            for r in await self._all(sql, params)
        ]

    async def ledger_total(self, guild_id: int) -> Decimal:
        """Return all cents ever charged to the guild."""
        return await self._cents(
            "SELECT COALESCE(SUM(cost_micro), 0) FROM ledger WHERE guild_id = ?", (guild_id,)
        )

    async def last_remaining_credits(self, key_fingerprint: str) -> Decimal | None:
        """Return the balance, cents, the service last reported for the key; None if never.

        Charges whose reported balance was unusable (NULL) are skipped.
        """
        row = await self._one(
            "SELECT remaining_credits_micro FROM ledger WHERE key_fingerprint = ?"
            " AND remaining_credits_micro IS NOT NULL ORDER BY at DESC, id DESC LIMIT 1",
            (key_fingerprint,),
        )
        return None if row is None else from_micro(row[0])

    async def charge_anomalies(self, guild_id: int, since: float) -> list[ChargeAnomaly]:
        """Return the guild's protocol anomalies reported at or after ``since``, oldest first."""
        rows = await self._all(
            "SELECT * FROM charge_anomalies WHERE guild_id = ? AND at >= ? ORDER BY at, id",
            (guild_id, since),
        )
        return [
            ChargeAnomaly(
                guild_id=r["guild_id"],
                channel_id=r["channel_id"],
                user_id=r["user_id"],
                kind=Kind(r["kind"]),
                model=r["model"],
                task_id=r["task_id"],
                reported_cost=r["reported_cost"],
                reported_remaining=r["reported_remaining"],
                reason=r["reason"],
                key_fingerprint=r["key_fingerprint"],
                at=r["at"],
            )
            for r in rows
        ]

    async def anomaly_count(self, guild_id: int, since: float) -> int:
        """Return how many protocol anomalies the guild had at or after ``since``."""
        return await self._int(
            "SELECT COUNT(*) FROM charge_anomalies WHERE guild_id = ? AND at >= ?",
            (guild_id, since),
        )

    # -- jobs -----------------------------------------------------------------------------------

    async def get_job(self, job_id: int) -> Job | None:
        """Return the job, or None."""
        row = await self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
        return None if row is None else _job(row)

    async def job_by_task(self, task_id: str) -> Job | None:
        """Return the job of the service's ``task_id``, or None."""
        row = await self._one(f"SELECT {_JOB_COLUMNS} FROM jobs WHERE task_id = ?", (task_id,))
        return None if row is None else _job(row)

    async def due_jobs(
        self, now: float, limit: int, *, skip_keys: Collection[str] = ()
    ) -> list[Job]:
        """Return up to ``limit`` pending jobs whose ``next_poll_at <= now``, earliest first.

        Served by the partial index ``jobs_due``: the cost follows the due jobs, not all jobs.

        Args:
            now: UTC epoch seconds.
            limit: the most jobs to return.
            skip_keys: key fingerprints whose jobs are left out (keys with no room to poll now),
                so that one key's backlog cannot fill the batch and starve the others.
        """
        skip = ""
        if skip_keys:
            skip = f" AND key_fingerprint NOT IN ({', '.join('?' * len(skip_keys))})"
        rows = await self._all(_DUE_JOBS_SQL.format(skip=skip), (now, *skip_keys, limit))
        return [_job(r) for r in rows]

    async def pending_count(self) -> int:
        """Return how many jobs are pending (counted on the ``jobs_due`` index)."""
        return await self._int("SELECT COUNT(*) FROM jobs WHERE status = 'pending'")

    async def next_due_at(self) -> float | None:
        """Return the earliest ``next_poll_at`` of the pending jobs, or None if there are none."""
        row = await self._one(NEXT_DUE_SQL)
        return None if row is None or row[0] is None else float(row[0])

    async def unannounced_jobs(self) -> list[Job]:
        """Return the finished jobs whose result was not posted yet, oldest first."""
        rows = await self._all(UNANNOUNCED_JOBS_SQL)
        return [_job(r) for r in rows]

    async def recent_jobs(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's most recent jobs, newest first, whatever their status (``/jobs``).

        Args:
            guild_id: the guild.
            user_id: only this member's jobs; None for the whole guild's.
            limit: the most jobs to return.
        """
        if user_id is None:
            rows = await self._all(JOBS_LISTING_SQL[False], (guild_id, limit))
        else:
            rows = await self._all(JOBS_LISTING_SQL[True], (guild_id, user_id, limit))
        return [_job(r) for r in rows]

    async def due_deliveries(self, now: float, limit: int) -> list[Job]:
        """Return up to ``limit`` finished, undelivered jobs whose delivery is due, oldest first.

        Args:
            now: UTC epoch seconds.
            limit: the most jobs to return.
        """
        rows = await self._all(DUE_DELIVERIES_SQL, (now, limit))
        return [_job(r) for r in rows]

    async def next_delivery_at(self) -> float | None:
        """Return when the next delivery attempt is due (UTC epoch seconds), or None."""
        row = await self._one(NEXT_DELIVERY_SQL)
        return None if row is None or row[0] is None else float(row[0])

    async def completion_seconds(self, model: str, limit: int = 20) -> list[float]:
        """Return how long the model's last ``limit`` completed jobs took, seconds, newest first."""
        rows = await self._all(
            "SELECT finished_at - created_at FROM jobs WHERE status = 'completed' AND model = ?"
            " ORDER BY finished_at DESC LIMIT ?",
            (model, limit),
        )
        return [float(r[0]) for r in rows]


class Transaction(Queries):
    """The writes, usable only inside :meth:`Store.write` (one ``BEGIN IMMEDIATE`` transaction).

    Reads made through it see the transaction's own writes and nobody else's in-between, which
    is what makes a check followed by a write atomic.
    """

    async def _run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute a write and return the number of rows it changed."""
        async with self._conn.execute(sql, params) as cursor:
            return cursor.rowcount

    async def _insert(self, sql: str, params: Sequence[Any]) -> int:
        """Execute an INSERT and return the new row id."""
        async with self._conn.execute(sql, params) as cursor:
            rowid = cursor.lastrowid
        assert rowid is not None
        return rowid

    async def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        await self._run("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    async def _ensure_guild(self, guild_id: int) -> None:
        await self._run("INSERT OR IGNORE INTO guild_settings (guild_id) VALUES (?)", (guild_id,))

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key and its last four characters."""
        await self._ensure_guild(guild_id)
        await self._run(
            "UPDATE guild_settings SET api_key_ciphertext = ?, api_key_last4 = ?"
            " WHERE guild_id = ?",
            (ciphertext, last4, guild_id),
        )

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key."""
        await self._run(
            "UPDATE guild_settings SET api_key_ciphertext = NULL, api_key_last4 = NULL"
            " WHERE guild_id = ?",
            (guild_id,),
        )

    async def retire_api_key(self, guild_id: int, key_fingerprint: str | None, at: float) -> None:
        """Move the guild's current key to ``retired_keys`` (if a pending job uses it) and clear it.

        Args:
            guild_id: the guild.
            key_fingerprint: the current key's fingerprint; None when it cannot be decrypted now
                (the key is then kept, as its jobs cannot be counted).
            at: UTC epoch seconds.
        """
        row = await self._one(
            "SELECT api_key_ciphertext, api_key_last4 FROM guild_settings WHERE guild_id = ?",
            (guild_id,),
        )
        if row is None or row["api_key_ciphertext"] is None:
            return
        in_use = key_fingerprint is None or await self._int(
            "SELECT COUNT(*) FROM jobs WHERE status = 'pending'"
            " AND guild_id = ? AND key_fingerprint = ?",
            (guild_id, key_fingerprint),
        )
        if in_use:
            await self._run(
                "INSERT OR REPLACE INTO retired_keys"
                " (guild_id, fingerprint, ciphertext, last4, retired_at) VALUES (?, ?, ?, ?, ?)",
                (guild_id, key_fingerprint, row["api_key_ciphertext"], row["api_key_last4"], at),
            )
        await self.clear_api_key(guild_id)

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired."""
        await self._run(
            "UPDATE OR IGNORE retired_keys SET fingerprint = ? WHERE id = ?",
            (key_fingerprint, retired_id),
        )
        # Ignored: another row holds the same key already; this copy is not needed.
        await self._run(
            "DELETE FROM retired_keys WHERE id = ? AND fingerprint IS NULL", (retired_id,)
        )

    async def delete_released_keys(self) -> int:
        """Delete the retired keys no pending job uses; return how many."""
        return await self._run(
            "DELETE FROM retired_keys WHERE fingerprint IS NOT NULL AND NOT EXISTS ("
            " SELECT 1 FROM jobs WHERE jobs.status = 'pending'"
            " AND jobs.guild_id = retired_keys.guild_id"
            " AND jobs.key_fingerprint = retired_keys.fingerprint)"
        )

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Replace every stored key's ciphertext (current and retired) by ``reencrypt(it)``.

        Returns:
            How many ciphertexts were replaced.
        """
        count = 0
        for row in await self._all(
            "SELECT guild_id, api_key_ciphertext FROM guild_settings"
            " WHERE api_key_ciphertext IS NOT NULL"
        ):
            await self._run(
                "UPDATE guild_settings SET api_key_ciphertext = ? WHERE guild_id = ?",
                (reencrypt(row["api_key_ciphertext"]), row["guild_id"]),
            )
            count += 1
        for row in await self._all("SELECT id, ciphertext FROM retired_keys"):
            await self._run(
                "UPDATE retired_keys SET ciphertext = ? WHERE id = ?",
                (reencrypt(row["ciphertext"]), row["id"]),
            )
            count += 1
        return count

    async def update_limits(self, guild_id: int, changes: dict[str, int | None]) -> None:
        """Set the given limit columns (names from a fixed list, values cents or counts).

        Raises:
            ValueError: for a name that is not a limit column.
        """
        unknown = set(changes) - set(_LIMIT_COLUMNS)
        if unknown:
            raise ValueError(f"not limit columns: {sorted(unknown)}")
        if not changes:
            return
        await self._ensure_guild(guild_id)
        # Column names come from _LIMIT_COLUMNS (checked above), never from user input.
        assignments = ", ".join(f"{name} = ?" for name in changes)
        await self._run(
            f"UPDATE guild_settings SET {assignments} WHERE guild_id = ?",
            [*changes.values(), guild_id],
        )

    async def set_allowed_channels(self, guild_id: int, channel_ids: Iterable[int]) -> None:
        """Replace the guild's allowed channels (empty = commands allowed everywhere)."""
        await self._ensure_guild(guild_id)
        await self._run("DELETE FROM allowed_channels WHERE guild_id = ?", (guild_id,))
        await self._conn.executemany(
            "INSERT OR IGNORE INTO allowed_channels (guild_id, channel_id) VALUES (?, ?)",
            [(guild_id, channel_id) for channel_id in channel_ids],
        )

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        await self._ensure_guild(guild_id)
        await self._run(
            "UPDATE guild_settings SET admin_channel_id = ? WHERE guild_id = ?",
            (channel_id, guild_id),
        )

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were told about; return True if it differs from before."""
        current = (await self.guild_settings(guild_id)).notified_problem
        if current == problem:
            return False
        await self._ensure_guild(guild_id)
        await self._run(
            "UPDATE guild_settings SET notified_problem = ? WHERE guild_id = ?",
            (problem, guild_id),
        )
        return True

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
    ) -> Reservation:
        """Hold ``amount_cents`` for a request until ``expires_at`` (UTC epoch seconds)."""
        reservation_id = await self._insert(
            "INSERT INTO reservations"
            " (guild_id, user_id, kind, model, amount_micro, created_at, expires_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            (guild_id, user_id, kind.value, model, to_micro(amount_cents), created_at, expires_at),
        )
        return Reservation(
            reservation_id, guild_id, user_id, kind, model, amount_cents, created_at, expires_at
        )

    async def delete_reservation(self, reservation_id: int) -> bool:
        """Drop a reservation; return False if it was already gone (expired or settled)."""
        return await self._run("DELETE FROM reservations WHERE id = ?", (reservation_id,)) > 0

    async def expire_reservations(self, now: float) -> int:
        """Drop reservations expired at ``now``; return how many."""
        return await self._run("DELETE FROM reservations WHERE expires_at <= ?", (now,))

    async def insert_charge(self, charge: Charge) -> bool:
        """Append the charge to the ledger; return False if its task was already recorded.

        Only that uniqueness conflict is ignored: any other constraint violation (a negative
        cost...) raises, never passing for "already recorded".

        Raises:
            sqlite3.IntegrityError: the charge breaks a constraint of the ledger.
            ValueError: an amount is not a finite number.
        """
        remaining = charge.remaining_credits_cents
        changed = await self._run(
            "INSERT INTO ledger (guild_id, channel_id, user_id, kind, model, task_id,"
            " cost_micro, remaining_credits_micro, key_fingerprint, at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
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
            ),
        )
        return changed > 0

    async def insert_anomaly(self, anomaly: ChargeAnomaly) -> bool:
        """Record a charge that breaks the protocol; False if its task was recorded already."""
        changed = await self._run(
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

    async def insert_job(self, job: NewJob) -> Job:
        """Store a pending job and return it; if its task is already stored, return that one."""
        await self._run(
            "INSERT INTO jobs (task_id, provider, poll_url, kind, model, guild_id, channel_id,"
            " message_id, user_id, prompt_summary, details, cost_micro, key_fingerprint,"
            " created_at, next_poll_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
            " ON CONFLICT (task_id) DO NOTHING",
            (
                job.task_id,
                job.provider,
                job.poll_url,
                job.kind.value,
                job.model,
                job.guild_id,
                job.channel_id,
                job.message_id,
                job.user_id,
                job.prompt_summary,
                json.dumps(dict(job.details), sort_keys=True),
                to_micro(job.cost_cents),
                job.key_fingerprint,
                job.created_at,
                job.next_poll_at,
            ),
        )
        stored = await self.job_by_task(job.task_id)
        assert stored is not None
        return stored

    async def schedule_poll(self, job_id: int, next_poll_at: float, poll_count: int) -> None:
        """Set when a pending job is polled next and how many polls were made."""
        await self._run(
            "UPDATE jobs SET next_poll_at = ?, poll_count = ? WHERE id = ? AND status = 'pending'",
            (next_poll_at, poll_count, job_id),
        )

    async def lease_jobs(self, job_ids: Collection[int], until: float) -> None:
        """Push pending jobs' next poll to ``until`` while a poll of each is under way."""
        await self._run(
            f"UPDATE jobs SET next_poll_at = ? WHERE status = 'pending'"
            f" AND id IN ({', '.join('?' * len(job_ids))})",
            (until, *job_ids),
        )

    async def finish_job(
        self,
        job_id: int,
        status: JobStatus,
        outputs: Sequence[str],
        error: str | None,
        finished_at: float,
    ) -> bool:
        """Mark a pending job finished; return True only the first time (exactly once).

        Raises:
            ValueError: if ``status`` is PENDING.
        """
        if status is JobStatus.PENDING:
            raise ValueError("a job cannot finish as pending")
        return (
            await self._run(
                "UPDATE jobs SET status = ?, outputs = ?, error = ?, finished_at = ?,"
                " next_delivery_at = ?, unwatched_at = NULL WHERE id = ? AND status = 'pending'",
                (status.value, json.dumps(list(outputs)), error, finished_at, finished_at, job_id),
            )
            > 0
        )

    async def mark_announced(
        self, job_id: int, at: float, route: DeliveryRoute = DeliveryRoute.PLACEHOLDER
    ) -> bool:
        """Record that the job's result was delivered by ``route``; True only the first time."""
        return (
            await self._run(
                "UPDATE jobs SET announced_at = ?, delivery_route = ?, next_delivery_at = NULL"
                " WHERE id = ? AND announced_at IS NULL",
                (at, route.value, job_id),
            )
            > 0
        )

    async def schedule_delivery(
        self,
        job_id: int,
        route: DeliveryRoute,
        attempts: int,
        next_at: float,
        error: str | None,
    ) -> None:
        """Set an undelivered job's next delivery attempt: its route, failures so far, when."""
        await self._run(
            "UPDATE jobs SET delivery_route = ?, delivery_attempts = ?, next_delivery_at = ?,"
            " delivery_error = ? WHERE id = ? AND announced_at IS NULL AND status <> 'pending'",
            (route.value, attempts, next_at, error, job_id),
        )

    async def lease_deliveries(self, job_ids: Collection[int], until: float) -> None:
        """Push undelivered jobs' next delivery attempt to ``until`` while one is under way."""
        await self._run(
            "UPDATE jobs SET next_delivery_at = ? WHERE announced_at IS NULL"
            f" AND id IN ({', '.join('?' * len(job_ids))})",
            (until, *job_ids),
        )

    async def set_unwatched(self, job_id: int, at: float | None) -> bool:
        """Stop (``at``) or resume (None) watching a pending job; True if it was pending."""
        return (
            await self._run(
                "UPDATE jobs SET unwatched_at = ? WHERE id = ? AND status = 'pending'",
                (at, job_id),
            )
            > 0
        )

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the job's placeholder message was last updated."""
        await self._run("UPDATE jobs SET last_progress_at = ? WHERE id = ?", (at, job_id))

    async def set_job_message(
        self, job_id: int, message_id: int, due_at: float | None = None
    ) -> None:
        """Record the job's placeholder message; a pending job falls due by ``due_at``."""
        await self._run(
            "UPDATE jobs SET message_id = ?,"
            " next_poll_at = CASE WHEN ? IS NULL OR status <> 'pending' THEN next_poll_at"
            " ELSE MIN(next_poll_at, ?) END WHERE id = ?",
            (message_id, due_at, due_at, job_id),
        )


class Store(Queries):
    """The bot's database. Reads go straight to the reader connection; writes via :meth:`write`.

    Build it with :meth:`open`, release it with :meth:`close`.
    """

    def __init__(
        self,
        writer: aiosqlite.Connection,
        reader: aiosqlite.Connection,
        schema_version: int,
    ) -> None:
        super().__init__(reader)
        self._writer = writer
        self._tx = Transaction(writer)
        self._write_lock = asyncio.Lock()
        self._schema_version = schema_version

    @classmethod
    async def open(cls, path: Path, *, clock: Clock) -> Store:
        """Open (creating if needed) the database at ``path`` and migrate it to the latest schema.

        Args:
            path: the database file; its parent directory is created if missing.
            clock: stamps the migration records in ``meta``.

        Raises:
            SchemaTooNewError: the database was written by a newer version of the bot.
            sqlite3.Error: the file cannot be opened or a migration failed (nothing of that
                migration is kept).
        """
        path.parent.mkdir(parents=True, exist_ok=True)
        writer = await _connect(path, query_only=False)
        try:
            version = await _migrate(writer, clock)
            reader = await _connect(path, query_only=True)
        except BaseException:
            await writer.close()
            raise
        return cls(writer, reader, version)

    async def close(self) -> None:
        """Close both connections (waits for a write in progress to finish)."""
        async with self._write_lock:
            await self._conn.close()
            await self._writer.close()

    @property
    def schema_version(self) -> int:
        """The schema version (``PRAGMA user_version``) the database is at."""
        return self._schema_version

    @asynccontextmanager
    async def write(self) -> AsyncIterator[Transaction]:
        """Run the block as one ``BEGIN IMMEDIATE`` transaction, one writer at a time.

        Commits when the block exits normally; rolls back (leaving nothing half-written) when it
        raises or is cancelled.

        Yields:
            The :class:`Transaction` whose methods read and write inside the transaction.
        """
        async with self._write_lock:
            try:
                await self._writer.execute("BEGIN IMMEDIATE")
                yield self._tx
                await self._writer.execute("COMMIT")
            except BaseException:
                await _rollback(self._writer)
                raise

    # -- single writes, each its own transaction ----------------------------------------------

    async def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``, replacing any previous value."""
        async with self.write() as tx:
            await tx.set_meta(key, value)

    async def set_api_key(self, guild_id: int, ciphertext: bytes, last4: str) -> None:
        """Store the guild's encrypted API key (never a plaintext key) and its last four chars."""
        async with self.write() as tx:
            await tx.set_api_key(guild_id, ciphertext, last4)

    async def clear_api_key(self, guild_id: int) -> None:
        """Forget the guild's API key."""
        async with self.write() as tx:
            await tx.clear_api_key(guild_id)

    async def replace_api_key(
        self,
        guild_id: int,
        new: tuple[bytes, str] | None,
        *,
        retire: bool,
        old_fingerprint: str | None,
        at: float,
    ) -> None:
        """Store ``new`` (ciphertext, last4) as the guild's key, or remove its key (None).

        With ``retire``, the current key is first retired (see ``Transaction.retire_api_key``),
        in the same transaction: a pending job's key is never missing in between.
        """
        async with self.write() as tx:
            if retire:
                await tx.retire_api_key(guild_id, old_fingerprint, at)
            if new is not None:
                await tx.set_api_key(guild_id, *new)
            else:
                await tx.clear_api_key(guild_id)

    async def set_retired_fingerprint(self, retired_id: int, key_fingerprint: str) -> None:
        """Record the fingerprint of a retired key first decrypted after it was retired."""
        async with self.write() as tx:
            await tx.set_retired_fingerprint(retired_id, key_fingerprint)

    async def delete_released_keys(self) -> int:
        """Delete the retired keys no pending job uses; return how many."""
        async with self.write() as tx:
            return await tx.delete_released_keys()

    async def reencrypt_keys(self, reencrypt: Callable[[bytes], bytes]) -> int:
        """Re-encrypt every stored key in one transaction; return how many (all or none)."""
        async with self.write() as tx:
            return await tx.reencrypt_keys(reencrypt)

    async def update_limits(
        self,
        guild_id: int,
        *,
        monthly_budget_cents: LimitUpdate = UNSET,
        user_daily_budget_cents: LimitUpdate = UNSET,
        max_pending_videos_per_user: LimitUpdate = UNSET,
        max_pending_videos_per_guild: LimitUpdate = UNSET,
    ) -> None:
        """Change some of the guild's limits.

        Args:
            guild_id: the guild.
            monthly_budget_cents: cents per UTC calendar month.
            user_daily_budget_cents: cents per user per UTC day.
            max_pending_videos_per_user: cap on a user's pending videos.
            max_pending_videos_per_guild: cap on the guild's pending videos.

        Each argument is a value, None (back to the Settings default) or :data:`UNSET` (keep).

        Raises:
            sqlite3.IntegrityError: a negative budget or a cap below 1.
        """
        given = {
            "monthly_budget_cents": monthly_budget_cents,
            "user_daily_budget_cents": user_daily_budget_cents,
            "max_pending_videos_per_user": max_pending_videos_per_user,
            "max_pending_videos_per_guild": max_pending_videos_per_guild,
        }
        changes = {name: value for name, value in given.items() if not isinstance(value, _Unset)}
        async with self.write() as tx:
            await tx.update_limits(guild_id, changes)

    async def set_allowed_channels(self, guild_id: int, ids: Iterable[int]) -> None:
        """Replace the channels the commands may be used in (empty = everywhere)."""
        async with self.write() as tx:
            await tx.set_allowed_channels(guild_id, ids)

    async def set_admin_channel(self, guild_id: int, channel_id: int | None) -> None:
        """Set (or with None, clear) the channel for admin notices."""
        async with self.write() as tx:
            await tx.set_admin_channel(guild_id, channel_id)

    async def set_notified_problem(self, guild_id: int, problem: str | None) -> bool:
        """Record the problem admins were last told about (None = resolved).

        Returns:
            True if it changed, i.e. admins should be notified (once per problem).
        """
        async with self.write() as tx:
            return await tx.set_notified_problem(guild_id, problem)

    async def settle_reservation(
        self,
        reservation_id: int | None,
        charge: Charge | None,
        job: NewJob | None = None,
        anomaly: ChargeAnomaly | None = None,
    ) -> Job | None:
        """Record a reported charge, in one transaction with what depends on it.

        Drops the reservation (if any and not expired already), appends the charge to the
        ledger unless its task was recorded before, records the anomaly if given, and stores
        the job if given.

        Args:
            reservation_id: the reservation the charge replaces; None if there is none.
            charge: the charge for the ledger; None when the report could not be trusted
                (then ``anomaly`` says why).
            job: the job to store with it.
            anomaly: what was wrong with the report, for the admins.

        Returns:
            The stored job (the existing one if its task was stored before), or None.

        Raises:
            sqlite3.IntegrityError: a constraint other than "task already recorded" failed;
                nothing of the transaction is kept.
        """
        async with self.write() as tx:
            if reservation_id is not None:
                await tx.delete_reservation(reservation_id)
            if charge is not None and not await tx.insert_charge(charge):
                log.info(
                    "charge of task %s already in the ledger; not counted again", charge.task_id
                )
            if anomaly is not None:
                await tx.insert_anomaly(anomaly)
            return None if job is None else await tx.insert_job(job)

    async def release_reservation(self, reservation_id: int) -> bool:
        """Drop a reservation whose call failed without a charge; False if already gone."""
        async with self.write() as tx:
            return await tx.delete_reservation(reservation_id)

    async def expire_reservations(self, now: float) -> int:
        """Drop the reservations expired at ``now`` (UTC epoch seconds); return how many."""
        async with self.write() as tx:
            return await tx.expire_reservations(now)

    async def insert_job(self, job: NewJob) -> Job:
        """Store a pending job without a charge (e.g. one that was already charged)."""
        async with self.write() as tx:
            return await tx.insert_job(job)

    async def schedule_poll(self, job_id: int, next_poll_at: float, poll_count: int) -> None:
        """Set when a pending job is polled next (UTC epoch seconds) and the polls made so far."""
        async with self.write() as tx:
            await tx.schedule_poll(job_id, next_poll_at, poll_count)

    async def lease_jobs(self, job_ids: Collection[int], until: float) -> None:
        """Take jobs out of the due set until ``until`` (UTC epoch seconds), in one write.

        The poller leases the jobs it starts polling: their own reschedule ends the lease, and
        if the process dies first they fall due again when it expires.
        """
        if job_ids:
            async with self.write() as tx:
                await tx.lease_jobs(job_ids, until)

    async def finish_job(
        self,
        job_id: int,
        status: JobStatus,
        outputs: Sequence[str],
        error: str | None,
        finished_at: float,
    ) -> bool:
        """Mark a pending job COMPLETED or FAILED; return True only the first time.

        Raises:
            ValueError: if ``status`` is PENDING.
        """
        async with self.write() as tx:
            return await tx.finish_job(job_id, status, outputs, error, finished_at)

    async def mark_announced(
        self, job_id: int, at: float, route: DeliveryRoute = DeliveryRoute.PLACEHOLDER
    ) -> bool:
        """Record that the result was delivered (UTC epoch seconds) by ``route``.

        Returns:
            True only the first time: a job is delivered once.
        """
        async with self.write() as tx:
            return await tx.mark_announced(job_id, at, route)

    async def schedule_delivery(
        self,
        job_id: int,
        route: DeliveryRoute,
        attempts: int,
        next_at: float,
        error: str | None,
    ) -> None:
        """Set the next delivery attempt of a finished job (``next_at``: UTC epoch seconds)."""
        async with self.write() as tx:
            await tx.schedule_delivery(job_id, route, attempts, next_at, error)

    async def lease_deliveries(self, job_ids: Collection[int], until: float) -> None:
        """Take finished jobs out of the due deliveries until ``until`` (UTC epoch seconds)."""
        if job_ids:
            async with self.write() as tx:
                await tx.lease_deliveries(job_ids, until)

    async def set_unwatched(self, job_id: int, at: float | None) -> bool:
        """Stop watching a pending job at ``at`` (UTC epoch seconds), or resume (None).

        Returns:
            Whether the job was still pending.
        """
        async with self.write() as tx:
            return await tx.set_unwatched(job_id, at)

    async def set_progress_at(self, job_id: int, at: float) -> None:
        """Record when the placeholder was last updated (UTC epoch seconds)."""
        async with self.write() as tx:
            await tx.set_progress_at(job_id, at)

    async def set_job_message(
        self, job_id: int, message_id: int, due_at: float | None = None
    ) -> None:
        """Record the job's placeholder message id; a pending job falls due by ``due_at``.

        Args:
            job_id: the job.
            message_id: the placeholder's Discord message id.
            due_at: poll the job no later than this (UTC epoch seconds); None leaves its
                schedule alone.
        """
        async with self.write() as tx:
            await tx.set_job_message(job_id, message_id, due_at)

    # == cards (issue 12): result requests and the confirmation threshold =======================
    # New small methods only, kept together so they can move into a repository at merge.

    async def add_result_request(
        self,
        *,
        kind: str,
        guild_id: int,
        user_id: int,
        options: dict[str, Any],
        outputs: Sequence[str] = (),
        job_id: int | None = None,
        at: float,
    ) -> int:
        """Store the request behind a result; return its id (the ``r<id>`` of its buttons).

        Args:
            kind: ``"text"``, ``"image"`` or ``"video"``.
            guild_id: where it was asked.
            user_id: the requester, who may delete the result.
            options: the command's options, JSON-serialisable.
            outputs: result URLs of a synchronous answer.
            job_id: the job of an asynchronous result (its buttons carry ``j<job_id>``).
            at: when, UTC epoch seconds.
        """
        async with self.write() as tx:
            return await tx._insert(
                "INSERT INTO result_requests "
                "(kind, guild_id, user_id, job_id, options, outputs, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    kind,
                    guild_id,
                    user_id,
                    job_id,
                    json.dumps(options),
                    json.dumps(list(outputs)),
                    at,
                ),
            )

    async def result_request(self, ref: str) -> ResultRequest | None:
        """The request behind a button's reference: ``j<job id>`` or ``r<result request id>``."""
        column = "job_id" if ref.startswith("j") else "id"
        if not ref[1:].isdigit():
            return None
        row = await self._one(
            f"SELECT * FROM result_requests WHERE {column} = ?",  # column is one of two literals
            (int(ref[1:]),),
        )
        if row is None:
            return None
        return ResultRequest(
            id=int(row["id"]),
            kind=str(row["kind"]),
            guild_id=int(row["guild_id"]),
            user_id=int(row["user_id"]),
            job_id=None if row["job_id"] is None else int(row["job_id"]),
            options=json.loads(row["options"]),
            outputs=tuple(json.loads(row["outputs"])),
        )

    async def confirm_above_cents(self, guild_id: int) -> Decimal | None:
        """The guild's confirmation threshold (``/config confirm-above``), cents; None: off."""
        row = await self._one(
            "SELECT confirm_above_micro FROM card_settings WHERE guild_id = ?", (guild_id,)
        )
        if row is None or row[0] is None:
            return None
        return from_micro(int(row[0]))

    async def set_confirm_above_cents(self, guild_id: int, cents: Decimal | None) -> None:
        """Set the guild's confirmation threshold in cents, or turn it off (None)."""
        micro = None if cents is None else to_micro(cents)
        async with self.write() as tx:
            await tx._run(
                "INSERT INTO card_settings (guild_id, confirm_above_micro) VALUES (?, ?) "
                "ON CONFLICT (guild_id) DO UPDATE "
                "SET confirm_above_micro = excluded.confirm_above_micro",
                (guild_id, micro),
            )


@dataclass(frozen=True, slots=True)
class ResultRequest:
    """The stored request behind a result (issue 12's buttons).

    Attributes:
        id: the row id (``r<id>``).
        kind: ``"text"``, ``"image"`` or ``"video"``.
        guild_id: where it was asked.
        user_id: the requester.
        job_id: the job of an asynchronous result, else None.
        options: the command's options as stored (JSON object).
        outputs: result URLs of a synchronous answer.
    """

    id: int
    kind: str
    guild_id: int
    user_id: int
    job_id: int | None
    options: dict[str, Any]
    outputs: tuple[str, ...]


# == end of cards block ==========================================================================
