"""Joins wait in one line per process, each told its place, one per member, dropped (with a
sentence) before their token expires; a film over the upload limit is re-encoded to fit within
the join's deadline or refused with its size and the limit; /video-join reads its numbers;
Continue checks the request before it downloads anything."""

from __future__ import annotations

import asyncio
import io
import os
import tempfile
from datetime import UTC, datetime
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import pytest

import bot.services.joins as joins_module
from bot.clock import ManualClock, SystemClock
from bot.discord.sequence_flows import join_start_by, join_videos, start_continue
from bot.domain import JobStatus
from bot.errors import CooldownActive, ValidationFailed
from bot.media.video import FrameBounds, MediaTimeout, MediaTooLarge, probe
from bot.services.joins import JoinService
from bot.services.sequences import JOIN_DROPPED, ONE_JOIN_EACH, JoinLine
from bot.services.submissions import SubmissionService
from cogs.sequences import parse_numbers


async def test_one_join_at_a_time_the_others_told_their_place_in_order() -> None:
    line = JoinLine(SystemClock())
    told: dict[str, list[int]] = {"b": [], "c": []}
    ran: list[str] = []
    release = {"a": asyncio.Event(), "b": asyncio.Event(), "c": asyncio.Event()}
    release["c"].set()

    async def join(name: str) -> None:
        async def tell(ahead: int) -> None:
            told[name].append(ahead)

        async with line.turn(ord(name), tell):
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
    line = JoinLine(SystemClock())
    release = asyncio.Event()

    async def hold() -> None:
        async with line.turn(1, lambda ahead: asyncio.sleep(0)):
            await release.wait()

    async def wait() -> None:
        async with line.turn(2, lambda ahead: asyncio.sleep(0)):
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


def _joins(files: dict[str, bytes]) -> JoinService:
    """The join service over a download that writes ``files`` (by URL)."""

    async def download(url: str, path: Path, limit: int) -> int:
        path.write_bytes(files[url])
        return len(files[url])

    return JoinService(JoinLine(SystemClock()), download)


class _Locales:
    def __init__(self, code: str | None) -> None:
        self.code = code

    async def of(self, guild_id: int | None) -> str | None:
        return self.code


class _Interaction:
    def __init__(self, files: dict[str, bytes], limit: int, *, locale: str | None = None) -> None:
        self.client = SimpleNamespace(locales=_Locales(locale))
        self.joins = _joins(files)
        self.created_at = datetime.now(UTC)
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
    await join_videos(interaction, jobs, interaction.joins)  # type: ignore[arg-type]
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
    await join_videos(interaction, jobs, interaction.joins)  # type: ignore[arg-type]
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
        await join_videos(interaction, jobs, interaction.joins)  # type: ignore[arg-type]
    assert interaction.film is None


async def test_a_member_has_one_join_in_line_a_second_is_refused() -> None:
    line = JoinLine(SystemClock())
    release = asyncio.Event()

    async def hold() -> None:
        async with line.turn(7, lambda ahead: asyncio.sleep(0)):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    with pytest.raises(ValidationFailed) as refused:
        line.refuse_if_queued(7)  # before the join is deferred: an ephemeral sentence
    assert refused.value.template == ONE_JOIN_EACH
    with pytest.raises(ValidationFailed, match="already have a join in line"):
        async with line.turn(7, lambda ahead: asyncio.sleep(0)):
            pass
    line.refuse_if_queued(8)  # someone else may queue
    assert line.length == 1
    release.set()
    await holder
    line.refuse_if_queued(7)  # and the member again, once theirs ended


async def test_a_join_whose_token_would_expire_in_line_is_dropped_with_a_sentence() -> None:
    clock = ManualClock()
    line = JoinLine(clock)
    release = asyncio.Event()
    told: list[int] = []

    async def hold() -> None:
        async with line.turn(1, lambda ahead: asyncio.sleep(0)):
            await release.wait()

    async def tell(ahead: int) -> None:
        told.append(ahead)

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0)
    asked = clock.time()
    with pytest.raises(ValidationFailed) as dropped:  # the clock's sleep: no real wait
        async with line.turn(2, tell, start_by=join_start_by(asked)):
            pytest.fail("the join ran after its token's useful life")
    assert dropped.value.template == JOIN_DROPPED
    assert told == [1]
    assert clock.time() == join_start_by(asked)  # dropped at its start-by time, not later
    assert line.length == 1  # the running join goes on
    release.set()
    await holder
    assert line.length == 0


