"""Settings, read once in ``main()`` from the environment and ``.env`` (pydantic-settings).

Every field here is listed in the settings table of ``docs/settings.md`` and in ``.env.example``;
a test keeps the three in step. Secrets are :class:`pydantic.SecretStr`, so they never print.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Annotated, Final, Literal
from urllib.parse import urlsplit

from cryptography.fernet import Fernet
from pydantic import Field, SecretStr, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from bot.redaction import REDACTED

DISCORD_API_BASE_URL = "https://discord.com/api/v10"
DISCORD_GATEWAY_URL = "wss://gateway.discord.gg/"

LogLevel = Literal["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"]
LogFormat = Literal["text", "json"]
NonNegativeCents = Annotated[int, Field(ge=0)]


SANDBOX_ALONE = (
    "GENAPI_BASE_URL is needed to run several processes (SHARD_IDS, POLLER_ENABLED=false, "
    "worker): sandbox mode runs its emulator inside one process, whose tasks no other "
    "process can poll"
)


PERSONAL_TOTAL_MULTIPLE = 10
"""``PERSONAL_TOTAL_DAILY_BUDGET_CENTS``'s default, in members' daily allowances."""


DEFAULT_PORTS: Final = {"http": 80, "https": 443}


def web_origin(url: str) -> str:
    """Return the origin of an http(s) URL, serialised as browsers send it (RFC 6454, 6.1).

    The scheme and host lowercased, the scheme's default port left out, no path:
    ``HTTPS://Dash.Example.com:443/x`` -> ``https://dash.example.com``. An unparsable port
    is left as written (the URL is then no origin a browser sends).
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 address keeps its brackets
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        return url.strip()
    shown = "" if port is None or port == DEFAULT_PORTS.get(scheme) else f":{port}"
    return f"{scheme}://{host}{shown}"


