"""Personal mode: who pays, and the member's wallet, on both storage engines."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from decimal import Decimal
from typing import Any

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.domain import Actor
from bot.errors import BotError, BudgetExceeded, CooldownActive, ValidationFailed, user_message
from bot.genapi import errors as api_errors
from bot.sandbox import GenApiEmulator
from bot.services.generation import Requester, TextOptions
from bot.services.guild_config import KEY_CHECK_COOLDOWN_SECONDS
from bot.services.keys import KeyVault, fingerprint
from bot.services.personal import (
    KEY_CHANGING_PERSONAL,
    SET_KEY_SENTENCE,
    BotNotInServer,
    NotYourInstall,
    Payer,
    PersonalKeyNeeded,
    is_personal,
    wallet_id,
    who_pays,
)
from bot.wiring import Services
from tests.support.settings import make_settings
from tests.support.stack import ADMIN_ACTOR, services_on_emulator

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
        # Both installs, but the bot is not a member there (commands-only install, or it left):
        # the member's own install authorised it.
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


@pytest.mark.parametrize(
    ("owners", "click", "refusal"),
    [
        # A server install of the commands alone (the bot never added): nobody's wallet.
        ({0: GUILD}, False, BotNotInServer),
        ({0: GUILD}, True, BotNotInServer),
        # Someone else's install never bills this member for a command.
        ({1: OTHER}, False, NotYourInstall),
    ],
)
def test_the_members_wallet_pays_only_where_the_member_allowed_it(
    owners: dict[int, int], click: bool, refusal: type[Exception]
) -> None:
    with pytest.raises(refusal) as refused:
        who_pays(guild_id=GUILD, user_id=MEMBER, owners=owners, bot_in_guild=False, click=click)
    assert "nothing was charged" in user_message(refused.value)
    if refusal is BotNotInServer:
        assert "must add the bot" in user_message(refused.value)


def test_a_click_on_a_personal_card_bills_whoever_clicks() -> None:
    # The card's owner's install authorised the card; the clicker pays from their own wallet.
    owners = {1: OTHER}
    assert (
        who_pays(guild_id=GUILD, user_id=MEMBER, owners=owners, bot_in_guild=False, click=True)
        is Payer.MEMBER
    )
    assert who_pays(
        guild_id=None, user_id=MEMBER, owners=owners, bot_in_guild=False, click=True
    ) is (Payer.MEMBER)


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
        change = await services.guild_config.set_api_key(
            wallet_id(MEMBER), own, actor=Actor(MEMBER)
        )
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
        await services.guild_config.remove_api_key(wallet_id(MEMBER), actor=ADMIN_ACTOR)
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
        await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        await services.generation.text(personal(), TextOptions("mine"))
        await services.generation.text(personal(), TextOptions("still mine"))
        assert api.requests[-1].key == own
        assert (await services.billing.report(wallet_id(MEMBER), MEMBER)).today_cents > Decimal(1)


async def test_a_personal_keys_problem_is_the_members_to_fix(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack() as (services, api):
        empty = api.create_key(balance_cents=0)
        await services.guild_config.set_api_key(wallet_id(MEMBER), empty, actor=Actor(MEMBER))
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


async def test_all_members_together_are_bounded_per_day_on_the_shared_key(
    personal_stack: StackFactory,
) -> None:
    # All members' total fits one 1-token answer's hold (2 cents while the price is unknown)
    # but not two: members asking at once are held to it together, though each member's own
    # allowance would let them all go (whether the second waits for the first's charge or
    # is refused depends on which reserves first).
    async with personal_stack(
        personal_daily_budget_cents=10,
        personal_total_daily_budget_cents=3,
        text_hold_ceiling_cents=2,
    ) as (services, api):
        asked = [
            services.generation.text(personal(user), TextOptions("hello", max_tokens=1))
            for user in (MEMBER, OTHER)
        ]
        outcomes = await asyncio.gather(*asked, return_exceptions=True)
        for refused in (o for o in outcomes if isinstance(o, BaseException)):
            assert isinstance(refused, BudgetExceeded) and refused.scope == "personal_total"
            said = user_message(refused)
            assert "for all members together" in said and "/settings api-key set" in said
        assert await services.db.ledger.personal_spent_since(None, 0.0) <= 3
        # Members whose own allowance is untouched are refused once the total is spent.
        scopes = []
        for user in range(500, 510):
            try:
                await services.generation.text(personal(user), TextOptions("hi", max_tokens=1))
            except BudgetExceeded as exc:
                scopes.append(exc.scope)
                break
        assert scopes == ["personal_total"]
        spent = await services.db.ledger.personal_spent_since(None, 0.0)
        assert 0 < spent <= 3
        # A member's own key is theirs: the total does not apply.
        own = api.create_key(balance_cents=5_000)
        await services.guild_config.set_api_key(wallet_id(444), own, actor=Actor(444))
        await services.generation.text(personal(444), TextOptions("mine", max_tokens=1))
        # A new UTC day, a new total.
        services.clock.advance(86_400)  # type: ignore[attr-defined]
        await services.generation.text(personal(OTHER), TextOptions("again", max_tokens=1))


def test_the_total_defaults_to_ten_members_allowances() -> None:
    assert make_settings(personal_daily_budget_cents=3).personal_total_budget_cents == 30
    chosen = make_settings(personal_daily_budget_cents=3, personal_total_daily_budget_cents=5)
    assert chosen.personal_total_budget_cents == 5


async def test_a_rejected_key_leaves_no_limiter_behind(personal_stack: StackFactory) -> None:
    # Its rate-window rows: tests/e2e/test_personal_e2e.py (the bot's durable window).
    async with personal_stack() as (services, api):
        typed = "not-a-key-the-service-knows"
        with pytest.raises(ValidationFailed, match="rejected that key"):
            await services.guild_config.set_api_key(wallet_id(MEMBER), typed, actor=Actor(MEMBER))
        assert [r.key for r in api.requests] == [typed]  # it was checked with the service
        assert fingerprint(typed) not in services.client.limiter._keys  # type: ignore[attr-defined]


async def test_key_checks_have_a_per_member_cooldown(personal_stack: StackFactory) -> None:
    async with personal_stack() as (services, api):
        first = "first-typo-of-a-key"
        with pytest.raises(ValidationFailed):
            await services.guild_config.set_api_key(wallet_id(MEMBER), first, actor=Actor(MEMBER))
        checks = len(api.requests)
        # At once again: refused before anything is sent, saying when to come back.
        own = api.create_key(balance_cents=1_000)
        with pytest.raises(CooldownActive) as refused:
            await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        assert "/settings api-key set has a cooldown" in user_message(refused.value)
        assert len(api.requests) == checks
        assert (await services.db.guilds.settings(wallet_id(MEMBER))).api_key_ciphertext is None
        # Another member is not held by it; a malformed key is refused without using it.
        await services.guild_config.set_api_key(wallet_id(OTHER), own, actor=Actor(OTHER))
        with pytest.raises(ValidationFailed, match="does not look like"):
            await services.guild_config.set_api_key(wallet_id(444), "short", actor=Actor(444))
        await services.guild_config.set_api_key(wallet_id(444), own, actor=Actor(444))
        # Once the cooldown passed, the member's check goes to the service.
        services.clock.advance(KEY_CHECK_COOLDOWN_SECONDS)  # type: ignore[attr-defined]
        change = await services.guild_config.set_api_key(
            wallet_id(MEMBER), own, actor=Actor(MEMBER)
        )
        assert change.last4 == own[-4:]


async def test_one_key_check_cooldown_per_member_across_settings_and_config(
    personal_stack: StackFactory,
) -> None:
    """/settings api-key set, /config api-key set and the dashboard share one cooldown."""
    async with personal_stack() as (services, api):
        own = api.create_key(balance_cents=1_000)
        await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        checks = len(api.requests)
        # The same member, as a server's admin, at once: refused before anything is sent.
        server_key = api.create_key(balance_cents=1_000)
        with pytest.raises(CooldownActive) as refused:
            await services.guild_config.set_api_key(GUILD, server_key, actor=Actor(MEMBER))
        assert "/config api-key set has a cooldown" in user_message(refused.value)
        with pytest.raises(CooldownActive):
            await services.guild_config.set_api_key(GUILD + 1, server_key, actor=Actor(MEMBER))
        assert len(api.requests) == checks
        assert (await services.db.guilds.settings(GUILD)).api_key_ciphertext is None
        # Another admin of the server is not held by it; the member is, once it passed, not.
        await services.guild_config.set_api_key(GUILD, server_key, actor=Actor(OTHER))
        services.clock.advance(KEY_CHECK_COOLDOWN_SECONDS)  # type: ignore[attr-defined]
        await services.guild_config.set_api_key(GUILD + 1, server_key, actor=Actor(MEMBER))


# -- personal-mode errors speak of the member's key, never a server's ---------------------------


async def test_a_personal_key_that_cannot_be_read_says_to_set_it_again(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack() as (services, api):
        own = api.create_key(balance_cents=1_000)
        await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        # The owner changed KEY_ENCRYPTION_KEY since: the stored key cannot be decrypted.
        services.keys._vault = KeyVault(SecretStr(Fernet.generate_key().decode()))  # type: ignore[attr-defined]
        with pytest.raises(BotError) as refused:
            await services.generation.text(personal(), TextOptions("hello"))
        said = user_message(refused.value)
        assert "server" not in said and "admin" not in said, said
        assert "/settings api-key set" in said


async def test_an_allowance_without_the_bots_key_speaks_to_the_member(
    personal_stack: StackFactory,
) -> None:
    async with personal_stack(personal_daily_budget_cents=100) as (services, _):
        services.keys._default_key = None  # type: ignore[attr-defined]
        with pytest.raises(BotError) as refused:
            await services.generation.text(personal(), TextOptions("hello"))
        said = user_message(refused.value)
        assert "this server" not in said and "admin" not in said, said
        assert "/settings api-key set" in said


@pytest.mark.parametrize("refusal", ["busy", "queue"])
def test_a_rate_limit_on_the_members_own_key_names_their_key(refusal: str) -> None:
    exc: api_errors.RateLimitedError = (
        api_errors.RateLimitedError(429, "RATE_LIMITED", "slow down", retry_after=20.0)
        if refusal == "busy"
        else api_errors.RateLimitWaitTooLong(600.0, queued=12)
    )
    exc.on_personal_key = True
    assert "your key" in user_message(exc, now=1_000.0)


def test_a_key_changing_during_a_personal_request_is_the_members() -> None:
    assert "server" not in KEY_CHANGING_PERSONAL and "Your API key" in KEY_CHANGING_PERSONAL
