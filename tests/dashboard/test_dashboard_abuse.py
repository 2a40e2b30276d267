"""The dashboard facing the internet: what a visitor does cannot spend the bot's standing with
Discord, write to its database without signing in, or grow the process without bound."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator

import pytest

from bot.dashboard.rights import (
    LISTS_SECONDS,
    UNREACHABLE_SECONDS,
    URLS_MOST_SECONDS,
    URLS_SECONDS,
)
from tests.support.dashboard_site import Site, open_site
from tests.support.stack import ADMIN_ACTOR, Stack

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)

HUGE = "99999999999999999999"  # past 2**63 - 1: no Discord id, no database row


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def asked(site: Site, path_part: str) -> int:
    """REST requests the bot's token made whose path contains ``path_part``."""
    return sum(1 for r in site.emulator.requests if path_part in r.path)


def rows(site: Site, table: str) -> int:
    path = site.services.settings.database_path
    with sqlite3.connect(path) as db:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def posted_card(site: Site) -> tuple[int, int]:
    """The member's image, its card posted with the file: ``(job id, message id)``."""
    import aiohttp

    form = aiohttp.FormData()
    form.add_field("payload_json", '{"content": "done"}', content_type="application/json")
    form.add_field("files[0]", b"\x89PNG", filename="task.png", content_type="image/png")
    async with aiohttp.ClientSession() as http:
        answer = await http.post(
            f"{site.emulator.api_base_url}/channels/{site.channel_id}/messages",
            data=form,
            headers={"Authorization": f"Bot {site.emulator.bot_token}"},
        )
        assert answer.status == 200, await answer.text()
        message_id = int((await answer.json())["id"])
    job = await site.charge(
        "1", prompt="a kite", outputs=("https://files.example/kite.png",), message_id=message_id
    )
    assert job is not None
    return job, message_id


# -- Discord is asked as little as can be --------------------------------------------------


async def test_media_of_a_card_the_bot_cannot_read_asks_discord_once(site: Site) -> None:
    """Discord bans an address after 10,000 403s in 10 minutes: a refusal is remembered."""
    job, message_id = await posted_card(site)
    other_job, _ = await posted_card(site)
    site.emulator.revoke_channel_access(site.channel_id)
    browser = site.browser()
    await browser.sign_in(site.member_id)
    before = asked(site, f"/channels/{site.channel_id}/messages/")
    for _ in range(20):
        answer = await browser.get(f"/media/{job}/0")
        # The service's own URL of the result, as before.
        assert answer.headers["Location"] == "https://files.example/kite.png"
    assert (await browser.get(f"/media/{other_job}/0")).status == 302
    # One question: the 403 is the channel's, so the other card there is not asked about.
    assert asked(site, f"/channels/{site.channel_id}/messages/") == before + 1
    site.clock.advance(UNREACHABLE_SECONDS + 1)
    await browser.get(f"/media/{job}/0")
    assert asked(site, f"/messages/{message_id}") == 2  # asked again once it is forgotten


async def test_attachment_urls_are_kept_until_they_expire(site: Site) -> None:
    job, message_id = await posted_card(site)
    browser = site.browser()
    await browser.sign_in(site.member_id)
    first = await browser.get(f"/media/{job}/0")
    for _ in range(5):
        assert (await browser.get(f"/media/{job}/0")).headers["Location"] == first.headers[
            "Location"
        ]
    assert asked(site, f"/messages/{message_id}") == 1
    site.clock.advance(URLS_SECONDS + 1)  # signed for 24 hours: still valid
    await browser.get(f"/media/{job}/0")
    assert asked(site, f"/messages/{message_id}") == 1
    site.clock.advance(URLS_MOST_SECONDS)  # kept no longer than this, whatever their expiry
    await browser.get(f"/media/{job}/0")
    assert asked(site, f"/messages/{message_id}") == 2


async def test_servers_the_member_is_not_in_ask_discord_nothing(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.other_owner_id)
    before = len(site.emulator.requests)
    for n in range(30):
        guild_id = 123456789012345678 + n
        assert (await browser.get(f"/servers/{guild_id}")).status == 404
        assert (await browser.get(f"/servers/{guild_id}/settings/tiers")).status == 404
    # The member is not in the server "Kites" either: its pages are not asked about.
    assert (await browser.get(f"/servers/{site.guild_id}")).status == 404
    assert len(site.emulator.requests) == before
    assert len(site.dashboard.rights._rights) == 0  # nothing remembered for them either


