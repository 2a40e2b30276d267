"""Discord's OAuth2 authorization code grant, with PKCE, for "Sign in with Discord".

Discord developer docs, "OAuth2": the browser is sent to ``/oauth2/authorize`` with the
``state`` and the S256 ``code_challenge`` (RFC 7636); the callback's code is exchanged at
``/oauth2/token`` (form-encoded, with the client's id and secret and the ``code_verifier``);
the member is read with the access token (``users/@me``, ``users/@me/guilds``: the scopes
``identify`` and ``guilds`` only), and the token is then revoked (``/oauth2/token/revoke``) and
dropped: the dashboard keeps no Discord token of a member.

A sign-in under way is kept by the browser alone, in a signed cookie (:class:`LoginCookie`):
``GET /auth/login`` writes nothing anywhere, so a flood of it costs the bot nothing but the
answers.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import logging
import secrets
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp

from bot.clock import Clock
from bot.domain import GuildRef
from bot.i18n import N_, _
from bot.services.dashboard import LOGIN_SECONDS, LoginRefused, pkce_challenge

log = logging.getLogger(__name__)

SCOPES: Final = "identify guilds"
"""The scopes asked for: who the member is, and which servers they are in; nothing more."""

TIMEOUT: Final = aiohttp.ClientTimeout(total=15)

WHO_UNKNOWN: Final = N_("Discord did not say who you are; sign in again.")
NO_TOKEN: Final = N_("Discord gave no access token; sign in again.")
REFUSED: Final = N_("Discord refused this sign-in; sign in again.")
UNEXPECTED: Final = N_("Discord answered something unexpected; sign in again.")
NO_ANSWER: Final = N_("Discord did not answer ({error}); try again.")

MAX_SNOWFLAKE: Final = 2**63 - 1
"""The largest id Discord (and the database's BIGINT) has: a snowflake is a 64-bit integer
whose top bit is never set."""


def snowflake(raw: str) -> bool:
    """Whether ``raw`` is a Discord id the database can hold: digits, 1 to 2**63-1."""
    return 0 < len(raw) <= 19 and raw.isascii() and raw.isdigit() and 0 < int(raw) <= MAX_SNOWFLAKE


class OAuthFailed(Exception):
    """Discord refused the code or did not answer; the message is for the member.

    Args:
        sentence: the sentence as marked (``N_``), in English; ``{name}`` placeholders.
        values: what the placeholders stand for.
    """

    def __init__(self, sentence: str, /, **values: object) -> None:
        super().__init__(sentence.format(**values) if values else sentence)
        self.template = sentence
        self.values = values

    def user_sentence(self) -> str:
        """The sentence in the request's locale."""
        return _(self.template, **self.values)


UNKNOWN_STATE: Final = N_("This sign-in link was used already or is unknown; sign in again.")
OTHER_BROWSER: Final = N_("This sign-in was begun in another browser; sign in again.")
TOO_LONG: Final = N_("This sign-in took too long; sign in again.")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


class LoginCookie:
    """A sign-in under way, kept in the browser's pre-login cookie, signed by the bot.

    The cookie holds the OAuth2 ``state``, the PKCE verifier (RFC 7636) and when the sign-in
    began, with an HMAC-SHA256 keyed by a key derived from ``DISCORD_CLIENT_SECRET``: a
    restart keeps sign-ins under way, and a cookie cannot be forged or altered. The callback's
    ``state`` must equal the cookie's, which binds the sign-in to the browser that began it
    (RFC 6749, 10.12); the cookie is deleted by the callback, and Discord takes a code once.

    Args:
        client_secret: ``DISCORD_CLIENT_SECRET``.
        clock: UTC epoch seconds.
    """

    def __init__(self, client_secret: str, clock: Clock) -> None:
        self._key = hmac.new(
            client_secret.encode(), b"genbot dashboard sign-in cookie", hashlib.sha256
        ).digest()
        self._clock = clock

    def _mac(self, body: str) -> str:
        return _b64(hmac.new(self._key, body.encode("ascii"), hashlib.sha256).digest())

    def begin(self) -> tuple[str, str, str]:
        """Begin a sign-in: return ``(state, PKCE S256 challenge, the cookie's value)``."""
        state, verifier = secrets.token_urlsafe(32), secrets.token_urlsafe(48)
        payload = {"s": state, "v": verifier, "t": self._clock.time()}
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        return state, pkce_challenge(verifier), f"{body}.{self._mac(body)}"

    def finish(self, value: str | None, state: str) -> str:
        """Return the PKCE verifier of the sign-in the callback's ``state`` belongs to.

        Args:
            value: the pre-login cookie's value the browser sent; None without one.
            state: the callback's ``state`` parameter.

        Raises:
            LoginRefused: no cookie, or a forged one (the sign-in is unknown or done); a
                ``state`` other than the cookie's (begun in another browser); older than
                :data:`~bot.services.dashboard.LOGIN_SECONDS`.
        """
        body, _, mac = (value or "").partition(".")
        if not body or not hmac.compare_digest(mac, self._mac(body)):
            raise LoginRefused(UNKNOWN_STATE)
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
            saved, verifier, began = str(payload["s"]), str(payload["v"]), float(payload["t"])
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise LoginRefused(UNKNOWN_STATE) from None
        if not state or not hmac.compare_digest(saved.encode(), state.encode()):
            raise LoginRefused(OTHER_BROWSER)
        if not 0 <= self._clock.time() - began <= LOGIN_SECONDS:
            raise LoginRefused(TOO_LONG)
        return verifier


def authorize_base(api_base_url: str) -> str:
    """Return Discord's authorize page for an API base URL.

    ``https://discord.com/api/v10`` -> ``https://discord.com/oauth2/authorize``: the page is on
    the site, not under the API (the tests' emulator serves both on one origin, alike).
    """
    parts = urlsplit(api_base_url)
    return f"{parts.scheme}://{parts.netloc}/oauth2/authorize"


class DiscordOAuth:
    """The OAuth2 client of the bot's Discord application.

    Args:
        api_base_url: Discord's REST base (``DISCORD_API_BASE_URL``).
        client_id: the application's id.
        client_secret: its OAuth2 secret (``DISCORD_CLIENT_SECRET``).
        redirect_uri: ``DASHBOARD_PUBLIC_URL`` + ``/auth/callback``.
        http: the session requests go through (closed by its owner).
    """

    def __init__(
        self,
        *,
        api_base_url: str,
        client_id: int,
        client_secret: str,
        redirect_uri: str,
        http: aiohttp.ClientSession,
    ) -> None:
        self._api = api_base_url.rstrip("/")
        self._client_id = str(client_id)
        self._secret = client_secret
        self._redirect_uri = redirect_uri
        self._http = http

    def __repr__(self) -> str:
        return f"DiscordOAuth(client_id={self._client_id}, redirect_uri={self._redirect_uri})"

    def authorize_url(self, state: str, challenge: str) -> str:
        """Return the URL of Discord's consent page for one sign-in."""
        query = urlencode(
            {
                "client_id": self._client_id,
                "response_type": "code",
                "redirect_uri": self._redirect_uri,
                "scope": SCOPES,
                "state": state,
                "code_challenge": challenge,
                "code_challenge_method": "S256",
                "prompt": "none",
            }
        )
        return f"{authorize_base(self._api)}?{query}"

    async def sign_in(
        self, code: str, verifier: str
    ) -> tuple[int, str, list[GuildRef], str | None]:
        """Exchange the code, read the member and their servers, revoke the token.

        Returns:
            ``(user id, name, servers, locale)``: the locale is the member's Discord language
            (``users/@me``'s ``locale``, a Discord code such as ``"ja"``), None when absent.

        Raises:
            OAuthFailed: Discord refused the code (used, expired, wrong verifier) or failed.
        """
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self._redirect_uri,
            "code_verifier": verifier,
            "client_id": self._client_id,
            "client_secret": self._secret,
        }
        token_data = await self._post_form("/oauth2/token", form)
        token = token_data.get("access_token")
        if not isinstance(token, str) or not token:
            raise OAuthFailed(NO_TOKEN)
        try:
            me = await self._get("/users/@me", token)
            guilds = await self._get("/users/@me/guilds", token)
        finally:
            await self._revoke(token)
        raw_id = me.get("id") if isinstance(me, dict) else None
        if not isinstance(raw_id, str | int) or not snowflake(str(raw_id)):
            raise OAuthFailed(WHO_UNKNOWN)
        user_id = int(raw_id)
        name = str(me.get("global_name") or me.get("username") or user_id)
        refs = []
        for g in guilds if isinstance(guilds, list) else []:
            # A server Discord lists oddly is left out, never a failed sign-in.
            if not isinstance(g, dict) or not snowflake(str(g.get("id", ""))):
                continue
            try:
                permissions = int(g.get("permissions", 0))
            except (TypeError, ValueError):
                permissions = 0
            refs.append(
                GuildRef(int(g["id"]), str(g.get("name", "")), permissions, bool(g.get("owner")))
            )
        locale = me.get("locale")
        return user_id, name, refs, locale if isinstance(locale, str) and locale else None

    async def _post_form(self, path: str, form: dict[str, str]) -> dict[str, Any]:
        try:
            async with self._http.post(
                self._api + path,
                data=form,  # application/x-www-form-urlencoded, as Discord requires
                headers={"Accept": "application/json"},
                timeout=TIMEOUT,
            ) as response:
                if response.status != 200:
                    log.info("Discord refused the sign-in code (HTTP %d)", response.status)
                    raise OAuthFailed(REFUSED)
                data = await response.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise OAuthFailed(NO_ANSWER, error=type(exc).__name__) from None
        if not isinstance(data, dict):
            raise OAuthFailed(UNEXPECTED)
        return data

    async def _get(self, path: str, token: str) -> Any:
        try:
            async with self._http.get(
                self._api + path, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
            ) as response:
                if response.status != 200:
                    raise OAuthFailed(WHO_UNKNOWN)
                return await response.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise OAuthFailed(NO_ANSWER, error=type(exc).__name__) from None

    async def _revoke(self, token: str) -> None:
        """Revoke the access token (best effort: it expires anyway, and is never stored)."""
        form = {
            "token": token,
            "token_type_hint": "access_token",
            "client_id": self._client_id,
            "client_secret": self._secret,
        }
        try:
            async with self._http.post(
                self._api + "/oauth2/token/revoke", data=form, timeout=TIMEOUT
            ) as response:
                if response.status != 200:
                    log.info("Discord did not revoke a dashboard token (HTTP %d)", response.status)
        except (aiohttp.ClientError, TimeoutError) as exc:
            log.info("Discord did not revoke a dashboard token (%s)", type(exc).__name__)
