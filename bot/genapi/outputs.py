"""Where the service's output files may be downloaded from.

A completed job's ``outputs`` are URLs the service (or whoever answers in its name) chose; the
bot downloads them and posts the bytes in a channel. Without a rule, a redirect or a crafted URL
could make the bot fetch from its own network (loopback, a private range, the cloud metadata
address ``169.254.169.254``) and publish the answer. The rule (docs/architecture.md, "Downloads
of results"):

* an output on the API's own origin (scheme, host and port of ``GENAPI_BASE_URL``) is fetched
  like the API itself: the operator chose that address;
* any other origin must be ``https`` and its host must resolve to public addresses only
  (:func:`is_public_address`, the stdlib's ``is_global``). The check runs on the addresses the
  pool connects to: :class:`PublicResolver` is the connection pool's resolver and drops every
  other address, and an IP literal is checked before the request, so there is no gap between
  a check and the connection (DNS rebinding) for any connection or redirect;
* a redirect is followed only within the origin that answered it (at most
  :data:`MAX_REDIRECTS`); to any other origin it is refused.

A refusal raises :class:`DownloadRefused`, whose ``reason`` is shown to people beside the link.
:func:`output_client` builds the one pooled client that does this (``bot.wiring``).
"""

from __future__ import annotations

import asyncio
import ipaddress
import logging
import socket
import unicodedata
from collections.abc import Awaitable, Callable, Sequence
from typing import Final

import aiohttp
import httpx2 as httpx
import idna
from aiohttp.abc import AbstractResolver, ResolveResult

from bot.genapi.transport import ApiTransport

log = logging.getLogger(__name__)

__all__ = [
    "MAX_REDIRECTS",
    "DownloadRefused",
    "OutputTransport",
    "PublicResolver",
    "ip_literal",
    "is_public_address",
    "normalise_host",
    "origin",
    "output_client",
    "resolves_privately",
]

MAX_REDIRECTS: Final = 5
"""Redirects one download may follow, all within one origin (httpx's default is 20)."""

_REDIRECTS: Final = frozenset({301, 302, 303, 307, 308})
_DEFAULT_PORTS: Final = {"http": 80, "https": 443}

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

_IPV4_MAPPED: Final = ipaddress.IPv6Network("::ffff:0:0/96")
_IPV4_COMPATIBLE: Final = ipaddress.IPv6Network("::/96")
_NAT64: Final = ipaddress.IPv6Network("64:ff9b::/96")
_LOCAL_NAT64: Final = ipaddress.IPv6Network("64:ff9b:1::/48")

RESOLVE_SECONDS: Final = 3.0
"""How long the check of a typed host's addresses waits for this machine's resolver."""

HostResolver = Callable[[str], Awaitable[Sequence[str]]]
"""Returns the addresses (text) a host name resolves to; raises ``OSError`` when it cannot."""


class DownloadRefused(httpx.TransportError):
    """A download the rule forbids; nothing was sent to the refused address.

    A :class:`httpx.TransportError`, so code that treats any failed download alike still does.

    Attributes:
        reason: why, for people: ``"its link leads to a private network address"``...
    """

    def __init__(self, reason: str) -> None:
        super().__init__(f"download refused: {reason}")
        self.reason = reason


def is_public_address(address: Address) -> bool:
    """Whether ``address`` is on the public internet (``ipaddress``'s ``is_global``, not multicast).

    The IPv6 forms that carry an IPv4 address are decided here, the same on every Python
    (3.11 calls ``::127.0.0.1`` and ``64:ff9b::7f00:1`` global; 3.13 reads mapped ones by
    their IPv4 address): IPv4-mapped (``::ffff:0:0/96``; no host has such an address of its
    own) and IPv4-compatible (``::/96``, deprecated by RFC 4291 2.5.5.1) are never public, nor
    NAT64 (the well-known ``64:ff9b::/96`` of RFC 6052 and the local-use ``64:ff9b:1::/48`` of
    RFC 8215): a translator reaches whatever IPv4 address it is given, the bot's own network's
    included, and a public service names its hosts by their own addresses. 6to4 and Teredo are
    public only when the IPv4 address they carry is.
    """
    if isinstance(address, ipaddress.IPv6Address):
        if any(address in net for net in (_IPV4_MAPPED, _IPV4_COMPATIBLE, _NAT64, _LOCAL_NAT64)):
            return False
        teredo = address.teredo
        for inner in (address.sixtofour, teredo[1] if teredo else None):
            if inner is not None and not is_public_address(inner):
                return False
    return address.is_global and not address.is_multicast