async def test_roles_and_channels_are_read_once_for_a_while(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    for _ in range(3):
        await browser.text(f"/servers/{site.guild_id}/settings/tiers")
        await browser.text(f"/servers/{site.guild_id}/settings/channels")
    assert asked(site, f"/guilds/{site.guild_id}/roles") == 1
    assert asked(site, f"/guilds/{site.guild_id}/channels") == 1
    site.clock.advance(LISTS_SECONDS + 1)
    await browser.text(f"/servers/{site.guild_id}/settings/tiers")
    assert asked(site, f"/guilds/{site.guild_id}/roles") == 2


# -- budgets --------------------------------------------------------------------------------


async def test_a_member_over_their_budget_is_told_when_to_come_back(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.member_id)
    answers = [(await browser.get("/me")).status for _ in range(101)]
    assert answers[:100] == [200] * 100
    refused = await browser.get("/me")
    assert refused.status == 429
    assert refused.headers["Retry-After"] == "1"
    assert "frame-ancestors" in refused.headers["Content-Security-Policy"]
    site.clock.advance(1)
    assert (await browser.get("/me")).status == 200


async def test_signing_in_is_rate_limited_per_address(site: Site) -> None:
    browser = site.browser()
    statuses = [(await browser.get("/auth/login")).status for _ in range(40)]
    assert statuses[:30] == [302] * 30
    assert set(statuses[30:]) == {429}
    refused = await browser.get("/auth/login")
    assert int(refused.headers["Retry-After"]) >= 1
    site.clock.advance(1)
    assert (await browser.get("/auth/login")).status == 302  # two a second again


# -- no database write without signing in ---------------------------------------------------


async def test_sign_ins_begun_and_forged_callbacks_write_nothing(site: Site) -> None:
    tables = ("dashboard_logins", "dashboard_sessions")
    before = {t: rows(site, t) for t in tables}
    browser = site.browser()
    for _ in range(20):
        assert (await browser.get("/auth/login")).status == 302
    for forged in ("state=forged&code=x", "code=x", "state=&code=x"):
        answer = await site.browser().get(f"/auth/callback?{forged}")
        assert answer.status == 400
    assert {t: rows(site, t) for t in tables} == before
    callback = await browser.consent(await browser.begin(), site.owner_id)
    login = next(c.value for c in browser.http.cookie_jar if c.key == "genbot_login")
    body, mac = login.split(".")
    for forged_cookie in (f"{body}x.{mac}", f"{body}.{mac[::-1]}", "garbage"):
        answer = await site.browser().get(
            callback, headers={"Cookie": f"genbot_login={forged_cookie}"}
        )
        assert answer.status == 400 and "sign in again" in await answer.text()
    assert {t: rows(site, t) for t in tables} == before
    # The whole sign-in still works, and writes its session only.
    assert (await site.browser().sign_in(site.owner_id)).headers["Location"] == "/servers"
    assert rows(site, "dashboard_sessions") == before["dashboard_sessions"] + 1
    assert rows(site, "dashboard_logins") == before["dashboard_logins"]


async def test_a_sign_in_older_than_ten_minutes_is_refused(site: Site) -> None:
    browser = site.browser()
    callback = await browser.consent(await browser.begin(), site.owner_id)
    site.clock.advance(601)
    late = await browser.get(callback)
    assert late.status == 400 and "took too long" in await late.text()


async def test_users_me_without_an_id_asks_to_sign_in_again(
    site: Site, monkeypatch: pytest.MonkeyPatch
) -> None:
    from aiohttp import web

    from tests.support.discord_emulator.oauth import OAuthRoutes

    def nobody(self: OAuthRoutes, request: web.Request) -> web.Response:
        self.bearer(request, "identify")
        return web.json_response({"username": "ghost"})

    monkeypatch.setattr(OAuthRoutes, "me", nobody)
    answer = await site.browser().sign_in(site.owner_id)
    assert answer.status == 400
    assert "sign in again" in await answer.text()


async def test_the_public_showcase_is_kept_half_a_minute(site: Site) -> None:
    await site.services.guild_config.set_showcase_public(site.guild_id, True, actor=ADMIN_ACTOR)
    visitor = site.browser()
    assert (await visitor.get(f"/showcase/{site.guild_id}")).status == 200
    await site.services.guild_config.set_showcase_public(site.guild_id, False, actor=ADMIN_ACTOR)
    assert (await visitor.get(f"/showcase/{site.guild_id}")).status == 200  # kept
    site.clock.advance(31)
    assert (await visitor.get(f"/showcase/{site.guild_id}")).status == 404


# -- origins and ids --------------------------------------------------------------------------


async def test_a_public_url_in_capitals_keeps_forms_working(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with open_site(
        stack.services, stack.clock, monkeypatch, public_url="HTTP://127.0.0.1:{port}"
    ) as site:
        browser = site.browser()
        await browser.sign_in(site.owner_id)
        body = await browser.text("/servers")
        token = body.split('name="token" value="')[1].split('"')[0]
        out = await browser.post(
            "/auth/logout", data={"token": token}, headers={"Origin": site.base}
        )
        assert (out.status, out.headers["Location"]) == (303, "/")


async def test_ids_out_of_range_are_not_found(site: Site) -> None:
    visitor = site.browser()
    answer = await visitor.get(f"/showcase/{HUGE}")
    assert answer.status == 404
    assert "frame-ancestors" in answer.headers["Content-Security-Policy"]
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    for path in (
        f"/media/{HUGE}/0",
        f"/media/1/{HUGE}",
        f"/servers/{HUGE}",
        f"/servers/{HUGE}/settings/tiers",
        f"/servers/{site.guild_id}{HUGE}",
    ):
        answer = await browser.get(path)
        assert answer.status == 404, path
        assert "nosniff" in answer.headers["X-Content-Type-Options"]


# -- nothing grows without bound --------------------------------------------------------------
