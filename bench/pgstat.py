"""The PostgreSQL server's statements per poll, for ``bench scale``.

The bench's throwaway server (``tests/support/pg_server.py``) is restarted once with
``shared_preload_libraries = 'pg_stat_statements'`` (the extension must be loaded at the
server's start, PostgreSQL docs F.32); each configuration's database gets
``CREATE EXTENSION pg_stat_statements``, the counters are reset when the steady window begins
and read when it ends, and each normalised statement is shown with its calls per poll and its
mean execution time. Without the extension in the server's packages, the fallback is
``log_min_duration_statement = 0`` (every statement and its duration in the server's log),
summarised the same way from the lines the window wrote.

Only the bench's own server on 127.0.0.1 is touched; nothing here asserts.
"""

from __future__ import annotations

import re
import subprocess
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from bench.report import Table
from tests.support.pg_server import PgServer

EXTENSION = "pg_stat_statements"
TOP = 14
"""Statements shown one by one (by total time); the rest are summed in one row."""


@dataclass
class Statement:
    """One normalised statement over the window: calls and total execution time (ms)."""

    query: str
    calls: int
    total_ms: float


@dataclass
class Profiler:
    """Profiles one server's statements; ``mode`` is ``"pg_stat_statements"`` or ``"log"``."""

    pg: PgServer
    mode: str
    _log_offset: int = 0

    @classmethod
    def enable(cls, pg: PgServer) -> Profiler:
        """Load ``pg_stat_statements`` (or turn on statement logging) and restart the server.

        ``pg_ctl restart`` keeps the options the server was started with (``postmaster.opts``);
        ``ALTER SYSTEM`` writes ``postgresql.auto.conf``, read at the restart.

        Raises:
            subprocess.CalledProcessError: when ``psql`` or ``pg_ctl`` fails.
        """
        available = _psql(pg, f"SELECT 1 FROM pg_available_extensions WHERE name = '{EXTENSION}'")
        if available.strip() == "1":
            _psql(pg, f"ALTER SYSTEM SET shared_preload_libraries = '{EXTENSION}'")
            mode = EXTENSION
        else:
            _psql(pg, "ALTER SYSTEM SET log_min_duration_statement = 0")
            _psql(pg, "ALTER SYSTEM SET log_line_prefix = '%m [%p] '")
            mode = "log"
        pg._run(
            "pg_ctl", "restart", "-w", "-m", "fast", "-D", str(pg.data),
            "-l", str(pg.base / "server.log"),
        )  # fmt: skip
        return cls(pg, mode)

    async def prepare(self, url: str) -> None:
        """Create the extension in a configuration's database (before the bot starts)."""
        if self.mode == EXTENSION:
            connection = await asyncpg.connect(url)
            try:
                await connection.execute(f"CREATE EXTENSION IF NOT EXISTS {EXTENSION}")
            finally:
                await connection.close()

    async def begin(self, url: str) -> None:
        """Forget what came before the steady window."""
        if self.mode == EXTENSION:
            connection = await asyncpg.connect(url)
            try:
                await connection.execute("SELECT pg_stat_statements_reset()")
            finally:
                await connection.close()
        else:
            self._log_offset = self._log().stat().st_size

    async def end(self, url: str) -> list[Statement]:
        """The statements run in this configuration's database since :meth:`begin`."""
        if self.mode == EXTENSION:
            connection = await asyncpg.connect(url)
            try:
                rows = await connection.fetch(
                    "SELECT query, calls, total_exec_time FROM pg_stat_statements"
                    " WHERE dbid = (SELECT oid FROM pg_database"
                    " WHERE datname = current_database())"
                )
            finally:
                await connection.close()
            return [Statement(_squash(r["query"]), r["calls"], r["total_exec_time"]) for r in rows]
        return _from_log(self._log(), self._log_offset)

    def _log(self) -> Path:
        return self.pg.base / "server.log"


_DURATION = re.compile(r"duration: ([0-9.]+) ms\s+(statement|execute|parse|bind)[^:]*:\s*(.*)")
"""A logged statement: ``duration: 0.05 ms  execute __asyncpg_stmt_1__: SELECT …``."""
_LITERALS = re.compile(r"'(?:[^']|'')*'|(?<![$\w])\d+(?:\.\d+)?\b")
"""Quoted strings and numbers, not ``$1`` parameters."""


