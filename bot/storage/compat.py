"""TRANSITIONAL: the repositories not yet moved onto :class:`~bot.storage.sql.Sql` (issue 19).

They take the pre-SQLAlchemy executors' interface (SQL text in their engine's placeholder
style); :class:`SqliteExecutor` and :class:`PgExecutor` give it to them over the engines of
:mod:`bot.storage.engine`, so that one :class:`~bot.storage.database.Database` hosts both kinds
while the move lasts. Removed when every repository is in ``bot/storage/repos``.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from decimal import Decimal
from typing import Any, TypeVar

from sqlalchemy import Connection
from sqlalchemy.engine import Row
from sqlalchemy.exc import IntegrityError

from bot.storage.engine import CoreSql, Engines
from bot.storage.money import from_micro
from bot.storage.repositories import ConstraintError

_T = TypeVar("_T")


class LegacyRow:
    """A row read by name (``row["col"]``) or by position (``row[0]``), as both drivers' were."""

    __slots__ = ("_row",)

    def __init__(self, row: Row[Any]) -> None:
        self._row = row

    def __getitem__(self, key: int | str) -> Any:
        if isinstance(key, int):
            return self._row[key]
        return self._row._mapping[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._row)

    def __len__(self) -> int:
        return len(self._row)

    def keys(self) -> list[str]:
        """The column names."""
        return [str(k) for k in self._row._mapping]

    def get(self, key: str, default: Any = None) -> Any:
        """The value of column ``key``, or ``default``."""
        return self._row._mapping.get(key, default)


def _fetch(conn: Connection, sql: str, params: Sequence[Any]) -> list[LegacyRow]:
    try:
        return [LegacyRow(r) for r in conn.exec_driver_sql(sql, tuple(params))]
    except IntegrityError as exc:
        raise ConstraintError(str(exc.orig)) from exc


def _execute(conn: Connection, sql: str, params: Sequence[Any]) -> tuple[int, int | None]:
    try:
        result = conn.exec_driver_sql(sql, tuple(params))
    except IntegrityError as exc:
        raise ConstraintError(str(exc.orig)) from exc
    lastrowid = result.lastrowid if conn.dialect.name == "sqlite" else None
    return int(result.rowcount), lastrowid


def _execute_many(conn: Connection, sql: str, rows: list[tuple[Any, ...]]) -> int:
    try:
        return int(conn.exec_driver_sql(sql, rows).rowcount)
    except IntegrityError as exc:
        raise ConstraintError(str(exc.orig)) from exc


class _Base:
    def __init__(self, sql: CoreSql, engines: Engines) -> None:
        self._sql = sql
        self._engines = engines

    @property
    def _bound(self) -> Connection | None:
        try:
            return self._sql.connection
        except RuntimeError:
            return None

    def write(self) -> AbstractAsyncContextManager[Any]:
        """Yield an executor bound to a write transaction: this one's, or a new one."""
        if self._bound is not None:
            return contextlib.nullcontext(self)
        return self._write()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Any]:
        async with self._engines.transaction() as tx:
            yield type(self)(tx, self._engines)

    async def _read(self, work: Callable[[Connection], _T]) -> _T:
        conn = self._bound
        if conn is not None:
            return await self._engines.call_bound(work, conn)
        return await self._engines.run_read(work)

    async def _write_once(self, work: Callable[[Connection], _T]) -> _T:
        conn = self._bound
        if conn is not None:
            return await self._engines.call_bound(work, conn)
        return await self._engines.run_in_transaction(work)

    async def lock_guild(self, guild_id: int) -> None:
        """The guild's advisory lock (PostgreSQL, in a transaction); SQLite: nothing."""
        await self._sql.lock_guild(guild_id)


class SqliteExecutor(_Base):
    """The interface of the pre-SQLAlchemy SQLite executor (``?`` placeholders, a tuple)."""

    async def all(self, sql: str, params: Sequence[Any] = ()) -> list[LegacyRow]:
        """Return every row of a query."""
        return await self._read(lambda c: _fetch(c, sql, params))

    async def one(self, sql: str, params: Sequence[Any] = ()) -> LegacyRow | None:
        """Return the first row of a query, or None."""
        rows = await self.all(sql, params)
        return rows[0] if rows else None

    async def integer(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Return an aggregate that always has one row."""
        row = await self.one(sql, params)
        assert row is not None
        return int(row[0])

    async def cents(self, sql: str, params: Sequence[Any] = ()) -> Decimal:
        """Return a micro-cent sum as Decimal cents."""
        return from_micro(await self.integer(sql, params))

    async def run(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Execute one write; return the rows changed."""
        return (await self._write_once(lambda c: _execute(c, sql, params)))[0]

    async def insert(self, sql: str, params: Sequence[Any]) -> int:
        """Execute one INSERT; return the new row id."""
        rowid = (await self._write_once(lambda c: _execute(c, sql, params)))[1]
        assert rowid is not None
        return rowid

    async def run_many(self, sql: str, rows: Iterable[Sequence[Any]]) -> int:
        """Execute one write per row, in one transaction; return the rows changed."""
        listed = [tuple(r) for r in rows]
        if not listed:
            return 0
        return await self._write_once(lambda c: _execute_many(c, sql, listed))


class PgExecutor(_Base):
    """The interface of the pre-SQLAlchemy PostgreSQL executor (``$n`` placeholders)."""

    async def all(self, sql: str, *params: Any) -> list[LegacyRow]:
        """Return every row of a query."""
        return await self._read(lambda c: _fetch(c, sql, params))

    async def one(self, sql: str, *params: Any) -> LegacyRow | None:
        """Return the first row of a query, or None."""
        rows = await self.all(sql, *params)
        return rows[0] if rows else None

    async def value(self, sql: str, *params: Any) -> Any:
        """Return the first column of the first row, or None."""
        row = await self.one(sql, *params)
        return None if row is None else row[0]

    async def integer(self, sql: str, *params: Any) -> int:
        """Return an aggregate that always has one row."""
        return int(await self.value(sql, *params))

    async def cents(self, sql: str, *params: Any) -> Decimal:
        """Return a micro-cent sum as Decimal cents."""
        return from_micro(await self.integer(sql, *params))

    async def run(self, sql: str, *params: Any) -> int:
        """Execute one write; return the rows changed."""
        return (await self._write_once(lambda c: _execute(c, sql, params)))[0]

    async def returning(self, sql: str, *params: Any) -> Any:
        """Execute one write with ``RETURNING``; its first value, or None."""
        rows = await self._write_once(lambda c: _fetch(c, sql, params))
        return rows[0][0] if rows else None


def _executor(sql: CoreSql) -> Any:
    engines = sql._engines
    return (SqliteExecutor if sql.dialect == "sqlite" else PgExecutor)(sql, engines)


def add_legacy_repositories(repos: Any, sql: CoreSql) -> None:
    """Give ``repos`` the repositories still written per engine, over ``sql``."""
    if sql.dialect == "sqlite":
        from bot.storage.sqlite.jobs import SqliteJobs

        repos.jobs = SqliteJobs(_executor(sql))
    else:
        from bot.storage.postgres.jobs import PgJobs

        repos.jobs = PgJobs(_executor(sql))


def legacy_rates(sql: CoreSql) -> Any:
    """The rate-window repository still written per engine, over the unbound ``sql``."""
    if sql.dialect == "sqlite":
        from bot.storage.sqlite.rates import SqliteRates

        return SqliteRates(_executor(sql))
    from bot.storage.postgres.rates import PgRates

    return PgRates(_executor(sql))
