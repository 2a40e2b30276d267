"""Shared plumbing for the REST handlers: request keys and Discord-style responses."""

from __future__ import annotations

import hashlib
import json
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from .errors import DiscordAPIError
from .recorder import RecordedFile

if TYPE_CHECKING:
    from .emulator import DiscordEmulator

API_PREFIX = "/api/v10"
ROUTE = web.RequestKey("route", str)
PAYLOAD = web.RequestKey("payload", Any)
FILES = web.RequestKey("files", list[RecordedFile])
RESPONSE = web.RequestKey("response_data", Any)


def _int(value: str, error: DiscordAPIError) -> int:
    try:
        return int(value)
    except ValueError:
        raise error from None


def _flag(query: Any, name: str) -> bool:
    return str(query.get(name, "")).lower() in ("1", "true")


class RouteBase:
    """Holds the emulator and builds responses with Discord's headers."""

    def __init__(self, emu: DiscordEmulator) -> None:
        self.emu = emu
        self.world = emu.world

    def _headers(self, route: str) -> dict[str, str]:
        bucket = hashlib.md5(route.encode()).hexdigest()
        return {
            "X-RateLimit-Limit": "5",
            "X-RateLimit-Remaining": "4",
            "X-RateLimit-Reset": f"{time.time() + 1:.3f}",
            "X-RateLimit-Reset-After": "1.000",
            "X-RateLimit-Bucket": bucket,
            "Via": "1.1 google",
        }

    def _json(self, request: web.Request, data: Any, status: int = 200) -> web.Response:
        request[RESPONSE] = data
        headers = {**self._headers(request.get(ROUTE, "")), "Content-Type": "application/json"}
        return web.Response(body=json.dumps(data).encode(), status=status, headers=headers)

    def _empty(self, request: web.Request) -> web.Response:
        return web.Response(status=204, headers=self._headers(request.get(ROUTE, "")))
