"""Join is one service call: its line, its downloads, PyAV, and the film handed in its turn.

:meth:`bot.services.joins.JoinService.join` over a download that writes small clips; the
adapter's side is the :class:`~bot.services.joins.JoinDesk` the test records.
"""

from __future__ import annotations

import contextlib
import io
from collections.abc import AsyncIterator
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import httpx2 as httpx
import pytest

from bot.clock import SystemClock
from bot.errors import ValidationFailed
from bot.services.joins import JoinProgress, JoinService
from bot.services.sequences import JoinLine


def small_clip(seconds: float = 1.0, fps: int = 12) -> bytes:
    """A short grey MP4 (64×36)."""
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 36, "yuv420p"
        for index in range(int(seconds * fps)):
            frame = av.VideoFrame(64, 36, "yuv420p")
            for plane in frame.planes:
                plane.update(bytes([128]) * plane.buffer_size)
            frame.pts, frame.time_base = index, Fraction(1, fps)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return out.getvalue()


class RecordingDesk:
    """The adapter's side of a join, as the test sees it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    async def waiting(self, ahead: int) -> None:
        self.events.append(f"waiting {ahead}")

    async def fetching(self) -> None:
        self.events.append("fetching")

    @contextlib.asynccontextmanager
    async def working(self, progress: JoinProgress) -> AsyncIterator[None]:
        self.events.append("working")
        yield
        self.events.append("worked")


def job(number: int) -> Any:
    return SimpleNamespace(id=number, outputs=(f"https://cdn.test/{number}.mp4",))


async def test_a_join_hands_its_film_within_its_turn_then_removes_it() -> None:
    files = {f"https://cdn.test/{n}.mp4": small_clip() for n in (1, 2)}

    async def download(url: str, path: Path, limit: int) -> int:
        path.write_bytes(files[url])
        return len(files[url])

    joins = JoinService(JoinLine(SystemClock()), download)
    desk = RecordingDesk()

    async with joins.join(5, [job(1), job(2)], limit=10_000_000, start_by=None, desk=desk) as film:
        assert film.path.exists() and film.size == film.path.stat().st_size
        assert abs(film.duration - 2.0) <= 0.1
        with pytest.raises(ValidationFailed, match="already have a join in line"):
            joins.refuse_if_queued(5)  # the turn lasts while the film is posted
        kept = film.path

    assert desk.events == ["fetching", "working", "worked"]
    assert not kept.exists()
    joins.refuse_if_queued(5)  # the line moved on


async def test_a_clip_that_cannot_be_fetched_is_one_sentence_and_nothing_is_joined() -> None:
    async def download(url: str, path: Path, limit: int) -> int:
        raise httpx.ConnectError("gone")

    joins = JoinService(JoinLine(SystemClock()), download)
    desk = RecordingDesk()
    with pytest.raises(ValidationFailed, match="Video #1 could not be fetched from the service"):
        async with joins.join(5, [job(1), job(2)], limit=10_000_000, start_by=None, desk=desk):
            pytest.fail("no film")
    assert desk.events == ["fetching"]
