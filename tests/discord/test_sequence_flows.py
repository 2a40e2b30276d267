"""Joins wait in one line per process, each told its place; a film over the upload limit is
re-encoded to fit or refused with its size and the limit; /video-join reads its numbers."""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import pytest

from bot.discord.sequence_flows import JoinLine, join_videos
from bot.errors import ValidationFailed
from bot.media.video import probe
from cogs.sequences import parse_numbers


async def test_one_join_at_a_time_the_others_told_their_place_in_order() -> None:
    line = JoinLine()
    told: dict[str, list[int]] = {"b": [], "c": []}
    ran: list[str] = []
    release = {"a": asyncio.Event(), "b": asyncio.Event(), "c": asyncio.Event()}
    release["c"].set()

    async def join(name: str) -> None:
        async def tell(ahead: int) -> None:
            told[name].append(ahead)

        async with line.turn(tell):
            ran.append(name)
            await release[name].wait()

    first = asyncio.create_task(join("a"))
    await asyncio.sleep(0)
    waiting = [asyncio.create_task(join("b")), asyncio.create_task(join("c"))]
    await asyncio.sleep(0.01)
    assert ran == ["a"] and line.length == 3
    assert told == {"b": [1], "c": [2]}
    release["a"].set()
    await asyncio.sleep(0.01)
    assert ran == ["a", "b"]
    release["b"].set()
    await asyncio.gather(first, *waiting)
    assert ran == ["a", "b", "c"]
    assert told == {"b": [1], "c": [2, 1]}
    assert line.length == 0


async def test_a_join_cancelled_while_waiting_leaves_the_line() -> None:
    line = JoinLine()
    release = asyncio.Event()

    async def hold() -> None:
        async with line.turn(lambda ahead: asyncio.sleep(0)):
            await release.wait()

    async def wait() -> None:
        async with line.turn(lambda ahead: asyncio.sleep(0)):
            pass

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert line.length == 1
    release.set()
    await holder
    assert line.length == 0


def test_video_join_reads_numbers_in_order() -> None:
    assert parse_numbers("12, 15 #16") == [12, 15, 16]
    for bad in ("12", "a b", "1 2 3 4 5 6 7 8 9", ""):
        with pytest.raises(ValidationFailed):
            parse_numbers(bad)


def _noisy_clip(seconds: float = 2.0, fps: int = 12) -> bytes:
    """A clip of random pixels: it compresses badly, so a join of two is a large film."""
    out = io.BytesIO()
    with av.open(out, "w", format="mp4") as container:
        stream = container.add_stream("libx264", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 128, 72, "yuv420p"
        stream.options = {"crf": "10", "preset": "ultrafast"}
        for index in range(int(seconds * fps)):
            frame = av.VideoFrame(128, 72, "yuv420p")
            for plane in frame.planes:
                plane.update(os.urandom(plane.buffer_size))
            frame.pts, frame.time_base = index, Fraction(1, fps)
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return out.getvalue()


class _Announcer:
    def __init__(self, files: dict[str, bytes]) -> None:
        self.files = files

    async def download_file(self, url: str, path: Path, limit: int) -> int:
        path.write_bytes(self.files[url])
        return len(self.files[url])


class _Locales:
    def __init__(self, code: str | None) -> None:
        self.code = code

    async def of(self, guild_id: int | None) -> str | None:
        return self.code


class _Interaction:
    def __init__(self, files: dict[str, bytes], limit: int, *, locale: str | None = None) -> None:
        self.client = SimpleNamespace(announcer=_Announcer(files), locales=_Locales(locale))
        self.guild_id = 1
        self.filesize_limit = limit
        self.user = SimpleNamespace(id=5)
        self.edits: list[dict[str, Any]] = []
        self.film: bytes | None = None

    async def edit_original_response(self, **kwargs: Any) -> None:
        self.edits.append(kwargs)
        for file in kwargs.get("attachments") or []:
            self.film = file.fp.read()


async def test_a_film_over_the_upload_limit_is_re_encoded_to_fit() -> None:
    files = {f"https://cdn.test/{n}.mp4": _noisy_clip() for n in (1, 2)}
    jobs = [
        SimpleNamespace(id=n, outputs=(f"https://cdn.test/{n}.mp4",), kind="video") for n in (1, 2)
    ]
    whole = sum(len(data) for data in files.values())
    limit = whole // 3  # well over what 100 kbit/s takes for 4 s
    interaction = _Interaction(files, limit)
    await join_videos(interaction, jobs, JoinLine())  # type: ignore[arg-type]
    assert interaction.film is not None and len(interaction.film) <= limit
    assert "Joined film" in interaction.edits[-1]["content"]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "film.mp4"
        path.write_bytes(interaction.film)
        assert abs(probe(path).duration - 4.0) <= 0.1


async def test_the_join_card_is_in_the_servers_language() -> None:
    files = {f"https://cdn.test/{n}.mp4": _noisy_clip() for n in (1, 2)}
    jobs = [
        SimpleNamespace(id=n, outputs=(f"https://cdn.test/{n}.mp4",), kind="video") for n in (1, 2)
    ]
    interaction = _Interaction(files, 10_000_000, locale="de")
    await join_videos(interaction, jobs, JoinLine())  # type: ignore[arg-type]
    said = [edit["content"] for edit in interaction.edits]
    assert said[0].startswith("**2 Videos werden verbunden** (#1, #2)")
    assert "Verbundener Film" in said[-1] and "Joined" not in said[-1]


async def test_a_film_that_cannot_fit_is_refused_with_its_size_and_the_limit() -> None:
    files = {f"https://cdn.test/{n}.mp4": _noisy_clip() for n in (1, 2)}
    jobs = [
        SimpleNamespace(id=n, outputs=(f"https://cdn.test/{n}.mp4",), kind="video") for n in (1, 2)
    ]
    interaction = _Interaction(files, 20_000)  # under what 100 kbit/s takes for 4 s
    with pytest.raises(ValidationFailed, match=r"over the upload limit here \(20,000 bytes\)"):
        await join_videos(interaction, jobs, JoinLine())  # type: ignore[arg-type]
    assert interaction.film is None
