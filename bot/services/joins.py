"""Join: several finished videos as one film, the bot's own work (no charge); Continue's frame.

One member action, one call: :meth:`JoinService.join`. A join waits its turn in the process's
one line (:class:`bot.services.sequences.JoinLine`: one join at a time, one in line per member,
dropped with a sentence when it could no longer be answered), streams its clips to files within
:data:`JOIN_FETCH_SECONDS` (at most :data:`MAX_CLIP_BYTES` each, never held in memory, under the
download rule: :mod:`bot.genapi.downloads`), joins them with PyAV in the media thread
(:func:`bot.media.video.join_clips`: stream copy when they match, else re-encoded to the first
clip's size, letterboxed), and re-encodes a film over the upload limit to fit
(:func:`bot.media.video.fit_to_size`), all of the PyAV work within :data:`JOIN_SECONDS`. The film
is handed to the adapter inside the join's turn (the method is an async context manager), so
the next join starts once it is posted and its files are removed after.

No Discord here: what only the adapter can show while a join runs (its place in line, the
fetching, the progress) is asked of it through a :class:`JoinDesk` (a port).

Continue's last frame (:meth:`JoinService.last_frame`) uses the same clip download.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from pathlib import Path
from typing import Final, Protocol

import httpx2 as httpx

from bot.domain import Job
from bot.errors import ValidationFailed
from bot.genapi.downloads import TooLarge, format_bytes
from bot.genapi.outputs import DownloadRefused
from bot.i18n import N_, number
from bot.media.video import (
    MediaError,
    MediaTimeout,
    MediaTooLarge,
    first_frame_png,
    fit_to_size,
    in_media_thread,
    join_clips,
    last_frame_png,
)
from bot.services.sequences import JoinLine

MAX_CLIP_BYTES: Final = 200 * 1024 * 1024
"""Bytes of one clip downloaded to continue or join it (streamed to a temporary file)."""

MAX_JOINED: Final = 8
"""Videos one join takes at most."""

JOIN_SECONDS: Final = 300.0
"""Seconds one join's PyAV work may take (joining, then fitting to the upload limit) before it
is stopped; waiting in line and downloading are not counted."""

JOIN_FETCH_SECONDS: Final = 120.0
"""Seconds one join's downloads may take together before it is stopped."""

TOO_LARGE = N_(
    "That video is too large for me to work on: at most {pixels} pixels a frame and "
    "{frames} frames a clip."
)
"""A clip over the media bounds (``bot.media.video.MAX_FRAME_PIXELS``, ``MAX_CLIP_FRAMES``)."""

ClipDownload = Callable[[str, Path, int], Awaitable[int]]
"""``async (url, path, limit) -> bytes written``: stream an output into a file under the
download rule (``bot.genapi.downloads.Downloads.to_file``; the same errors)."""


@dataclasses.dataclass
class JoinProgress:
    """How far a join's PyAV work is: written from the media thread, read by the adapter.

    Attributes:
        share: 0 to 1 of the current stage.
        stage: what is being done, in English (marked for translation, translated where
            shown).
    """

    share: float = 0.0
    stage: str = N_("Joining")


@dataclasses.dataclass(frozen=True, slots=True)
class JoinedFilm:
    """A joined film, ready to post while the join's turn lasts.

    Attributes:
        path: the MP4 (a temporary file, removed when the turn ends).
        size: its bytes (at most the upload limit).
        duration: seconds.
        copied: joined by stream copy (else re-encoded to the first clip's size).
    """

    path: Path
    size: int
    duration: float
    copied: bool


class JoinDesk(Protocol):
    """The adapter's side of a join, called by the service (a port)."""

    async def waiting(self, ahead: int) -> None:
        """The join waits with ``ahead`` joins before it (called whenever that changes)."""
        ...

    async def fetching(self) -> None:
        """The join's turn came: its clips are being downloaded."""
        ...

    def working(self, progress: JoinProgress) -> contextlib.AbstractAsyncContextManager[object]:
        """The block in which PyAV works; ``progress`` says how far it is."""
        ...


