"""The few things SQLite and PostgreSQL spell differently, chosen by :attr:`Sql.dialect`.

Each helper keeps one repository method written once: the upsert construct (both dialects'
``insert`` share the ``on_conflict_do_update`` / ``on_conflict_do_nothing`` API), text
ordering by code point, and a JSON value for a JSON column.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import ColumnElement, Table, Text, cast, literal
from sqlalchemy.dialects import postgresql, sqlite

from bot.storage.sql import Sql


def upsert(sql: Sql, table: Table) -> sqlite.Insert | postgresql.Insert:
    """Return an ``INSERT`` into ``table`` that takes an ``ON CONFLICT`` clause.

    Both engines implement ``INSERT ... ON CONFLICT`` (SQLite 3.24+, PostgreSQL 9.5+) with the
    same meaning; SQLAlchemy builds it with each dialect's own ``insert`` construct.
    """
    if sql.dialect == "postgresql":
        return postgresql.insert(table)
    return sqlite.insert(table)


def text_order(sql: Sql, column: ColumnElement[str]) -> ColumnElement[str]:
    """Return ``column`` for an ``ORDER BY`` that sorts text by code point on both engines.

    SQLite's default ``BINARY`` collation compares UTF-8 bytes, that is code points;
    PostgreSQL sorts by the database's locale unless told ``COLLATE "C"`` (which SQLite does
    not know), so lists read the same on either engine.
    """
    if sql.dialect == "postgresql":
        return column.collate("C")
    return column


def json_value(sql: Sql, value: Any) -> ColumnElement[Any]:
    """Return ``value`` encoded as JSON text, for a JSON column (``Text`` in the schema).

    SQLite stores the text as it is. PostgreSQL's column is ``jsonb``, and the asyncpg dialect
    sends a string parameter as ``varchar``, which PostgreSQL does not assign to ``jsonb``
    without an explicit cast.
    """
    text = literal(json.dumps(value), Text)
    if sql.dialect == "postgresql":
        return cast(text, postgresql.JSONB)
    return text
