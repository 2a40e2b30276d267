"""A new operator's first run: the real ``python -m bot`` answers in one clear line."""

import contextlib
import os
import socket
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.config import SettingsError, load_settings
from bot.discord.permissions import PLACEHOLDER_PERMISSIONS, invite_permissions
from tests.support.command_line import ROOT, TOKEN, one_line, run_bot


@contextlib.contextmanager
def read_only(*paths: Path) -> Iterator[None]:
    """Make ``paths`` read-only for this user, root included.

    chmod does not stop root (CI runs as root), but the immutable attribute does: the closest
    thing to a read-only disk without mounting one.
    """
    if os.geteuid() != 0:
        for path in paths:
            path.chmod(0o555 if path.is_dir() else 0o444)
        try:
            yield
        finally:
            for path in paths:
                path.chmod(0o755 if path.is_dir() else 0o644)
        return
    done = []
    try:
        for path in paths:
            if subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode:
                pytest.skip(
                    "running as root, and chattr +i is not available to make a read-only file"
                )
            done.append(path)
        yield
    finally:
        for path in done:
            subprocess.run(["chattr", "-i", str(path)], check=True)


# -- DATABASE_PATH -----------------------------------------------------------------------------


def test_a_database_path_that_is_a_directory_is_one_line(tmp_path: Path) -> None:
    result = run_bot(tmp_path, DATABASE_PATH=str(tmp_path))
    assert result.returncode == 2
    assert (
        one_line(result)
        == f"genbot: cannot start: DATABASE_PATH: {tmp_path} is a directory, not a database file"
    )


def test_a_database_path_below_a_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "plain").write_text("x")
    result = run_bot(tmp_path, DATABASE_PATH=str(tmp_path / "plain" / "data" / "bot.db"))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("genbot: cannot start: DATABASE_PATH: ")
    assert "plain is a file" in line


def test_a_database_in_a_read_only_folder_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    with read_only(folder):
        result = run_bot(tmp_path, DATABASE_PATH=str(folder / "bot.db"))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("genbot: cannot start: DATABASE_PATH: ")
    assert str(folder) in line


def test_an_existing_database_on_a_read_only_disk_is_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "disk"
    folder.mkdir()
    sqlite3.connect(folder / "bot.db").close()
    with read_only(folder / "bot.db", folder):
        result = run_bot(tmp_path, DATABASE_PATH=str(folder / "bot.db"))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("genbot: cannot start: DATABASE_PATH: ")
    assert str(folder) in line


def test_a_database_path_naming_another_kind_of_file_is_one_line(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("not a database, but long enough to be read as one " * 9)
    result = run_bot(tmp_path, DATABASE_PATH=str(tmp_path / "notes.txt"))
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith(f"genbot: cannot start: DATABASE_PATH: cannot open {tmp_path}")
    assert "not a database" in line


# -- the Generation API settings ---------------------------------------------------------------


def test_a_real_key_without_a_base_url_is_named_in_one_warning(tmp_path: Path) -> None:
    result = run_bot(tmp_path, GENAPI_API_KEY="sk-gen-real-key-never-shown")
    warnings = [line for line in result.stderr.splitlines() if "GENAPI_API_KEY" in line]
    assert len(warnings) == 1
    assert "WARNING" in warnings[0]
    assert "sandbox" in warnings[0]
    assert "GENAPI_BASE_URL" in warnings[0]
    assert "sk-gen-real-key-never-shown" not in result.stderr


def test_sandbox_mode_is_one_line_that_says_how_to_leave_it(tmp_path: Path) -> None:
    result = run_bot(tmp_path, DATABASE_PATH=str(tmp_path / "bot.db"))
    (line,) = [line for line in result.stderr.splitlines() if "SANDBOX MODE" in line]
    assert "GENAPI_BASE_URL is not set" in line
    assert "To leave it, set GENAPI_BASE_URL" in line
    assert "/config api-key set" in line


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("http://gen.example:0/api/v1", "port"),
        ("http://gen.example:70000/api/v1", "port"),
        ("http://gen.example:port/api/v1", "port"),
        ("https://gen.example:/api/v1", "port"),
        ("https:///api/v1", "host"),
        ("http://:8080/api/v1", "host"),
    ],
)
def test_an_impossible_base_url_is_refused_at_start(
    monkeypatch: pytest.MonkeyPatch, url: str, reason: str
) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    monkeypatch.setenv("GENAPI_BASE_URL", url)
    with pytest.raises(SettingsError) as bad:
        load_settings(_env_file=None)
    assert str(bad.value).startswith("GENAPI_BASE_URL: ")
    assert reason in str(bad.value)


