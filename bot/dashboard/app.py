"""The dashboard's web server: its headers, sessions, sign-in and sign-out, and start-up.

Every response carries a strict Content Security Policy (scripts and styles from this origin
only, no inline script or style, ``frame-ancestors 'none'``), ``nosniff``, no referrer beyond
the origin, and ``no-store`` on pages. The session cookie is ``HttpOnly`` and ``SameSite=Lax``;
``Secure`` with the ``__Host-`` prefix when ``DASHBOARD_PUBLIC_URL`` is https (behind a proxy
that ends TLS, the public URL decides: the connection the bot sees may be plain http).
A non-GET request must carry the session's form token and come from this origin
(``Origin``, ``Sec-Fetch-Site``, compared as origins: RFC 6454), so another site cannot submit
a form for a member.

Under abuse (``docs/dashboard.md``): every request but static files spends a token of its
address's budget, then of its member's (signed in) or of its address's signed-out budget
(:mod:`bot.dashboard.limits`); over one, 429 with ``Retry-After``. A route's id out of range
is a 404 before any database or Discord question; a server page of a server not in the
member's OAuth2 list is a 404 before any question to Discord. The public showcase page is kept
:data:`SHOWCASE_SECONDS` for signed-out visitors.
"""

from __future__ import annotations

import hmac
import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import aiohttp
import jinja2
from aiohttp import web

from bot.clock import Clock
from bot.config import Settings, web_origin
from bot.dashboard.language import LANG_COOKIE, LANG_SECONDS, install, locale_of_request
from bot.dashboard.limits import (
    ADDRESS_BUDGET,
    ANONYMOUS_BUDGET,
    SESSION_BUDGET,
    THUMB_BUDGET,
    Bounded,
    RequestBuckets,
    retry_after,
)
from bot.dashboard.oauth import DiscordOAuth, LoginCookie, OAuthFailed, snowflake
from bot.dashboard.rights import (
    ADMINISTRATOR,
    KEPT,
    MANAGE_GUILD,
    CachingDirectory,
    Directory,
    RightsCache,
)
from bot.domain import DashboardSession
from bot.i18n import LANGUAGE_NAMES, N_, _, current, reset_locale, resolve, set_locale
from bot.services.dashboard import LOGIN_SECONDS, LoginRefused
from bot.wiring import Services

log = logging.getLogger(__name__)

HERE: Final = Path(__file__).parent

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data: https:; "
    "media-src 'self' https:; connect-src 'self'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
"""The Content Security Policy of every response: nothing inline, no script or style from
elsewhere (the sign-in leaves by a link, which ``form-action`` does not govern). Pictures and
videos may come from https addresses: a result's page shows its file where ``/media/...``
redirects (Discord's CDN, or the service's own URL)."""

THUMBS: Final = ("/thumbs/", "/public/thumbs/")
"""The thumbnails' paths: counted against :data:`THUMB_BUDGET` per address (a gallery page is
one page and up to 60 thumbnails), not a member's or a visitor's page budget."""

SHOWCASE_SECONDS: Final = 30.0
"""How long the public showcase page (``/showcase/<id>``) is kept for signed-out visitors."""

TOO_MANY: Final = N_("Too many requests; wait a few seconds and try again.")
NOT_FOUND: Final = N_("Not found.")
NOT_ALLOWED: Final = N_("Not allowed.")
CANCELLED: Final = N_("Sign-in cancelled on Discord.")
NO_CODE: Final = N_("Discord sent no sign-in code; sign in again.")
OTHER_SITE: Final = N_("This form was sent from another site.")
EXPIRED_FORM: Final = N_("This form has expired; reload the page.")


def client_address(request: web.Request) -> str:
    """The address a request's budget is counted against.

    The connection's peer; when that peer is a loopback or private address (a reverse proxy
    on the machine or its network, ``docs/deployment.md``) and sent ``X-Forwarded-For``, the
    address the proxy saw (the list's last entry, the one the proxy wrote).
    """
    peer = request.remote or ""
    forwarded = request.headers.get("X-Forwarded-For")
    if not forwarded:
        return peer
    try:
        near = ipaddress.ip_address(peer)
    except ValueError:
        return peer
    if not (near.is_loopback or near.is_private):
        return peer
    return forwarded.rsplit(",", 1)[-1].strip() or peer


