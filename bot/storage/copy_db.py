"""``python -m bot copy-db --to URL``: move a SQLite database into an empty PostgreSQL one.

Every table is copied as it is (ids kept, money already in micro-cents in both engines), in one
PostgreSQL transaction that is committed only after the copy is verified: the row count of each
table and, per guild, the ledger's count and exact sum of micro-cents must equal the source's.
The legacy migration records of ``meta`` stay behind (each engine had its own numbering); the
schema version is the same on both (the one Alembic sequence), and the source must be at it.

Engine-specific on purpose: the source is read with the standard library's ``sqlite3`` (a
read-only snapshot, never migrated), and the target is filled with asyncpg's binary ``COPY``
(``copy_records_to_table``) on the transaction's connection, a bulk path Core does not have.
"""

from __future__ import annotations

import contextlib
import sqlite3
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Final

from sqlalchemy import Connection, text
from sqlalchemy.util import await_

from bot.clock import Clock
from bot.storage.database import Database
from bot.storage.migrations import position, revisions
from bot.storage.money import from_micro

TABLES: Final = (
    "meta",
    "guild_settings",
    "allowed_channels",
    "retired_keys",
    "default_keys",
    "ledger",
    "charge_anomalies",
    "reservations",
    "jobs",
    "result_requests",
    "card_settings",
    "policy_tiers",
    "policy_models",
    "blocked_terms",
    "cooldowns",
    "cooldown_uses",
    "config_audit",
    "conversations",
    "conversation_turns",
    "personas",
    "member_settings",
    "sequence_settings",
    "sequences",
    "sequence_clips",
    "takes",
    "member_takes",
)
"""Every table copied, parents before children (``allowed_channels`` needs its guild)."""

NOT_COPIED: Final = ("rate_requests", "rate_blocks")
"""The shared rate window (issue 10): the last minute of requests, worthless after a move."""

_WITH_IDS: Final = (
    "retired_keys",
    "ledger",
    "charge_anomalies",
    "reservations",
    "jobs",
    "result_requests",
    "config_audit",
    "conversation_turns",
    "sequences",
)
_NOT_COPIED: Final = "migration.%"
"""``meta`` keys that describe the engine's own migrations."""


class CopyError(Exception):
    """The copy was refused or failed its check; nothing was written. One line, no secrets."""


