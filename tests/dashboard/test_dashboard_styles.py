"""The Styles page: each style with its suffix, tiers and references as thumbnails served from
the bot's own store; a reference whose message is gone said so; an editor removes a style."""

from __future__ import annotations

import io
from collections.abc import AsyncIterator

import pytest
from PIL import Image

from bot.domain import Actor, ImageRef
from tests.support.dashboard_site import Browser, Site, open_site, post_forms
from tests.support.stack import Stack

pytestmark = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def png() -> bytes:
    picture = io.BytesIO()
    Image.new("RGB", (64, 48), (20, 120, 200)).save(picture, "PNG")
    return picture.getvalue()


async def signed_in(site: Site, user_id: int) -> Browser:
    browser = site.browser()
    assert (await browser.sign_in(user_id)).status == 302
    return browser


async def a_style(site: Site) -> tuple[int, ImageRef, ImageRef]:
    """The style ``noir``, for the Gold tier: one reference kept, one whose message is gone."""
    kept = site.emulator.post_user_message(
        site.channel_id, site.owner_id, attachment=("a.png", png(), "image/png")
    )
    deleted = site.emulator.post_user_message(
        site.channel_id, site.owner_id, attachment=("b.png", png(), "image/png")
    )
    site.emulator.delete_message(site.channel_id, deleted.id)
    gold = site.emulator.add_role(site.guild_id, "Gold")
    owner = Actor(site.owner_id)
    await site.services.guild_config.set_tier(site.guild_id, gold.id, "Gold", actor=owner)
    refs = [ImageRef(site.channel_id, kept.id), ImageRef(site.channel_id, deleted.id)]
    creative = site.services.creative
    style = await creative.add_style(
        site.guild_id, "noir", "film noir", refs, actor=owner, pictures=[png(), png()]
    )
    await creative.set_style_tiers(site.guild_id, "noir", [gold.id], actor=owner)
    return style.id, refs[0], refs[1]


async def test_the_styles_page_shows_references_as_kept_thumbnails_and_a_gone_one(
    site: Site,
) -> None:
    style_id, _kept, _gone = await a_style(site)
    browser = await signed_in(site, site.owner_id)
    url = site.dashboard.url("styles", guild_id=site.guild_id)

    page = await browser.text(url)

    assert f'href="{url}" aria-current="page">Styles</a>' in page  # in the server's tabs
    assert "noir" in page and "film noir" in page and "Gold" in page
    thumb = f"/thumbs/styles/{site.guild_id}/{style_id}/0"
    assert f'src="{thumb}?v=' in page
    assert page.count("Gone: its message was deleted") == 2  # its text and its label
    assert f"/thumbs/styles/{site.guild_id}/{style_id}/1" not in page
    served = await browser.get(thumb)
    assert (served.status, served.content_type) == (200, "image/webp")
    asked = len(site.emulator.requests)
    assert (await browser.get(thumb)).status == 200
    assert len(site.emulator.requests) == asked  # from the bot's own store, rights cached
    stranger = await signed_in(site, site.other_owner_id)
    assert (await stranger.get(thumb)).status == 404  # not a server of theirs
    member = await signed_in(site, site.member_id)
    assert (await member.get(thumb)).status == 404  # no rights on its pages


async def test_an_editor_removes_a_style_audited_as_made_on_the_web(site: Site) -> None:
    await a_style(site)
    browser = await signed_in(site, site.owner_id)
    url = site.dashboard.url("styles", guild_id=site.guild_id)
    (form,) = post_forms(await browser.text(url))
    assert form["name"] == "noir"
    form["action"] = "remove"  # its button

    forged = await browser.post(url, data=form, headers={"Origin": "https://evil.example"})
    assert forged.status == 403
    assert [s.name for s in await site.services.creative.styles(site.guild_id)] == ["noir"]
    removed = await browser.post(url, data=form)

    assert removed.status == 200 and "Saved." in await removed.text()
    assert await site.services.creative.styles(site.guild_id) == []
    audit = await site.services.guild_config.audit(site.guild_id)
    assert any(e.what == "style noir" and e.via == "web" for e in audit)
    again = await browser.post(url, data=form)
    assert again.status == 400  # removed already: one sentence, nothing changed
    assert "That style is not in this server" in await again.text()
