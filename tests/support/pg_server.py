"""A throwaway PostgreSQL server for the test session, on loopback, from the Debian binaries.

Why not pytest-postgresql: it runs ``pg_ctl`` as the current user, and ``initdb`` refuses to
run as root (CI runs as root), and its requests for another user were closed without one
(https://github.com/dbfixtures/pytest-postgresql/issues/341 and
https://github.com/dbfixtures/pytest-postgresql/issues/455). Here, as root, the server's files
belong to ``postgres`` (or ``nobody``) and ``initdb`` / ``pg_ctl`` run as that user with
``runuser``; as anyone else they run as that user directly.

One server per session (``initdb`` takes a second or two), a fresh database per test.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

SHARED_DATABASE = "genbot_tests"
"""The database whose schemas :meth:`PgServer.create_migrated_schema` hands out."""

MIGRATED_SCHEMA = "genbot_migrated_template"
"""The schema migrated once per session whose copy :meth:`PgServer.create_migrated_schema`
hands out (a name no table, column or value of ours contains)."""

SKIP_REASON = (
    "PostgreSQL tests skipped: no pg_ctl/initdb found; enable them with "
    "`apt-get install postgresql` (or put its bin directory on PATH)"
)


def find_bin_dir() -> Path | None:
    """Return the directory holding ``initdb`` and ``pg_ctl``, or None when not installed."""
    found = shutil.which("pg_ctl")
    if found and shutil.which("initdb"):
        return Path(os.path.realpath(found)).parent
    # Debian keeps them off PATH, one directory per major version: take the newest.
    candidates = sorted(
        glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"),
        key=lambda p: (
            int(Path(p).parent.parent.name) if Path(p).parent.parent.name.isdigit() else 0
        ),
    )
    return Path(candidates[-1]).parent if candidates else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _server_user() -> str | None:
    """The unprivileged user that owns the server when we are root; None when we are not."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root, and there is no postgres or nobody user to run PG as")


@dataclass
class PgServer:
    """A running server: superuser ``postgres`` without password, on ``127.0.0.1:port``."""

    bin_dir: Path
    base: Path
    port: int
    user: str | None
    _migrated_sql: str | None = field(default=None, init=False, repr=False)

    @property
    def data(self) -> Path:
        return self.base / "data"

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str) -> None:
        command = [str(self.bin_dir / args[0]), *args[1:]]
        if self.user is not None:
            command = ["runuser", "-u", self.user, "--", *command]
        subprocess.run(command, check=True, capture_output=True, cwd=self.base)

    @classmethod
    def start(cls, bin_dir: Path) -> PgServer:
        base = Path(tempfile.mkdtemp(prefix="genbot-pg-"))
        user = _server_user()
        if user is not None:
            entry = pwd.getpwnam(user)
            os.chown(base, entry.pw_uid, entry.pw_gid)
        server = cls(bin_dir, base, _free_port(), user)
        try:
            server._run(
                "initdb", "-D", str(server.data), "-U", "postgres", "--auth=trust",
                "--encoding=UTF8", "--locale=C", "--no-sync",
            )  # fmt: skip
            server._start_on_a_free_port()
            server._client("createdb", SHARED_DATABASE)
        except BaseException:
            with contextlib.suppress(subprocess.CalledProcessError):  # never started
                server.stop()
            shutil.rmtree(base, ignore_errors=True)
            raise
        return server

    def _start_on_a_free_port(self, attempts: int = 5) -> None:
        """Start the server; should another process take its port first (pytest-xdist's
        workers each start a server), try again on another free port."""
        for attempt in range(attempts):
            # Durability is not under test here: fsync off makes each fresh database quick.
            options = (
                f"-c listen_addresses=127.0.0.1 -c port={self.port}"
                f" -c unix_socket_directories={self.base} -c fsync=off"
                " -c synchronous_commit=off -c full_page_writes=off -c max_connections=200"
            )
            try:
                self._run(
                    "pg_ctl", "start", "-w", "-D", str(self.data), "-o", options,
                    "-l", str(self.base / "server.log"),
                )  # fmt: skip
                return
            except subprocess.CalledProcessError:
                if attempt == attempts - 1:
                    raise
                self.port = _free_port()

    def create_database(self) -> str:
        """Create a new, empty database and return its URL (client tools run as anyone)."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self._client("createdb", name)
        return self.url(name)

    def create_migrated_schema(self, migrate: Callable[[str], None]) -> str:
        """A new schema of the shared database at the newest migration; a URL that uses it.

        Quicker than a database (``CREATE DATABASE`` copies a template); ``search_path`` in the
        URL is passed to the server.

        The first call makes :data:`MIGRATED_SCHEMA` and calls ``migrate(url)`` on it (the
        bot's own migrations, as ``python -m bot`` runs them); its dump (``pg_dump``: tables,
        indexes, sequences and the migration records) is kept, and each call replays it under
        a new name: about a tenth of the migrations' time (0.03 s against 0.27 s).
        """
        if self._migrated_sql is None:
            url = f"{self.url(SHARED_DATABASE)}?search_path={MIGRATED_SCHEMA}"
            self._client("psql", "-d", SHARED_DATABASE, "-qc", f'CREATE SCHEMA "{MIGRATED_SCHEMA}"')
            migrate(url)
            self._migrated_sql = self._output(
                "pg_dump", "--schema", MIGRATED_SCHEMA, "--no-owner", "--no-privileges",
                SHARED_DATABASE,
            )  # fmt: skip
        name = f"s_{uuid.uuid4().hex[:16]}"
        script = self._migrated_sql.replace(MIGRATED_SCHEMA, name)
        self._client(
            "psql", "-d", SHARED_DATABASE, "-q", "-v", "ON_ERROR_STOP=1", input=script
        )  # fmt: skip
        return f"{self.url(SHARED_DATABASE)}?search_path={name}"

    def drop_schema(self, url: str) -> None:
        """Drop a schema made by :meth:`create_migrated_schema` (a leak is harmless)."""
        name = url.rsplit("=", 1)[1]
        sql = f"SET lock_timeout = '5s'; DROP SCHEMA \"{name}\" CASCADE"
        self._client("psql", "-d", SHARED_DATABASE, "-qc", sql, check=False)

    def drop_database(self, url: str) -> None:
        """Drop a database made by :meth:`create_database`, whoever is still connected."""
        self._client("dropdb", "--force", url.rsplit("/", 1)[1])

    def _client(self, tool: str, *args: str, check: bool = True, input: str | None = None) -> None:
        subprocess.run(
            [str(self.bin_dir / tool), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
             *args],
            check=check,
            capture_output=True,
            input=input,
            text=input is not None,
        )  # fmt: skip

    def _output(self, tool: str, *args: str) -> str:
        """What a client tool prints (``pg_dump``)."""
        return subprocess.run(
            [str(self.bin_dir / tool), "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
             *args],
            check=True,
            capture_output=True,
            text=True,
        ).stdout  # fmt: skip

    def stop(self) -> None:
        try:
            self._run("pg_ctl", "stop", "-m", "immediate", "-w", "-D", str(self.data))
        finally:
            shutil.rmtree(self.base, ignore_errors=True)
