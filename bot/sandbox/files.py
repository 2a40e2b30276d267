"""Tiny placeholder output files served at ``/files/<name>`` (no auth, like a CDN).

A prompt may choose its result's colour (docs/testing.md): ``color:red``, ``colour:#b03030``
(any CSS colour name or hex form Pillow knows) makes its pictures flat pictures of that colour
(:func:`solid_png`) and its clips' frames that colour (``bot.sandbox.clips``), so a test can
ask for a result the safety scorer's test model scores high (red) or low (blue).
"""

from __future__ import annotations

import functools
import io
import re
import struct
import zlib
from typing import Final

from PIL import Image, ImageColor


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    crc = zlib.crc32(kind + data)
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)


def _one_pixel_png() -> bytes:
    # A real 1x1 RGB PNG, so that Discord or an image library accepts it as an image.
    header = struct.pack(">IIBBBBB", 1, 1, 8, 2, 0, 0, 0)
    pixels = zlib.compress(b"\x00\x5a\x8c\xd2")  # filter byte, then one blue-ish pixel
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", header)
        + _png_chunk(b"IDAT", pixels)
        + _png_chunk(b"IEND", b"")
    )


PNG_BYTES: Final = _one_pixel_png()
# Only an ISO-BMFF "ftyp" box and an empty "free" box: the type's entry below; a video task's
# file is its real clip (bot.sandbox.clips).
MP4_BYTES: Final = b"\x00\x00\x00\x18ftypisom\x00\x00\x02\x00isomiso2" + b"\x00\x00\x00\x08free"

CONTENT_TYPES: Final = {".mp4": ("video/mp4", MP4_BYTES), ".png": ("image/png", PNG_BYTES)}


COLOUR_WORD: Final = re.compile(r"\bcolou?r:(#[0-9a-fA-F]{3,8}|[A-Za-z]+)")
"""``color:<name or #hex>`` (or ``colour:``) in a prompt: the colour of its result files."""

SOLID_SIDE: Final = 32
"""Pixels a side of a coloured picture (small: tests decode it)."""


def colour_of(prompt: object) -> tuple[int, int, int] | None:
    """The RGB colour a prompt asks for with ``color:<name or #hex>``; None when it does not.

    An unknown colour name is no colour (the default files are served).
    """
    if not isinstance(prompt, str) or (found := COLOUR_WORD.search(prompt)) is None:
        return None
    try:
        rgb = ImageColor.getrgb(found.group(1))
    except ValueError:
        return None
    return rgb[0], rgb[1], rgb[2]


@functools.lru_cache(maxsize=64)
def solid_png(rgb: tuple[int, int, int]) -> bytes:
    """A :data:`SOLID_SIDE`-pixel square PNG of one flat colour."""
    out = io.BytesIO()
    Image.new("RGB", (SOLID_SIDE, SOLID_SIDE), rgb).save(out, format="PNG")
    return out.getvalue()


def padded(data: bytes, size: int) -> bytes:
    """``data`` followed by zeros up to ``size`` bytes: a large file for upload-limit tests."""
    return data + bytes(max(0, size - len(data)))


def task_id_of(name: str) -> str | None:
    """Return the task id a file name belongs to (``<id>.mp4`` or ``<id>-<n>.png``), or None."""
    stem, dot, ext = name.rpartition(".")
    if not dot:
        return None
    if ext == "mp4":
        return stem
    if ext == "png":
        task_id, dash, _ = stem.rpartition("-")
        return task_id if dash else None
    return None
