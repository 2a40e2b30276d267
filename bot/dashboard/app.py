"""The dashboard's web server: its headers, sessions, sign-in and sign-out, and start-up.

Every response carries a strict Content Security Policy (scripts and styles from this origin
only, no inline script or style, ``frame-ancestors 'none'``), ``nosniff``, no referrer beyond
the origin, and ``no-store`` on pages. The session cookie is ``HttpOnly`` and ``SameSite=Lax``;
``Secure`` with the ``__Host-`` prefix when ``DASHBOARD_PUBLIC_URL`` is https (behind a proxy
that ends TLS, the public URL decides: the connection the bot sees may be plain http).
A non-GET request must carry the session's form token and come from this origin
(``Origin``, ``Sec-Fetch-Site``), so another site cannot submit a form for a member.
"""

from __future__ import annotations

import hmac
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
from bot.config import Settings
from bot.dashboard.oauth import DiscordOAuth, OAuthFailed
from bot.dashboard.rights import Directory, RightsCache
from bot.domain import DashboardSession
from bot.services.dashboard import LOGIN_SECONDS, DashboardService, LoginRefused, usd
from bot.wiring import Services

log = logging.getLogger(__name__)

HERE: Final = Path(__file__).parent

CSP: Final = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
"""The Content Security Policy of every response: nothing inline, nothing from elsewhere
(the sign-in leaves by a link, which ``form-action`` does not govern)."""


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
        self.directory = directory
        self.clock = clock
        self.application_id = application_id
        self._pages = pages
        self.public_url = settings.dashboard_public_url
        self.secure = urlsplit(self.public_url).scheme == "https"
        prefix = "__Host-" if self.secure else ""
        self.session_cookie = f"{prefix}genbot_session"
        self.login_cookie = f"{prefix}genbot_login"
        self.dashboard = services.service(DashboardService)
        self.rights = RightsCache(directory, self.dashboard.access_roles, clock)
        self.templates = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,
            undefined=jinja2.StrictUndefined,
        )
        self.templates.filters["usd"] = usd
        self._http: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.oauth: DiscordOAuth | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def build(self) -> web.Application:
        """Return the application: headers, sessions, signing in and out, and the pages."""
        app = web.Application(middlewares=[self._headers, self._sessions], client_max_size=64_000)
        app.on_startup.append(self._open)
        app.on_cleanup.append(self._close)
        routes = app.router
        routes.add_get("/", self.home)
        routes.add_get("/auth/login", self.login)
        routes.add_get("/auth/callback", self.callback)
        routes.add_post("/auth/logout", self.logout)
        routes.add_static("/static/", HERE / "static", append_version=False)
        self._pages(self, routes)
        return app

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
    async def _headers(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            response: web.StreamResponse = await handler(request)
        except web.HTTPNotFound:
            response = self.page(request, "error.html", status=404, message="Not found.")
        except web.HTTPMethodNotAllowed:
            response = self.page(request, "error.html", status=405, message="Not allowed.")
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
        if not request.path.startswith("/static/"):
            headers["Cache-Control"] = "no-store"
        if self.secure:
            headers["Strict-Transport-Security"] = "max-age=31536000"
        return response

    @web.middleware
    async def _sessions(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.startswith("/static/"):
            token = request.cookies.get(self.session_cookie)
            session = await self.dashboard.session(token)
            if session is not None and token is not None:
                request[SESSION_KEY] = Signed(session, token)
        response: web.StreamResponse = await handler(request)
        return response

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
        if (origin is not None and origin != self.public_url) or site not in (
            None,
            "same-origin",
        ):
            raise web.HTTPForbidden(text="This form was sent from another site.")
        form = {k: str(v) for k, v in (await request.post()).items()}
        expected = self.dashboard.form_token(signed.token)
        if not hmac.compare_digest(form.get("token", ""), expected):
            raise web.HTTPForbidden(text="This form has expired; reload the page.")
        return form

    # -- signing in and out ----------------------------------------------------------------

    async def home(self, request: web.Request) -> web.Response:
        """``/``: "Sign in with Discord", or the way on for a signed-in member."""
        return self.page(request, "index.html")

    async def login(self, request: web.Request) -> web.Response:
        """``/auth/login``: begin a sign-in and send the browser to Discord's consent page."""
        assert self.oauth is not None
        login, _ = await self.dashboard.begin_login()
        response = redirect(self.oauth.authorize_url(login.state, login.challenge))
        self.set_cookie(response, self.login_cookie, login.binding, int(LOGIN_SECONDS))
        return response

    async def callback(self, request: web.Request) -> web.StreamResponse:
        """``/auth/callback``: check the state, exchange the code, open a session."""
        assert self.oauth is not None
        query = request.query
        if "error" in query:
            return self.page(
                request, "error.html", status=400, message="Sign-in cancelled on Discord."
            )
        code, state = query.get("code", ""), query.get("state", "")
        try:
            if not code:
                raise LoginRefused("Discord sent no sign-in code; sign in again.")
            verifier = await self.dashboard.finish_login(
                state, request.cookies.get(self.login_cookie)
            )
            user_id, name, guilds = await self.oauth.sign_in(code, verifier)
        except (LoginRefused, OAuthFailed) as exc:
            message = exc.sentence if isinstance(exc, LoginRefused) else str(exc)
            response = self.page(request, "error.html", status=400, message=message)
            self.delete_cookie(response, self.login_cookie)
            return response
        previous = request.get(SESSION_KEY)
        if previous is not None:  # a sign-in over a session replaces it, never adds one
            await self.dashboard.sign_out(previous.token)
        token = await self.dashboard.open_session(user_id, name, guilds)
        log.info("dashboard: member %s signed in", user_id)
        found = redirect("/servers")
        self.delete_cookie(found, self.login_cookie)
        self.set_cookie(found, self.session_cookie, token, None)
        return found

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
