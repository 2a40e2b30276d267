"""Pictures on the dashboard: grids of thumbnails the dashboard serves itself, a result's own
page with its image or video player, and the public showcase's link preview (Open Graph).

A gallery asks Discord for nothing: its thumbnails are the bot's own copies, with the result's
rights, cached by the browser by their digest.
"""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator

import pytest
from PIL import Image

from bot.dashboard.pages import IMMUTABLE, PUBLIC_THUMB, REVALIDATE
from bot.domain import Kind
from bot.sandbox.clips import make_clip
from tests.support.dashboard_site import Site, open_site
from tests.support.stack import ADMIN_ACTOR, Stack


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def png(rgb: tuple[int, int, int]) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (1024, 1024), rgb).save(out, "PNG")
    return out.getvalue()


async def result_with_thumbnail(
    site: Site, prompt: str, rgb: tuple[int, int, int], **options: object
) -> tuple[int, str]:
    """A finished image (or ``kind=Kind.VIDEO`` clip) and its kept thumbnail's digest."""
    kind = options.pop("kind", Kind.IMAGE)
    job = await site.charge(
        "2",
        prompt=prompt,
        kind=kind,
        outputs=("https://files.example/a",),
        **options,  # type: ignore[arg-type]
    )
    assert job is not None
    data = make_clip(1, width=640, height=360, colour=rgb) if kind is Kind.VIDEO else png(rgb)
    thumbnails = site.services.thumbnails
    assert await thumbnails.keep(job, str(kind.value), [data]) == 1  # type: ignore[attr-defined]
    thumb = await thumbnails.thumbnail(job, 0)
    assert thumb is not None
    return job, thumb.digest