def redirect(location: str, status: int = 302) -> web.Response:
    """Return a redirect to ``location`` (302 Found, or 303 See Other after a POST)."""
    return web.Response(status=status, headers={"Location": location})


@dataclass(frozen=True, slots=True)
class Signed:
    """The signed-in member of a request: their session and its cookie's value."""

    session: DashboardSession
    token: str

    @property
    def user_id(self) -> int:
        """The member's id."""
        return self.session.user_id


SESSION_KEY: Final = web.RequestKey("dashboard_session", Signed)
"""The request's signed-in member (absent when signed out)."""

ADDRESS_KEY: Final = web.RequestKey("dashboard_address", str)
"""The address the request's budgets are counted against (:func:`client_address`)."""


class Dashboard:
    """The dashboard's aiohttp application and its server.

    Args:
        settings: ``DASHBOARD_PUBLIC_URL``, ``DASHBOARD_PORT``, ``DASHBOARD_HOST``,
            ``DISCORD_CLIENT_SECRET``, ``DISCORD_API_BASE_URL``.
        services: the process's services (billing, member settings, keys, the database's
            dashboard service).
        directory: Discord through the bot's token (rights, names, fresh attachment URLs).
        application_id: the bot's application id (the OAuth2 client id).
        clock: wall and monotonic time.
        pages: adds the pages' routes (``bot.dashboard.editing.add_all_pages``), which use this
            class's helpers.
    """

    def __init__(
        self,
        settings: Settings,
        services: Services,
        directory: Directory,
        *,
        application_id: int,
        clock: Clock,
        pages: Callable[[Dashboard, web.UrlDispatcher], None],
    ) -> None:
        assert settings.dashboard_public_url is not None
        assert settings.discord_client_secret is not None
        self.settings = settings
        self.services = services
        # What a visitor does reaches Discord through the caches only (``CachingDirectory``).
        self.cached = CachingDirectory(directory, clock)
        self.directory: Directory = self.cached
        self.clock = clock
        self.application_id = application_id
        self._pages = pages
        self.public_url = web_origin(settings.dashboard_public_url)
        self.secure = urlsplit(self.public_url).scheme == "https"
        prefix = "__Host-" if self.secure else ""
        self.session_cookie = f"{prefix}genbot_session"
        self.login_cookie = f"{prefix}genbot_login"
        self.dashboard = services.dashboard
        self.rights = RightsCache(self.directory, self.dashboard.access_roles, clock)
        self.logins = LoginCookie(settings.discord_client_secret.get_secret_value(), clock)
        self.by_address: RequestBuckets[str] = RequestBuckets(ADDRESS_BUDGET, clock.monotonic)
        self.by_member: RequestBuckets[int] = RequestBuckets(SESSION_BUDGET, clock.monotonic)
        self.signed_out: RequestBuckets[str] = RequestBuckets(ANONYMOUS_BUDGET, clock.monotonic)
        self.thumbs: RequestBuckets[str] = RequestBuckets(THUMB_BUDGET, clock.monotonic)
        self._showcase: Bounded[tuple[int, str], tuple[int, bytes]] = Bounded(
            KEPT, SHOWCASE_SECONDS, clock.monotonic
        )
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        install(self.templates)  # {% trans %}, _(), and amounts and times in the locale
        # Templates link by a route's name: url("overview", guild_id=...) (see build()).
        self.templates.globals["url"] = self.url
        # The settings pages' tabs a member sees (their rights -> (name, label)), once added.
        self.templates.globals["settings_tabs"] = lambda rights: []
        self._router: web.UrlDispatcher | None = None
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.oauth: DiscordOAuth | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def build(self) -> web.Application:
        """Return the application: headers, sessions, signing in and out, and the pages."""
        app = web.Application(
            middlewares=[self._language, self._headers, self._budget, self._sessions],
            client_max_size=64_000,
        )
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        routes = self._router = app.router
        routes.add_get("/", self.home, name="home")
        routes.add_get("/auth/login", self.login, name="login")
        routes.add_get("/auth/callback", self.callback, name="callback")
        routes.add_post("/auth/logout", self.logout, name="logout")
        routes.add_get("/language", self.language, name="language")
        routes.add_static("/static/", HERE / "static", append_version=False, name="static")
        self._pages(self, routes)
        return app

    def url(self, name: str, **parts: object) -> str:
        """The address of the route named ``name``, its ``{parts}`` filled in (templates' ``url``).

        Raises:
            KeyError: no route has that name.
        """
        assert self._router is not None, "the application is built first"
        return str(self._router[name].url_for(**{k: str(v) for k, v in parts.items()}))

    async def _open(self, _: web.Application) -> None:
        self._http = aiohttp.ClientSession()
        secret = self.settings.discord_client_secret
        assert secret is not None
        self.oauth = DiscordOAuth(
            api_base_url=self.settings.discord_api_base_url,
            client_id=self.application_id,
            client_secret=secret.get_secret_value(),
            redirect_uri=self.settings.dashboard_redirect_uri,
            http=self._http,
        )

    async def _close(self, _: web.Application) -> None:
        if self._http is not None:
            await self._http.close()

    async def start(self) -> str:
        """Listen on ``DASHBOARD_HOST``:``DASHBOARD_PORT``; return the address listened on.

        Raises:
            OSError: the port cannot be listened on.
        """
        self._runner = web.AppRunner(self.build(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(
            self._runner, self.settings.dashboard_host, self.settings.dashboard_listen_port
        )
        await site.start()
        return f"http://{self.settings.dashboard_host}:{self.settings.dashboard_listen_port}"

    async def stop(self) -> None:
        """Stop serving and close the client to Discord."""
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    # -- middlewares -----------------------------------------------------------------------

    @web.middleware
    async def _language(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Read the request in its member's language (``bot.dashboard.language``)."""
        if request.path.startswith("/static/"):
            response: web.StreamResponse = await handler(request)
            return response
        code = locale_of_request(
            request.cookies.get(LANG_COOKIE), request.headers.get("Accept-Language")
        )
        token = set_locale(code)
        try:
            response = await handler(request)
        finally:
            reset_locale(token)
        response.headers["Content-Language"] = code
        # The page differs by language: a shared cache keys it by these.
        response.headers["Vary"] = "Cookie, Accept-Language"
        return response

    @web.middleware
    async def _headers(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPNotFound:
            response = self.page(request, "error.html", status=404, message=_(NOT_FOUND), here="/")
        except web.HTTPMethodNotAllowed:
            response = self.page(
                request, "error.html", status=405, message=_(NOT_ALLOWED), here="/"
            )
        except web.HTTPException as exc:
            if exc.status >= 400:
                # A refusal (403 of a forged form, 503...): one sentence, with the headers below.
                response = web.Response(status=exc.status, text=exc.text or exc.reason)
            else:
                # A redirect raised by a page (signed out: to "/"), answered as a response.
                response = web.Response(status=exc.status, headers=exc.headers)
        headers = response.headers
        headers["Content-Security-Policy"] = CSP
        headers["X-Content-Type-Options"] = "nosniff"
        headers["X-Frame-Options"] = "DENY"
        headers["Referrer-Policy"] = "same-origin"
        headers["Cross-Origin-Opener-Policy"] = "same-origin"
        if not request.path.startswith("/static/") and not (
            request.path.startswith(THUMBS) and response.status in (200, 304)
        ):
            headers["Cache-Control"] = "no-store"
        if self.secure:
            headers["Strict-Transport-Security"] = "max-age=31536000"
        return response

    @staticmethod
    def _too_many(wait: float) -> web.Response:
        return web.Response(
            status=429, text=_(TOO_MANY), headers={"Retry-After": retry_after(wait)}
        )

    @web.middleware
    async def _budget(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """The address's budget, then ids in range: before any database or Discord question."""
        if not request.path.startswith("/static/"):
            request[ADDRESS_KEY] = address = client_address(request)
            wait = self.by_address.take(address)
            if wait:
                return self._too_many(wait)
            for name, value in request.match_info.items():
                # Every route's id is a snowflake or a row id: both fit a signed 64-bit integer.
                if name.endswith("_id") and not snowflake(value):
                    raise web.HTTPNotFound()
        response: web.StreamResponse = await handler(request)
        return response

    @web.middleware
    async def _sessions(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if request.path.startswith("/static/"):
            response: web.StreamResponse = await handler(request)
            return response
        token = request.cookies.get(self.session_cookie)
        session = await self.dashboard.session(token)
        if session is not None and token is not None:
            signed = request[SESSION_KEY] = Signed(session, token)
        else:
            signed = None
        if request.path.startswith(THUMBS):
            wait = self.thumbs.take(request[ADDRESS_KEY])
        elif signed is not None:
            wait = self.by_member.take(signed.user_id)
        else:
            wait = self.signed_out.take(request[ADDRESS_KEY])
        if wait:
            return self._too_many(wait)
        raw_guild = request.match_info.get("guild_id")
        # Never a question to Discord about a server the member is not in (as Discord listed
        # at sign-in): the same plain 404 as a server they may not see.
        if (
            signed is not None
            and raw_guild is not None
            and request.path.startswith("/servers/")
            and int(raw_guild) not in {g.id for g in signed.session.guilds}
        ):
            raise web.HTTPNotFound()
        if signed is None and request.method == "GET" and request.path.startswith("/showcase/"):
            return await self._public_showcase(request, handler)
        if request.method == "POST" and raw_guild is not None:
            # A change on the server's pages (its showcase made public, an entry removed) is
            # on its public page at once, not after SHOWCASE_SECONDS.
            self.forget_showcase(int(raw_guild))
        return await handler(request)  # type: ignore[no-any-return]

    def forget_showcase(self, guild_id: int) -> None:
        """Drop the server's kept public showcase pages."""
        for key in self._showcase.kept():
            if key[0] == guild_id:
                self._showcase.pop(key)

    async def _public_showcase(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """The public showcase page for signed-out visitors, kept :data:`SHOWCASE_SECONDS`."""
        # Kept per language: a visitor reads the page in theirs.
        key = (int(request.match_info.get("guild_id", "0")), f"{current()} {request.path_qs}")
        kept = self._showcase.get(key)
        if kept is None:
            try:
                response = await handler(request)
            except web.HTTPNotFound:
                self._showcase.put(key, (404, b""))
                raise
            if not isinstance(response, web.Response) or response.status != 200:
                return response  # type: ignore[no-any-return]
            assert response.body is None or isinstance(response.body, bytes)
            kept = (200, response.body or b"")
            self._showcase.put(key, kept)
        if kept[0] == 404:
            raise web.HTTPNotFound()
        return web.Response(body=kept[1], content_type="text/html", charset="utf-8")

    # -- helpers the pages use -------------------------------------------------------------

    def signed(self, request: web.Request) -> Signed:
        """Return the request's member; signed out, redirect to ``/``.

        Raises:
            web.HTTPFound: to ``/`` when signed out.
        """
        signed: Signed | None = request.get(SESSION_KEY)
        if signed is None:
            raise web.HTTPFound("/")
        return signed

    def page(
        self, request: web.Request, template: str, *, status: int = 200, **values: Any
    ) -> web.Response:
        """Render a template with the member (if any) and their form token."""
        signed = request.get(SESSION_KEY)
        values.setdefault("signed", signed)
        values.setdefault(
            "form_token",
            "" if signed is None else self.dashboard.form_token(signed.token),
        )
        values.setdefault("nav", None)
        values.setdefault("guild_id", None)
        values.setdefault("rights", None)
        values.setdefault("here", request.path_qs)
        body = self.templates.get_template(template).render(**values)
        return web.Response(text=body, status=status, content_type="text/html", charset="utf-8")

    def set_cookie(
        self, response: web.StreamResponse, name: str, value: str, max_age: int | None
    ) -> None:
        """Set a cookie with the dashboard's attributes (HttpOnly, Lax, Secure on https)."""
        response.set_cookie(
            name,
            value,
            max_age=max_age,
            path="/",
            httponly=True,
            samesite="Lax",
            secure=self.secure,
        )

    def delete_cookie(self, response: web.StreamResponse, name: str) -> None:
        """Expire a cookie set by :meth:`set_cookie` (same attributes, as browsers require)."""
        self.set_cookie(response, name, "", 0)

    async def check_form(self, request: web.Request, signed: Signed) -> dict[str, str]:
        """Return a POST's fields once it proved it is the member's own, from this origin.

        Raises:
            web.HTTPForbidden: the form token is missing or wrong, or the request came from
                another site (``Origin`` or ``Sec-Fetch-Site``).
        """
        origin = request.headers.get("Origin")
        site = request.headers.get("Sec-Fetch-Site")
        if (origin is not None and web_origin(origin) != self.public_url) or site not in (
            None,
            "same-origin",
        ):
            raise web.HTTPForbidden(text=_(OTHER_SITE))
        form = {k: str(v) for k, v in (await request.post()).items()}
        expected = self.dashboard.form_token(signed.token)
        if not hmac.compare_digest(form.get("token", ""), expected):
            raise web.HTTPForbidden(text=_(EXPIRED_FORM))
        return form

    # -- signing in and out ----------------------------------------------------------------

    async def home(self, request: web.Request) -> web.Response:
        """``/``: "Sign in with Discord", or the way on for a signed-in member."""
        return self.page(request, "index.html")

    async def login(self, request: web.Request) -> web.Response:
        """``/auth/login``: begin a sign-in and send the browser to Discord's consent page."""
        assert self.oauth is not None
        state, challenge, cookie = self.logins.begin()  # nothing written: the browser keeps it
        response = redirect(self.oauth.authorize_url(state, challenge))
        self.set_cookie(response, self.login_cookie, cookie, int(LOGIN_SECONDS))
        return response

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """``/auth/callback``: check the state, exchange the code, open a session."""
        assert self.oauth is not None
        query = request.query
        if "error" in query:
            return self.page(request, "error.html", status=400, message=_(CANCELLED))
        code, state = query.get("code", ""), query.get("state", "")
        try:
            if not code:
                raise LoginRefused(NO_CODE)
            verifier = self.logins.finish(request.cookies.get(self.login_cookie), state)
            user_id, name, guilds, locale = await self.oauth.sign_in(code, verifier)
        except (LoginRefused, OAuthFailed) as exc:
            message = exc.user_sentence()
            response = self.page(request, "error.html", status=400, message=message)
            self.delete_cookie(response, self.login_cookie)
            return response
        previous = request.get(SESSION_KEY)
        if previous is not None:  # a sign-in over a session replaces it, never adds one
            await self.dashboard.sign_out(previous.token)
        token = await self.dashboard.open_session(user_id, name, guilds)
        for guild in guilds:  # an admin signing in sees roles and channels made meanwhile
            if guild.owner or guild.permissions & (MANAGE_GUILD | ADMINISTRATOR):
                self.cached.forget_lists(guild.id)
        log.info("dashboard: member %s signed in", user_id)
        found = redirect("/servers")
        self.delete_cookie(found, self.login_cookie)
        self.set_cookie(found, self.session_cookie, token, None)
        if locale is not None and request.cookies.get(LANG_COOKIE) not in LANGUAGE_NAMES:
            # The member's Discord language, unless this browser chose one in the menu.
            self.set_cookie(found, LANG_COOKIE, resolve(locale), LANG_SECONDS)
        return found

    async def language(self, request: web.Request) -> web.StreamResponse:
        """``GET /language?lang=<code>&next=<path>``: the header's language menu.

        Keeps the choice in the ``lang`` cookie and returns to ``next`` (a path of this site;
        anything else returns to ``/``). An unknown language changes nothing.
        """
        code = request.query.get("lang", "")
        back = request.query.get("next", "/")
        if not back.startswith("/") or back.startswith("//") or "\\" in back:
            back = "/"
        response = redirect(back, 303)
        if code in LANGUAGE_NAMES:
            self.set_cookie(response, LANG_COOKIE, code, LANG_SECONDS)
        return response

    async def logout(self, request: web.Request) -> web.StreamResponse:
        """``POST /auth/logout``: end this session, or every session of the member."""
        signed = request.get(SESSION_KEY)
        if signed is None:
            return redirect("/", 303)
        form = await self.check_form(request, signed)
        if form.get("everywhere"):
            await self.dashboard.sign_out_everywhere(signed.user_id)
        else:
            await self.dashboard.sign_out(signed.token)
        self.rights.forget(signed.user_id)
        response = redirect("/", 303)
        self.delete_cookie(response, self.session_cookie)
        return response
