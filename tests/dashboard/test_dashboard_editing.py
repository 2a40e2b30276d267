"""Changing a server's settings on the dashboard: the same services as ``/config``, audited as
made on the web and posted in the admin channel; the guards of every save (who may edit, the
form token and origin, the rate limit, and a save over a value changed meanwhile)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from cryptography.fernet import Fernet

from bot.dashboard.editing import WRITES_PER_MINUTE
from bot.domain import Actor
from bot.services.guild_config import KEY_CHECK_COOLDOWN_SECONDS
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
    await config.set_admin_channel(site.guild_id, site.channel_id, actor=Actor(site.owner_id))
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
    await config.set_tier(
        site.guild_id, patrons.id, "Patrons", daily_per_user=100, actor=Actor(site.owner_id)
    )
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
    await config.set_tier(
        site.guild_id, patrons.id, "Patrons", daily_per_user=400, actor=Actor(site.owner_id)
    )
    fresh.update(daily="5", action="save")
    assert (await first.post(tiers_url(site), data=fresh)).status == 409
    assert (await config.policy(site.guild_id)).tiers[0].daily_per_user_cents == 400


async def test_a_viewer_sees_no_forms_and_their_post_is_refused(site: Site) -> None:
    viewers = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, site.member_id, viewers.id)
    await site.services.dashboard.set_access_role(site.guild_id, viewers.id, "view")
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
    await site.services.guild_config.add_blocked_term(
        site.guild_id, "dragon", actor=Actor(site.owner_id)
    )
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
    editors.colour = 0x1ABC9C
    site.emulator.give_role(site.guild_id, site.member_id, editors.id)
    owner = await admin(site)
    url = f"/servers/{site.guild_id}/settings/access"
    page = await owner.text(url)
    assert 'fill="#1abc9c"' in page  # the role's colour beside its name
    form = next(f for f in post_forms(page) if f["role_id"] == str(editors.id))
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


@pytest.mark.parametrize(
    "stack_overrides", [{"key_encryption_key": Fernet.generate_key().decode()}], indirect=False
)
async def test_a_key_set_on_the_web_is_checked_stored_and_never_shown(
    site: Site, stack: Stack
) -> None:
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/key"
    key = stack.api.create_key(balance_cents=1_234)
    form = post_forms(await browser.text(url))[0]
    assert form["api_key"] == ""  # write-only: never filled in
    form.update(api_key=key, action="set")
    saved = await browser.post(url, data=form)
    body = await saved.text()
    assert saved.status == 200, body.split("<main")[1][:600]
    assert "Saved." in body
    assert key not in body
    assert f"ending in {key[-4:]}" in body
    assert 'id="fingerprint"' in body
    assert await site.services.guild_config.key_last4(site.guild_id) == key[-4:]
    entries = await site.services.guild_config.audit(site.guild_id)
    assert [(e.what, e.via) for e in entries] == [("API key", "web")]
    assert all(key not in e.new for e in entries)
    # The member's key checks share one cooldown with /config and /settings: at once, refused.
    posts = len(stack.api.requests)
    again = post_forms(body)[0]
    again.update(api_key=stack.api.create_key(), action="set")
    answer = await browser.post(url, data=again)
    assert answer.status == 400
    assert "/config api-key set has a cooldown here" in await answer.text()
    assert len(stack.api.requests) == posts  # nothing sent to the service
    stack.clock.advance(KEY_CHECK_COOLDOWN_SECONDS)
    rejected = post_forms(body)[0]
    rejected.update(api_key="sk-not-a-real-key-at-all", action="set")
    answer = await browser.post(url, data=rejected)
    assert answer.status == 400
    assert "The service rejected that key; nothing was stored." in await answer.text()
    assert await site.services.guild_config.key_last4(site.guild_id) == key[-4:]


async def test_models_saved_on_the_web_are_the_server_list(site: Site) -> None:
    """The Models page's pickers: the catalogue's models ticked, by kind, with their prices."""
    config = site.services.guild_config
    await config.set_models(site.guild_id, allowed=("aurora-lite/",), actor=Actor(site.owner_id))
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/models"
    page = await browser.text(url)
    assert 'name="allow" value="black-forest-labs/flux-schnell"' in page
    assert 'name="block" value="aurora-lite/text-to-video"' in page
    assert "<legend>Videos</legend>" in page and "per 5 s" in page
    # /config's prefix stays on the list, ticked, under its own group.
    assert 'name="allow" value="aurora-lite/" checked' in page
    assert 'name="allowed"' not in page  # no typed list beside the catalogue
    form = post_forms(page)[0]
    assert form["allowed_mode"] == "picked"
    data = [(k, v) for k, v in form.items() if k not in ("allow", "block")]
    data += [
        ("allow", "aurora-lite/"),
        ("allow", "black-forest-labs/flux-schnell"),
        ("block", "aurora-lite/text-to-video"),
    ]
    assert (await browser.post(url, data=data)).status == 200
    lists = (await config.policy(site.guild_id)).models
    assert lists.allowed == ("aurora-lite/", "black-forest-labs/flux-schnell")
    assert lists.blocked == ("aurora-lite/text-to-video",)
    # The same validation as /config: none ticked, or a model of no catalogue, changes nothing.
    again = post_forms(await browser.text(url))[0]
    none = [(k, v) for k, v in again.items() if k not in ("allow", "block")]
    refused = await browser.post(url, data=none)
    assert refused.status == 400 and "Pick at least one model" in await refused.text()
    refused = await browser.post(url, data=[*none, ("allow", "evil/model")])
    assert refused.status == 400 and "Pick models of the catalogue." in await refused.text()
    everything = [(k, "all" if k == "allowed_mode" else v) for k, v in none]
    assert (await browser.post(url, data=everything)).status == 200
    lists = (await config.policy(site.guild_id)).models
    assert (lists.allowed, lists.blocked) == ((), ())


async def test_channels_and_a_locked_persona_saved_on_the_web(site: Site) -> None:
    extra = site.emulator.add_channel(site.guild_id, "showcase")
    browser = await admin(site)
    url = f"/servers/{site.guild_id}/settings/channels"
    page = await browser.text(url)
    form = next(f for f in post_forms(page) if "admin_channel" in f)
    form.pop("allowed", None)
    data = [(k, v) for k, v in form.items() if k not in ("admin_channel", "showcase_channel")]
    data += [
        ("allowed", str(site.channel_id)),
        ("admin_channel", str(site.channel_id)),
        ("showcase_channel", str(extra.id)),
        ("action", "channels"),
    ]
    assert (await browser.post(url, data=data)).status == 200
    config = await site.services.guild_config.show(site.guild_id)
    assert config.allowed_channel_ids == {site.channel_id}
    assert config.admin_channel_id == site.channel_id
    settings = await site.services.showcases.settings(site.guild_id)
    assert settings == (extra.id, False)
    new = next(f for f in post_forms(await browser.text(url)) if "system" in f)
    new.update(channel_id=str(site.channel_id), system="You are a pirate.", locked="on")
    new["action"] = "persona"
    assert (await browser.post(url, data=new)).status == 200
    [persona] = await site.services.guild_config.personas(site.guild_id)
    assert (persona.channel_id, persona.system, persona.locked) == (
        site.channel_id,
        "You are a pirate.",
        True,
    )
    stranger = next(f for f in post_forms(await browser.text(url)) if "admin_channel" in f)
    stranger.update(admin_channel="123", action="channels")
    assert (await browser.post(url, data=stranger)).status == 400


async def test_a_tier_saved_unchanged_changes_nothing(site: Site) -> None:
    patrons = site.emulator.add_role(site.guild_id, "Patrons")
    config = site.services.guild_config
    await config.set_tier(
        site.guild_id,
        patrons.id,
        "Patrons",
        daily_per_user=150,
        models=("*",),
        actor=Actor(site.owner_id),
    )
    audited = await config.audit(site.guild_id)  # the tier made with /config
    browser = await admin(site)
    form = next(f for f in post_forms(await browser.text(tiers_url(site))) if "base" in f)
    assert (form["daily"], form["monthly"], form["models_mode"]) == ("1.50", "default", "all")
    form["action"] = "save"
    answer = await browser.post(tiers_url(site), data=form)
    assert "Nothing changed." in await answer.text()
    assert await config.audit(site.guild_id) == audited


async def test_a_tier_s_models_are_picked_from_the_catalogue_by_kind(site: Site) -> None:
    patrons = site.emulator.add_role(site.guild_id, "Patrons")
    config = site.services.guild_config
    browser = await admin(site)
    page = await browser.text(tiers_url(site))
    # Checkboxes grouped by kind, videos with their catalogue price; the role with a swatch.
    assert 'name="models_mode"' in page and 'name="model" value="aurora-lite/text-to-video"' in page
    assert "per 5 s" in page and "<legend>Videos</legend>" in page
    assert 'class="swatch"' in page
    form = await new_tier_form(browser, site)
    form.update(role_id=str(patrons.id), models_mode="picked", action="save")
    picked = {**form, "model": ["black-forest-labs/flux-schnell", "aurora-lite/text-to-video"]}
    data = [(k, v) for k, vs in picked.items() for v in (vs if isinstance(vs, list) else [vs])]
    assert (await browser.post(tiers_url(site), data=data)).status == 200
    (tier,) = (await config.policy(site.guild_id)).tiers
    assert tier.models == ("black-forest-labs/flux-schnell", "aurora-lite/text-to-video")
    # The same validation as /config: a model not in the catalogue changes nothing.
    again = next(f for f in post_forms(await browser.text(tiers_url(site))) if "base" in f)
    again.update(models_mode="picked", model="evil/model", action="save")
    refused = await browser.post(tiers_url(site), data=again)
    assert refused.status == 400 and "Pick models of the catalogue." in await refused.text()
    assert (await config.policy(site.guild_id)).tiers[0].models == tier.models
