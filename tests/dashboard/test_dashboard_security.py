"""Signing in and who sees what: the attacks the sign-in, the sessions and the rights refuse."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.services.dashboard import SESSION_IDLE_SECONDS
from tests.support.dashboard_site import Site, open_site
from tests.support.stack import Stack


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


async def test_a_replayed_state_is_refused(site: Site) -> None:
    browser = site.browser()
    callback = await browser.consent(await browser.begin(), site.owner_id)
    assert (await browser.get(callback)).status == 302
    exchanges = list(site.emulator.oauth.exchanges)
    await browser.post("/auth/logout", data={"token": "x"})  # refused: no matter
    replay = await browser.get(callback)
    assert replay.status == 400
    assert "used already" in await replay.text()
    assert site.emulator.oauth.exchanges == exchanges  # the code was not even tried again


async def test_a_state_from_another_browser_is_refused(site: Site) -> None:
    """A login CSRF: the attacker's own callback URL, opened in the victim's browser."""
    attacker, victim = site.browser(), site.browser()
    callback = await attacker.consent(await attacker.begin(), site.other_owner_id)
    await victim.begin()  # the victim has a pre-login cookie of their own
    answer = await victim.get(callback)
    assert answer.status == 400
    assert "another browser" in await answer.text()
    assert (await victim.get("/servers")).headers["Location"] == "/"  # not signed in at all


async def test_a_code_with_the_wrong_pkce_verifier_is_refused(site: Site) -> None:
    """An intercepted code, injected into the attacker's own sign-in: its verifier differs."""
    victim, attacker = site.browser(), site.browser()
    stolen = await victim.consent(await victim.begin(), site.owner_id)
    code = stolen.split("code=")[1].split("&")[0]
    own = await attacker.consent(await attacker.begin(), site.other_owner_id)
    state = own.split("state=")[1].split("&")[0]
    answer = await attacker.get(f"/auth/callback?code={code}&state={state}")
    assert answer.status == 400
    assert site.emulator.oauth.exchanges[-1] == "invalid_grant"
    assert (await attacker.get(f"/servers/{site.guild_id}")).headers["Location"] == "/"


async def test_a_reused_code_is_refused(site: Site) -> None:
    browser = site.browser()
    callback = await browser.consent(await browser.begin(), site.owner_id)
    assert (await browser.get(callback)).status == 302
    code = callback.split("code=")[1].split("&")[0]
    again = site.browser()
    fresh = await again.consent(await again.begin(), site.owner_id)
    state = fresh.split("state=")[1].split("&")[0]
    answer = await again.get(f"/auth/callback?code={code}&state={state}")
    assert answer.status == 400
    assert site.emulator.oauth.exchanges[-1] == "invalid_grant"


async def test_another_servers_admin_cannot_read_this_server(site: Site) -> None:
    await site.charge("1", prompt="secret plans")
    other = site.browser()
    await other.sign_in(site.other_owner_id)
    assert (await other.get(f"/servers/{site.other_guild_id}")).status == 200
    unknown = await other.get("/servers/123456789012345678")
    for path in ("", "/spend", "/ledger", "/ledger.csv", "/audit", "/audit.csv", "/gallery"):
        answer = await other.get(f"/servers/{site.guild_id}{path}")
        assert answer.status == 404, path
        assert await answer.text() == await unknown.text()  # no oracle: the same plain 404
    assert "secret plans" not in await other.text("/me")


async def test_rights_are_read_again_after_a_minute(site: Site) -> None:
    role = site.emulator.add_role(site.guild_id, "mods", permissions=1 << 5)  # Manage Server
    site.emulator.give_role(site.guild_id, site.member_id, role.id)
    browser = site.browser()
    await browser.sign_in(site.member_id)
    assert (await browser.get(f"/servers/{site.guild_id}")).status == 200
    site.emulator.world.guilds[site.guild_id].members[site.member_id].role_ids.remove(role.id)
    assert (await browser.get(f"/servers/{site.guild_id}")).status == 200  # cached
    site.clock.advance(61)
    assert (await browser.get(f"/servers/{site.guild_id}")).status == 404


