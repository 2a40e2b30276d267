"""Log lines an operator reads: JSON with context, and no secret whatever a library logs."""

import asyncio
import io
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

import bot.discord.worker
from bot.ops.logs import bind, setup_logging
from bot.services.keys import KeyVault
from bot.wiring import Services, build_services
from tests.conftest import make_settings

BOT_TOKEN = "MTA5ODc2NTQzMjEwOTg3NjU0.GhIjKl.abcdefghijklmnopqrstuvwxyz0123"
API_KEY = "sk-live_0123456789abcdefghij"
INTERACTION_TOKEN = "aW50ZXJhY3Rpb246MTIzNDU2Nzg5OnNlY3JldA"


@pytest.fixture
def root_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def library_debug_lines() -> None:
    """What discord.py, httpx2 and a database driver may log at DEBUG."""
    logging.getLogger("discord.webhook.async_").debug(
        "Webhook ID 1234 with POST https://discord.com/api/v10/webhooks/1234/%s?wait=true",
        INTERACTION_TOKEN,
    )
    logging.getLogger("discord.http").debug(
        "POST /interactions/987/%s/callback with {'headers': {'Authorization': 'Bot %s'}}",
        INTERACTION_TOKEN,
        BOT_TOKEN,
    )
    logging.getLogger("discord.gateway").debug(
        "For Shard ID None: WebSocket Event: %s",
        {"op": 0, "t": "INTERACTION_CREATE", "d": {"token": INTERACTION_TOKEN, "id": "987"}},
    )
    logging.getLogger("httpx2").debug("request headers: Authorization: Bearer %s", API_KEY)
    logging.getLogger("asyncpg").debug("connecting to postgresql://genbot:hunter2pass@db/genbot")


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_no_secret_survives_a_library_logging_at_debug(fmt: str, root_logging: None) -> None:
    out = io.StringIO()
    setup_logging(logging.DEBUG, fmt, secrets=[BOT_TOKEN, "plain-default-key"], stream=out)
    library_debug_lines()
    logging.getLogger("bot").warning("default key plain-default-key refused")
    try:
        raise RuntimeError(f"upstream echoed {API_KEY}")
    except RuntimeError:
        logging.getLogger("bot.jobs.poller").exception("poll failed")
    text = out.getvalue()
    assert "poll failed" in text
    for secret in (BOT_TOKEN, API_KEY, INTERACTION_TOKEN, "hunter2pass", "plain-default-key"):
        assert secret not in text
    assert "/webhooks/1234/[redacted]" in text
    assert "postgresql://genbot:[redacted]@db/genbot" in text
    assert "RuntimeError: upstream echoed [redacted]" in text.replace("\\n", "\n")


def test_a_key_the_bot_decrypts_is_redacted_from_then_on(root_logging: None) -> None:
    out = io.StringIO()
    redaction = setup_logging(logging.INFO, "text", stream=out)
    secret = SecretStr(Fernet.generate_key().decode())
    vault = KeyVault(secret, on_key=redaction.add)
    guild_key = "not key shaped at all"  # only the vault can tell the filter about it
    vault.decrypt(KeyVault(secret).encrypt(guild_key))
    logging.getLogger("discord.gateway").info("modal value %r", guild_key)
    assert guild_key not in out.getvalue()


def test_json_lines_carry_the_context_of_their_own_task(root_logging: None) -> None:
    out = io.StringIO()
    setup_logging(logging.INFO, "json", stream=out)
    log = logging.getLogger("bot.jobs.poller")

    async def poll(job_id: int) -> None:
        with bind(job_id=job_id, task_id=f"task-{job_id}"):
            await asyncio.sleep(0)
            log.info("polled")

    async def main() -> None:
        await asyncio.gather(poll(1), poll(2))
        log.info("idle")

    asyncio.run(main())
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line.get("job_id"), line.get("task_id")) for line in lines] == [
        (1, "task-1"),
        (2, "task-2"),
        (None, None),
    ]
    assert {"time", "level", "logger", "message"} <= lines[0].keys()
    assert lines[0]["level"] == "INFO" and lines[0]["logger"] == "bot.jobs.poller"


class _Built(Exception):
    """Stops ``run_worker`` once its services are built (no Discord login in a unit test)."""


async def test_a_worker_redacts_the_server_keys_it_decrypts(
    root_logging: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Issue 23, E18: `python -m bot worker` built its services without on_secret, so a server
    # key it decrypted to poll a job could be printed by any library that logged it.
    out = io.StringIO()
    redaction = setup_logging(logging.INFO, "text", stream=out)
    secret = SecretStr(Fernet.generate_key().decode())
    settings = make_settings(
        database_path=tmp_path / "bot.db",
        genapi_base_url="http://127.0.0.1:9/api/v1",
        key_encryption_key=secret,
    )
    built: list[Services] = []

    async def build_then_stop(*args: Any, **kwargs: Any) -> Services:
        built.append(await build_services(*args, **kwargs))
        raise _Built

    monkeypatch.setattr(bot.discord.worker, "build_services", build_then_stop)
    with pytest.raises(_Built):
        await bot.discord.worker.run_worker(settings, redaction=redaction)
    guild_key = "not key shaped at all"
    (services,) = built
    services.vault.decrypt(KeyVault(secret).encrypt(guild_key))  # as a poll of its job does
    logging.getLogger("httpx").warning("request with %s", guild_key)
    assert "request with" in out.getvalue()
    assert guild_key not in out.getvalue()
