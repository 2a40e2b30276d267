"""Downloading a result's files: streamed, bounded, under the download rule.

A completed video or image is downloaded (streamed, at most the upload limit held in memory)
and attached under the provider's file name, so the result outlives the provider's URL; a clip
to work on (Continue's last frame, a Join) is streamed to a file. Refused by the download rule
(``bot.genapi.outputs``: no private addresses, no redirect to another site): the delivery then
shows the link alone, and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import re
from collections.abc import AsyncGenerator
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import httpx2 as httpx

from bot.genapi.outputs import output_client

DOWNLOAD_TIMEOUT = httpx.Timeout(10.0, read=30.0)
"""Connect and per-read time-outs of a result download, seconds."""

DOWNLOAD_DEADLINE = 120.0
"""Seconds a whole download may take: a trickling server must not hold a delivery forever."""

_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class TooLarge(Exception):
    """The file is larger than the upload limit; ``size`` in bytes when known."""

    def __init__(self, size: int | None) -> None:
        super().__init__("larger than the upload limit")
        self.size = size


def file_name(task_id: str, url: str, index: int, kind: str) -> str:
    """The attachment name of output ``index`` (0-based) of ``task_id``.

    ``<task_id>.mp4`` or ``<task_id>.png``, the extension taken from the URL's path (else the
    kind's usual one); the second output on is ``<task_id>-2.png`` and so on.
    """
    suffix = PurePosixPath(urlsplit(url).path).suffix
    if not _EXTENSION.fullmatch(suffix):
        suffix = ".mp4" if kind == "video" else ".png"
    stem = _UNSAFE.sub("_", task_id) or "result"
    return f"{stem}{'' if index == 0 else f'-{index + 1}'}{suffix.lower()}"


def format_bytes(size: int) -> str:
    """Render a size for people, in MiB as Discord states its limits (``"10 MB"``)."""
    return f"{size / (1024 * 1024):.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


async def _chunks(http: httpx.AsyncClient, url: str, limit: int) -> AsyncGenerator[bytes, None]:
    """``url``'s body chunk by chunk, within :data:`DOWNLOAD_DEADLINE` and ``limit`` bytes.

    Raises:
        TooLarge: the declared or streamed size exceeds ``limit``.
        httpx.HTTPError: the download failed (status, network, time-out).
        TimeoutError: it took longer than :data:`DOWNLOAD_DEADLINE`.
    """
    received = 0
    async with asyncio.timeout(DOWNLOAD_DEADLINE):
        async with http.stream("GET", url, timeout=DOWNLOAD_TIMEOUT) as response:
            response.raise_for_status()
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise TooLarge(int(declared))
            async for chunk in response.aiter_bytes():
                received += len(chunk)
                if received > limit:
                    raise TooLarge(None)
                yield chunk


async def download(http: httpx.AsyncClient, url: str, limit: int) -> bytes:
    """Stream ``url`` into memory, refusing more than ``limit`` bytes.

    Raises:
        TooLarge, httpx.HTTPError, TimeoutError: as :func:`_chunks`.
    """
    data = io.BytesIO()
    async with contextlib.aclosing(_chunks(http, url, limit)) as chunks:
        async for chunk in chunks:
            data.write(chunk)
    # getvalue() hands BytesIO's own buffer over (CPython shares it): the file is held once,
    # not twice as a bytearray copied into bytes was (peak 1.1x its size, not 2x).
    return data.getvalue()


async def download_to(http: httpx.AsyncClient, url: str, path: Path, limit: int) -> int:
    """Stream ``url`` into the file ``path``, refusing more than ``limit`` bytes.

    For work on a whole clip (its last frame, a join): the file is written chunk by chunk, so
    memory stays flat whatever its size.

    Returns:
        The bytes written.

    Raises:
        TooLarge, httpx.HTTPError, TimeoutError: as :func:`_chunks` (``path`` is removed).
    """
    written = 0
    try:
        async with contextlib.aclosing(_chunks(http, url, limit)) as chunks:
            with path.open("wb") as out:
                async for chunk in chunks:
                    written += len(chunk)
                    out.write(chunk)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a partial file is never used
        raise
    return written


class Downloads:
    """Downloads through one pooled client, or one made per download under the same rule.

    Args:
        http: the pooled client (``output_client``, built by ``bot.wiring``); None: one under
            the same rule is made per download, trusting no origin (every output must be https
            on a public address).
    """

    def __init__(self, http: httpx.AsyncClient | None) -> None:
        self._http = http

    async def fetch(self, url: str, limit: int) -> bytes:
        """Stream an output into memory (:func:`download`; the same errors)."""
        if self._http is not None:
            return await download(self._http, url, limit)
        async with output_client(None) as http:
            return await download(http, url, limit)

    async def to_file(self, url: str, path: Path, limit: int) -> int:
        """Stream an output into ``path`` (:func:`download_to`; the same errors)."""
        if self._http is not None:
            return await download_to(self._http, url, path, limit)
        async with output_client(None) as http:
            return await download_to(http, url, path, limit)
