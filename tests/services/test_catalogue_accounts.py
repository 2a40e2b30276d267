"""Whose key fetches the model catalogue, and whose catalogue each account reads.

The catalogue is shared work: it is fetched and refreshed only with the bot's default key or a
server's own key, never with a member's personal key. Accounts may see different catalogues
(the API emulator's ``hide_models``): each server reads its own key's.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Any

import pytest
from cryptography.fernet import Fernet

from bot.clock import ManualClock
from bot.domain import Actor
from bot.sandbox import GenApiEmulator
from bot.services.generation import Requester, TextOptions
from bot.services.personal import wallet_id
from bot.wiring import Services
from tests.support.stack import ADMIN_ACTOR, services_on_emulator

MEMBER = 222
SERVER = 111
OWN_KEY_SERVER = 112
ADMIN = 900


@contextlib.asynccontextmanager
async def built(
    engine_settings: dict[str, Any], clock: ManualClock
) -> AsyncIterator[tuple[Services, GenApiEmulator, str]]:
    settings = {"key_encryption_key": Fernet.generate_key().decode(), **engine_settings}
    async with services_on_emulator(clock, **settings) as opened:
        yield opened


def catalogue_fetches(api: GenApiEmulator, since: int) -> set[str | None]:
    """The keys of the ``GET /models`` requests from ``since`` on."""
    return {r.key for r in api.requests[since:] if r.path.endswith("/models")}


async def settle(services: Services) -> None:
    """Let the background refreshes started so far finish."""
    for _ in range(20):
        await asyncio.sleep(0)
    await asyncio.sleep(0.05)


async def test_a_members_own_key_never_fetches_nor_refreshes_the_catalogue(
    engine_settings: dict[str, Any],
) -> None:
    clock = ManualClock()
    async with built(engine_settings, clock) as (services, api, default_key):
        own = api.create_key(balance_cents=5_000)
        await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        before = len(api.requests)

        # The member's first request on their own key, nothing cached yet.
        await services.generation.text(Requester(wallet_id(MEMBER), 10, MEMBER), TextOptions("hi"))
        assert api.requests[-1].key == own  # the member's key paid for the answer...
        assert catalogue_fetches(api, before) == {default_key}  # ...not for the catalogue

        # Stale: read again, refreshed in the background; then the periodic refresh.
        clock.advance(3600)
        await services.generation.catalogue(wallet_id(MEMBER))
        await settle(services)
        refresher = asyncio.create_task(services.catalogue.run())
        try:
            await settle(services)
        finally:
            refresher.cancel()
            await asyncio.gather(refresher, return_exceptions=True)
        assert catalogue_fetches(api, before) == {default_key}


async def test_each_account_reads_its_own_catalogue(engine_settings: dict[str, Any]) -> None:
    clock = ManualClock()
    async with built(engine_settings, clock) as (services, api, _):
        own = api.create_key(balance_cents=5_000)
        await services.guild_config.set_api_key(OWN_KEY_SERVER, own, actor=Actor(ADMIN))
        shared = await services.generation.catalogue(SERVER)
        hidden = shared.video[0].id
        api.hide_models(own, hidden)

        mine = await services.generation.catalogue(OWN_KEY_SERVER)
        assert hidden not in [m.id for m in mine.video]
        # The server on the default key still sees it, and autocomplete reads each one's.
        assert hidden in [m.id for m in (await services.generation.catalogue(SERVER)).video]
        cached = await services.generation.cached_catalogue(OWN_KEY_SERVER)
        assert cached is not None
        assert hidden not in [m.id for m in cached.video]
        cached = await services.generation.cached_catalogue(SERVER)
        assert cached is not None
        assert hidden in [m.id for m in cached.video]
        # Removing the server's key: it reads the default key's catalogue again.
        await services.guild_config.remove_api_key(OWN_KEY_SERVER, actor=ADMIN_ACTOR)
        again = await services.generation.catalogue(OWN_KEY_SERVER)
        assert hidden in [m.id for m in again.video]


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_a_member_without_a_shared_key_reads_a_catalogue_a_server_fetched(
    engine_settings: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """No default key: a wallet reads the catalogue a server's key fetched, never fetching."""
    clock = ManualClock()
    async with built(engine_settings, clock) as (services, api, _):
        server_key = api.create_key()
        await services.guild_config.set_api_key(OWN_KEY_SERVER, server_key, actor=Actor(ADMIN))
        own = api.create_key()
        await services.guild_config.set_api_key(wallet_id(MEMBER), own, actor=Actor(MEMBER))
        monkeypatch.setattr(services.keys, "_default", None)  # as if GENAPI_API_KEY were unset
        fetched = await services.generation.catalogue(OWN_KEY_SERVER)
        before = len(api.requests)
        assert await services.generation.catalogue(wallet_id(MEMBER)) == fetched
        assert catalogue_fetches(api, before) == set()
