"""Discord's OAuth2 authorization code grant, with PKCE, for "Sign in with Discord".

Discord developer docs, "OAuth2": the browser is sent to ``/oauth2/authorize`` with the
``state`` and the S256 ``code_challenge`` (RFC 7636); the callback's code is exchanged at
``/oauth2/token`` (form-encoded, with the client's id and secret and the ``code_verifier``);
the member is read with the access token (``users/@me``, ``users/@me/guilds``: the scopes
``identify`` and ``guilds`` only), and the token is then revoked (``/oauth2/token/revoke``) and
dropped: the dashboard keeps no Discord token of a member.
"""

from __future__ import annotations

import logging
from typing import Any, Final
from urllib.parse import urlencode, urlsplit

import aiohttp

from bot.domain import GuildRef

log = logging.getLogger(__name__)

SCOPES: Final = "identify guilds"
"""The scopes asked for: who the member is, and which servers they are in; nothing more."""

TIMEOUT: Final = aiohttp.ClientTimeout(total=15)


class OAuthFailed(Exception):
    """Discord refused the code or did not answer; the message is for the member."""


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

    async def sign_in(self, code: str, verifier: str) -> tuple[int, str, list[GuildRef]]:
        """Exchange the code, read the member and their servers, revoke the token.

        Returns:
            ``(user id, name, servers)``.

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
            raise OAuthFailed("Discord gave no access token; sign in again.")
        try:
            me = await self._get("/users/@me", token)
            guilds = await self._get("/users/@me/guilds", token)
        finally:
            await self._revoke(token)
        user_id = int(me["id"])
        name = str(me.get("global_name") or me.get("username") or user_id)
        refs = [
            GuildRef(
                int(g["id"]),
                str(g.get("name", "")),
                int(g.get("permissions", 0)),
                bool(g.get("owner")),
            )
            for g in guilds
        ]
        return user_id, name, refs

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
                    raise OAuthFailed("Discord refused this sign-in; sign in again.")
                data = await response.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise OAuthFailed(
                f"Discord did not answer ({type(exc).__name__}); try again."
            ) from None
        if not isinstance(data, dict):
            raise OAuthFailed("Discord answered something unexpected; sign in again.")
        return data

    async def _get(self, path: str, token: str) -> Any:
        try:
            async with self._http.get(
                self._api + path, headers={"Authorization": f"Bearer {token}"}, timeout=TIMEOUT
            ) as response:
                if response.status != 200:
                    raise OAuthFailed("Discord did not say who you are; sign in again.")
                return await response.json()
        except (aiohttp.ClientError, TimeoutError) as exc:
            raise OAuthFailed(
                f"Discord did not answer ({type(exc).__name__}); try again."
            ) from None

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
