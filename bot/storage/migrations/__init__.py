"""One migration sequence for both engines: Alembic, run by the bot at start-up (issue 19).

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
from typing import Final

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, func, select

from bot.clock import Clock
from bot.storage.engine import Engines
from bot.storage.migrations import legacy
from bot.storage.repositories import SchemaTooNewError
from bot.storage.sql import Engine

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


def _migrate(conn: Connection, engine: Engine, now: float) -> int:
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
    if head > 1:
        legacy.mark(conn, legacy_head + head - 1, known[-1], now)
    log.info("database schema at version %d (%s)", head, known[-1])
    return head
