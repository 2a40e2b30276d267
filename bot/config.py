"""Settings, read once in ``main()`` from the environment and ``.env`` (pydantic-settings).

Every field here is listed in the README's configuration table and in ``.env.example``; a test
keeps the three in step. Secrets are :class:`pydantic.SecretStr`, so they never print.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Literal
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from pydantic import Field, SecretStr, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DISCORD_API_BASE_URL = "https://discord.com/api/v10"
DISCORD_GATEWAY_URL = "wss://gateway.discord.gg/"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
NonNegativeCents = Annotated[int, Field(ge=0)]


class Settings(BaseSettings):
    """The bot's configuration. Field names are the environment variables, upper-cased."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        env_ignore_empty=True,
        extra="ignore",
        hide_input_in_errors=True,
    )

    discord_token: SecretStr
    genapi_base_url: str | None = None
    genapi_api_key: SecretStr | None = None
    database_path: Path = Path("data/bot.db")
    database_url: SecretStr | None = None
    discord_api_base_url: str = DISCORD_API_BASE_URL
    discord_gateway_url: str = DISCORD_GATEWAY_URL
    dev_guild_id: int | None = None
    log_level: LogLevel = "INFO"
    key_encryption_key: SecretStr | None = None

    default_guild_monthly_budget_cents: NonNegativeCents | None = None
    default_user_daily_budget_cents: NonNegativeCents | None = None
    default_max_pending_videos_per_user: Annotated[int, Field(ge=1)] = 3
    default_max_pending_videos_per_guild: Annotated[int, Field(ge=1)] = 20

    job_timeout_seconds: Annotated[float, Field(gt=0)] = 1800.0
    genapi_rate_limit: Annotated[int, Field(ge=1)] = 30
    genapi_rate_window_seconds: Annotated[float, Field(gt=0)] = 60.0
    sandbox_time_scale: Annotated[float, Field(gt=0)] = 1.0

    @field_validator("genapi_base_url")
    @classmethod
    def _base_url_is_v1(cls, value: str | None) -> str | None:
        if value is None or value == "":
            return None
        value = value.rstrip("/")
        if not value.startswith(("http://", "https://")) or not value.endswith("/api/v1"):
            raise ValueError("must be an http(s) URL ending in /api/v1")
        parts = urlsplit(value)
        if not parts.hostname:
            raise ValueError("has no host name")
        try:
            port = parts.port
        except ValueError:  # out of range or not a number
            port = 0
        if port == 0 or parts.netloc.endswith(":"):
            raise ValueError("has a port outside 1-65535")
        return value

    @field_validator("database_url")
    @classmethod
    def _is_postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip():
            return None
        check_database_url(value.get_secret_value())
        return value

    @field_validator("discord_api_base_url", "discord_gateway_url")
    @classmethod
    def _is_url(cls, value: str) -> str:
        if not value.startswith(("http://", "https://", "ws://", "wss://")):
            raise ValueError("must be an http(s) or ws(s) URL")
        return value

    @field_validator("key_encryption_key")
    @classmethod
    def _is_fernet_key(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value().strip(" ,"):
            return None
        try:
            fernet_keys(value.get_secret_value())
        except ValueError as exc:
            raise ValueError(
                f"{exc}; give one Fernet key, or several separated by commas (the first "
                "encrypts, all decrypt). Make one with: python -c "
                '"from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())"'
            ) from None
        return value

    @property
    def postgresql(self) -> bool:
        """True when ``DATABASE_URL`` is set: PostgreSQL, and ``DATABASE_PATH`` is not used."""
        return self.database_url is not None

    @property
    def sandbox(self) -> bool:
        """True when no ``GENAPI_BASE_URL`` is set: the bot runs the built-in emulator."""
        return self.genapi_base_url is None

    @property
    def log_level_number(self) -> int:
        """The ``logging`` level of ``log_level``."""
        return logging.getLevelNamesMapping()[self.log_level]


def fernet_keys(secret: str) -> list[str]:
    """Split a ``KEY_ENCRYPTION_KEY`` value into its comma-separated Fernet keys.

    The first encrypts, all decrypt (``cryptography.fernet.MultiFernet``); listing an old key
    after a new one lets ``python -m bot rotate-keys`` re-encrypt what the old one made.

    Raises:
        ValueError: an entry is not a Fernet key (urlsafe base64 of 32 bytes); the message
            gives its position, never its value.
    """
    keys = [part.strip() for part in secret.split(",") if part.strip()]
    for position, key in enumerate(keys, start=1):
        try:
            Fernet(key)
        except ValueError:
            raise ValueError(f"entry {position} is not a Fernet key") from None
    return keys


def check_database_url(url: str) -> None:
    """Check that ``url`` reads ``postgresql://user:password@host:port/dbname``.

    ``postgres://`` is accepted too, and so are libpq's query parameters (``?sslmode=...``);
    the password is optional (e.g. ``trust`` or a ``.pgpass`` file).

    Raises:
        ValueError: what is wrong, in words that never include the URL or its password.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("postgresql", "postgres"):
        raise ValueError("must be a postgresql://user:password@host:port/dbname URL")
    if not parts.hostname:
        raise ValueError("has no host name (postgresql://user:password@host:port/dbname)")
    try:
        port = parts.port
    except ValueError:  # out of range or not a number; its message would quote the netloc
        raise ValueError("has a port outside 1-65535") from None
    if port == 0 or parts.netloc.endswith(":"):
        raise ValueError("has a port outside 1-65535")
    if not parts.path.strip("/") or "/" in parts.path.strip("/"):
        raise ValueError("names no database (postgresql://user:password@host:port/dbname)")


def redact_database_url(url: str) -> str:
    """Return ``url`` with its password replaced by ``***``, for logs and messages.

    ``postgresql://bot:s3cret@db:5432/genbot`` gives ``postgresql://bot:***@db:5432/genbot``;
    query parameters are dropped (they may carry a password too).
    """
    parts = urlsplit(url)
    user = parts.username or ""
    auth = f"{user}:***@" if parts.password is not None else (f"{user}@" if user else "")
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        port = ""
    return f"{parts.scheme}://{auth}{host}{port}{parts.path}"


class SettingsError(Exception):
    """A setting is missing or malformed; the message names it and never shows its value."""


def check_database_path(path: Path) -> None:
    """Check that the bot can create or write the SQLite database at ``path``, before opening it.

    SQLite in WAL mode writes two files beside the database (``-wal``, ``-shm``), so its folder
    must be writable as well as the file. The checks use the process's own permissions
    (``os.access``); a read-only mount that they cannot see fails later, when the database is
    opened, and ``main()`` reports that in the same one-line form.

    Raises:
        SettingsError: ``DATABASE_PATH: <path> is a directory`` and the like, one line.
    """
    if path.is_dir():
        raise SettingsError(f"DATABASE_PATH: {path} is a directory, not a database file")
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    if not folder.is_dir():
        raise SettingsError(
            f"DATABASE_PATH: {folder} is a file, so nothing can be created below it"
        )
    if path.exists() and not os.access(path, os.R_OK | os.W_OK):
        raise SettingsError(f"DATABASE_PATH: {path} is not writable by this user")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise SettingsError(
            f"DATABASE_PATH: folder {folder} is not writable by this user "
            "(SQLite needs to create its -wal and -shm files beside the database)"
        )


def load_settings(**overrides: object) -> Settings:
    """Build :class:`Settings` from the environment, ``.env`` and ``overrides``.

    Raises:
        SettingsError: with one line per bad setting, e.g. ``DISCORD_TOKEN: missing``.
    """
    try:
        return Settings(**overrides)  # type: ignore[arg-type]
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            name = str(error["loc"][0]).upper() if error["loc"] else "settings"
            reason = "missing" if error["type"] == "missing" else error["msg"]
            lines.append(f"{name}: {reason}")
        raise SettingsError("; ".join(lines)) from None