def centre(data: bytes) -> tuple[int, int, int]:
    image = Image.open(io.BytesIO(data)).convert("RGB")
    r, g, b = image.getpixel((image.width // 2, image.height // 2))  # type: ignore[misc]
    return r, g, b


async def test_the_gallery_is_a_grid_of_thumbnails_served_with_the_results_rights(
    site: Site,
) -> None:
    job, digest = await result_with_thumbnail(site, "a red kite", (220, 20, 20))
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    gallery = await browser.text(f"/servers/{site.guild_id}/gallery")
    assert f'href="/results/{job}"' in gallery
    assert f'src="/thumbs/{job}/0?v={digest}" alt="a red kite"' in gallery
    kept = await browser.get(f"/thumbs/{job}/0?v={digest}")
    assert kept.status == 200 and kept.headers["Content-Type"] == "image/webp"
    assert kept.headers["ETag"] == f'"{digest}"'
    assert kept.headers["Cache-Control"] == IMMUTABLE
    red, green, blue = centre(await kept.read())
    assert red > 180 and green < 60 and blue < 60
    plain = await browser.get(f"/thumbs/{job}/0")
    assert plain.headers["Cache-Control"] == REVALIDATE
    again = await browser.get(f"/thumbs/{job}/0", headers={"If-None-Match": f'"{digest}"'})
    assert again.status == 304
    assert (await browser.get(f"/thumbs/{job}/1")).status == 404  # no such file
    # Someone of another server: the same plain 404 as for a result that does not exist.
    stranger = site.browser()
    await stranger.sign_in(site.other_owner_id)
    refused = await stranger.get(f"/thumbs/{job}/0?v={digest}")
    assert refused.status == 404 and refused.headers["Cache-Control"] == "no-store"


async def test_a_private_members_thumbnail_is_hidden_from_a_viewer_who_is_not_an_admin(
    site: Site,
) -> None:
    viewer_id = site.emulator.add_user("treasurer").id
    site.emulator.world.ensure_member(site.guild_id, viewer_id)
    role = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, viewer_id, role.id)
    await site.services.dashboard.set_access_role(site.guild_id, role.id, "view")
    await site.services.members.update(site.member_id, {"private": True})
    job, digest = await result_with_thumbnail(site, "a secret kite", (10, 10, 10))
    viewer = site.browser()
    await viewer.sign_in(viewer_id)
    assert (await viewer.get(f"/thumbs/{job}/0?v={digest}")).status == 404
    assert (await viewer.get(f"/results/{job}")).status == 404
    member = site.browser()
    await member.sign_in(site.member_id)
    assert (await member.get(f"/thumbs/{job}/0?v={digest}")).status == 200
    assert f"/thumbs/{job}/0?v={digest}" in await member.text("/me")


async def test_showing_a_gallery_asks_discord_for_nothing(site: Site) -> None:
    """Even when the cards' attachment URLs have expired: the thumbnails are the bot's own."""
    jobs = [
        (await result_with_thumbnail(site, f"kite {n}", (20 * n, 100, 100), message_id=900 + n))
        for n in range(6)
    ]
    site.clock.advance(86_400 * 30)  # any attachment URL of theirs has long expired
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    asked = len(site.emulator.requests)
    gallery = await browser.text(f"/servers/{site.guild_id}/gallery")
    # The member's rights and names (cached) at most: no card's message is read.
    assert not [r for r in site.emulator.requests[asked:] if "/messages" in r.path]
    sources = re.findall(r'src="(/thumbs/[0-9]+/0\?v=[0-9a-f]+)"', gallery)
    assert len(sources) == len(jobs)
    asked = len(site.emulator.requests)
    for source in sources:
        assert (await browser.get(source)).status == 200
    await browser.text(f"/servers/{site.guild_id}/gallery")
    assert site.emulator.requests[asked:] == []


async def test_a_results_page_shows_its_image_or_plays_its_video(site: Site) -> None:
    image, _ = await result_with_thumbnail(site, "a kite at dawn", (200, 200, 20))
    video, digest = await result_with_thumbnail(
        site, "a kite in flight", (20, 200, 20), kind=Kind.VIDEO
    )
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    page = await browser.text(f"/results/{image}")
    assert f'<img class="full" src="/media/{image}/0" alt="a kite at dawn">' in page
    assert "$0.02" in page and "black-forest-labs/flux-schnell" in page
    played = await browser.text(f"/results/{video}")
    assert re.search(
        rf'<video controls preload="metadata" src="/media/{video}/0" '
        rf'poster="/thumbs/{video}/0\?v={digest}"',
        played,
    )
    gallery = await browser.text(f"/servers/{site.guild_id}/gallery")
    assert "▶ video · 1 s" in gallery  # a clip's tile says so, with its duration


async def test_the_public_showcase_unfurls_with_its_top_entrys_thumbnail(site: Site) -> None:
    showcase = site.services.showcases
    await site.services.guild_config.set_showcase_public(site.guild_id, True, actor=ADMIN_ACTOR)
    site.clock.advance(1)
    job, digest = await result_with_thumbnail(site, "the best kite", (30, 30, 220))
    entry, _ = await showcase.share(job, site.member_id)
    visitor = site.browser()  # signed out
    page = await visitor.text(f"/showcase/{site.guild_id}")
    image = f"{site.dashboard.public_url}/public/thumbs/{entry.id}?v={digest}"
    assert f'<meta property="og:image" content="{image}">' in page
    assert '<meta property="og:description" content="the best kite">' in page
    assert '<meta property="og:title" content="Showcase">' in page
    assert '<meta name="twitter:card" content="summary_large_image">' in page
    assert f'src="/public/thumbs/{entry.id}?v={digest}" alt="the best kite"' in page
    served = await visitor.get(f"/public/thumbs/{entry.id}?v={digest}")
    assert served.status == 200 and served.headers["Cache-Control"] == PUBLIC_THUMB
    red, _, blue = centre(await served.read())
    assert blue > 180 and red < 80
    # Its private twin needs a session: the public one is the only way in for a visitor.
    assert (await visitor.get(f"/thumbs/{job}/0")).status == 302
    await showcase.remove(site.guild_id, entry.id, site.owner_id)
    assert (await visitor.get(f"/public/thumbs/{entry.id}?v={digest}")).status == 404


async def test_the_server_showcase_is_a_grid_of_thumbnails(site: Site) -> None:
    job, digest = await result_with_thumbnail(site, "a shared kite", (30, 30, 220))
    await site.services.showcases.share(job, site.member_id)
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    page = await browser.text(f"/servers/{site.guild_id}/showcase")
    assert f'href="/results/{job}"' in page
    assert f'src="/thumbs/{job}/0?v={digest}" alt="a shared kite"' in page
