"""Thumbnails of results: small WebP pictures the dashboard shows instead of the files.

Blocking CPU work (Pillow, and PyAV for a clip's poster frame through
:func:`bot.media.video.poster_frame`): callers run it off the event loop
(``bot.services.thumbnails``). No network, no database.

- :func:`image_thumbnail`: an image at most :data:`LONG_SIDE` pixels on its long side.
- :func:`video_thumbnail`: a clip's poster frame the same way, with the clip's duration.

An image is refused before decoding when its header says more than
:data:`~bot.media.video.MAX_FRAME_PIXELS` pixels (Pillow's decompression-bomb guard is tighter
still); JPEGs are decoded at a reduced scale (``draft``), so a large photo costs a fraction of
its full decode.
"""

from __future__ import annotations

import hashlib
import io
from dataclasses import dataclass
from typing import Final

from PIL import Image, ImageOps, UnidentifiedImageError

from bot.media.video import DEFAULT_BOUNDS, FrameBounds, MediaError, MediaTooLarge, poster_frame

LONG_SIDE: Final = 320
"""Pixels on a thumbnail's long side (the short side keeps the picture's proportions)."""

WEBP_QUALITY: Final = 72
"""WebP quality of a thumbnail (0-100): about 10-20 KB at 320 px for a typical picture."""

WEBP_METHOD: Final = 2
"""libwebp's effort (0 fastest, 6 smallest): 2 makes a 320 px picture in a few milliseconds,
a few per cent larger than 4."""

MIME: Final = "image/webp"
"""Every thumbnail's type."""

DIGEST_CHARS: Final = 32
"""Hex characters of a thumbnail's digest kept (128 bits of SHA-256): its ETag and ``?v=``."""


@dataclass(frozen=True, slots=True)
class Made:
    """A thumbnail as made.

    Attributes:
        data: the WebP bytes.
        digest: the first :data:`DIGEST_CHARS` hex characters of their SHA-256.
        mime: ``image/webp``.
        width: pixels.
        height: pixels.
        duration: the clip's duration, seconds; None for an image.
    """

    data: bytes
    digest: str
    mime: str
    width: int
    height: int
    duration: float | None = None


def _webp(image: Image.Image, duration: float | None) -> Made:
    if image.mode not in ("RGB", "RGBA"):
        image = image.convert("RGBA" if "A" in image.getbands() else "RGB")
    image.thumbnail((LONG_SIDE, LONG_SIDE), Image.Resampling.BILINEAR, reducing_gap=2.0)
    out = io.BytesIO()
    image.save(out, "WEBP", quality=WEBP_QUALITY, method=WEBP_METHOD)
    data = out.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:DIGEST_CHARS]
    return Made(data, digest, MIME, image.width, image.height, duration)


def image_thumbnail(data: bytes, *, bounds: FrameBounds = DEFAULT_BOUNDS) -> Made:
    """The thumbnail of an image file (PNG, JPEG, WebP, GIF's first frame...).

    Raises:
        MediaTooLarge: the image has more than ``bounds.max_pixels`` pixels.
        MediaError: not an image Pillow can read.
    """
    try:
        with Image.open(io.BytesIO(data)) as image:
            width, height = image.size
            if width * height > bounds.max_pixels:
                raise MediaTooLarge(bounds)
            image.draft("RGB", (LONG_SIDE, LONG_SIDE))  # JPEG: decoded at a scale still >= 320
            shown = ImageOps.exif_transpose(image)
            return _webp(shown, None)
    except (UnidentifiedImageError, OSError, Image.DecompressionBombError, ValueError) as exc:
        raise MediaError("That file is not an image the bot can read.") from exc


def video_thumbnail(data: bytes, *, bounds: FrameBounds = DEFAULT_BOUNDS) -> Made:
    """The thumbnail of a clip: its poster frame, with the clip's duration.

    Raises:
        MediaTooLarge: the clip is over ``bounds``.
        MediaError: not a video PyAV can read.
    """
    poster = poster_frame(data, bounds=bounds)
    image: Image.Image = poster.frame.to_image()  # type: ignore[no-untyped-call]
    return _webp(image, poster.duration)
