"""The spend guard on the dashboard: the Overview's meters, credits, runway and latest alerts;
the Guard page's every alert and its Resume button through the dashboard's write path (who may
edit, the form token and origin, the pause changed meanwhile)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from bot.domain import Charge, Kind
from bot.services.guard import GUARD_ACTOR
from tests.support.dashboard_site import Browser, Site, open_site, post_forms
from tests.support.stack import ADMIN_ACTOR, Stack

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


async def admin(site: Site) -> Browser:
    browser = site.browser()
    assert (await browser.sign_in(site.owner_id)).status == 302
    return browser


async def charge(site: Site, cents: int, remaining: int | None = None, fp: str = "fp") -> None:
    await site.services.billing.record_charge(
        Charge(
            guild_id=site.guild_id,
            channel_id=site.channel_id,
            user_id=site.member_id,
            kind=Kind.IMAGE,
            model="acme/image",
            task_id=None,
            cost_cents=Decimal(cents),
            remaining_credits_cents=None if remaining is None else Decimal(remaining),
            key_fingerprint=fp,
            at=site.clock.time(),
        )
    )


async def test_the_overview_shows_the_month_meter_with_its_thresholds_and_the_alerts(
    site: Site,
) -> None:
    await site.services.guild_config.set_budgets(site.guild_id, monthly=100, actor=ADMIN_ACTOR)
    await charge(site, 60)  # 60 % of $1.00: the 50 % threshold fires
    await site.services.guard.idle()
    page = await (await admin(site)).text(f"/servers/{site.guild_id}")
    assert '<meter id="meter-1"' in page
    # Figures in text beside the meter, thresholds said crossed or not (not by colour only).
    assert "This month: $0.60 of $1.00 (60 %)" in page
    assert "50 % (crossed), 80 % (not reached), 100 % (not reached)" in page
    assert "The month&#39;s spend $0.60 of the $1.00 budget (50 %)" in page
    assert f'href="/servers/{site.guild_id}/guard"' in page


async def test_the_guard_page_lists_every_alert_and_resumes_through_the_write_path(
    site: Site,
) -> None:
    guard = site.services.guard
    await site.services.guild_config.set_budgets(site.guild_id, monthly=100, actor=ADMIN_ACTOR)
    await site.services.guild_config.set_admin_channel(
        site.guild_id, site.channel_id, actor=ADMIN_ACTOR
    )
    await charge(site, 55)
    await charge(site, 50)  # 105 %: 80 and 100 % recorded, one line
    await guard.pause(site.guild_id, GUARD_ACTOR, "an unusual hour")
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/guard"
    html = await browser.text(url)
    assert html.count("Monthly budget</td>") == 3  # 50, 80 and 100 %
    assert "of the $1.00 budget (100 %)" in html
    assert "Paused" in html and "an unusual hour" in html
    (form,) = [f for f in post_forms(html) if "base" in f]
    # A cross-site post, and one without the token, change nothing.
    no_token = {k: v for k, v in form.items() if k != "token"}
    assert (await browser.post(url, data=no_token)).status == 403
    assert (
        await browser.post(url, data=form, headers={"Origin": "https://evil.example"})
    ).status == 403
    assert await guard.paused(site.guild_id)
    resumed = await browser.post(url, data=form)
    assert resumed.status == 200 and "Paid requests are allowed again." in await resumed.text()
    assert not await guard.paused(site.guild_id)
    audit = await site.services.guild_config.audit(site.guild_id)
    assert (audit[0].what, audit[0].old, audit[0].new, audit[0].via) == (
        "spending",
        "paused",
        "on",
        "web",
    )
    assert audit[0].user_id == site.owner_id
    posted = await site.posted(site.channel_id, "on the web dashboard")
    assert "spending: paused → on" in posted
    # The same form again: the pause it was rendered from is gone (resumed meanwhile).
    site.clock.advance(60)
    await guard.pause(site.guild_id, GUARD_ACTOR, "again")
    stale = await browser.post(url, data=form)
    assert stale.status == 409 and "The pause changed" in await stale.text()
    assert await guard.paused(site.guild_id)


async def test_a_viewer_sees_the_alerts_but_no_resume_and_their_post_is_refused(
    site: Site,
) -> None:
    viewers = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, site.member_id, viewers.id)
    await site.services.dashboard.set_access_role(site.guild_id, viewers.id, "view")
    await site.services.guard.pause(site.guild_id, GUARD_ACTOR, "an unusual hour")
    owner = await admin(site)
    url = f"/servers/{site.guild_id}/guard"
    (forged,) = [f for f in post_forms(await owner.text(url)) if "base" in f]
    viewer = site.browser()
    await viewer.sign_in(site.member_id)
    html = await viewer.text(url)
    assert "Paused" in html and post_forms(html) == []
    token = (await viewer.text("/servers")).split('name="token" value="')[1].split('"')[0]
    forged.update(token=token)
    assert (await viewer.post(url, data=forged)).status == 403
    assert await site.services.guard.paused(site.guild_id)


async def test_a_server_on_the_shared_key_sees_neither_its_credits_nor_its_runway(
    site: Site,
) -> None:
    # GENAPI_API_KEY's balance is the bot owner's (the rule of /usage, test_keys_e2e).
    shared = (await site.services.keys.resolve(site.guild_id)).fingerprint
    await charge(site, 60, remaining=5_000, fp=shared)
    page = await (await admin(site)).text(f"/servers/{site.guild_id}")
    assert "Latest alerts" in page  # the guard's panel is there
    assert 'id="runway"' not in page and "$50.00" not in page
