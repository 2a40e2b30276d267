"""Discord's OAuth2 for "Sign in with Discord": authorize (with consent), token, revoke, and
the user's own ``users/@me`` and ``users/@me/guilds`` with a Bearer token.

As Discord (developer docs, "OAuth2"): the consent page is on the site (``/oauth2/authorize``),
the token endpoint under the API and form-encoded only; a code is single use, valid 10
minutes, bound to its redirect URI and, with PKCE (RFC 7636), to the S256 challenge it was
asked with; a refused exchange is 400 ``invalid_grant``. The member signed in to "Discord" in
the browser is :attr:`OAuthState.browser_user` (a test sets it, as a person would log in).
"""

from __future__ import annotations

import base64
import hashlib
import html
import secrets
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from aiohttp import web

from . import permissions as perms
from .errors import DiscordAPIError
from .payloads import user_payload
from .routing import API_PREFIX, PAYLOAD, RouteBase

CODE_SECONDS = 600.0
"""An authorization code's life (Discord: 10 minutes)."""


@dataclass
class Grant:
    """An authorization code given and not yet exchanged."""

    user_id: int
    redirect_uri: str
    scopes: frozenset[str]
    challenge: str | None
    method: str | None
    expires_at: float


@dataclass
class OAuthState:
    """The emulated OAuth2 provider's state.

    Attributes:
        client_secret: the application's secret; the token endpoint checks it.
        browser_user: who is logged in to Discord in "the browser" (None: nobody).
        codes: codes given, not yet exchanged.
        tokens: access token -> (user id, scopes).
        exchanges: every token request's outcome (``"ok"`` or the error), for tests.
        revoked: access tokens revoked by the client.
    """

    client_secret: str = "client-secret"
    browser_user: int | None = None
    codes: dict[str, Grant] = field(default_factory=dict)
    tokens: dict[str, tuple[int, frozenset[str]]] = field(default_factory=dict)
    exchanges: list[str] = field(default_factory=list)
    revoked: list[str] = field(default_factory=list)


class OAuthError(DiscordAPIError):
    """An OAuth2 error as the token endpoint shapes it (RFC 6749, 5.2): ``{"error": ...}``."""

    def body(self) -> dict[str, Any]:
        return {"error": self.message}


