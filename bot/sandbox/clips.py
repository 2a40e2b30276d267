"""Real, playable MP4 clips for the emulator, whose frames say where they come from.

Every frame is one flat colour, :func:`frame_colour` of its clip's ``seed`` and its index, so a
test can tell from any decoded frame which clip and which frame it is (the last frame sent on
as a continuation's ``image_url``, the clips of a joined film in order). H.264 in yuv420p at a
high quality keeps each channel within a few levels of the colour it was given.
"""

from __future__ import annotations

import functools
import io
import zlib
from fractions import Fraction
from typing import Final

import av
import av.audio.frame
import av.audio.stream
import av.container
import av.video.frame

WIDTH: Final = 128
HEIGHT: Final = 72
FPS: Final = 24
SECONDS: Final = 1.0

_LEVELS: Final = 8
"""Steps per channel of the seed's colour: 8 levels of red and green tell 64 clips apart."""

FRAME_CYCLE: Final = 24
"""Frame indexes a colour tells apart: :func:`identify` reads the index modulo this."""

SEED_CYCLE: Final = 64
"""Clips a colour tells apart: :func:`identify` reads the seed modulo this."""

_FRAME_STEP: Final = 10
"""Blue levels per frame index: twice the largest error H.264 at this quality was seen to make
on a flat frame (about 4 levels), so a decoded frame is never read as its neighbour."""


def frame_colour(seed: int, index: int) -> tuple[int, int, int]:
    """The RGB colour of frame ``index`` of the clip made with ``seed``.

    Red and green encode ``seed`` (mod :data:`SEED_CYCLE`), blue the frame's index (mod
    :data:`FRAME_CYCLE`), each a whole step apart so that a decoded frame is told apart within
    H.264's error.
    """
    step = 256 // _LEVELS
    red = step * (seed % _LEVELS) + step // 2
    green = step * ((seed // _LEVELS) % _LEVELS) + step // 2
    blue = 10 + _FRAME_STEP * (index % FRAME_CYCLE)
    return red, green, blue


def identify(rgb: tuple[float, float, float]) -> tuple[int, int]:
    """The ``(seed mod SEED_CYCLE, index mod FRAME_CYCLE)`` whose colour is nearest ``rgb``."""
    step = 256 // _LEVELS
    red, green, blue = rgb
    seed = round((red - step // 2) / step) % _LEVELS + _LEVELS * (
        round((green - step // 2) / step) % _LEVELS
    )
    return seed, round((blue - 10) / _FRAME_STEP) % FRAME_CYCLE


def seed_of(task_id: str) -> int:
    """The seed of a task's clip: the number its id ends with, else a checksum of the id.

    Sequential task ids give consecutive clips different colours, so a test tells them apart.
    """
    digits = len(task_id) - len(task_id.rstrip("0123456789"))
    if digits:
        return int(task_id[-digits:])
    return zlib.crc32(task_id.encode())


CLIPS_KEPT: Final = 256
"""Clips :func:`clip_of_task` keeps made (a few kilobytes each)."""


SHAPES: Final = {"16:9": (WIDTH, HEIGHT), "9:16": (HEIGHT, WIDTH), "1:1": (HEIGHT, HEIGHT)}
"""Width and height of a clip by its request's ``aspect_ratio`` (16:9 when none or other)."""


@functools.lru_cache(maxsize=CLIPS_KEPT)
def clip_of_task(
    task_id: str, aspect_ratio: str | None = None, colour: tuple[int, int, int] | None = None
) -> bytes:
    """The clip a video task's output file serves: :func:`make_clip` of its :func:`seed_of`.

    Shaped as the request asked (:data:`SHAPES`), so clips of different sizes can be had;
    every frame ``colour`` when its prompt chose one (``bot.sandbox.files.colour_of``).
    """
    width, height = SHAPES.get(aspect_ratio or "", (WIDTH, HEIGHT))
    return make_clip(seed_of(task_id), width=width, height=height, colour=colour)


def make_clip(
    seed: int,
    *,
    width: int = WIDTH,
    height: int = HEIGHT,
    seconds: float = SECONDS,
    fps: int = FPS,
    audio: bool = False,
    colour: tuple[int, int, int] | None = None,
) -> bytes:
    """An H.264 MP4 of ``seconds`` at ``fps``, every frame flat :func:`frame_colour`.

    Args:
        seed: names the clip (a task's number); its frames' colours encode it.
        width: pixels, even.
        height: pixels, even.
        seconds: the clip's duration.
        fps: frames a second.
        audio: with an AAC track of silence (a join keeps audio only when every clip has it).
        colour: every frame this RGB colour instead (the frames then say nothing of the clip).

    Returns:
        The MP4 file's bytes.
    """
    out = io.BytesIO()
    frames = max(1, round(seconds * fps))
    with av.open(out, "w", format="mp4") as container:
        video = container.add_stream("libx264", rate=fps)
        video.width, video.height = width, height
        video.pix_fmt = "yuv420p"
        video.options = {"crf": "12", "preset": "veryfast"}
        sound = container.add_stream("aac", rate=48_000) if audio else None
        for index in range(frames):
            rgb = frame_colour(seed, index) if colour is None else colour
            frame = _flat_frame(width, height, rgb)
            frame.pts = index
            frame.time_base = Fraction(1, fps)
            container.mux(video.encode(frame))
        container.mux(video.encode())
        if sound is not None:
            _silence(container, sound, seconds)
    return out.getvalue()


def _flat_frame(width: int, height: int, rgb: tuple[int, int, int]) -> av.video.frame.VideoFrame:
    frame = av.video.frame.VideoFrame(width, height, "rgb24")
    plane = frame.planes[0]
    row = bytes(rgb) * width + bytes(plane.line_size - 3 * width)
    plane.update(row * height)
    return frame


def _silence(
    container: av.container.OutputContainer, stream: av.audio.stream.AudioStream, seconds: float
) -> None:
    rate = stream.rate or 48_000
    samples = 1024
    total = round(seconds * rate)
    for start in range(0, total, samples):
        frame = av.audio.frame.AudioFrame(format="fltp", layout="stereo", samples=samples)
        for plane in frame.planes:
            plane.update(bytes(plane.buffer_size))
        frame.sample_rate = rate
        frame.pts = start
        frame.time_base = Fraction(1, rate)
        container.mux(stream.encode(frame))
    container.mux(stream.encode())
