"""The one surface repositories run SQL through: SQLAlchemy Core statements, both engines.

A repository is written once (issue 19) against :class:`Sql`: it builds Core statements over
the tables of ``bot.storage.schema`` and never sees a placeholder style, a driver or a
connection. Engine-specific semantics stay behind this surface (the writer lock, advisory
locks, the database's clock) or are asked for explicitly with :attr:`Sql.dialect` where the
engines really differ (claims with ``FOR UPDATE SKIP LOCKED``).

Rows come back as mappings (``row["column"]``), never by position.

:class:`LegacySql` runs Core statements on the pre-SQLAlchemy executors of
``bot.storage.sqlite.engine`` and ``bot.storage.postgres.engine``, compiled for their
engine; it exists while repositories move onto one implementation.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

import asyncpg
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

from bot.storage.repositories import ConstraintError

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

Engine: TypeAlias = Literal["sqlite", "postgresql"]
Row: TypeAlias = Mapping[str, Any]


class Sql(Protocol):
    """Runs Core statements: inside one transaction, or each write on its own.

    Unbound (used directly by a repository of the database), a read runs on a connection that
    sees committed data and each write runs in a transaction of its own; bound (a repository
    of :meth:`Database.transaction`), everything runs in that transaction.
    """

    @property
    def dialect(self) -> Engine:
        """The engine's name, for the few statements whose semantics differ."""
        ...

    def write(self) -> AbstractAsyncContextManager[Sql]:
        """Yield an executor bound to a write transaction: this one's, or a new one.

        A new transaction commits when the block exits and rolls back when it raises, so a
        write method with several statements is all-or-nothing however it is called.
        """
        ...

    async def all(self, stmt: Executable) -> Sequence[Row]:
        """Return every row of a query (or of a write's ``RETURNING``)."""
        ...

    async def one(self, stmt: Executable) -> Row | None:
        """Return the first row of a query (or of a write's ``RETURNING``), or None."""
        ...

    async def scalar(self, stmt: Executable) -> Any:
        """Return the first column of the first row, or None when there is no row."""
        ...

    async def run(self, stmt: Executable, rows: Sequence[Mapping[str, Any]] = ()) -> int:
        """Execute a write (once, or once per mapping of ``rows``); return the rows changed.

        Raises:
            ConstraintError: the write broke a constraint (nothing of it is kept).
        """
        ...

    async def lock_guild(self, guild_id: int) -> None:
        """Serialise this transaction with others on ``guild_id`` until it ends.

        PostgreSQL: the guild's transaction-scoped advisory lock. SQLite: nothing to do, its
        writer lock already serialises every write transaction.
        """
        ...


_DIALECTS: dict[Engine, Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
}


def compile_for(
    engine: Engine, stmt: ClauseElement, row: Mapping[str, Any] | None = None
) -> tuple[str, list[Any]]:
    """Return ``stmt`` as ``engine``'s SQL text and its positional parameters.

    Args:
        engine: the target engine.
        stmt: a Core statement.
        row: values for a statement whose parameters are given at execution (``executemany``).
    """
    compiled = stmt.compile(
        dialect=_DIALECTS[engine], column_keys=list(row) if row is not None else None
    )
    assert isinstance(compiled, SQLCompiler)
    # Expanded after compiling (IN lists, including those of an expanding parameter given by
    # ``.params()``, which ``render_postcompile`` refuses to construct parameters for).
    state = compiled.construct_expanded_state(compiled.construct_params(row))
    return state.statement, [state.parameters[name] for name in state.positiontup or ()]


class LegacySql:
    """:class:`Sql` over a pre-SQLAlchemy executor (transitional; see the module's note)."""

    def __init__(self, engine: Engine, executor: Any) -> None:
        self._engine: Engine = engine
        self._executor = executor

    @property
    def dialect(self) -> Engine:
        """The engine's name."""
        return self._engine

    @property
    def executor(self) -> Any:
        """The executor under this one (for repositories not yet moved)."""
        return self._executor

    def write(self) -> AbstractAsyncContextManager[Sql]:
        """Yield an executor bound to a write transaction: this one's, or a new one."""
        return self._write()

    @asynccontextmanager
    async def _write(self) -> AsyncIterator[Sql]:
        async with self._executor.write() as tx:
            yield LegacySql(self._engine, tx)

    async def all(self, stmt: Executable) -> Sequence[Row]:
        """Return every row of a query (a write's ``RETURNING`` runs in a write transaction)."""
        sql, params = compile_for(self._engine, stmt)  # type: ignore[arg-type]
        if getattr(stmt, "is_dml", False):
            async with self._executor.write() as tx:
                return await _fetch(self._engine, tx, sql, params)
        return await _fetch(self._engine, self._executor, sql, params)

    async def one(self, stmt: Executable) -> Row | None:
        """Return the first row, or None."""
        rows = await self.all(stmt)
        return rows[0] if rows else None

    async def scalar(self, stmt: Executable) -> Any:
        """Return the first column of the first row, or None."""
        row = await self.one(stmt)
        return None if row is None else row[next(iter(row.keys()))]

    async def run(self, stmt: Executable, rows: Sequence[Mapping[str, Any]] = ()) -> int:
        """Execute a write (once per mapping of ``rows`` when given); return the rows changed."""
        if not rows:
            return await self._run(*compile_for(self._engine, stmt))  # type: ignore[arg-type]
        # Compiled once for the batch (its rows share their keys), as executemany is; SQLite
        # runs it as one executemany, PostgreSQL's executor has none: a statement per row.
        compiled = stmt.compile(  # type: ignore[attr-defined]
            dialect=_DIALECTS[self._engine], column_keys=list(rows[0])
        )
        assert isinstance(compiled, SQLCompiler)
        if compiled.post_compile_params or compiled.literal_execute_params:
            # IN lists: each row's text is its own.
            batch = [compile_for(self._engine, stmt, row) for row in rows]  # type: ignore[arg-type]
        else:
            names = compiled.positiontup or ()
            batch = [
                (str(compiled), [v[name] for name in names])
                for v in map(compiled.construct_params, rows)
            ]
        if self._engine == "sqlite" and len({sql for sql, _ in batch}) == 1:
            # One transaction: the executor's own, or the one it is bound to.
            return int(await self._executor.run_many(batch[0][0], [p for _, p in batch]))
        async with self.write() as tx:
            changed = 0
            for sql, params in batch:
                changed += await tx._run(sql, params)  # type: ignore[attr-defined]
        return changed

    async def _run(self, sql: str, params: list[Any]) -> int:
        if self._engine == "sqlite":
            return int(await self._executor.run(sql, params))
        return int(await self._executor.run(sql, *params))

    async def lock_guild(self, guild_id: int) -> None:
        """PostgreSQL: the guild's advisory lock; SQLite: nothing."""
        if self._engine == "postgresql":
            await self._executor.lock_guild(guild_id)


async def _fetch(engine: Engine, executor: Any, sql: str, params: list[Any]) -> Sequence[Row]:
    try:
        if engine == "sqlite":
            return list(await executor.all(sql, params))
        return list(await executor.all(sql, *params))
    except (sqlite3.IntegrityError, asyncpg.IntegrityConstraintViolationError) as exc:
        # A write's RETURNING comes through here: its constraint errors are ConstraintError too.
        raise ConstraintError(str(exc)) from exc
