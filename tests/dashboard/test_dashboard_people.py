"""Members as people see them on every page: their server nickname or name and avatar, the id
on hover, "former member" once gone; asked of Discord once per member of a page, then cached.
And the Spend chart stacked by kind, readable without colour."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import pytest

from bot.dashboard.charts import Stack as ChartStack
from bot.dashboard.charts import stacked_chart
from bot.domain import Actor, Kind
from tests.support.dashboard_site import Site, open_site
from tests.support.stack import Stack

SQLITE = pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def member_lookups(site: Site, since: int = 0) -> list[str]:
    """The members Discord was asked about, but the viewer (whose rights are read)."""
    return [
        r.path
        for r in site.emulator.requests[since:]
        if "/members/" in r.path and not r.path.endswith(f"/{site.owner_id}")
    ]


@SQLITE
async def test_members_are_shown_by_name_and_avatar_and_the_gone_as_former(site: Site) -> None:
    guild = site.emulator.world.guilds[site.guild_id]
    guild.members[site.member_id].nick = "Kite Queen"
    guild.members[site.member_id].avatar = "abc123"
    leaver = site.emulator.add_user("leaver")
    site.emulator.world.ensure_member(site.guild_id, leaver.id)
    jobs = [
        await site.charge("1", prompt=f"kite {n}", outputs=("https://files.example/a",))
        for n in range(5)
    ]
    gone_job = await site.charge(
        "1", prompt="a gone kite", user_id=leaver.id, outputs=("https://files.example/b",)
    )
    await site.services.guild_config.set_cooldown(
        site.guild_id, Kind.IMAGE, 5, actor=Actor(leaver.id)
    )
    del guild.members[leaver.id]  # they left the server
    browser = site.browser()
    await browser.sign_in(site.owner_id)

    asked = len(site.emulator.requests)
    ledger = await browser.text(f"/servers/{site.guild_id}/ledger")
    # Six rows, two members: each asked about once, never once per row.
    assert sorted(member_lookups(site, asked)) == sorted(
        f"/guilds/{site.guild_id}/members/{u}" for u in (site.member_id, leaver.id)
    )
    avatar = (
        f"https://cdn.discordapp.com/guilds/{site.guild_id}/users/{site.member_id}"
        "/avatars/abc123.png?size=64"
    )
    shown = (
        f'<span class="member" title="{site.member_id}"><img class="avatar" src="{avatar}" '
        'alt="Avatar of Kite Queen"'
    )
    former = f'<span class="member gone" title="{leaver.id}">former member</span>'
    assert ledger.count(shown) == 5 and ledger.count(former) == 1
    bare = re.sub(r'(title|src)="[^"]+"', "", ledger)
    assert str(site.member_id) not in bare  # the id on hover only

    # Every other page shows them the same way, from the cache: no new question to Discord.
    asked = len(site.emulator.requests)
    pages = {
        "gallery": await browser.text(f"/servers/{site.guild_id}/gallery"),
        "spend": await browser.text(f"/servers/{site.guild_id}/spend"),
        "result": await browser.text(f"/results/{jobs[0]}"),
        "gone result": await browser.text(f"/results/{gone_job}"),
        "audit": await browser.text(f"/servers/{site.guild_id}/audit"),
    }
    assert member_lookups(site, asked) == []
    for name in ("gallery", "spend", "result"):
        assert shown in pages[name], name
    for name in ("gallery", "spend", "gone result", "audit"):
        assert former in pages[name], name


@SQLITE
async def test_a_member_without_an_avatar_has_discords_default(site: Site) -> None:
    await site.charge("1", user_id=site.owner_id)
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    ledger = await browser.text(f"/servers/{site.guild_id}/ledger")
    default = f"https://cdn.discordapp.com/embed/avatars/{(site.owner_id >> 22) % 6}.png"
    assert f'src="{default}" alt="Avatar of owner"' in ledger


def test_the_spend_chart_stacks_kinds_told_apart_without_colour() -> None:
    svg = stacked_chart(
        [
            ChartStack("01-30", {"video": 300, "image": 100}, "2026-01-30"),
            ChartStack("01-31", {"text": 50}, "2026-01-31"),
        ],
        kinds=("video", "image", "text"),
        label="Spend per day",
        value_text=lambda micro: f"${micro / 1e6:.6f}",
    )
    # One segment per kind and day, each with its own pattern and a title with its figure.
    assert svg.count('<rect class="segment kind-video"') == 1
    assert 'fill="url(#kind-image)"' in svg and "<pattern" in svg
    assert "<title>2026-01-30 · video: $0.000300</title>" in svg
    # The legend names every kind beside its pattern: not colour alone.
    for kind in ("video", "image", "text"):
        assert '<text class="legend"' in svg and f">{kind}</text>" in svg
    assert "<script" not in svg and "style=" not in svg