async def test_a_dashboard_role_opens_the_pages(site: Site) -> None:

    role = site.emulator.add_role(site.guild_id, "treasurer")
    site.emulator.give_role(site.guild_id, site.member_id, role.id)
    await site.services.dashboard.set_access_role(site.guild_id, role.id, "view")
    browser = site.browser()
    await browser.sign_in(site.member_id)
    assert f'href="/servers/{site.guild_id}"' in await browser.text("/servers")
    assert (await browser.get(f"/servers/{site.guild_id}/ledger")).status == 200


async def test_the_bot_removed_from_a_server_closes_its_pages(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    site.emulator.remove_bot(site.guild_id)
    site.clock.advance(61)
    assert (await browser.get(f"/servers/{site.guild_id}")).status == 404


async def test_cookies_headers_and_sign_out(site: Site) -> None:
    browser = site.browser()
    begun = await browser.get("/auth/login")
    login_cookie = begun.headers["Set-Cookie"]
    assert "HttpOnly" in login_cookie and "SameSite=Lax" in login_cookie
    assert "Secure" not in login_cookie  # http://127.0.0.1: a home install without TLS
    callback = await browser.consent(begun.headers["Location"], site.owner_id)
    signed = await browser.get(callback)
    session_cookie = next(
        v for v in signed.headers.getall("Set-Cookie") if v.startswith("genbot_session=")
    )
    assert "HttpOnly" in session_cookie and "SameSite=Lax" in session_cookie
    assert len(site.emulator.oauth.revoked) == 1  # the token was revoked once read
    assert site.emulator.oauth.tokens == {}  # no Discord token left alive
    page = await browser.get("/servers")
    csp = page.headers["Content-Security-Policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp
    assert "unsafe-inline" not in csp
    assert page.headers["Cache-Control"] == "no-store"
    # Sign-out is a POST with the session's form token, from this site only.
    assert (await browser.get("/auth/logout")).status == 405
    assert (await browser.post("/auth/logout", data={"token": "forged"})).status == 403
    body = await page.text()
    token = body.split('name="token" value="')[1].split('"')[0]
    forged = await browser.post("/auth/logout", data={"token": "forged"})
    assert "frame-ancestors" in forged.headers["Content-Security-Policy"]
    cross = await browser.post(
        "/auth/logout", data={"token": token}, headers={"Origin": "https://evil.example"}
    )
    assert cross.status == 403
    assert (await browser.get("/servers")).status == 200
    out = await browser.post("/auth/logout", data={"token": token})
    assert (out.status, out.headers["Location"]) == (303, "/")
    assert (await browser.get("/servers")).headers["Location"] == "/"


async def test_sign_out_everywhere_and_idle_expiry(site: Site) -> None:
    laptop, phone = site.browser(), site.browser()
    await laptop.sign_in(site.owner_id)
    await phone.sign_in(site.owner_id)
    body = await laptop.text("/servers")
    token = body.split('name="token" value="')[1].split('"')[0]
    await laptop.post("/auth/logout", data={"token": token, "everywhere": "1"})
    assert (await phone.get("/servers")).headers["Location"] == "/"
    await phone.sign_in(site.owner_id)
    site.clock.advance(SESSION_IDLE_SECONDS + 1)
    assert (await phone.get("/servers")).headers["Location"] == "/"


async def test_https_makes_the_cookies_secure_and_host_only(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Behind a proxy that ends TLS, the public URL decides the cookies' security."""
    async with open_site(
        stack.services, stack.clock, monkeypatch, public_url="https://dash.example.com"
    ) as secure:
        browser = secure.browser()
        begun = await browser.get("/auth/login")
        cookie = begun.headers["Set-Cookie"]
        assert cookie.startswith("__Host-genbot_login=")
        assert "Secure" in cookie and "Path=/" in cookie and "Domain" not in cookie
        assert (
            "redirect_uri=https%3A%2F%2Fdash.example.com%2Fauth%2Fcallback"
            in begun.headers["Location"]
        )


async def test_signing_in_again_replaces_the_session(site: Site) -> None:
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    first = next(c.value for c in browser.http.cookie_jar if c.key == "genbot_session")
    await browser.sign_in(site.owner_id)
    second = next(c.value for c in browser.http.cookie_jar if c.key == "genbot_session")
    assert first != second  # a new id at every sign-in
    stale = site.browser()
    stale.http.cookie_jar.update_cookies({"genbot_session": first})
    assert (await stale.get("/servers")).headers["Location"] == "/"
