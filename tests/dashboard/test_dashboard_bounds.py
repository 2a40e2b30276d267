"""The dashboard's caches and budgets on their own: bounded, and on an injectable clock."""

from __future__ import annotations

import pytest

from bot.clock import ManualClock
from bot.config import load_settings
from bot.dashboard import editing, rights
from bot.dashboard.limits import ANONYMOUS_BUDGET, Bounded, RequestBuckets
from bot.dashboard.rights import URLS_MARGIN, CachingDirectory, RightsCache
from bot.domain import MemberAccess


async def test_a_signed_url_is_kept_until_a_minute_before_its_ex() -> None:
    clock = ManualClock()
    expiry = int(clock.time()) + 3600

    class Discord:
        calls = 0

        async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
            self.calls += 1
            return [f"https://cdn.example/a.png?ex={expiry:x}&is=0&hm=ab"]

    discord = Discord()
    cached = CachingDirectory(discord, clock)  # type: ignore[arg-type]
    await cached.attachment_urls(1, 2)
    clock.advance(3600 - URLS_MARGIN - 5)
    await cached.attachment_urls(1, 2)
    assert discord.calls == 1
    clock.advance(10)
    await cached.attachment_urls(1, 2)
    assert discord.calls == 2


def test_the_public_url_is_an_origin_as_browsers_send_it() -> None:
    def public(url: str) -> str | None:
        return load_settings(
            _env_file=None,
            discord_token="t",
            genapi_base_url="https://api.example.com/api/v1",
            dashboard_public_url=url,
        ).dashboard_public_url

    assert public("HTTPS://Dash.Example.com:443") == "https://dash.example.com"
    assert public("http://Dash.example.com:80/") == "http://dash.example.com"
    assert public("https://dash.example.com:8443") == "https://dash.example.com:8443"


async def test_rights_names_and_locks_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rights, "KEPT", 10)
    clock = ManualClock()

    class Discord:
        async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
            return MemberAccess("server", 1 << 5, frozenset())

        async def member_name(self, guild_id: int, user_id: int) -> str | None:
            return "name"

    async def no_roles(guild_id: int) -> dict[int, str]:
        return {}

    cache = RightsCache(Discord(), no_roles, clock)  # type: ignore[arg-type]
    for guild_id in range(1, 200):
        assert await cache.of(guild_id, 7) is not None
        assert await cache.name(guild_id, 7) == "name"
    assert len(cache._rights) == 10 and len(cache._names) == 10
    assert len(cache._locks) == 0


def test_the_write_limiter_forgets_members(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(editing, "KEPT", 10)
    limiter = editing.SaveThrottle(ManualClock())
    for user_id in range(500):
        assert limiter.allow(user_id)
    assert len(limiter._writes) == 10


def test_a_bounded_dictionary_drops_the_least_recently_used_and_the_old() -> None:
    clock = ManualClock()
    kept: Bounded[int, str] = Bounded(2, 10.0, clock.monotonic)
    kept.put(1, "a")
    kept.put(2, "b")
    assert kept.get(1) == "a"
    kept.put(3, "c")  # 2 was used least recently
    assert (kept.get(1), kept.get(2), kept.get(3)) == ("a", None, "c")
    clock.advance(10)
    assert kept.get(1) is None and len(kept) == 1


def test_a_bucket_lets_a_burst_through_then_its_rate() -> None:
    clock = ManualClock()
    buckets: RequestBuckets[str] = RequestBuckets(ANONYMOUS_BUDGET, clock.monotonic)
    assert all(buckets.take("a") == 0 for _ in range(int(ANONYMOUS_BUDGET.burst)))
    assert buckets.take("a") == pytest.approx(1 / ANONYMOUS_BUDGET.per_second)
    assert buckets.take("b") == 0  # another caller's own bucket
    clock.advance(1 / ANONYMOUS_BUDGET.per_second)
    assert buckets.take("a") == 0
