"""The language of a server's public messages: an admin's choice, else Discord's, never a crash."""

from types import SimpleNamespace
from typing import Any

import discord
import pytest

import bot.discord.locales
from bot.clock import ManualClock
from bot.discord.locales import GuildLocales


class Config:
    def __init__(self, chosen: str | None = None, fails: bool = False) -> None:
        self.chosen = chosen
        self.fails = fails

    async def locale(self, guild_id: int) -> str | None:
        if self.fails:
            raise RuntimeError("database is locked")
        return self.chosen


class Client:
    def __init__(self, cached: str | None = None, fetched: str | None = None) -> None:
        self.cached = cached
        self.fetched = fetched
        self.fetches = 0

    def get_guild(self, guild_id: int) -> Any:
        if self.cached is None:
            return None
        return SimpleNamespace(preferred_locale=discord.Locale(self.cached))

    async def fetch_guild(self, guild_id: int, /, *, with_counts: bool = True) -> Any:
        self.fetches += 1
        if self.fetched is None:
            raise discord.NotFound(SimpleNamespace(status=404, reason="Not Found"), "gone")
        return SimpleNamespace(preferred_locale=discord.Locale(self.fetched))


def locales(client: Client, config: Config, *, rest: bool = True) -> GuildLocales:
    return GuildLocales(client, config, ManualClock(), rest=rest)  # type: ignore[arg-type]


async def test_an_admins_choice_beats_the_servers_discord_language() -> None:
    assert await locales(Client(cached="de"), Config(chosen="fr")).of(1) == "fr"
    assert await locales(Client(cached="de"), Config()).of(1) == "de"


async def test_a_worker_without_a_guild_cache_reads_it_once_by_rest() -> None:
    client = Client(fetched="ja")
    found = locales(client, Config())
    assert await found.of(1) == "ja"
    assert await found.of(1) == "ja"
    assert client.fetches == 1


async def test_a_language_that_cannot_be_read_is_english_and_never_stops_a_delivery() -> None:
    assert await locales(Client(cached="de"), Config(fails=True)).of(1) is None
    assert await locales(Client(), Config()).of(1) is None  # the bot was removed: 404
    assert await locales(Client(cached="de"), Config()).of(None) is None  # a DM


async def test_a_server_that_removed_the_bot_is_asked_once_and_the_gateway_never_asks() -> None:
    worker = Client()
    found = locales(worker, Config())
    assert await found.of(1) is None
    assert await found.of(1) is None
    assert worker.fetches == 1  # the 403 is remembered, not asked for on every edit
    gateway = Client(fetched="de")
    assert await locales(gateway, Config(), rest=False).of(1) is None
    assert gateway.fetches == 0  # not in the gateway's cache: not in that server


async def test_a_worker_remembers_a_bounded_number_of_servers_least_recent_out_first(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A worker reads the language of any server it delivers to by REST, and kept every one.
    monkeypatch.setattr(bot.discord.locales, "FETCHED_REMEMBERED", 3, raising=False)
    client = Client(fetched="ja")
    found = locales(client, Config())
    for guild in (1, 2, 3, 1, 4):  # 1 is used again before 4 comes: 2 is the least recent
        assert await found.of(guild) == "ja"
    assert client.fetches == 4
    assert await found.of(1) == "ja" and client.fetches == 4  # kept
    assert await found.of(2) == "ja" and client.fetches == 5  # dropped, read again
    assert found.held == 3