def parse_credit_packs(text: str | None) -> dict[int, int]:
    """Return ``CREDIT_PACKS`` as ``{SKU id: cents credited}``, in the order written.

    ``"1234567890123456789=500, 1234567890123456790=1000"`` -> two packs. Empty or None: none.

    Raises:
        ValueError: a pair is not ``<snowflake>=<whole cents above 0>``, or a SKU repeats.
    """
    packs: dict[int, int] = {}
    for part in (text or "").split(","):
        if not part.strip():
            continue
        sku, sep, cents = (p.strip() for p in part.partition("="))
        if not sep or not sku.isdigit() or not cents.isdigit() or int(cents) <= 0:
            raise ValueError("must be <SKU id>=<cents> pairs separated by commas, e.g. 123=500")
        if int(sku) in packs:
            raise ValueError("lists a SKU twice")
        packs[int(sku)] = int(cents)
    return packs


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
    # SQLite: how long a write waits for another connection's write lock, seconds.
    database_busy_timeout_seconds: Annotated[float, Field(gt=0, le=60)] = 5.0
    # Where a settlement the database could not take waits for the next start (None: beside
    # DATABASE_PATH, see settlement_spool_file).
    settlement_spool_path: Path | None = None
    discord_api_base_url: str = DISCORD_API_BASE_URL
    discord_gateway_url: str = DISCORD_GATEWAY_URL
    dev_guild_id: int | None = None
    log_level: LogLevel = "INFO"
    log_format: LogFormat = "text"
    metrics_port: Annotated[int, Field(ge=0, le=65535)] | None = None
    metrics_host: str = "127.0.0.1"
    dashboard_public_url: str | None = None
    dashboard_port: Annotated[int, Field(ge=1, le=65535)] | None = None
    dashboard_host: str = "127.0.0.1"
    # Out of the repr altogether: its very name would read as a secret in a log line.
    discord_client_secret: SecretStr | None = Field(default=None, repr=False)
    key_encryption_key: SecretStr | None = None

    default_guild_monthly_budget_cents: NonNegativeCents | None = None
    default_user_daily_budget_cents: NonNegativeCents | None = None
    default_max_pending_videos_per_user: Annotated[int, Field(ge=1)] = 3
    default_max_pending_videos_per_guild: Annotated[int, Field(ge=1)] = 20
    # What a request holds when its price is not known yet (docs/architecture.md, Money rules).
    text_hold_ceiling_cents: NonNegativeCents = 50
    image_hold_ceiling_cents: NonNegativeCents = 25
    video_hold_ceiling_cents_per_5s: NonNegativeCents = 200
    jobs_recheck_seconds: Annotated[float, Field(ge=0)] = 300.0
    personal_daily_budget_cents: NonNegativeCents = 0
    # All members' personal use of GENAPI_API_KEY together, per UTC day; None: 10 times the
    # per-member allowance (personal_total_budget_cents).
    personal_total_daily_budget_cents: NonNegativeCents | None = None

    job_timeout_seconds: Annotated[float, Field(gt=0)] = 1800.0
    genapi_rate_limit: Annotated[int, Field(ge=1)] = 30
    genapi_rate_window_seconds: Annotated[float, Field(gt=0)] = 60.0
    # A user's request waits in its key's queue up to this long (estimated as it is queued)
    # before being refused; at most 14 min, within the 15 min an interaction can be answered.
    queue_max_wait_seconds: Annotated[float, Field(gt=0, le=840)] = 300.0
    sandbox_time_scale: Annotated[float, Field(gt=0)] = 1.0
    wait_scale: Annotated[float, Field(ge=1)] = 1.0
    placeholder_grace_seconds: Annotated[float, Field(gt=0)] = 30.0

    shard_count: Annotated[int, Field(ge=1)] | None = None
    shard_ids: str | None = None
    poller_enabled: bool = True
    shared_rate_limit: bool | None = None
    poll_lease_seconds: Annotated[float, Field(gt=0)] = 30.0
    delivery_lease_seconds: Annotated[float, Field(gt=0)] = 300.0
    shutdown_grace_seconds: Annotated[float, Field(ge=0)] = 20.0
    # After the gateway's READY, how long discord.py waits for one more GUILD_CREATE before
    # it calls the shard ready (its guild_ready_timeout), seconds.
    guild_ready_timeout_seconds: Annotated[float, Field(ge=0, le=60)] = 2.0

    # Conversations: the bound on a folded prompt, characters (at least one 4,000-
    # character turn with its labels; the emulator takes 32,000, docs/genapi-choices.md), and
    # turns per conversation.
    chat_max_prompt_chars: Annotated[int, Field(ge=4200)] = 16_000
    chat_max_turns: Annotated[int, Field(ge=1)] = 50

    # Retention: days rows are kept before the periodic sweep deletes them (0: for ever), and
    # seconds between two sweeps (bot/services/retention.py).
    retention_result_requests_days: Annotated[float, Field(ge=0)] = 90.0
    retention_audit_days: Annotated[float, Field(ge=0)] = 365.0
    retention_rate_rows_days: Annotated[float, Field(ge=0)] = 1.0
    retention_metadata_days: Annotated[float, Field(ge=0)] = 1.0
    retention_thumbnails_days: Annotated[float, Field(ge=0)] = 0.0
    retention_sweep_seconds: Annotated[float, Field(gt=0)] = 3600.0

    # Safety checking of results (docs/safety.md, bot/media/safety.py): the model (a folder in
    # Optimum's ONNX layout, or "nudenet"; None: checking unavailable), its labels that count
    # as unsafe (comma-separated, any case), seconds to a verdict before the result is held,
    # and the scorer's threads (each inference on one core).
    safety_model: str | None = None
    safety_unsafe_labels: str = "nsfw"
    safety_timeout: Annotated[float, Field(gt=0)] = 20.0
    safety_threads: Annotated[int, Field(ge=1, le=8)] = 1

    # Credit packs members buy in Discord (docs/credits.md): ``<SKU id>=<cents>`` pairs,
    # comma-separated (None: no packs offered), and the markup a member's balance pays over
    # the service's price, percent.
    credit_packs: str | None = None
    credit_markup_percent: Annotated[int, Field(ge=0, le=1000)] = 0

    @field_validator("safety_unsafe_labels")
    @classmethod
    def _some_unsafe_label(cls, value: str) -> str:
        if not any(label.strip() for label in value.split(",")):
            raise ValueError("name at least one label, e.g. nsfw")
        return value

    @field_validator("credit_packs")
    @classmethod
    def _credit_pack_list(cls, value: str | None) -> str | None:
        if value is None or not value.strip(" ,"):
            return None
        parse_credit_packs(value)
        return value

    @field_validator("shard_ids")
    @classmethod
    def _shard_id_list(cls, value: str | None) -> str | None:
        if value is None or not value.strip(" ,"):
            return None
        parts = [part.strip() for part in value.split(",") if part.strip()]
        if not all(part.isdigit() for part in parts):
            raise ValueError("must be shard numbers separated by commas, e.g. 0,1")
        ids = [int(part) for part in parts]
        if len(set(ids)) != len(ids):
            raise ValueError("lists a shard twice")
        return ",".join(str(i) for i in ids)

    @model_validator(mode="after")
    def _shards_fit_the_count(self) -> Settings:
        ids = self.shard_id_list
        if ids is not None:
            if self.shard_count is None:
                raise ValueError("SHARD_IDS needs SHARD_COUNT (the total over every process)")
            if max(ids) >= self.shard_count:
                raise ValueError(f"SHARD_IDS must be below SHARD_COUNT ({self.shard_count})")
        if self.sandbox and (ids is not None or not self.poller_enabled):
            raise ValueError(SANDBOX_ALONE)
        return self

    @model_validator(mode="after")
    def _dashboard_has_its_own_port(self) -> Settings:
        if (
            self.dashboard_enabled
            and self.metrics_port is not None
            and self.dashboard_listen_port == self.metrics_port
        ):
            raise ValueError(
                "DASHBOARD_PORT must differ from METRICS_PORT (the dashboard has a port of its own)"
            )
        return self

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

    @field_validator("dashboard_public_url")
    @classmethod
    def _dashboard_url_is_an_origin(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        value = value.strip().rstrip("/")
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL, e.g. http://localhost:8080")
        if parts.path or parts.query or parts.fragment or parts.username or parts.password:
            raise ValueError(
                "must be an origin only (scheme, host, port), e.g. https://dash.example.com"
            )
        try:
            port = parts.port
        except ValueError:
            port = 0
        if port == 0 or parts.netloc.endswith(":"):
            raise ValueError("has a port outside 1-65535")
        return web_origin(value)

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
    def personal_total_budget_cents(self) -> int:
        """Cents all members together may spend per UTC day on the shared key, personally.

        ``PERSONAL_TOTAL_DAILY_BUDGET_CENTS`` when set, else :data:`PERSONAL_TOTAL_MULTIPLE`
        times ``PERSONAL_DAILY_BUDGET_CENTS``: ten members spending their whole allowance on
        the same day is already a busy day for an allowance meant as a taste of the bot, and
        the owner's bill stays a known small multiple of one member's.
        """
        if self.personal_total_daily_budget_cents is not None:
            return self.personal_total_daily_budget_cents
        return PERSONAL_TOTAL_MULTIPLE * self.personal_daily_budget_cents

    @property
    def dashboard_enabled(self) -> bool:
        """Whether the web dashboard is served (``docs/dashboard.md``).

        On when ``DASHBOARD_PUBLIC_URL`` and ``DISCORD_CLIENT_SECRET`` are both set.
        """
        return self.dashboard_public_url is not None and self.discord_client_secret is not None

    @property
    def dashboard_listen_port(self) -> int:
        """The port the dashboard listens on.

        ``DASHBOARD_PORT``, else the public URL's port (80 or 443 when it names none).
        """
        if self.dashboard_port is not None:
            return self.dashboard_port
        parts = urlsplit(self.dashboard_public_url or "http://localhost")
        return parts.port or (443 if parts.scheme == "https" else 80)

    @property
    def dashboard_redirect_uri(self) -> str:
        """The OAuth2 redirect URI to register in the Discord application.

        ``DASHBOARD_PUBLIC_URL`` + ``/auth/callback``.
        """
        return f"{self.dashboard_public_url}/auth/callback"

    @property
    def postgresql(self) -> bool:
        """True when ``DATABASE_URL`` is set: PostgreSQL, and ``DATABASE_PATH`` is not used."""
        return self.database_url is not None

    @property
    def shard_id_list(self) -> list[int] | None:
        """The shards this process runs (``SHARD_IDS``); None: all of ``SHARD_COUNT``."""
        if self.shard_ids is None:
            return None
        return [int(part) for part in self.shard_ids.split(",")]

    @property
    def rate_limit_shared(self) -> bool:
        """Whether the per-key rate window lives in the database (shared by every process).

        ``SHARED_RATE_LIMIT`` when set; otherwise on whenever this process is probably one of
        several: on PostgreSQL, with a subset of shards (``SHARD_IDS``), or with the poller
        left to workers (``POLLER_ENABLED=false``). ``python -m bot worker`` always shares it.
        """
        if self.shared_rate_limit is not None:
            return self.shared_rate_limit
        return self.postgresql or self.shard_ids is not None or not self.poller_enabled

    @property
    def credit_pack_cents(self) -> dict[int, int]:
        """``CREDIT_PACKS`` parsed: ``{SKU id: cents credited}`` (empty: no packs offered)."""
        return parse_credit_packs(self.credit_packs)

    @property
    def sandbox(self) -> bool:
        """True when no ``GENAPI_BASE_URL`` is set: the bot runs the built-in emulator."""
        return self.genapi_base_url is None

    @property
    def unsafe_labels(self) -> list[str]:
        """``SAFETY_UNSAFE_LABELS`` as a list, each stripped and lower-cased."""
        labels = self.safety_unsafe_labels.split(",")
        return [label.strip().lower() for label in labels if label.strip()]

    def scaled(self, seconds: float) -> float:
        """Return one of the bot's own fixed waits (seconds) divided by ``WAIT_SCALE``.

        Only the bot's own choices about the service's time are scaled (delivery backoff, the
        poll priors, the longest gap between polls, the waits after a 404): never the service's
        rules (the rate window has its own setting, and two polls of a job stay 3 s apart,
        docs/genapi.md §3.2), nor waits on Discord (``PLACEHOLDER_GRACE_SECONDS``). 1 in
        production; the end-to-end tests' bot runs at 10.
        """
        return seconds / self.wait_scale

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
    """Return ``url`` with its password replaced by ``[redacted]``, for logs and messages.

    The same marker as the log filter's (``bot.redaction.REDACTED``):
    ``postgresql://bot:s3cret@db:5432/genbot`` gives
    ``postgresql://bot:[redacted]@db:5432/genbot``;
    query parameters are dropped (they may carry a password too).
    """
    parts = urlsplit(url)
    user = parts.username or ""
    auth = f"{user}:{REDACTED}@" if parts.password is not None else (f"{user}@" if user else "")
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


def settlement_spool_file(settings: Settings) -> Path:
    """The settlement spool's file: ``SETTLEMENT_SPOOL_PATH``, else beside ``DATABASE_PATH``.

    ``data/bot.db`` gives ``data/bot.settlements.jsonl`` (with PostgreSQL too: the data folder
    is local to the process, the spool must be).
    """
    if settings.settlement_spool_path is not None:
        return settings.settlement_spool_path
    path = settings.database_path
    return path.with_name(path.stem + ".settlements.jsonl")


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
