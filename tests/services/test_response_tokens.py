"""Personal jobs' interaction tokens: kept encrypted, never used once dead."""

from __future__ import annotations

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.services import response_tokens
from bot.services.keys import KeyVault
from bot.services.response_tokens import ResponseToken, ResponseTokens
from bot.storage import Database

TOKEN = "aW50ZXJhY3Rpb246" + "x" * 60
"""An interaction token's shape (Discord's are long url-safe strings)."""


@pytest.fixture
def vault() -> KeyVault:
    """A vault with a key: tokens are stored encrypted."""
    return KeyVault(SecretStr(Fernet.generate_key().decode()))


async def test_a_token_is_stored_encrypted_and_survives_a_restart_until_it_expires(
    store: Database, clock: ManualClock, vault: KeyVault
) -> None:
    tokens = ResponseTokens(store, vault, clock)
    await tokens.keep(7, ResponseToken(TOKEN, clock.time() + 870, 25 * 1024 * 1024))
    assert TOKEN not in repr(await tokens.get(7))
    stored = await store.meta.get("response:7")
    assert stored and TOKEN not in stored  # a secret at rest: encrypted like keys

    # Another process (or the bot after a restart) reads it back, with its upload limit.
    again = ResponseTokens(store, vault, clock)
    found = await again.get(7)
    assert found is not None and found.token == TOKEN
    assert found.filesize_limit == 25 * 1024 * 1024

    # Past its 15 minutes it is never handed out again, and no longer stored.
    clock.advance(871)
    assert await again.get(7) is None
    assert await store.meta.get("response:7") == ""
    assert await ResponseTokens(store, vault, clock).get(7) is None


async def test_a_refused_token_is_forgotten_everywhere(
    store: Database, clock: ManualClock, vault: KeyVault
) -> None:
    tokens = ResponseTokens(store, vault, clock)
    await tokens.keep(8, ResponseToken(TOKEN, clock.time() + 870))
    await tokens.forget(8)  # Discord answered 401 50027
    assert await tokens.get(8) is None
    assert await ResponseTokens(store, vault, clock).get(8) is None


async def test_without_an_encryption_key_a_token_stays_in_memory_only(
    store: Database, clock: ManualClock
) -> None:
    tokens = ResponseTokens(store, KeyVault(None), clock)
    await tokens.keep(9, ResponseToken(TOKEN, clock.time() + 870))
    assert (await tokens.get(9)) is not None
    assert await store.meta.get("response:9") is None  # never stored in clear
    assert await ResponseTokens(store, KeyVault(None), clock).get(9) is None


async def test_a_private_responses_token_stays_private_across_a_restart(
    store: Database, clock: ManualClock, vault: KeyVault
) -> None:
    # An ephemeral card's followups must be ephemeral too (private results): a
    # worker or a restarted bot must know, or the completion ping lands in the channel.
    await ResponseTokens(store, vault, clock).keep(
        9, ResponseToken(TOKEN, clock.time() + 870, private=True)
    )
    found = await ResponseTokens(store, vault, clock).get(9)
    assert found is not None and found.private


async def test_dead_and_expired_tokens_are_not_remembered_without_bound(
    store: Database, clock: ManualClock, vault: KeyVault, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(response_tokens, "DEAD_REMEMBERED", 50)
    tokens = ResponseTokens(store, vault, clock)
    for job_id in range(200):  # jobs with no token: each looked up, found dead
        assert await tokens.get(job_id) is None
    assert tokens.held == (0, 50)
    assert await tokens.get(3) is None  # one forgotten is read again, and still never used
    # Live tokens expire in 15 minutes: those kept since are dropped as new ones come.
    for job_id in range(1000, 1100):
        await tokens.keep(job_id, ResponseToken(TOKEN, clock.time() + 870))
    clock.advance(871)
    await tokens.keep(2000, ResponseToken(TOKEN, clock.time() + 870))
    assert tokens.held[0] == 1
    assert (await tokens.get(2000)) is not None