@dataclass
class CopyReport:
    """What was copied: rows per table, and per guild the ledger's charges and exact cents."""

    rows: dict[str, int] = field(default_factory=dict)
    ledger: dict[int, tuple[int, Decimal]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        """The report for people, one line per table and per guild."""
        out = [f"{table}: {count} rows" for table, count in self.rows.items()]
        for guild_id, (count, cents) in sorted(self.ledger.items()):
            out.append(f"ledger of guild {guild_id}: {count} charges, {cents} cents")
        return out


def _source_rows(
    db: sqlite3.Connection, table: str, columns: list[str]
) -> list[tuple[object, ...]]:
    sql = f"SELECT {', '.join(columns)} FROM {table}"  # names from PostgreSQL's own catalogue
    if table == "meta":
        return list(db.execute(f"{sql} WHERE key NOT LIKE ?", (_NOT_COPIED,)))
    return list(db.execute(sql))


def _source_ledger(db: sqlite3.Connection) -> dict[int, tuple[int, int]]:
    rows = db.execute("SELECT guild_id, COUNT(*), SUM(cost_micro) FROM ledger GROUP BY guild_id")
    return {int(g): (int(n), int(micro)) for g, n, micro in rows}


def _count(conn: Connection, sql: str) -> int:
    return int(conn.execute(text(sql)).scalar_one())


def _target_columns(conn: Connection, table: str) -> list[str]:
    rows = conn.execute(
        text(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = :table"
            " ORDER BY ordinal_position"
        ),
        {"table": table},
    )
    return [str(r[0]) for r in rows]


def _refuse_unless_empty(conn: Connection) -> None:
    for table in TABLES:
        where = " WHERE key NOT LIKE 'migration.%'" if table == "meta" else ""
        count = _count(conn, f"SELECT COUNT(*) FROM {table}{where}")
        if count:
            raise CopyError(
                f"the target database is not empty ({table} has {count} rows); "
                "copy-db only fills a new, empty database"
            )


async def copy_sqlite_to_postgres(source: Path, url: str, *, clock: Clock) -> CopyReport:
    """Copy the SQLite database at ``source`` into the empty PostgreSQL database at ``url``.

    The source must be at the newest schema (start this release on it once) and should not be
    in use: it is read in one read transaction, a consistent snapshot. The target is migrated
    to the newest schema first, then filled in one transaction.

    Args:
        source: the SQLite file (``DATABASE_PATH``).
        url: ``postgresql://user:password@host:port/dbname``; a secret.
        clock: stamps the target's migration records.

    Returns:
        The rows copied per table and the ledger's totals per guild (exact cents).

    Raises:
        CopyError: the source is missing or not at the newest schema, the target is not empty,
            or the verification found a difference (nothing is then committed).
        DatabaseUnavailable: the target cannot be reached.
        SchemaTooNewError: the target was written by a newer release.
    """
    # A one-shot command: blocking sqlite3 reads on the event loop's thread hold nobody up.
    with contextlib.closing(_open_source(source)) as db:
        db.execute("BEGIN")  # one snapshot for every table, counts and sums included
        target = await Database.open_postgresql(url, clock=clock)
        try:
            async with target.engines.connection() as conn:
                return await target.engines.call_bound(_copy, conn, db)
        finally:
            await target.close()


def _copy(conn: Connection, db: sqlite3.Connection) -> CopyReport:
    """Fill the target in the open transaction of ``conn``; verify before the commit."""
    _refuse_unless_empty(conn)  # also starts the transaction the raw COPY then runs in
    driver = conn.connection.driver_connection
    assert driver is not None
    report = CopyReport()
    for table in TABLES:
        columns = _target_columns(conn, table)
        rows = _source_rows(db, table, columns)
        if rows:
            await_(driver.copy_records_to_table(table, records=rows, columns=columns))
        report.rows[table] = len(rows)
    for table in _WITH_IDS:
        # Ids were copied as they were: new rows must start after the largest.
        conn.execute(
            text(
                f"SELECT setval(pg_get_serial_sequence('{table}', 'id'),"
                f" COALESCE(MAX(id), 0) + 1, false) FROM {table}"
            )
        )
    _verify(conn, db, report)
    return report


def _open_source(source: Path) -> sqlite3.Connection:
    """Open the SQLite file read-only (never creating or migrating it) and check its version."""
    if not source.is_file():
        raise CopyError(f"DATABASE_PATH: {source} does not exist")
    uri = f"{source.resolve().as_uri()}?mode=ro"
    db = sqlite3.connect(uri, uri=True, isolation_level=None)
    try:
        _check_source_version(db, source)
    except BaseException:
        db.close()
        raise
    return db


def _check_source_version(db: sqlite3.Connection, source: Path) -> None:
    known = revisions()
    has_alembic = db.execute(
        "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'alembic_version'"
    ).fetchone()
    row = db.execute("SELECT version_num FROM alembic_version").fetchone() if has_alembic else None
    found = 0 if row is None else position(str(row[0]), known)
    if found != len(known):
        raise CopyError(
            f"DATABASE_PATH: {source} is at schema version {found}, not {len(known)}; "
            "start this release of the bot on it once (it migrates at start-up), then copy"
        )


def _verify(conn: Connection, db: sqlite3.Connection, report: CopyReport) -> None:
    for table, expected in report.rows.items():
        where = " WHERE key NOT LIKE 'migration.%'" if table == "meta" else ""
        copied = _count(conn, f"SELECT COUNT(*) FROM {table}{where}")
        if copied != expected:
            raise CopyError(f"{table}: {copied} rows copied, {expected} in the source")
    source = _source_ledger(db)
    rows = conn.execute(
        text(
            "SELECT guild_id, COUNT(*) AS n, SUM(cost_micro) AS micro FROM ledger GROUP BY guild_id"
        )
    )
    target = {int(r.guild_id): (int(r.n), int(r.micro)) for r in rows}
    if target != source:
        raise CopyError("the ledger's totals per guild differ from the source's; nothing copied")
    report.ledger = {g: (n, from_micro(micro)) for g, (n, micro) in sorted(target.items())}
