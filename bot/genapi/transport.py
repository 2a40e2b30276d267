"""The shared HTTP client's transport: httpx's interface over aiohttp's connection pool.

With httpx's own transport (httpcore) a status poll cost the client 1.4-3.9 ms of CPU with 1-50
requests in flight, more the more connections are in use (each request walks the pooled
connections, asking every socket for its peer name): at 80 polls a second it was the largest
share of the poller's CPU. The maintained ``httpx-aiohttp`` transport sends the same requests
through aiohttp's pool for 0.8-1.0 ms (``python -m bench.transport``; docs/benchmarks.md,
"Cheaper polls"), and callers keep the ``httpx.AsyncClient`` interface (``bot.genapi.client``).

One correction is ours, because money depends on it: ``httpx-aiohttp`` reports every
``aiohttp.ClientConnectionError`` as ``httpx.ConnectTimeout``, which the API client reads as
"never sent" (so a generation ``POST`` may be retried). A connection the service dropped after
reading the request (``ServerDisconnectedError``, a reset) is such an error, and retrying it
could charge twice. :class:`ApiTransport` maps aiohttp's errors by what they prove instead:
only a connection that never opened (connect error, connect timeout) is "not sent".
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager

import aiohttp
import httpx2 as httpx
from httpx_aiohttp.httpx2 import AiohttpTransport

__all__ = ["ApiTransport", "transport_error"]


def transport_error(exc: BaseException) -> httpx.TransportError | None:
    """Return the httpx error that says what ``exc``, raised by aiohttp, proves; None if unknown.

    ``exc`` may be aiohttp's own error or ``httpx-aiohttp``'s translation of one (its
    ``__cause__``). Only :class:`httpx.ConnectError` and :class:`httpx.ConnectTimeout` mean the
    request was never sent (``bot.genapi.client`` retries a generation only then); everything
    after the connection opened is a read error or a read timeout ("may have been sent").
    """
    cause = exc.__cause__ if isinstance(exc, httpx.TransportError) else exc
    if not isinstance(cause, aiohttp.ClientError | TimeoutError):
        return None
    message = str(cause) or type(cause).__name__
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        return httpx.ConnectTimeout(message)  # no connection within the timeout: nothing sent
    if isinstance(cause, aiohttp.ClientConnectorError):
        return httpx.ConnectError(message)  # refused, unresolvable, TLS handshake failed
    if isinstance(cause, TimeoutError):  # aiohttp's socket read timeouts are TimeoutErrors
        return httpx.ReadTimeout(message)
    if isinstance(cause, aiohttp.ServerDisconnectedError):
        return httpx.RemoteProtocolError(message)
    return httpx.ReadError(message)


@contextmanager
def _errors_by_what_they_prove() -> Iterator[None]:
    try:
        yield
    except (httpx.TransportError, aiohttp.ClientError, TimeoutError) as exc:
        mapped = transport_error(exc)
        if mapped is None:
            raise
        raise mapped from exc


class _Body(httpx.AsyncByteStream):
    """A response body whose read errors are mapped like the request's."""

    def __init__(self, inner: httpx.AsyncByteStream) -> None:
        self._inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _errors_by_what_they_prove():
            async for chunk in self._inner:
                yield chunk

    async def aclose(self) -> None:
        with _errors_by_what_they_prove():
            await self._inner.aclose()


class ApiTransport(AiohttpTransport):
    """``httpx_aiohttp.AiohttpTransport`` with errors mapped by what they prove (module doc).

    Built like it: ``ApiTransport(limits=httpx.Limits(...))`` (``max_connections`` becomes
    aiohttp's pool limit, ``keepalive_expiry`` its keep-alive timeout); pass it to
    ``httpx.AsyncClient(transport=...)``, which closes it. HTTP/1.1 only, like aiohttp.
    """

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send ``request``; return the response with its body still to be read.

        Raises:
            httpx.ConnectError: the connection could not be opened (nothing was sent).
            httpx.ConnectTimeout: no connection within the pool or connect timeout (nothing
                was sent).
            httpx.ReadTimeout: no answer within the read timeout (it may have been sent).
            httpx.TransportError: any other failure (it may have been sent).
        """
        with _errors_by_what_they_prove():
            response = await super().handle_async_request(request)
        assert isinstance(response.stream, httpx.AsyncByteStream)
        response.stream = _Body(response.stream)
        return response