def _from_log(log: Path, offset: int) -> list[Statement]:
    """Summarise ``duration: … ms statement: …`` lines (literals folded, as the extension does)."""
    by_query: dict[str, list[float]] = defaultdict(list)
    with log.open(errors="replace") as handle:
        handle.seek(offset)
        for line in handle:
            found = _DURATION.search(line)
            # parse and bind of the extended protocol are logged apart; a call is its execute.
            if found and found.group(2) in ("statement", "execute"):
                by_query[_LITERALS.sub("?", _squash(found.group(3)))].append(float(found.group(1)))
    return [Statement(q, len(d), sum(d)) for q, d in by_query.items()]


def _squash(query: str) -> str:
    return " ".join(query.split())


def _psql(pg: PgServer, sql: str) -> str:
    done = subprocess.run(
        [str(pg.bin_dir / "psql"), "-h", "127.0.0.1", "-p", str(pg.port), "-U", "postgres",
         "-d", "postgres", "-tAqc", sql],
        check=True,
        capture_output=True,
        text=True,
    )  # fmt: skip
    return done.stdout


def profile_table(label: str, statements: list[Statement], polls: int, mode: str) -> Table:
    """Per statement: calls per poll, mean and total execution time per poll (ms).

    Execution time is the server's time inside the statement (``total_exec_time``), not its
    CPU: waits on locks count, parsing and the network do not.
    """
    table = Table(
        f"PostgreSQL statements per poll [{label}] ({mode})",
        header=("statement", "calls/poll", "mean ms", "ms/poll"),
    )
    ordered = sorted(statements, key=lambda s: s.total_ms, reverse=True)
    per = max(polls, 1)
    for statement in ordered[:TOP]:
        table.add(
            statement.query[:110],
            f"{statement.calls / per:.2f}",
            f"{statement.total_ms / max(statement.calls, 1):.3f}",
            f"{statement.total_ms / per:.3f}",
        )
    rest = ordered[TOP:]
    if rest:
        calls, total = sum(s.calls for s in rest), sum(s.total_ms for s in rest)
        table.add(
            f"({len(rest)} other statements)",
            f"{calls / per:.2f}",
            f"{total / max(calls, 1):.3f}",
            f"{total / per:.3f}",
        )
    calls, total = sum(s.calls for s in statements), sum(s.total_ms for s in statements)
    table.add(
        "all statements", f"{calls / per:.2f}", f"{total / max(calls, 1):.3f}", f"{total / per:.3f}"
    )
    for kind, (k_calls, k_ms) in sorted(_kinds(statements).items(), key=lambda kv: -kv[1][1]):
        table.add(
            f"  kind: {kind}",
            f"{k_calls / per:.2f}",
            f"{k_ms / max(k_calls, 1):.3f}",
            f"{k_ms / per:.3f}",
        )
    table.notes.append(f"{polls:,} polls in the window; execution time, not CPU")
    return table


def _kinds(statements: list[Statement]) -> dict[str, tuple[int, float]]:
    """Group by verb and main table: ``UPDATE jobs``, ``BEGIN``, ``SELECT rate_window``…"""
    kinds: dict[str, tuple[int, float]] = {}
    for statement in statements:
        kind = _kind(statement.query)
        calls, total = kinds.get(kind, (0, 0.0))
        kinds[kind] = (calls + statement.calls, total + statement.total_ms)
    return kinds


_TABLE = re.compile(r"\b(?:FROM|INTO|UPDATE|JOIN)\s+([A-Za-z_][A-Za-z_0-9.]*)", re.IGNORECASE)


_FUNCTION = re.compile(r"\b([A-Za-z_][A-Za-z_0-9]*)\s*\(")
"""A statement without a table is named by its first function: ``SELECT pg_advisory_xact_lock``."""


def _kind(query: str) -> str:
    words = query.split()
    verb = words[0].upper() if words else "?"
    if verb == "WITH":
        verb = next(
            (w.upper() for w in words[1:] if w.upper() in {"SELECT", "INSERT", "UPDATE", "DELETE"}),
            "WITH",
        )
    if verb in {"BEGIN", "COMMIT", "ROLLBACK", "SET", "RESET", "SAVEPOINT", "RELEASE"}:
        return verb
    found = _TABLE.search(query) or _FUNCTION.search(query)
    return f"{verb} {found.group(1)}" if found else verb
