"""Which storage errors are transient: worth trying the same transaction again a moment later.

A write that fails this way changed nothing (its transaction rolled back) and may well pass a
second later: SQLite's writer lock held by another connection past the busy timeout
(``SQLITE_BUSY``/``SQLITE_LOCKED``: "database is locked"), a PostgreSQL connection that dropped
(SQLSTATE class 08, an administrator's shutdown or restart, class 57P), a serialisation failure
or a deadlock (40001, 40P01), a socket error. Everything else (a broken constraint, a bug, a
closed database) would fail the same way again.
"""

from __future__ import annotations

import sqlite3

import asyncpg
from sqlalchemy.exc import DBAPIError

_PG_TRANSIENT = (
    asyncpg.exceptions.PostgresConnectionError,
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.SerializationError,
    asyncpg.exceptions.DeadlockDetectedError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncpg.exceptions.ConnectionDoesNotExistError,
    asyncpg.exceptions.InterfaceError,
)
"""asyncpg's errors of a connection that went away or a transaction the server gave up on.
``InterfaceError`` is raised for a use of a closed connection ("connection is closed")."""


def is_transient(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a storage call, may pass if the call is made again.

    SQLAlchemy wraps the driver's error (the driver's is its ``orig``); asyncpg's are raised
    as they are. A connection SQLAlchemy saw invalidated counts too.
    """
    if isinstance(exc, DBAPIError) and exc.connection_invalidated:
        return True
    cause = getattr(exc, "orig", None) or exc
    if isinstance(cause, sqlite3.OperationalError):
        code = getattr(cause, "sqlite_errorcode", None)
        if code is None:  # raised by hand, not by SQLite: read its words
            return "locked" in str(cause)
        return code in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    return isinstance(cause, (*_PG_TRANSIENT, ConnectionError, TimeoutError))
