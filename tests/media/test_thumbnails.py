"""Thumbnails of results: 320 px WebP pictures of images, and of clips' poster frames."""

from __future__ import annotations

import io
import random

import pytest
from PIL import Image

from bot.media.thumbnails import LONG_SIDE, image_thumbnail, video_thumbnail
from bot.media.video import FrameBounds, MediaError, MediaTooLarge
from bot.sandbox.clips import make_clip


def _png(width: int, height: int, rgb: tuple[int, int, int] = (200, 30, 30)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), rgb).save(out, "PNG")
    return out.getvalue()


def _noisy_jpeg(width: int, height: int, seed: int) -> bytes:
    """A photo-like picture: smooth gradients with noise (what compresses like a real one)."""
    rng = random.Random(seed)
    image = Image.linear_gradient("L").resize((width, height)).convert("RGB")
    noise = Image.effect_noise((width, height), 40).convert("RGB")
    image = Image.blend(image, noise, 0.3)
    tint = Image.new("RGB", (width, height), tuple(rng.randrange(256) for _ in range(3)))
    image = Image.blend(image, tint, 0.4)
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def _opened(data: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(data))
    image.load()
    return image


@pytest.mark.parametrize(
    ("size", "expected"),
    [((1024, 1024), (320, 320)), ((1536, 1024), (320, 213)), ((768, 1344), (183, 320))],
)
def test_an_image_thumbnail_is_webp_at_320_px_on_its_long_side(
    size: tuple[int, int], expected: tuple[int, int]
) -> None:
    made = image_thumbnail(_png(*size))
    shown = _opened(made.data)
    assert shown.format == "WEBP" and made.mime == "image/webp"
    assert (made.width, made.height) == shown.size == expected
    assert made.duration is None
    assert len(made.digest) == 32 and made.digest == image_thumbnail(_png(*size)).digest
    assert shown.convert("RGB").getpixel((made.width // 2, made.height // 2))[0] > 180


def test_a_small_image_is_not_enlarged() -> None:
    made = image_thumbnail(_png(100, 60))
    assert (made.width, made.height) == (100, 60)


def test_thumbnails_average_at_most_30_kb() -> None:
    sizes = [len(image_thumbnail(_noisy_jpeg(1024, 1024, seed)).data) for seed in range(6)]
    assert sum(sizes) / len(sizes) <= 30_000


def test_a_clip_thumbnail_is_its_poster_frame_with_its_duration() -> None:
    clip = make_clip(3, width=640, height=360, seconds=2.0, colour=(20, 200, 40))
    made = video_thumbnail(clip)
    shown = _opened(made.data).convert("RGB")
    assert made.mime == "image/webp"
    assert (made.width, made.height) == (LONG_SIDE, 180)
    assert made.duration == pytest.approx(2.0, abs=0.1)
    r, g, b = shown.getpixel((made.width // 2, made.height // 2))  # type: ignore[misc]
    assert g > 150 and r < 80 and b < 90


def test_a_file_that_is_no_picture_is_refused() -> None:
    with pytest.raises(MediaError):
        image_thumbnail(b"not an image")
    with pytest.raises(MediaError):
        video_thumbnail(b"not a video")


def test_a_picture_past_the_bounds_is_refused_before_decoding() -> None:
    with pytest.raises(MediaTooLarge):
        image_thumbnail(_png(400, 400), bounds=FrameBounds(max_pixels=100 * 100))
    with pytest.raises(MediaTooLarge):
        video_thumbnail(make_clip(1, seconds=0.5), bounds=FrameBounds(max_pixels=50 * 50))
