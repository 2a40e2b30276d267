"""Changing a server's settings on the dashboard: the same services as ``/config``, audited as
made on the web and posted in the admin channel; the guards of every save (who may edit, the
form token and origin, the rate limit, and a save over a value changed meanwhile)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from bot.dashboard.editing import WRITES_PER_MINUTE
from bot.services.dashboard import DashboardService
from tests.support.dashboard_site import Browser, Site, open_site, post_forms
from tests.support.stack import Stack


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


def tiers_url(site: Site) -> str:
    return f"/servers/{site.guild_id}/settings/tiers"


async def admin(site: Site) -> Browser:
    browser = site.browser()
    assert (await browser.sign_in(site.owner_id)).status == 302
    return browser


async def new_tier_form(browser: Browser, site: Site) -> dict[str, str]:
    forms = post_forms(await browser.text(tiers_url(site)))
    return next(f for f in forms if "role_id" in f and f.get("daily") == "default")


async def test_a_tier_saved_on_the_web_is_the_policy_audited_and_announced(site: Site) -> None:
    patrons = site.emulator.add_role(site.guild_id, "Patrons")
    config = site.services.guild_config
    await config.set_admin_channel(site.guild_id, site.channel_id)
    browser = await admin(site)
    form = await new_tier_form(browser, site)
    form.update(role_id=str(patrons.id), daily="0.50", action="save")
    saved = await browser.post(tiers_url(site), data=form)
    assert saved.status == 200
    assert "Saved." in await saved.text()
    # The policy a command reads now judges the role's members by it.
    judged = await site.services.billing.member_policy(site.guild_id, {patrons.id})
    assert judged.daily.value == 50
    audit = await config.audit(site.guild_id)
    assert {(e.what, e.new, e.via) for e in audit} >= {
        (f"tier Patrons (<@&{patrons.id}>): daily per member", "$0.50", "web")
    }
    assert all(e.user_id == site.owner_id for e in audit)
    page = await browser.text(f"/servers/{site.guild_id}/audit")
    assert "daily per member</td><td>—</td><td>$0.50</td><td>web</td>" in page
    posted = await site.posted(site.channel_id, "on the web dashboard")
    assert posted.startswith(f"<@{site.owner_id}> changed the bot's settings on the web dashboard")
    assert "daily per member: — → $0.50" in posted


async def test_two_saves_from_one_page_the_later_is_told_and_changes_nothing(site: Site) -> None:
    patrons = site.emulator.add_role(site.guild_id, "Patrons")
    config = site.services.guild_config
    await config.set_tier(site.guild_id, patrons.id, "Patrons", daily_per_user=100)
    first, second = await admin(site), await admin(site)
    first_form = next(f for f in post_forms(await first.text(tiers_url(site))) if "base" in f)
    second_form = next(f for f in post_forms(await second.text(tiers_url(site))) if "base" in f)
    assert second_form["base"] == first_form["base"]
    first_form.update(daily="2", action="save")
    second_form.update(daily="3", action="save")
    assert (await first.post(tiers_url(site), data=first_form)).status == 200
    later = await second.post(tiers_url(site), data=second_form)
    assert later.status == 409
    assert "changed this setting since you opened the page" in await later.text()
    tier = (await config.policy(site.guild_id)).tiers[0]
    assert tier.daily_per_user_cents == 200
    # A change made with /config meanwhile is a change too.
    fresh = next(f for f in post_forms(await first.text(tiers_url(site))) if "base" in f)
    await config.set_tier(site.guild_id, patrons.id, "Patrons", daily_per_user=400)
    fresh.update(daily="5", action="save")
    assert (await first.post(tiers_url(site), data=fresh)).status == 409
    assert (await config.policy(site.guild_id)).tiers[0].daily_per_user_cents == 400


async def test_a_viewer_sees_no_forms_and_their_post_is_refused(site: Site) -> None:
    viewers = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, site.member_id, viewers.id)
    await site.services.service(DashboardService).set_access_role(site.guild_id, viewers.id, "view")
    owner = await admin(site)
    forged = await new_tier_form(owner, site)  # a well-formed save, as an editor sees it
    viewer = site.browser()
    await viewer.sign_in(site.member_id)
    for page in ("tiers", "budgets", "blocked-terms", "access"):
        html = await viewer.text(f"/servers/{site.guild_id}/settings/{page}")
        assert post_forms(html) == [], page
        assert "You may view these settings" in html
    servers = await viewer.text("/servers")
    token = servers.split('name="token" value="')[1].split('"')[0]
    forged.update(token=token, role_id=str(viewers.id), daily="99", action="save")
    refused = await viewer.post(tiers_url(site), data=forged)
    assert refused.status == 403
    assert (await site.services.guild_config.policy(site.guild_id)).tiers == []


async def test_a_cross_site_post_changes_nothing(site: Site) -> None:
    patrons = site.emulator.add_role(site.guild_id, "Patrons")
    browser = await admin(site)
    form = await new_tier_form(browser, site)
    form.update(role_id=str(patrons.id), daily="1", action="save")
    no_token = {k: v for k, v in form.items() if k != "token"}
    attempts = [
        (no_token, {"Origin": "https://evil.example"}),
        (no_token, {}),
        (form, {"Origin": "https://evil.example"}),
        (form, {"Sec-Fetch-Site": "cross-site"}),
    ]
    for data, headers in attempts:
        answer = await browser.post(tiers_url(site), data=data, headers=headers)
        assert answer.status == 403, (data.keys(), headers)
    assert (await site.services.guild_config.policy(site.guild_id)).tiers == []
    assert await site.services.guild_config.audit(site.guild_id) == []


async def test_writes_are_rate_limited_per_member(site: Site) -> None:
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/blocked-terms"
    statuses = []
    for i in range(WRITES_PER_MINUTE + 1):
        form = next(f for f in post_forms(await browser.text(url)) if "term" in f and not f["term"])
        form.update(term=f"word{i}", action="add")
        statuses.append((await browser.post(url, data=form)).status)
    assert statuses == [200] * WRITES_PER_MINUTE + [429]
    terms = (await site.services.guild_config.policy(site.guild_id)).blocked_terms
    assert len(terms) == WRITES_PER_MINUTE


async def test_try_a_prompt_names_the_rule_that_matched(site: Site) -> None:
    await site.services.guild_config.add_blocked_term(site.guild_id, "dragon")
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/blocked-terms"
    refused = await browser.text(f"{url}?prompt=A+red+DR%D0%90G0N+flying")
    assert "contains the blocked term <code>dragon</code>" in refused
    allowed = await browser.text(f"{url}?prompt=dragonfly")
    assert "Allowed: no blocked term matches." in allowed


async def test_budgets_saved_on_the_web_are_the_limits(site: Site) -> None:
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/budgets"
    form = post_forms(await browser.text(url))[0]
    form.update(monthly="25", daily="1.50", per_user="2", cooldown_video="30")
    assert (await browser.post(url, data=form)).status == 200
    limits = await site.services.billing.limits(site.guild_id)
    assert (limits.monthly_budget_cents, limits.user_daily_budget_cents) == (2500, 150)
    assert limits.max_pending_videos_per_user == 2
    bad = post_forms(await browser.text(url))[0]
    bad.update(monthly="lots")
    answer = await browser.post(url, data=bad)
    assert answer.status == 400
    assert (await site.services.billing.limits(site.guild_id)).monthly_budget_cents == 2500


async def test_dashboard_access_granted_on_the_web_lets_a_role_edit(site: Site) -> None:
    editors = site.emulator.add_role(site.guild_id, "Editors")
    site.emulator.give_role(site.guild_id, site.member_id, editors.id)
    owner = await admin(site)
    url = f"/servers/{site.guild_id}/settings/access"
    form = next(f for f in post_forms(await owner.text(url)) if f["role_id"] == str(editors.id))
    form.update(access="edit")
    assert (await owner.post(url, data=form)).status == 200
    entries = await site.services.guild_config.audit(site.guild_id)
    assert [(e.new, e.via) for e in entries] == [("edit", "web")]
    member = site.browser()
    await member.sign_in(site.member_id)
    tier_form = await new_tier_form(member, site)
    tier_form.update(role_id=str(editors.id), daily="1", action="save")
    assert (await member.post(tiers_url(site), data=tier_form)).status == 200
    # Only Manage Server decides who else may edit.
    assert post_forms(await member.text(url)) == []
