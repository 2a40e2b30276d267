"""A dashboard served in-process over loopback, on the Discord emulator and real services.

Everything is real but Discord: the dashboard's aiohttp server on a free port, its OAuth2
client and the bot's REST directory against the Discord emulator (which serves the OAuth2
endpoints), the services of the ``stack`` fixture (API emulator, a database of each engine),
and browsers as aiohttp sessions with cookie jars of their own.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import socket
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import discord
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.dashboard.app import Dashboard
from bot.dashboard.editing import add_all_pages
from bot.dashboard.forms import FORMS, SettingsForm
from bot.discord.bot import change_outlet
from bot.discord.dashboard_directory import RestDirectory
from bot.discord.locales import GuildLocales
from bot.domain import Charge, Kind, NewJob
from bot.wiring import Services
from tests.support.discord_emulator import DiscordEmulator

TOKEN = "dashboard.bot.token"
SECRET = "the-client-secret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Forms(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.forms: list[dict[str, str]] = []
        self._select: str | None = None
        self._textarea: str | None = None

    def handle_data(self, data: str) -> None:
        if self._textarea is not None and self.forms:
            self.forms[-1][self._textarea] += data

    def handle_endtag(self, tag: str) -> None:
        if tag == "textarea":
            self._textarea = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.forms.append(
                {"@method": found.get("method", "get"), "@action": found.get("action", "")}
            )
        elif self.forms and tag == "input" and "name" in found:
            if found.get("type") in ("radio", "checkbox") and "checked" not in found:
                return  # as a browser posts them: only when ticked
            self.forms[-1].setdefault(found["name"], found.get("value", ""))
        elif self.forms and tag == "textarea" and "name" in found:
            self.forms[-1].setdefault(found["name"], "")
            self._textarea = found["name"]
        elif self.forms and tag == "select":
            self._select = found.get("name")
        elif (
            self.forms
            and tag == "option"
            and self._select is not None
            and (self._select not in self.forms[-1] or "selected" in found)
        ):
            self.forms[-1][self._select] = found.get("value", "")


def post_forms(html: str) -> list[dict[str, str]]:
    """The page's POST forms but sign-out: each its fields' values as rendered (a select's
    chosen option, else its first; a radio button's or a checkbox's first ticked one)."""
    parser = _Forms()
    parser.feed(html)
    return [
        {k: v for k, v in f.items() if not k.startswith("@")}
        for f in parser.forms
        if f["@method"].lower() == "post" and f["@action"] != "/auth/logout"
    ]


@dataclass
class Browser:
    """A browser: its own cookies; it follows no redirect by itself (the tests do)."""

    http: aiohttp.ClientSession
    site: Site
    user_id: int | None = None
    console: list[str] = field(default_factory=list)

    async def get(self, url: str, **kwargs: Any) -> aiohttp.ClientResponse:
        response = await self.http.get(self.site.url(url), allow_redirects=False, **kwargs)
        await response.read()
        return response

    async def post(self, url: str, **kwargs: Any) -> aiohttp.ClientResponse:
        response = await self.http.post(self.site.url(url), allow_redirects=False, **kwargs)
        await response.read()
        return response

    async def begin(self) -> str:
        """``/auth/login``: return Discord's authorize URL it was sent to."""
        response = await self.get("/auth/login")
        assert response.status == 302, response.status
        return response.headers["Location"]

    async def consent(self, authorize_url: str, user_id: int) -> str:
        """Log in to "Discord" as ``user_id`` and authorize: return the callback URL."""
        self.site.emulator.oauth.browser_user = user_id
        page = await self.http.get(authorize_url)
        assert page.status == 200, await page.text()
        form = dict(parse_qsl(urlsplit(authorize_url).query))
        form["action"] = "authorize"
        answer = await self.http.post(
            f"{self.site.emulator.base_url}/oauth2/authorize", data=form, allow_redirects=False
        )
        assert answer.status == 302, await answer.text()
        return answer.headers["Location"]

    async def sign_in(self, user_id: int) -> aiohttp.ClientResponse:
        """The whole sign-in; return the callback's answer (302 to /servers when it worked)."""
        callback = await self.consent(await self.begin(), user_id)
        self.user_id = user_id
        return await self.get(callback)

    async def text(self, url: str, status: int = 200) -> str:
        response = await self.get(url)
        body = await response.text()
        assert response.status == status, (url, response.status, body[:500])
        return body