def test_a_join_must_start_while_its_token_has_time_for_fetching_and_joining() -> None:
    # 15 min token, 30 s margin, 120 s for the downloads, 300 s for PyAV: 7 min 30 s in line.
    assert join_start_by(1000.0) == 1000.0 + 450.0


def _two_clips() -> tuple[dict[str, bytes], list[Any]]:
    files = {f"https://cdn.test/{n}.mp4": _noisy_clip() for n in (1, 2)}
    jobs = [
        SimpleNamespace(id=n, outputs=(f"https://cdn.test/{n}.mp4",), kind="video") for n in (1, 2)
    ]
    return files, jobs


async def test_the_joins_deadline_covers_fitting_to_the_upload_limit(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    deadlines: list[float | None] = []

    def slow_fit(source: Path, output: Path, limit: int, *, deadline: float | None = None) -> Path:
        deadlines.append(deadline)
        raise MediaTimeout("Fitting took too long and was stopped.")

    monkeypatch.setattr(joins_module, "fit_to_size", slow_fit)
    files, jobs = _two_clips()
    interaction = _Interaction(files, sum(len(data) for data in files.values()) // 3)
    with pytest.raises(ValidationFailed, match="took longer than 300 seconds and was stopped"):
        await join_videos(interaction, jobs, interaction.joins)  # type: ignore[arg-type]
    assert deadlines and deadlines[0] is not None
    assert interaction.film is None


async def test_a_clip_over_the_media_bounds_is_refused_with_the_figures(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def too_large(*args: object, **kwargs: object) -> object:
        raise MediaTooLarge(FrameBounds(max_pixels=8_294_400, max_frames=3600))

    monkeypatch.setattr(joins_module, "join_clips", too_large)
    files, jobs = _two_clips()
    interaction = _Interaction(files, 10_000_000)
    with pytest.raises(ValidationFailed, match=r"at most 8,294,400 pixels a frame and 3,600"):
        await join_videos(interaction, jobs, interaction.joins)  # type: ignore[arg-type]


async def test_continue_checks_cooldown_and_budget_before_downloading_the_clip() -> None:
    downloads: list[str] = []

    async def download(url: str, path: Path, limit: int) -> int:
        downloads.append(url)
        raise AssertionError("downloaded before the checks")

    class Generation:
        async def check_video(self, who: object, options: object) -> None:
            raise CooldownActive("video", 2_000_000_000.0)

    class Sequences:
        async def check_room(self, guild_id: int, job_id: int) -> int:
            return 2

    edits: list[dict[str, Any]] = []

    async def edit(**kwargs: Any) -> None:
        edits.append(kwargs)

    # Continue is one service call (SubmissionService.continue_video) over these two.
    submissions = SubmissionService(
        generation=Generation(),  # type: ignore[arg-type]
        sequences=Sequences(),  # type: ignore[arg-type]
        members=None,  # type: ignore[arg-type]
        guild_config=None,  # type: ignore[arg-type]
        creative=None,  # type: ignore[arg-type]
        drafts=None,  # type: ignore[arg-type]
    )
    interaction = SimpleNamespace(
        client=SimpleNamespace(
            services=SimpleNamespace(
                submissions=submissions, joins=JoinService(JoinLine(SystemClock()), download)
            ),
        ),
        edit_original_response=edit,
    )
    job = SimpleNamespace(
        id=4,
        guild_id=1,
        kind="video",
        status=JobStatus.COMPLETED,
        outputs=("https://cdn.test/4.mp4",),
        message_id=None,
        channel_id=9,
    )
    who = SimpleNamespace(guild_id=1, user_id=5)
    with pytest.raises(CooldownActive):
        await start_continue(
            interaction,  # type: ignore[arg-type]
            who,  # type: ignore[arg-type]
            job,  # type: ignore[arg-type]
            prompt="then it jumps",
            model="m",
            duration=None,
        )
    assert downloads == [] and edits == []