def normalise_host(host: str) -> str:
    """Return ``host`` as resolvers read it: UTS #46 processing, then the ASCII (A-label) form.

    Full-width letters and digits, ideographic full stops (U+3002) and enclosed letters
    (``ⓛⓞⓒⓐⓛⓗⓞⓢⓣ``) map to what they look like, so ``１２７。０。０。１`` is ``127.0.0.1``
    and is checked as such. An ASCII name is only lowercased (names such as ``under_score``
    stay usable); an IPv6 literal (brackets dropped) is NFKC-normalised.

    Raises:
        ValueError: a non-ASCII name that IDNA refuses (a character no label may hold, an
            empty label).
    """
    host = host.strip()
    if host.startswith("[") or ":" in host:
        return unicodedata.normalize("NFKC", host).removeprefix("[").removesuffix("]").lower()
    if host.isascii():
        return host.lower()
    try:
        return idna.encode(host, uts46=True, transitional=False).decode("ascii")
    except idna.IDNAError as exc:
        raise ValueError(f"not a valid host name: {exc}") from None


async def _system_resolve(host: str) -> list[str]:
    found = await asyncio.get_running_loop().getaddrinfo(host, 443, type=socket.SOCK_STREAM)
    return [str(info[4][0]) for info in found]


async def resolves_privately(host: str, resolve: HostResolver | None = None) -> bool:
    """Whether ``host`` (normalised) resolves here to any address that is not public.

    Any one suffices: the service may connect to whichever it picks. A name this machine
    cannot resolve (or not within :data:`RESOLVE_SECONDS`) is not known to be private: the
    service resolves it in its own network, and refuses what it cannot fetch.

    Args:
        host: a host name (not an IP literal: those are checked as they are).
        resolve: the resolver; this machine's (``getaddrinfo``) when None.
    """
    try:
        async with asyncio.timeout(RESOLVE_SECONDS):
            found = await (resolve or _system_resolve)(host)
    except (OSError, TimeoutError, UnicodeError):
        return False
    return any(not _public(address.split("%", 1)[0]) for address in found)


def ip_literal(host: str) -> Address | None:
    """The address ``host`` names literally, or None when it is a name.

    Brackets of an IPv6 literal are dropped; legacy IPv4 forms that resolvers still accept
    (``127.1``, ``2130706433``, ``0x7f.0.0.1``) are read as ``inet_aton`` reads them.
    """
    host = host.strip().removeprefix("[").removesuffix("]")
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except (OSError, UnicodeError, ValueError):
        return None


def origin(url: httpx.URL) -> tuple[str, str, int | None]:
    """Scheme, host and port of ``url`` (the default port made explicit): RFC 6454's origin."""
    return url.scheme, url.host.lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


class PublicResolver(AbstractResolver):
    """An aiohttp resolver that returns only public addresses (:func:`is_public_address`).

    The connection pool connects only to what its resolver returns, so a name that resolves
    to a private address (``localhost``, an internal name, a rebinding DNS answer) is never
    connected to, whatever it resolved to a moment before.

    Args:
        inner: the resolver asked first; aiohttp's default when None.

    Raises:
        DownloadRefused: (from :meth:`resolve`) the name has no public address.
    """

    def __init__(self, inner: AbstractResolver | None = None) -> None:
        self._inner = inner

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        """Resolve ``host`` and keep its public addresses; refuse it if none is left."""
        if self._inner is None:  # made in the running loop, as aiohttp's resolvers expect
            self._inner = aiohttp.DefaultResolver()
        found = await self._inner.resolve(host, port, family)
        public = [result for result in found if _public(result["host"])]
        if not public:
            log.warning("download from %s refused: it resolves to no public address", host)
            raise DownloadRefused("its link leads to a private network address")
        return public

    async def close(self) -> None:
        """Release the inner resolver."""
        if self._inner is not None:
            await self._inner.close()


