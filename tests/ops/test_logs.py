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

import bot.__main__
from bot.ops.logs import RedactionFilter, bind, setup_logging
from bot.services.keys import KeyVault
from bot.wiring import Services, build_services
from tests.support.settings import make_settings

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
    # `python -m bot worker` built its services without on_secret, so a server
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

    monkeypatch.setattr(bot.__main__, "build_services", build_then_stop)
    with pytest.raises(_Built):
        await bot.__main__.run_worker(settings, redaction=redaction)
    guild_key = "not key shaped at all"
    (services,) = built
    services.vault.decrypt(KeyVault(secret).encrypt(guild_key))  # as a poll of its job does
    logging.getLogger("httpx").warning("request with %s", guild_key)
    assert "request with" in out.getvalue()
    assert guild_key not in out.getvalue()


def test_an_interaction_token_never_registered_is_redacted_wherever_it_appears(
    root_logging: None,
) -> None:
    # Discord's interaction tokens are base64 of "interaction:<id>:..." and so begin with
    # "aW50ZXJhY3Rpb246": recognised by that shape, they need not be learnt one by one.
    out = io.StringIO()
    redaction = setup_logging(logging.DEBUG, "text", stream=out)
    log = logging.getLogger("bot.discord.delivery")
    log.info("kept response token %s for job 7", INTERACTION_TOKEN)
    log.info("a library's repr: InteractionResponse(token=%s)", INTERACTION_TOKEN + "_x-1")
    log.info("followup https://discord.com/api/webhooks/1234/%s/messages/@original", "a" * 70)
    text = out.getvalue()
    assert INTERACTION_TOKEN not in text
    assert "a" * 70 not in text
    assert "kept response token [redacted] for job 7" in text
    assert redaction.known == 0


async def test_response_tokens_are_not_added_to_the_known_secrets(
    root_logging: None, tmp_path: Path
) -> None:
    from bot.clock import ManualClock
    from bot.services.response_tokens import ResponseToken, ResponseTokens
    from bot.storage.database import Database

    redaction = setup_logging(logging.INFO, "text", stream=io.StringIO())
    vault = KeyVault(SecretStr(Fernet.generate_key().decode()), on_key=redaction.add)
    clock = ManualClock()
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=clock)
    try:
        tokens = ResponseTokens(db, vault, clock)
        for job_id in range(50):
            await tokens.keep(job_id, ResponseToken(f"{INTERACTION_TOKEN}{job_id:04d}", 1e12))
    finally:
        await db.close()
    assert redaction.known == 0  # 50 personal jobs later, the set is as small as before


def test_the_known_secrets_are_bounded_and_the_configured_ones_stay() -> None:
    redaction = RedactionFilter(["configured-secret-value"], limit=3)
    learnt = [f"learnt key number {n}" for n in range(5)]
    for secret in learnt:
        redaction.add(secret)
    redaction.add(learnt[2])  # used again: the most recent
    assert redaction.known == 4  # the configured one and three learnt ones
    text = redaction.redact(" | ".join(["configured-secret-value", *learnt]))
    assert text.split(" | ") == [
        "[redacted]",
        learnt[0],  # the least recently seen are forgotten first
        learnt[1],
        "[redacted]",
        "[redacted]",
        "[redacted]",
    ]


def test_the_pattern_is_compiled_once_per_change_not_per_record() -> None:
    redaction = RedactionFilter(["configured secret"])
    first = redaction.pattern
    for n in range(20):
        redaction.redact(f"line {n} with configured secret")
    assert redaction.pattern is first
    redaction.add("configured secret")  # already known: no change
    assert redaction.pattern is first
    redaction.add("a new secret")
    assert redaction.pattern is not first
    assert redaction.redact("a new secret and configured secret") == "[redacted] and [redacted]"


def test_keys_known_by_the_thousand_are_found_as_words_or_within_them() -> None:
    redaction = RedactionFilter()
    keys = [f"gk{n:05d}{'abcdefghij' * 2}" for n in range(10_000)]
    for key in keys:
        redaction.add(key)
    assert redaction.known == 10_000
    line = f"key {keys[17]}, header x_{keys[9_999]}. JSON {{'k': '{keys[5]}'}} ok"
    assert (
        redaction.redact(line) == "key [redacted], header x_[redacted]. JSON {'k': '[redacted]'} ok"
    )