def test_a_possible_base_url_is_accepted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", TOKEN)
    monkeypatch.setenv("GENAPI_BASE_URL", "https://gen.example:8443/api/v1/")
    assert load_settings(_env_file=None).genapi_base_url == "https://gen.example:8443/api/v1"


# -- help, version, invite ---------------------------------------------------------------------


def test_help_is_plain_text_naming_env_and_the_settings_table(tmp_path: Path) -> None:
    result = run_bot(tmp_path, "--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert ".env file in the working directory" in text
    assert "docs/settings.md" in text
    for command in ("run", "sync", "invite", "backup"):
        assert f" {command} " in text
    assert "\x1b[" not in result.stdout  # no colour codes


def test_version_comes_from_the_package_metadata(tmp_path: Path) -> None:
    from importlib.metadata import version

    result = run_bot(tmp_path, "--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"genbot {version('genbot')}"


def test_invite_prints_the_url_with_every_permission_the_code_checks(tmp_path: Path) -> None:
    result = run_bot(tmp_path, "invite")
    assert result.returncode == 0
    server, user = result.stdout.strip().splitlines()
    assert server.startswith("server install: ")
    url = server.removeprefix("server install: ")
    assert url.startswith("https://discord.com/oauth2/authorize?client_id=123456789012345678&")
    assert url.endswith("&integration_type=0")
    # The user install: commands only, no bot user, no permissions.
    assert user == (
        "user install: https://discord.com/oauth2/authorize?client_id=123456789012345678"
        "&scope=applications.commands&integration_type=1"
    )
    assert "scope=bot+applications.commands" in url
    assert f"permissions={invite_permissions().value}" in url
    assert "token-secret-part" not in result.stdout + result.stderr
    for name in PLACEHOLDER_PERMISSIONS:
        assert getattr(invite_permissions(), name)
    assert invite_permissions().send_messages_in_threads
    assert invite_permissions().create_public_threads  # /chat's threads


def test_the_documented_invite_matches_the_code() -> None:
    documented = (ROOT / "docs" / "discord-application.md").read_text()
    value = invite_permissions().value
    assert f"`{value}`" in documented
    assert f"permissions={value}" in documented
    assert "Send Messages in Threads" in documented


def test_invite_with_an_application_id_needs_no_token(tmp_path: Path) -> None:
    result = run_bot(tmp_path, "invite", "--application-id", "42", DISCORD_TOKEN="")
    assert result.returncode == 0
    assert "client_id=42&" in result.stdout


def test_invite_with_a_token_that_is_not_a_bot_token_is_one_line(tmp_path: Path) -> None:
    result = run_bot(tmp_path, "invite", DISCORD_TOKEN="not-base64-secret!")
    assert result.returncode == 2
    line = one_line(result)
    assert line.startswith("genbot: invite failed: DISCORD_TOKEN: ")
    assert "--application-id" in line
    assert "secret" not in line


# -- backup ------------------------------------------------------------------------------------


def test_backup_copies_a_live_wal_database(tmp_path: Path) -> None:
    live = tmp_path / "bot.db"
    writer = sqlite3.connect(live, isolation_level=None)
    writer.execute("PRAGMA journal_mode = WAL")
    writer.execute("PRAGMA wal_autocheckpoint = 0")  # keep the rows in the WAL file
    writer.execute("CREATE TABLE ledger (cost INTEGER)")
    writer.execute("INSERT INTO ledger VALUES (7), (35)")
    assert (tmp_path / "bot.db-wal").stat().st_size > 0
    try:
        result = run_bot(tmp_path, "backup", str(tmp_path / "copy.db"), DATABASE_PATH=str(live))
    finally:
        writer.close()
    assert result.returncode == 0, result.stderr
    with contextlib.closing(sqlite3.connect(tmp_path / "copy.db")) as copy:
        assert copy.execute("SELECT sum(cost) FROM ledger").fetchone() == (42,)


def test_backup_never_overwrites_a_file(tmp_path: Path) -> None:
    sqlite3.connect(tmp_path / "bot.db").close()
    (tmp_path / "copy.db").write_text("keep me")
    result = run_bot(tmp_path, "backup", "copy.db", DATABASE_PATH=str(tmp_path / "bot.db"))
    assert result.returncode == 2
    assert one_line(result).startswith("genbot: backup failed: copy.db exists already")
    assert "copy.db exists already" in one_line(result)
    assert (tmp_path / "copy.db").read_text() == "keep me"


# -- the sandbox emulator alone ----------------------------------------------------------------


def test_the_sandbox_on_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_bot(tmp_path, "--port", str(port), module="bot.sandbox")
    assert result.returncode == 1
    line = one_line(result)
    assert f"127.0.0.1:{port}" in line
    assert "in use" in line
