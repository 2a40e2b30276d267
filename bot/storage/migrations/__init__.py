"""One migration sequence for both engines: Alembic, run by the bot at start-up.

``versions/`` holds the revisions, shared by SQLite and PostgreSQL; ``0001_baseline`` brings a
database of any release before Alembic (or an empty one) to the last legacy schema with the
legacy SQL files of its engine (``legacy/``). :func:`migrate` runs ``env.py`` programmatically
on the database's write transaction (never ``alembic.ini`` from a command line).

**Schema version** (``Database.schema_version``, ``/readyz``, the start-up log) is the position
of the database's revision in this one sequence: ``0001_baseline`` is 1, the next revision 2,
and so on, the same number on both engines. The legacy marks (SQLite ``PRAGMA user_version``,
PostgreSQL ``schema_migrations``) stay at the legacy head at the baseline, so that the previous
release still runs on a database this one upgraded; each later revision moves them past it
(legacy head + position - 1), so that the previous release refuses a schema it does not know.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Final

from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.runtime.environment import NameFilterParentNames, NameFilterType
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Boolean, Connection, func, select
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.types import TypeEngine

from bot.clock import Clock
from bot.domain import SchemaTooNewError
from bot.storage.engine import Engines
from bot.storage.migrations import legacy
from bot.storage.schema import metadata
from bot.storage.sql import DialectName

log = logging.getLogger(__name__)

SCRIPT_LOCATION: Final = Path(__file__).parent
"""The Alembic script directory: ``env.py`` and ``versions/``."""

MIGRATION_LOCK: Final = (0x67656E62, 1)
"""PostgreSQL's advisory lock of migrations (two-int key space, apart from the guilds' keys)."""


def revisions() -> list[str]:
    """The revision ids of the one sequence, oldest first (position = index + 1)."""
    script = ScriptDirectory(str(SCRIPT_LOCATION))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def position(revision: str, known: list[str]) -> int:
    """The schema version of ``revision``: its position in the sequence, counted from 1.

    A revision this code does not know (a newer release's) is numbered from its id
    (``NNNN_name``) when it has one, else one past the newest known.
    """
    if revision in known:
        return known.index(revision) + 1
    prefix = revision.split("_", 1)[0]
    return int(prefix) if prefix.isdigit() else len(known) + 1


async def migrate(engines: Engines, clock: Clock) -> int:
    """Bring the database to the newest schema in one write transaction; return its version.

    SQLite: under ``BEGIN IMMEDIATE``; PostgreSQL: under the advisory lock
    :data:`MIGRATION_LOCK`. A second process starting at the same time waits, then finds
    nothing left to do; DDL is transactional on both, so a failed migration leaves the previous
    version intact.

    Args:
        engines: the database's connections.
        clock: stamps the migration records (UTC epoch seconds).

    Returns:
        The schema version (position in the one sequence) the database is at.

    Raises:
        SchemaTooNewError: the database was written by a newer release (nothing is changed).
        sqlalchemy.exc.DBAPIError: a migration failed (nothing of it is kept).
    """
    async with engines.connection() as conn:
        return await engines.call_bound(_migrate, conn, engines.dialect, clock.time())


def _migrate(conn: Connection, engine: DialectName, now: float) -> int:
    if engine == "postgresql":
        conn.execute(select(func.pg_advisory_xact_lock(*MIGRATION_LOCK)))
    known = revisions()
    head = len(known)
    legacy_head = len(legacy.load(engine))
    current = MigrationContext.configure(conn).get_current_revision()
    if current is not None and current not in known:
        raise SchemaTooNewError(position(current, known), head)
    if current is None:
        found = legacy.version(conn)
        if found > legacy_head:
            # Only a release of this sequence moves the legacy mark past the legacy head.
            raise SchemaTooNewError(found - legacy_head + 1, head)
    if current == known[-1]:
        return head
    config = Config()
    config.set_main_option("script_location", str(SCRIPT_LOCATION))
    config.attributes["connection"] = conn
    config.attributes["now"] = now
    command.upgrade(config, "head")
    # Each revision past the baseline applied now gets its own mark (and stamp), as when
    # they come one release at a time; the last mark is the one the legacy releases read.
    done = 0 if current is None else known.index(current) + 1
    for number in range(max(2, done + 1), head + 1):
        legacy.mark(conn, legacy_head + number - 1, known[number - 1], now)
    log.info("database schema at version %d (%s)", head, known[-1])
    return head


LEGACY_TABLES: Final = frozenset({"schema_migrations"})
"""Tables of the legacy migrations' bookkeeping, outside :data:`bot.storage.schema.metadata`."""

_SQLITE_AFFINITY: Final = {
    "INTEGER": ("INT",),
    "REAL": ("REAL", "FLOA", "DOUB"),
    "TEXT": ("CHAR", "CLOB", "TEXT"),
    "BLOB": ("BLOB",),
}


def _sqlite_affinity(type_name: str) -> str:
    """SQLite's type affinity of a declared type (https://sqlite.org/datatype3.html §3.1)."""
    upper = type_name.upper()
    for affinity, markers in _SQLITE_AFFINITY.items():
        if any(marker in upper for marker in markers):
            return affinity
    return "NUMERIC"


def compare_type(
    context: MigrationContext,
    inspected_column: Any,
    metadata_column: Any,
    inspected_type: TypeEngine[Any],
    metadata_type: TypeEngine[Any],
) -> bool | None:
    """Alembic's ``compare_type`` hook: True where the column's type really differs.

    SQLite keeps a column's declared name but stores by affinity: the schema's ``BigInteger``,
    ``Boolean`` and ``Double`` are the legacy tables' ``INTEGER`` and ``REAL``, so two types
    differ only by their affinity. On PostgreSQL a JSON text column
    (:data:`bot.storage.schema.JSON_TEXT`) is ``jsonb``. Anything else keeps Alembic's own
    comparison (None).
    """
    if context.dialect.name == "postgresql" and metadata_column.info.get("json"):
        return not isinstance(inspected_type, JSONB)
    if context.dialect.name != "sqlite":
        return None
    # SQLAlchemy keeps a Boolean as 0 or 1: the legacy tables declare it INTEGER.
    declared = (
        "INTEGER"
        if isinstance(metadata_type, Boolean)
        else metadata_type.compile(dialect=context.dialect)
    )
    return _sqlite_affinity(str(inspected_type)) != _sqlite_affinity(declared)


def include_name(
    name: str | None, type_: NameFilterType, parent_names: NameFilterParentNames
) -> bool:
    """Alembic's ``include_name`` hook: leave out the legacy bookkeeping tables."""
    return not (type_ == "table" and name in LEGACY_TABLES)


def schema_drift(conn: Connection) -> list[Any]:
    """What Alembic's autogenerate would change to make the database match the schema.

    Empty when the database migrated to head is what ``bot/storage/schema.py`` describes
    (``tests/storage/test_schema_drift.py`` holds both engines to it). On SQLite, a primary key
    of integer affinity is the rowid, never NULL, though SQLite reports it nullable without a
    ``NOT NULL`` of its own; that report is not a difference.

    Args:
        conn: a connection of a plain engine (the reflection reads the catalogue with the
            driver's own type codecs).

    Returns:
        Alembic's diff entries (``compare_metadata``), empty when none.
    """
    context = MigrationContext.configure(
        conn, opts={"compare_type": compare_type, "include_name": include_name}
    )
    drift = []
    for entry in compare_metadata(context, metadata):
        changes = entry if isinstance(entry, list) else [entry]
        kept = [c for c in changes if not _sqlite_rowid_nullable(conn, c)]
        if kept:
            drift.append(kept if isinstance(entry, list) else entry)
    if conn.dialect.name == "sqlite":
        drift = _without_sqlite_fk_actions(drift)
    return drift


def _fk_key(change: Any) -> tuple[Any, ...]:
    fk = change[1]
    return (
        fk.parent.name,
        tuple(c.name for c in fk.columns),
        fk.referred_table.name,
        tuple(e.column.name for e in fk.elements),
    )


def _without_sqlite_fk_actions(drift: list[Any]) -> list[Any]:
    """Drop the remove/add pairs of one foreign key that differ only by their ``ON DELETE``.

    SQLAlchemy reads a SQLite foreign key's action only from a table-level ``FOREIGN KEY``
    clause, not from a column's inline ``REFERENCES … ON DELETE`` (the legacy tables' form),
    which ``PRAGMA foreign_key_list`` shows is there.
    """
    removed = {_fk_key(c) for c in drift if isinstance(c, tuple) and c[0] == "remove_fk"}
    added = {_fk_key(c) for c in drift if isinstance(c, tuple) and c[0] == "add_fk"}
    same = removed & added
    return [
        c
        for c in drift
        if not (isinstance(c, tuple) and c[0] in ("remove_fk", "add_fk") and _fk_key(c) in same)
    ]


def _sqlite_rowid_nullable(conn: Connection, change: Any) -> bool:
    if conn.dialect.name != "sqlite" or change[0] != "modify_nullable":
        return False
    column = metadata.tables[change[2]].c[change[3]]
    return (
        bool(column.primary_key)
        and _sqlite_affinity(column.type.compile(dialect=conn.dialect)) == "INTEGER"
    )
