"""The HTTP client library is httpx2, the maintained continuation of httpx."""

import logging

import httpx2 as httpx
import pytest

from bot.__main__ import quiet_library_loggers
from bot.genapi.transport import ApiTransport


async def test_the_bots_log_gets_no_line_per_request(caplog: pytest.LogCaptureFixture) -> None:
    quiet_library_loggers(logging.DEBUG)
    caplog.set_level(logging.DEBUG)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"ok": True}))
    async with httpx.AsyncClient(transport=transport) as http:
        response = await http.get("https://gen.example/api/v1/models?key=secret")
    assert response.json() == {"ok": True}
    assert [r.getMessage() for r in caplog.records if r.name.startswith("httpx")] == []


def test_the_api_transport_is_httpx_aiohttps_for_httpx2() -> None:
    # Errors it maps must be the ones GenAPIClient catches: httpx2's, not the old httpx's.
    assert issubclass(ApiTransport, httpx.AsyncBaseTransport)
