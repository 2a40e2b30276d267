"""Secrets in upstream messages: a service may echo the key it refused; we never repeat it."""

from __future__ import annotations

import logging

import httpx2 as httpx
import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.discord.tree import sentence_for
from bot.genapi import errors
from bot.genapi.client import GenAPIClient, error_from_response
from bot.genapi.ratelimit import RateLimiter
from bot.services.generation import Requester, TextOptions
from bot.services.keys import KeyResolver, KeyVault
from tests.support.poller import RecordingAnnouncer, make_poller, run_until, submit
from tests.support.stack import Stack, on_keys


async def test_the_emulator_can_echo_the_key_and_the_client_redacts_it(stack: Stack) -> None:
    stack.api.echo_keys_in_errors()
    stack.api.revoke_key(stack.key)
    async with httpx.AsyncClient() as raw:
        answer = await raw.get(
            f"{stack.api.base_url}/models", headers={"Authorization": f"Bearer {stack.key}"}
        )
    assert stack.key in answer.text  # the knob works: the service's own message names the key

    with pytest.raises(errors.UnauthorizedError) as denied:
        await stack.client.list_models(SecretStr(stack.key))
    assert stack.key not in str(denied.value)
    assert stack.key not in denied.value.message
    assert "revoked" in denied.value.message and "[redacted]" in denied.value.message


@pytest.mark.parametrize("whose", ["default", "guild"])
async def test_a_refused_command_logs_and_shows_no_key(
    stack: Stack, who: Requester, whose: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = SecretStr(Fernet.generate_key().decode())
    on_keys(stack, KeyResolver(stack.db, KeyVault(secret), SecretStr(stack.key)))
    key = stack.key
    if whose == "guild":
        key = stack.api.create_key()
        await stack.keys.store_key(who.guild_id, key)
    stack.api.echo_keys_in_errors()
    stack.api.revoke_key(key)
    with pytest.raises(errors.UnauthorizedError) as denied:
        await stack.generation.text(who, TextOptions("hello"))
    with caplog.at_level(logging.DEBUG):
        sentence = sentence_for(denied.value)
    assert "upstream refused a command: 401 UNAUTHORIZED" in caplog.text
    assert key not in caplog.text
    assert key not in sentence


async def test_the_default_key_is_redacted_even_from_another_keys_request() -> None:
    default = "owner's plain key 1234"  # not key-shaped: only knowing it removes it

    def answer(request: httpx.Request) -> httpx.Response:
        body = {"error": {"code": "UNAUTHORIZED", "message": f"mixed up with {default}"}}
        return httpx.Response(401, json=body)

    clock = ManualClock()
    async with httpx.AsyncClient(transport=httpx.MockTransport(answer)) as http:
        client = GenAPIClient(
            "http://api.invalid/api/v1",
            http=http,
            limiter=RateLimiter(clock),
            clock=clock,
            known_keys=(SecretStr(default),),
        )
        with pytest.raises(errors.UnauthorizedError) as denied:
            await client.list_models(SecretStr("sk-gen-guild"))
    assert default not in str(denied.value)


def test_key_shaped_words_are_redacted_and_ordinary_words_kept() -> None:
    shaped = [
        "sk-gen-0123456789abcdef0123456789abcdef",
        "gk_live_9f8e7d6c5b4a39281706f5e4",
        "sk-proj-AbCdEf0123456789_xyz-QRST",
    ]
    message = "keys " + ", ".join(shaped) + "; aspect_ratio must be 16:9; Bearer abc.def"
    error = error_from_response(
        httpx.Response(400, json={"error": {"code": "INVALID_PARAMS", "message": message}})
    )
    assert isinstance(error, errors.InvalidParamsError)
    for key in (*shaped, "abc.def"):
        assert key not in error.message
    assert "aspect_ratio must be 16:9" in error.message
    assert "Bearer [redacted]" in error.message


async def test_a_failed_tasks_reason_is_redacted(stack: Stack, who: Requester) -> None:
    stack.api.fail_next_tasks(1, f"provider rejected key {stack.key}")
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.results))
    (shown,) = announcer.results
    assert shown.id == job.id
    assert stack.key not in (shown.error or "")
    assert shown.error == "provider rejected key [redacted]"