def _public(host: str) -> bool:
    try:
        return is_public_address(ipaddress.ip_address(host))
    except ValueError:  # not an address at all: refuse rather than guess
        return False


class OutputTransport(httpx.AsyncBaseTransport):
    """Applies the download rule (module doc) to every request and redirect.

    Redirects are followed here, so a client built on it must not follow them itself
    (httpx's default). Closing it closes both inner transports.

    Args:
        api_base_url: ``{base_url}``; outputs on its origin go through ``api``. None: none do.
        api: the transport for the API's origin; a plain pooled one when None.
        public: the transport for other origins; it must refuse non-public addresses after
            resolution (:class:`PublicResolver`); built so when None.
    """

    def __init__(
        self,
        api_base_url: str | None,
        *,
        api: httpx.AsyncBaseTransport | None = None,
        public: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._api_origin = origin(httpx.URL(api_base_url)) if api_base_url else None
        self._api = api if api is not None else ApiTransport()
        # aiohttp's connector does not close a resolver it was given: closed in aclose().
        self._resolver: PublicResolver | None = None
        if public is None:
            resolver = self._resolver = PublicResolver()
            public = ApiTransport(client=lambda: _public_session(resolver))
        self._public = public

    def _transport_for(self, url: httpx.URL) -> httpx.AsyncBaseTransport:
        if origin(url) == self._api_origin:
            return self._api
        if url.scheme != "https":
            raise DownloadRefused("its link is not https")
        literal = ip_literal(url.host)
        if literal is not None and not is_public_address(literal):
            log.warning("download from %s refused: not a public address", url.host)
            raise DownloadRefused("its link leads to a private network address")
        return self._public

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request`` by the rule, following same-origin redirects.

        Raises:
            DownloadRefused: the URL, or a redirect, is not allowed (nothing was sent there).
            httpx.TransportError: the inner transport failed.
        """
        for _ in range(MAX_REDIRECTS + 1):
            response = await self._transport_for(request.url).handle_async_request(request)
            location = response.headers.get("location")
            if response.status_code not in _REDIRECTS or not location:
                return response
            await response.aclose()
            try:
                target = request.url.join(location)
            except httpx.InvalidURL:
                raise DownloadRefused("its link redirects to an invalid address") from None
            if origin(target) != origin(request.url):
                log.warning(
                    "download from %s refused: redirected to %s", request.url.host, target.host
                )
                raise DownloadRefused("its link redirects to another site")
            method = request.method if response.status_code in (307, 308) else "GET"
            headers = [(k, v) for k, v in request.headers.raw if k.lower() != b"host"]
            request = httpx.Request(method, target, headers=headers, extensions=request.extensions)
        raise DownloadRefused(f"its link redirects more than {MAX_REDIRECTS} times")

    async def aclose(self) -> None:
        """Close both pools."""
        try:
            await self._public.aclose()
        finally:
            await self._api.aclose()
            if self._resolver is not None:
                await self._resolver.close()


def _public_session(resolver: PublicResolver) -> aiohttp.ClientSession:
    # Built lazily by the transport, inside the running loop. TLS as httpx verifies it;
    # no proxy from the environment (trust_env is off), which would resolve names for us.
    connector = aiohttp.TCPConnector(resolver=resolver, ssl=httpx.create_ssl_context(), limit=50)
    return aiohttp.ClientSession(connector=connector)


def output_client(api_base_url: str | None) -> httpx.AsyncClient:
    """The pooled client results are downloaded with, under the rule of this module.

    Args:
        api_base_url: ``{base_url}`` (``GENAPI_BASE_URL``, or the sandbox's); its origin is
            trusted as the API itself is.

    Returns:
        An ``httpx.AsyncClient`` to use as an async context manager (it closes its pools).
    """
    return httpx.AsyncClient(transport=OutputTransport(api_base_url), follow_redirects=False)