def _s256(verifier: str) -> str:
    digest = hashlib.sha256(verifier.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode("ascii")


class OAuthRoutes(RouteBase):
    """The OAuth2 routes, over the emulator's world and :class:`OAuthState`."""

    @property
    def state(self) -> OAuthState:
        return self.emu.oauth

    def add_to(self, app: web.Application) -> None:
        add = app.router.add_route
        add("GET", "/oauth2/authorize", self.authorize)
        add("POST", "/oauth2/authorize", self.consent)
        add("POST", API_PREFIX + "/oauth2/token", self.token)
        add("POST", API_PREFIX + "/oauth2/token/revoke", self.revoke)

    def _params(self, query: Any) -> dict[str, str]:
        names = (
            "client_id",
            "response_type",
            "redirect_uri",
            "scope",
            "state",
            "code_challenge",
            "code_challenge_method",
            "prompt",
        )
        return {n: str(query[n]) for n in names if n in query}

    def _check_request(self, params: dict[str, str]) -> None:
        if params.get("client_id") != str(self.world.application_id):
            raise web.HTTPBadRequest(text="Invalid OAuth2 application (client_id)")
        if params.get("response_type") != "code" or not params.get("redirect_uri"):
            raise web.HTTPBadRequest(text="Invalid OAuth2 request")
        scopes = set(params.get("scope", "").split())
        if not scopes or not scopes <= {"identify", "guilds", "email", "guilds.members.read"}:
            raise web.HTTPBadRequest(text="Invalid scope")
        method = params.get("code_challenge_method")
        if params.get("code_challenge") and method != "S256":
            raise web.HTTPBadRequest(text="Unsupported code_challenge_method")

    async def authorize(self, request: web.Request) -> web.Response:
        """The consent page: who asks for what, Authorize or Cancel."""
        params = self._params(request.query)
        self._check_request(params)
        user = self.world.users.get(self.state.browser_user or 0)
        if user is None:
            return web.Response(text="Log in to Discord first.", status=401)
        hidden = "".join(
            f'<input type="hidden" name="{html.escape(k)}" value="{html.escape(v)}">'
            for k, v in params.items()
        )
        page = (
            "<!doctype html><html><head><title>Discord: authorize</title>"
            '<link rel="icon" href="data:,"></head><body>'
            f"<p>{html.escape(self.world.bot_user.username)} wants to access your account "
            f"({html.escape(user.username)}): {html.escape(params['scope'])}</p>"
            f'<form method="post" action="/oauth2/authorize">{hidden}'
            '<button id="authorize" name="action" value="authorize">Authorize</button>'
            '<button id="cancel" name="action" value="cancel">Cancel</button></form>'
            "</body></html>"
        )
        return web.Response(text=page, content_type="text/html")

    async def consent(self, request: web.Request) -> web.Response:
        """The member's answer: redirect to the client with a code, or ``access_denied``."""
        form = await request.post()
        params = self._params(form)
        self._check_request(params)
        user_id = self.state.browser_user
        state = params.get("state")
        extra = {} if state is None else {"state": state}
        if form.get("action") != "authorize" or user_id is None:
            query = urlencode({"error": "access_denied", **extra})
            raise web.HTTPFound(f"{params['redirect_uri']}?{query}")
        code = secrets.token_urlsafe(24)
        self.state.codes[code] = Grant(
            user_id=user_id,
            redirect_uri=params["redirect_uri"],
            scopes=frozenset(params["scope"].split()),
            challenge=params.get("code_challenge"),
            method=params.get("code_challenge_method"),
            expires_at=self.emu.clock() + CODE_SECONDS,
        )
        raise web.HTTPFound(f"{params['redirect_uri']}?{urlencode({'code': code, **extra})}")

    def _refuse(self, why: str, status: int = 400) -> DiscordAPIError:
        self.state.exchanges.append(why)
        return OAuthError(status, 0, why)

    def _client(self, request: web.Request, form: dict[str, str]) -> None:
        if request.content_type != "application/x-www-form-urlencoded":
            raise self._refuse("unsupported_grant_type")  # Discord reads forms only
        if form.get("client_id") != str(self.world.application_id) or not secrets.compare_digest(
            form.get("client_secret", ""), self.state.client_secret
        ):
            raise self._refuse("invalid_client", 401)

    async def token(self, request: web.Request) -> web.Response:
        """Exchange a code (once) for an access token, checking the PKCE verifier."""
        form = request[PAYLOAD] or {}
        self._client(request, form)
        if form.get("grant_type") != "authorization_code":
            raise self._refuse("unsupported_grant_type")
        grant = self.state.codes.pop(form.get("code", ""), None)  # single use, even if refused
        if grant is None or grant.expires_at < self.emu.clock():
            raise self._refuse("invalid_grant")
        if form.get("redirect_uri") != grant.redirect_uri:
            raise self._refuse("invalid_grant")
        if grant.challenge is not None and _s256(form.get("code_verifier", "")) != grant.challenge:
            raise self._refuse("invalid_grant")
        token = secrets.token_urlsafe(24)
        self.state.tokens[token] = (grant.user_id, grant.scopes)
        self.state.exchanges.append("ok")
        return self._json(
            request,
            {
                "access_token": token,
                "token_type": "Bearer",
                "expires_in": 604800,
                "refresh_token": secrets.token_urlsafe(24),
                "scope": " ".join(sorted(grant.scopes)),
            },
        )

    async def revoke(self, request: web.Request) -> web.Response:
        """Revoke an access token (it stops working at once)."""
        form = request[PAYLOAD] or {}
        self._client(request, form)
        token = form.get("token", "")
        if self.state.tokens.pop(token, None) is not None:
            self.state.revoked.append(token)
        return self._json(request, {})

    def bearer(self, request: web.Request, scope: str) -> int:
        """The user of the request's Bearer token, which must carry ``scope``; else 401."""
        header = request.headers.get("Authorization", "")
        found = (
            self.state.tokens.get(header.removeprefix("Bearer "))
            if header.startswith("Bearer ")
            else None
        )
        if found is None or scope not in found[1]:
            raise DiscordAPIError(401, 0, "401: Unauthorized")
        return found[0]

    def me(self, request: web.Request) -> web.Response:
        """``GET /users/@me`` with a Bearer token (scope ``identify``)."""
        user = self.world.users[self.bearer(request, "identify")]
        # With the identify scope Discord adds the user's client language (Users: "locale").
        return self._json(request, {**user_payload(user), "locale": user.locale})

    def my_guilds(self, request: web.Request) -> web.Response:
        """``GET /users/@me/guilds`` (scope ``guilds``): partial guilds with the user's
        permissions there."""
        user_id = self.bearer(request, "guilds")
        guilds = [
            {
                "id": str(g.id),
                "name": g.name,
                "icon": None,
                "banner": None,
                "owner": g.owner_id == user_id,
                "permissions": str(perms.compute_permissions(g, None, user_id)),
                "features": [],
            }
            for g in self.world.guilds.values()
            if user_id in g.members
        ]
        return self._json(request, guilds)
