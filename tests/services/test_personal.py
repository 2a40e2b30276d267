"""Personal mode (issue 22): who pays, and the member's wallet, on both storage engines."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import pytest
from cryptography.fernet import Fernet

from bot.clock import ManualClock
from bot.errors import BudgetExceeded, user_message
from bot.genapi import errors as api_errors
from bot.sandbox import GenApiEmulator
from bot.services.generation import Requester, TextOptions
from bot.services.keys import fingerprint
from bot.services.personal import (
    SET_KEY_SENTENCE,
    Payer,
    PersonalKeyNeeded,
    is_personal,
    wallet_id,
    who_pays,
)
from bot.wiring import Services
from tests.conftest import services_on_emulator

GUILD = 111
MEMBER = 222
OTHER = 333


# -- who pays ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("guild_id", "owners", "bot_in_guild", "payer"),
    [
        # A server install used in that server, the bot a member: the server, as today.
        (GUILD, {0: GUILD}, True, Payer.GUILD),
        # The member's own install in a server that never added the bot.
        (GUILD, {1: MEMBER}, False, Payer.MEMBER),
        # Both installs, the bot a member: the server's install authorised it, the server pays.
        (GUILD, {0: GUILD, 1: MEMBER}, True, Payer.GUILD),
        # Both installs, but the bot is not a member there (commands-only install, or it left).
        (GUILD, {0: GUILD, 1: MEMBER}, False, Payer.MEMBER),
        # A user install in a server whose own install is another server's id (never trusted).
        (GUILD, {0: 999, 1: MEMBER}, True, Payer.MEMBER),
        # The bot's DM (a guild install reads "0": "0" outside guilds) and a group DM.
        (None, {0: 0, 1: MEMBER}, False, Payer.MEMBER),
        (None, {1: MEMBER}, False, Payer.MEMBER),
    ],
)
def test_who_pays_follows_the_authorising_install(
    guild_id: int | None, owners: dict[int, int], bot_in_guild: bool, payer: Payer
) -> None:
    assert (
        who_pays(guild_id=guild_id, user_id=MEMBER, owners=owners, bot_in_guild=bot_in_guild)
        is payer
    )


def test_a_wallet_id_is_never_a_servers() -> None:
    assert wallet_id(MEMBER) == -MEMBER
    assert is_personal(wallet_id(MEMBER))
    assert not is_personal(GUILD)
    with pytest.raises(ValueError, match="not a user id"):
        wallet_id(0)


# -- the member's wallet -------------------------------------------------------------------------

StackFactory = Callable[..., contextlib.AbstractAsyncContextManager[tuple[Services, Any]]]


@pytest.fixture
def personal_stack(engine_settings: dict[str, Any]) -> StackFactory:
    """Services as ``python -m bot`` builds them, with keys encryptable and ``overrides``."""

    @contextlib.asynccontextmanager
    async def build(**overrides: Any) -> AsyncIterator[tuple[Services, GenApiEmulator]]:
        fernet = Fernet.generate_key().decode()
        settings = {"key_encryption_key": fernet, **engine_settings, **overrides}
        async with services_on_emulator(ManualClock(), **settings) as (services, api, _):
            yield services, api

    return build


def personal(user_id: int = MEMBER) -> Requester:
    """A member paying from their own wallet, in a channel of a server without the bot."""
    return Requester(wallet_id(user_id), 10, user_id)


async def test_personal_use_without_a_key_is_refused_before_any_call(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack() as (services, api):
        with pytest.raises(PersonalKeyNeeded) as refused:
            await services.generation.text(personal(), TextOptions("hello"))
        assert user_message(refused.value) == SET_KEY_SENTENCE
        assert "/settings api-key set" in SET_KEY_SENTENCE
        assert [r for r in api.requests if r.method == "POST"] == []
        # The server's own use is unchanged: the default key pays for it.
        await services.generation.text(Requester(GUILD, 10, MEMBER), TextOptions("hello"))


async def test_a_personal_key_pays_and_the_charge_is_the_members_not_a_servers(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack() as (services, api):
        own = api.create_key(balance_cents=5_000)
        change = await services.guild_config.set_api_key(wallet_id(MEMBER), own)
        assert change.last4 == own[-4:]
        stored = await services.db.guilds.settings(wallet_id(MEMBER))
        assert stored.api_key_ciphertext is not None
        assert own.encode() not in stored.api_key_ciphertext  # encrypted at rest

        result = await services.generation.text(personal(), TextOptions("hello"))
        assert api.requests[-1].key == own

        mine = await services.billing.report(
            wallet_id(MEMBER), MEMBER, key_fingerprint=fingerprint(own)
        )
        assert mine.today_cents == result.cost_cents
        assert mine.last_remaining_credits_cents == result.remaining_credits_cents
        # Never a server's: the server the member stood in has spent nothing.
        server = await services.billing.report(GUILD)
        assert server.month_cents == 0
        assert await services.db.ledger.total(GUILD) == 0

        # Removing it leaves the member without a key again: refused, not billed to the owner.
        await services.guild_config.remove_api_key(wallet_id(MEMBER))
        with pytest.raises(PersonalKeyNeeded):
            await services.generation.text(personal(), TextOptions("again"))


async def test_the_personal_allowance_is_per_member_per_day_on_the_default_key(
    personal_stack: StackFactory,
) -> None:
    # 1-token answers: their hold (the ceiling until a price is known, then the bound of their
    # tokens at the observed rates) is 2 cents at most, the allowance. One call of 1 c for 2
    # prompt tokens and 1 answer token bounds both rates loosely: "hi" holds 1 c, "again" 3.
    async with personal_stack(personal_daily_budget_cents=2, text_hold_ceiling_cents=2) as (
        services,
        api,
    ):
        first = await services.generation.text(personal(), TextOptions("hello", max_tokens=1))
        assert api.requests[-1].key == services.settings.genapi_api_key.get_secret_value()  # type: ignore[union-attr]
        assert first.cost_cents >= 1
        posts = sum(1 for r in api.requests if r.method == "POST")
        with pytest.raises(BudgetExceeded) as refused:
            await services.generation.text(personal(), TextOptions("again", max_tokens=1))
        assert refused.value.scope == "user"
        assert sum(1 for r in api.requests if r.method == "POST") == posts
        # Another member has their own allowance.
        await services.generation.text(personal(OTHER), TextOptions("hi", max_tokens=1))
        # A new UTC day, a new allowance.
        services.clock.advance(86_400)  # type: ignore[attr-defined]
        await services.generation.text(personal(), TextOptions("hi", max_tokens=1))
        # On their own key, the owner's allowance does not limit the member.
        own = api.create_key(balance_cents=5_000)
        await services.guild_config.set_api_key(wallet_id(MEMBER), own)
        await services.generation.text(personal(), TextOptions("mine"))
        await services.generation.text(personal(), TextOptions("still mine"))
        assert api.requests[-1].key == own
        assert (await services.billing.report(wallet_id(MEMBER), MEMBER)).today_cents > Decimal(1)


async def test_a_personal_keys_problem_is_the_members_to_fix(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack() as (services, api):
        empty = api.create_key(balance_cents=0)
        await services.guild_config.set_api_key(wallet_id(MEMBER), empty)
        with pytest.raises(api_errors.InsufficientCreditsError) as refused:
            await services.generation.text(personal(), TextOptions("hello"))
        assert user_message(refused.value) == (
            "Your API key is out of credits; top it up with the service."
        )
        assert await services.db.ledger.total(wallet_id(MEMBER)) == 0


@pytest.mark.parametrize("problem", ["out of credits", "rejected"])
async def test_the_default_keys_problem_on_the_allowance_speaks_to_the_member(
    personal_stack: StackFactory, problem: str
) -> None:
    # On the owner's allowance the key is the bot's: no server, and no admin, is involved.
    async with personal_stack(personal_daily_budget_cents=100) as (services, api):
        default = services.settings.genapi_api_key.get_secret_value()  # type: ignore[union-attr]
        if problem == "out of credits":
            api.set_balance(default, 0)
            error: type[Exception] = api_errors.InsufficientCreditsError
        else:
            api.revoke_key(default)
            error = api_errors.UnauthorizedError
        with pytest.raises(error) as refused:
            await services.generation.text(personal(), TextOptions("hello", max_tokens=1))
        said = user_message(refused.value)
        assert "server" not in said and "admin" not in said, said
        what = {
            "out of credits": "The bot's shared API key, which your personal allowance uses, is "
            "out of credits.",
            "rejected": "The service rejected the bot's shared API key, which your personal "
            "allowance uses.",
        }[problem]
        assert said == (
            f"{what} Tell the bot's owner, or set your own key with `/settings api-key set`."
        )
        assert await services.db.ledger.total(wallet_id(MEMBER)) == 0


async def test_the_personal_allowance_is_named_when_it_refuses(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack(personal_daily_budget_cents=1, text_hold_ceiling_cents=1) as (
        services,
        _,
    ):
        await services.generation.text(personal(), TextOptions("hello", max_tokens=1))
        with pytest.raises(BudgetExceeded) as refused:
            await services.generation.text(personal(), TextOptions("again", max_tokens=1))
        assert user_message(refused.value).startswith(
            "Your daily allowance ($0.01, personal allowance) has $0.00 left"
        )


def test_settings_show_names_the_key_by_its_end_and_what_pays() -> None:
    from cogs.settings import personal_settings_text

    assert personal_settings_text("Ab12", 0, shared_key=True).startswith(
        "Your API key: ending in `Ab12`"
    )
    granted = personal_settings_text(None, 50, shared_key=True)
    assert "grants you $0.50 a day (UTC)" in granted
    assert "/settings api-key set" in personal_settings_text(None, 50, shared_key=False)
    assert SET_KEY_SENTENCE in personal_settings_text(None, 0, shared_key=True)