def media_refusal(exc: MediaError) -> ValidationFailed:
    """The sentence a member reads for a clip PyAV refused (``exc``)."""
    if isinstance(exc, MediaTooLarge):
        return ValidationFailed(
            TOO_LARGE,
            pixels=number(exc.bounds.max_pixels),
            frames=number(exc.bounds.max_frames),
        )
    return ValidationFailed(exc.sentence)


class JoinService:
    """Joins and the clips they (and Continue) download; see the module.

    Args:
        line: the process's one line of joins (``SequenceService.joins``).
        download: streams an output into a file under the download rule.
    """

    def __init__(self, line: JoinLine, download: ClipDownload) -> None:
        self._line = line
        self._download = download

    def refuse_if_queued(self, member_id: int) -> None:
        """Refuse a member who already has a join in line (before anything is deferred).

        Raises:
            ValidationFailed: ``ONE_JOIN_EACH`` (:meth:`JoinLine.refuse_if_queued`).
        """
        self._line.refuse_if_queued(member_id)

    async def fetch_clip(self, job: Job, path: Path) -> None:
        """Stream ``job``'s first video output into ``path`` (at most :data:`MAX_CLIP_BYTES`).

        Raises:
            ValidationFailed: too large, refused by the download rule, or the download failed.
        """
        url = next(url for url in job.outputs if url.startswith(("https://", "http://")))
        try:
            await self._download(url, path, MAX_CLIP_BYTES)
        except TooLarge:
            raise ValidationFailed(
                N_("Video #{number} is larger than {size}."),
                number=job.id,
                size=format_bytes(MAX_CLIP_BYTES),
            ) from None
        except DownloadRefused as exc:
            raise ValidationFailed(
                N_("Video #{number} could not be fetched: {reason}."),
                number=job.id,
                reason=exc.reason,
            ) from None
        except (httpx.HTTPError, TimeoutError):
            raise ValidationFailed(
                N_(
                    "Video #{number} could not be fetched from the service (its link may have "
                    "expired); try again later."
                ),
                number=job.id,
            ) from None

    async def last_frame(self, job: Job) -> bytes:
        """The last frame of ``job``'s video as a PNG, for Continue (the file is removed).

        Raises:
            ValidationFailed: the clip could not be fetched or read.
        """
        return await self._frame(job, last_frame_png)

    async def first_frame(self, job: Job) -> bytes:
        """The first frame of ``job``'s video as a PNG, for a draft's Final (docs/creative.md).

        Raises:
            ValidationFailed: the clip could not be fetched or read.
        """
        return await self._frame(job, first_frame_png)

    async def _frame(self, job: Job, read: Callable[[Path], bytes]) -> bytes:
        """``read`` (a PyAV frame reader) over ``job``'s clip, fetched to a temporary file."""
        with tempfile.TemporaryDirectory(prefix="genbot-frame-") as folder:
            path = Path(folder) / "clip.mp4"
            await self.fetch_clip(job, path)
            try:
                return await in_media_thread(read, path)
            except MediaError as exc:
                raise media_refusal(exc) from None

    @contextlib.asynccontextmanager
    async def join(
        self,
        member_id: int,
        jobs: Sequence[Job],
        *,
        limit: int,
        start_by: float | None,
        desk: JoinDesk,
    ) -> AsyncIterator[JoinedFilm]:
        """Join ``jobs``' videos in order into one film of at most ``limit`` bytes.

        The film is the block's value, within the join's turn: post it there.

        Args:
            member_id: whose join it is (one in line each).
            jobs: the finished videos, in order (checked by the caller: the member's, here).
            limit: the upload limit where the film goes, bytes.
            start_by: UTC epoch seconds by which the turn must come; None: no bound.
            desk: the adapter's side (place in line, fetching, progress).

        Raises:
            ValidationFailed: the member has a join in line, the turn came too late, a clip
                could not be fetched or read, the work passed :data:`JOIN_SECONDS`, or the
                film cannot fit ``limit`` (its size and the limit said).
        """
        async with self._line.turn(member_id, desk.waiting, start_by=start_by):
            await desk.fetching()
            with tempfile.TemporaryDirectory(prefix="genbot-join-") as folder:
                paths = await self._fetch_clips(jobs, Path(folder))
                progress = JoinProgress()
                async with desk.working(progress):
                    film = await self._joined(paths, Path(folder), limit, progress)
                yield film

    async def _joined(
        self, paths: list[Path], folder: Path, limit: int, progress: JoinProgress
    ) -> JoinedFilm:
        """Join ``paths`` into ``folder``, fitted to ``limit`` bytes, within the deadline."""
        loop = asyncio.get_running_loop()

        def moved(share: float) -> None:
            loop.call_soon_threadsafe(setattr, progress, "share", share)

        deadline = time.monotonic() + JOIN_SECONDS
        output = folder / "joined.mp4"
        try:
            result = await in_media_thread(
                join_clips, paths, output, progress=moved, deadline=deadline
            )
            film, size = result.path, result.size
            if size > limit:
                progress.stage, progress.share = N_("Making it fit the upload limit"), 0.0
                film, size = await _fit(output, folder, size, limit, deadline)
        except MediaTimeout:
            raise ValidationFailed(
                N_(
                    "Joining took longer than {seconds} seconds and was stopped; join "
                    "fewer or shorter videos."
                ),
                seconds=f"{JOIN_SECONDS:g}",
            ) from None
        except MediaError as exc:
            raise media_refusal(exc) from None
        return JoinedFilm(film, size, result.duration, result.copied)

    async def _fetch_clips(self, jobs: Sequence[Job], folder: Path) -> list[Path]:
        """Download the jobs' clips into ``folder``, in order, within :data:`JOIN_FETCH_SECONDS`.

        Raises:
            ValidationFailed: the downloads took longer than that.
        """
        paths = []
        try:
            async with asyncio.timeout(JOIN_FETCH_SECONDS):
                for index, job in enumerate(jobs, start=1):
                    path = folder / f"clip{index}.mp4"
                    await self.fetch_clip(job, path)
                    paths.append(path)
        except TimeoutError:
            raise ValidationFailed(
                N_(
                    "Fetching the clips took longer than {seconds} seconds and was "
                    "stopped; try again later, or join fewer videos."
                ),
                seconds=f"{JOIN_FETCH_SECONDS:g}",
            ) from None
        return paths


async def _fit(
    output: Path, folder: Path, size: int, limit: int, deadline: float
) -> tuple[Path, int]:
    """Re-encode the joined film ``output`` (``size`` bytes) to fit ``limit`` bytes.

    Returns:
        The fitted film and its size in bytes.

    Raises:
        MediaTimeout: the ``deadline`` (monotonic clock) passed.
        ValidationFailed: it cannot be made to fit.
    """
    fitted = folder / "fitted.mp4"
    try:
        await in_media_thread(fit_to_size, output, fitted, limit, deadline=deadline)
    except MediaTimeout:
        raise
    except MediaError:
        raise ValidationFailed(
            N_(
                "The joined film is {size}, over the upload limit here "
                "({limit}), and cannot be made to fit; join fewer or shorter "
                "videos."
            ),
            size=format_bytes(size),
            limit=format_bytes(limit),
        ) from None
    size = fitted.stat().st_size
    if size > limit:
        raise ValidationFailed(
            N_(
                "The joined film is {size}, over the upload limit here "
                "({limit}); join fewer or shorter videos."
            ),
            size=format_bytes(size),
            limit=format_bytes(limit),
        )
    return fitted, size
