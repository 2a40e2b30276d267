"""A server on the bot's default key is not told to top up "its" key."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.discord.render.admin import key_problem_notice
from bot.errors import user_message
from bot.genapi import errors as api_errors
from bot.services.generation import Requester, TextOptions
from bot.services.keys import KeyResolver, KeyVault
from tests.support.stack import Stack, on_keys


async def test_a_server_on_the_default_key_is_told_it_is_the_shared_key(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_balance(stack.key, 0)
    with pytest.raises(api_errors.InsufficientCreditsError) as broke:
        await stack.generation.text(who, TextOptions("hello"))
    sentence = user_message(broke.value)
    assert "shared" in sentence
    assert "owner" in sentence
    assert "top it up" not in sentence

    stack.api.revoke_key(stack.key)
    with pytest.raises(api_errors.UnauthorizedError) as denied:
        await stack.generation.text(who, TextOptions("hello"))
    sentence = user_message(denied.value)
    assert "shared" in sentence and "this server's API key" not in sentence


async def test_a_server_with_its_own_key_is_told_to_top_it_up(stack: Stack, who: Requester) -> None:
    secret = SecretStr(Fernet.generate_key().decode())
    on_keys(stack, KeyResolver(stack.db, KeyVault(secret), SecretStr(stack.key)))
    own = stack.api.create_key(balance_cents=0)
    await stack.keys.store_key(who.guild_id, own)
    with pytest.raises(api_errors.InsufficientCreditsError) as broke:
        await stack.generation.text(who, TextOptions("hello"))
    sentence = user_message(broke.value)
    assert "This server's API key is out of credits" in sentence
    assert "shared" not in sentence


@pytest.mark.parametrize("problem", ["unauthorized", "insufficient_credits"])
def test_admin_notices_say_whose_key_it_is(problem: str) -> None:
    shared = key_problem_notice(problem, shared=True)
    assert "bot's shared" in shared and "owner" in shared and "/config api-key set" in shared
    own = key_problem_notice(problem, shared=False)
    assert "this server" in own and "shared" not in own
