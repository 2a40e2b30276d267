"""The one surface repositories run SQL through: SQLAlchemy Core statements, both engines.

A repository is written once against :class:`Sql`: it builds Core statements over
the tables of ``bot.storage.schema`` and never sees a placeholder style, a driver or a
connection. Engine-specific semantics stay behind this surface (the writer lock, advisory
locks, the database's clock) or are asked for explicitly with :attr:`Sql.dialect` where the
engines really differ (claims with ``FOR UPDATE SKIP LOCKED``).

Rows come back as mappings (``row["column"]``), never by position.

:class:`bot.storage.engine.CoreSql` implements it for both engines; :func:`compile_for` shows a
statement as an engine's SQL text (query plans, diagnostics).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol, TypeAlias

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Dialect
from sqlalchemy.sql import ClauseElement, Executable
from sqlalchemy.sql.compiler import SQLCompiler

DialectName: TypeAlias = Literal["sqlite", "postgresql"]
"""The database's SQLAlchemy dialect name (``Dialect.name``), for the few statements whose SQL
differs; not SQLAlchemy's ``Engine``."""
Row: TypeAlias = Mapping[str, Any]
Params: TypeAlias = Mapping[str, Any] | None
"""Values of a statement's ``bindparam()`` names, given at execution.

A statement built once at module level and run with ``params`` keeps its compiled form and
cache key; ``stmt.params(...)`` or a statement built per call costs about 0.1 ms of CPU more
per execution (``docs/benchmarks.md``, "Storage on SQLAlchemy Core")."""


class Sql(Protocol):
    """Runs Core statements: inside one transaction, or each write on its own.

    Unbound (used directly by a repository of the database), a read runs on a connection that
    sees committed data and each write runs in a transaction of its own; bound (a repository
    of :meth:`Database.transaction`), everything runs in that transaction.
    """

    @property
    def dialect(self) -> DialectName:
        """The engine's name, for the few statements whose semantics differ."""
        ...

    def write(self) -> AbstractAsyncContextManager[Sql]:
        """Yield an executor bound to a write transaction: this one's, or a new one.

        A new transaction commits when the block exits and rolls back when it raises, so a
        write method with several statements is all-or-nothing however it is called.
        """
        ...

    async def all(self, stmt: Executable, params: Params = None) -> Sequence[Row]:
        """Return every row of a query (or of a write's ``RETURNING``).

        ``params`` gives the values of the statement's ``bindparam()`` names (see
        :data:`Params`).
        """
        ...

    async def one(self, stmt: Executable, params: Params = None) -> Row | None:
        """Return the first row of a query (or of a write's ``RETURNING``), or None."""
        ...

    async def scalar(self, stmt: Executable, params: Params = None) -> Any:
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


_DIALECTS: dict[DialectName, Dialect] = {
    "sqlite": sqlite.dialect(paramstyle="qmark"),
    "postgresql": postgresql.asyncpg.dialect(),  # type: ignore[no-untyped-call]
}


def compile_for(
    engine: DialectName, stmt: ClauseElement, row: Mapping[str, Any] | None = None
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