@dataclass
class Site:
    """The dashboard, the Discord emulator, the services, and a server with its people."""

    dashboard: Dashboard
    emulator: DiscordEmulator
    services: Services
    clock: ManualClock
    base: str
    guild_id: int
    channel_id: int
    owner_id: int
    member_id: int
    other_guild_id: int
    other_owner_id: int
    client: discord.Client
    _sessions: list[aiohttp.ClientSession] = field(default_factory=list)
    _task_ids: int = 0

    def url(self, path: str) -> str:
        return path if path.startswith("http") else f"{self.base}{path}"

    def browser(self) -> Browser:
        jar = aiohttp.CookieJar(unsafe=True)  # cookies of 127.0.0.1, as a browser keeps them
        http = aiohttp.ClientSession(cookie_jar=jar)
        self._sessions.append(http)
        return Browser(http, self)

    async def posted(self, channel_id: int, containing: str, seconds: float = 5.0) -> str:
        """The first message of the channel containing ``containing``, waited for (a post
        follows the answer to the save)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        while True:
            for message in self.emulator.channel_messages(channel_id):
                if containing in message.content:
                    return str(message.content)
            assert loop.time() < deadline, f"nothing containing {containing!r} was posted"
            await asyncio.sleep(0.02)

    async def charge(
        self,
        cents: str,
        *,
        user_id: int | None = None,
        guild_id: int | None = None,
        kind: Kind = Kind.IMAGE,
        model: str = "black-forest-labs/flux-schnell",
        prompt: str | None = None,
        outputs: tuple[str, ...] = (),
        message_id: int | None = None,
        at: float | None = None,
        stage: str | None = None,
    ) -> int | None:
        """Record a charge as billing does; with a prompt, its job too (return the job id).

        ``stage``: a draft's or a Final's charge (``"draft"``, ``"final"``; docs/creative.md).
        """
        self._task_ids += 1
        task_id = f"task-{self._task_ids}"
        when = self.clock.time() if at is None else at
        guild = self.guild_id if guild_id is None else guild_id
        user = self.member_id if user_id is None else user_id
        db = self.services.db
        await db.ledger.insert_charge(
            Charge(
                guild_id=guild,
                channel_id=self.channel_id,
                user_id=user,
                kind=kind,
                model=model,
                task_id=task_id,
                cost_cents=Decimal(cents),
                remaining_credits_cents=None,
                key_fingerprint="fp-test",
                at=when,
                stage=stage,
            )
        )
        if prompt is None:
            return None
        job = await db.jobs.insert(
            NewJob(
                task_id=task_id,
                provider="sandbox",
                poll_url="",
                kind=kind,
                model=model,
                guild_id=guild,
                channel_id=self.channel_id,
                message_id=message_id,
                user_id=user,
                prompt_summary=prompt,
                details={},
                cost_cents=Decimal(cents),
                key_fingerprint="fp-test",
                created_at=when + 0.001,
                next_poll_at=when + 10,
            )
        )
        if outputs:
            from bot.domain import JobStatus

            await db.jobs.finish(job.id, JobStatus.COMPLETED, outputs, None, when + 5)
        return job.id


@contextlib.asynccontextmanager
async def open_site(
    services: Services,
    clock: ManualClock,
    monkeypatch: Any,
    *,
    public_url: str | None = None,
    forms: Iterable[type[SettingsForm]] = FORMS,
) -> AsyncIterator[Site]:
    """Serve the dashboard over ``services`` on the Discord emulator, with two servers.

    ``public_url`` is ``DASHBOARD_PUBLIC_URL`` as written (``{port}`` in it: the port served
    on), else ``http://127.0.0.1:<port>``. ``forms``: the settings pages served.
    """
    # Attachment URLs signed on the site's clock: they expire as the dashboard reads them.
    async with DiscordEmulator(bot_token=TOKEN, wall_clock=clock.time) as emulator:
        emulator.oauth.client_secret = SECRET
        monkeypatch.setattr(discord.http.Route, "BASE", emulator.api_base_url)
        client = discord.Client(
            intents=discord.Intents(guilds=True), allowed_mentions=discord.AllowedMentions.none()
        )
        await client.login(TOKEN)
        owner = emulator.add_user("owner")
        member = emulator.add_user("member")
        guild = emulator.add_guild("Kites", owner_id=owner.id)
        channel = emulator.add_channel(guild.id, "generate")
        emulator.world.ensure_member(guild.id, member.id)
        other_owner = emulator.add_user("other-owner")
        other = emulator.add_guild("Elsewhere", owner_id=other_owner.id)
        emulator.world.ensure_member(other.id, member.id)
        port = free_port()
        settings = services.settings.model_copy(
            update={
                # ``{port}`` in ``public_url`` is the port served on.
                "dashboard_public_url": (public_url or "http://127.0.0.1:{port}").format(port=port),
                "dashboard_port": port,
                "discord_client_secret": SecretStr(SECRET),
                "discord_api_base_url": emulator.api_base_url,
            }
        )
        # Saves are posted in the admin channel as a worker serving the dashboard posts them.
        locales = GuildLocales(client, services.guild_config, clock, rest=True)
        services.guild_config.set_change_outlet(change_outlet(client, locales))
        dashboard = Dashboard(
            settings,
            services,
            RestDirectory.over(client, services, locales),
            application_id=emulator.application_id,
            clock=clock,
            pages=functools.partial(add_all_pages, forms=forms),
        )
        await dashboard.start()
        site = Site(
            dashboard=dashboard,
            emulator=emulator,
            services=services,
            clock=clock,
            base=f"http://127.0.0.1:{port}",
            guild_id=guild.id,
            channel_id=channel.id,
            owner_id=owner.id,
            member_id=member.id,
            other_guild_id=other.id,
            other_owner_id=other_owner.id,
            client=client,
        )
        try:
            yield site
        finally:
            for http in site._sessions:
                await http.close()
            await dashboard.stop()
            await client.close()
