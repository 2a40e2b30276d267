"""Settings: documented everywhere, clear when wrong, and secrets never printed."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import Settings, SettingsError, load_settings

ROOT = Path(__file__).resolve().parents[1]
FIELDS = {name.upper() for name in Settings.model_fields}


def test_every_setting_is_in_env_example_and_the_settings_table() -> None:
    example = set(re.findall(r"^([A-Z0-9_]+)=", (ROOT / ".env.example").read_text(), re.M))
    table = (ROOT / "docs" / "settings.md").read_text()
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", table, re.M))
    assert example == FIELDS
    assert documented == FIELDS


def compose_environment() -> set[str]:
    """The variable names of the ``environment:`` block of docker-compose.yml's bot service."""
    text = (ROOT / "docker-compose.yml").read_text()
    block = re.search(r"^    environment:\n((?:      .*\n|\s*\n)+)", text, re.M)
    assert block is not None, "docker-compose.yml has no environment block"
    return set(re.findall(r"^      ([A-Z0-9_]+):", block.group(1), re.M))


def test_every_setting_is_in_the_compose_file() -> None:
    assert compose_environment() == FIELDS


def test_a_bad_setting_is_named_without_its_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "tok-secret-123")
    monkeypatch.setenv("GENAPI_BASE_URL", "https://example.com/v2")
    monkeypatch.setenv("KEY_ENCRYPTION_KEY", "not-a-fernet-key-secret")
    with pytest.raises(SettingsError) as bad:
        load_settings(_env_file=None)
    message = str(bad.value)
    assert "GENAPI_BASE_URL" in message
    assert "KEY_ENCRYPTION_KEY" in message
    assert "secret" not in message


def test_secrets_do_not_show_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DISCORD_TOKEN", "tok-secret-123")
    monkeypatch.setenv("GENAPI_API_KEY", "sk-gen-secret-456")
    settings = load_settings(_env_file=None)
    assert "secret" not in repr(settings)
    assert settings.sandbox


def test_starting_without_a_token_prints_one_clear_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "genbot: cannot start: DISCORD_TOKEN: missing"


def test_an_unreachable_discord_is_one_clear_line(tmp_path: Path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "PYTHONPATH": str(ROOT),
        "DISCORD_TOKEN": "token-never-printed",
        "DISCORD_API_BASE_URL": "http://127.0.0.1:9/api/v10",  # the discard port: refused
    }
    result = subprocess.run(
        [sys.executable, "-m", "bot"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("genbot: cannot start: Discord is unreachable at http://127.0.0.1:9")
    assert "Traceback" not in result.stderr
    assert "token-never-printed" not in result.stderr


def test_shard_settings_and_the_shared_rate_limit() -> None:
    def settings(**values: object) -> Settings:
        values.setdefault("genapi_base_url", "https://api.example.com/api/v1")
        return load_settings(_env_file=None, discord_token="t", **values)

    plain = settings()
    assert (plain.shard_count, plain.shard_id_list, plain.poller_enabled) == (None, None, True)
    assert not plain.rate_limit_shared  # one process on SQLite: the in-process limiter
    split = settings(shard_count=2, shard_ids=" 1, 0 ")
    assert split.shard_id_list == [1, 0] and split.rate_limit_shared
    assert settings(poller_enabled=False).rate_limit_shared
    assert not settings(poller_enabled=False, shared_rate_limit=False).rate_limit_shared
    with pytest.raises(SettingsError, match="SHARD_COUNT"):
        settings(shard_ids="0")
    with pytest.raises(SettingsError, match="below SHARD_COUNT"):
        settings(shard_count=2, shard_ids="0,2")
    with pytest.raises(SettingsError, match=r"SHARD_IDS: .*separated by commas"):
        settings(shard_count=2, shard_ids="zero")
    # The sandbox's emulator lives inside one process: no other process could poll its tasks.
    with pytest.raises(SettingsError, match="GENAPI_BASE_URL is needed"):
        settings(genapi_base_url=None, poller_enabled=False)


def test_a_worker_in_sandbox_mode_is_refused_with_one_line(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot", "worker"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "DISCORD_TOKEN": "t"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2
    assert result.stderr.startswith("genbot: cannot start: GENAPI_BASE_URL is needed")
    assert len(result.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "data").exists()  # nothing was created
