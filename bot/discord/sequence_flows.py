"""Continue a video from its last frame, and join videos into one film.

**Continue**: one call, :meth:`bot.services.submissions.SubmissionService.continue_video`.
The request is checked first as ``/video`` would check it (channel, options, cooldown, budgets,
caps: :meth:`bot.services.generation.GenerationService.check_video`), so a refused request
downloads nothing; then the clip is streamed to a temporary file (at most
:data:`MAX_CLIP_BYTES`, never held in memory), its last frame decoded with PyAV
(:func:`bot.media.video.last_frame_png`, in the media thread), posted with the member's
response so that it has a Discord CDN URL the service can fetch (the service's
:data:`~bot.services.submissions.FrameUrl`), and that URL is the new video's ``image_url``. The
rest is ``/video``'s path: its confirmation, holds, budgets, caps, cooldowns and one ledger
row. Its card names and links the clip it continues; the clips form a sequence
(:mod:`bot.services.sequences`), bounded per server.

**Join**: the bot's own work, costing no credits. One join at a time per process
(:class:`bot.services.sequences.JoinLine`; the others wait and see their place; one join in
line per member), clips streamed to files within :data:`JOIN_FETCH_SECONDS`, joined with PyAV
in the media thread (:func:`bot.media.video.join_clips`: stream copy when they match, else
re-encoded to the first clip's size, letterboxed), progress shown on the join's card, stopped
after :data:`JOIN_SECONDS`. A film over the upload limit here (``Interaction.filesize_limit``)
is re-encoded to fit (:func:`bot.media.video.fit_to_size`, within the same deadline) or refused
with its size and the limit. The card is the interaction's response, which Discord lets the bot
edit for 15 minutes: a join still waiting when too little of that is left for its fetching and
joining (:func:`join_start_by`) leaves the line with a sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import io
import logging
import tempfile
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Final

import discord
import httpx2 as httpx
from babel.numbers import format_decimal

from bot.discord.delivery import TooLarge, format_bytes
from bot.discord.render.results import is_web_url
from bot.discord.request_flows import InteractionDesk, show_video_outcome
from bot.discord.tree import PUBLIC_DEFER
from bot.domain import Job
from bot.errors import ValidationFailed
from bot.genapi.outputs import DownloadRefused
from bot.i18n import N_, _, locale_of, n_, number, using
from bot.media.video import (
    JoinResult,
    MediaError,
    MediaTimeout,
    MediaTooLarge,
    fit_to_size,
    in_media_thread,
    join_clips,
    last_frame_png,
)
from bot.services.generation import Requester
from bot.services.response_tokens import TOKEN_LIFETIME_SECONDS, TOKEN_MARGIN_SECONDS
from bot.services.sequences import JoinLine

if TYPE_CHECKING:
    from bot.discord.bot import GenBot

log = logging.getLogger(__name__)

Interaction = discord.Interaction["GenBot"]

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

PROGRESS_EVERY: Final = 2.0
"""Seconds between two progress edits of a join's card (Discord rate-limits edits)."""


def card_link(job: Job) -> str | None:
    """The jump link to ``job``'s card in its server's channel; None where it has none."""
    if job.message_id is None or job.guild_id <= 0:
        return None
    return f"https://discord.com/channels/{job.guild_id}/{job.channel_id}/{job.message_id}"


async def fetch_clip(bot: GenBot, job: Job, path: Path) -> None:
    """Stream ``job``'s first video output into ``path`` (at most :data:`MAX_CLIP_BYTES`).

    Raises:
        ValidationFailed: too large, refused by the download rule, or the download failed.
    """
    url = next(url for url in job.outputs if is_web_url(url))
    try:
        await bot.announcer.download_file(url, path, MAX_CLIP_BYTES)
    except TooLarge:
        raise ValidationFailed(
            N_("Video #{number} is larger than {size}."),
            number=job.id,
            size=format_bytes(MAX_CLIP_BYTES),
        ) from None
    except DownloadRefused as exc:
        raise ValidationFailed(
            N_("Video #{number} could not be fetched: {reason}."), number=job.id, reason=exc.reason
        ) from None
    except (httpx.HTTPError, TimeoutError):
        raise ValidationFailed(
            N_(
                "Video #{number} could not be fetched from the service (its link may have "
                "expired); try again later."
            ),
            number=job.id,
        ) from None


async def last_frame(bot: GenBot, job: Job) -> bytes:
    """The last frame of ``job``'s video as a PNG (the file is removed afterwards).

    Raises:
        ValidationFailed: the clip could not be fetched or read.
    """
    with tempfile.TemporaryDirectory(prefix="genbot-frame-") as folder:
        path = Path(folder) / "clip.mp4"
        await fetch_clip(bot, job, path)
        try:
            return await in_media_thread(last_frame_png, path)
        except MediaError as exc:
            raise _refusal(exc) from None


def _refusal(exc: MediaError) -> ValidationFailed:
    """The sentence a member reads for ``exc``."""
    if isinstance(exc, MediaTooLarge):
        return ValidationFailed(
            TOO_LARGE,
            pixels=number(exc.bounds.max_pixels),
            frames=number(exc.bounds.max_frames),
        )
    return ValidationFailed(exc.sentence)


def join_start_by(created_at: float) -> float:
    """When a join asked at ``created_at`` must start, to be answered while its token lives.

    The interaction token lives :data:`TOKEN_LIFETIME_SECONDS` (Discord: 15 minutes), used up
    to :data:`TOKEN_MARGIN_SECONDS` before its end; the join's downloads take at most
    :data:`JOIN_FETCH_SECONDS` and its PyAV work :data:`JOIN_SECONDS`.

    Args:
        created_at: the interaction's time, UTC epoch seconds.

    Returns:
        UTC epoch seconds (7 min 30 s after ``created_at`` with today's figures).
    """
    return (
        created_at
        + TOKEN_LIFETIME_SECONDS
        - TOKEN_MARGIN_SECONDS
        - JOIN_FETCH_SECONDS
        - JOIN_SECONDS
    )


async def start_continue(
    interaction: Interaction,
    who: Requester,
    job: Job | None,
    *,
    prompt: str,
    model: str,
    duration: float | None,
) -> None:
    """Continue ``job`` with a new clip from its last frame (``SubmissionService.continue_video``).

    ``interaction`` must be deferred as :func:`bot.discord.request_flows.defer_video` does.
    The service checks the clip, the sequence's bound and the options before asking for the
    frame; the frame is posted as an ephemeral followup (so its URL outlives the response's
    later edits) and sent as ``image_url``. The outcome is shown as ``/video``'s.

    Raises:
        ValidationFailed: the clip is not usable, the sequence is at the server's bound, the
            options fail ``/video``'s checks, or the frame could not be made (nothing charged).
    """
    bot = interaction.client

    async def frame(clip_job: Job, clip: int) -> str:
        await interaction.edit_original_response(
            content=_("Taking the last frame of video #{number}…", number=clip_job.id), view=None
        )
        png = await last_frame(bot, clip_job)
        posted = await interaction.followup.send(
            _(
                "The last frame of video #{number}, where clip {clip} starts:",
                number=clip_job.id,
                clip=clip,
            ),
            file=discord.File(io.BytesIO(png), f"last-frame-{clip_job.id}.png"),
            ephemeral=True,
            wait=True,
        )
        if not posted.attachments:
            raise ValidationFailed(N_("Discord did not keep the frame; try again."))
        return posted.attachments[0].url

    outcome = await bot.services.submissions.continue_video(
        who,
        job,
        prompt=prompt,
        model=model,
        duration=duration,
        continues_link=None if job is None else card_link(job),
        frame=frame,
        desk=InteractionDesk(interaction, who),
    )
    await show_video_outcome(interaction, who, outcome)


@dataclasses.dataclass
class _Progress:
    share: float = 0.0
    stage: str = N_("Joining")  # English, translated where shown


async def join_videos(interaction: Interaction, jobs: Sequence[Job], line: JoinLine) -> None:
    """Join ``jobs``' videos in order into one MP4 and post it as the response.

    ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set): the response is the
    join's card, edited with its place in line and its progress, then holding the film.

    Raises:
        ValidationFailed: a clip could not be fetched or read, the work passed
            :data:`JOIN_SECONDS`, or the film cannot fit the upload limit (its size and the
            limit said).
    """
    bot = interaction.client
    # The join's card is public: the server's language (a refusal, the member's).
    with using(await bot.locales.of(interaction.guild_id)):
        await _join(interaction, jobs, line)


async def _join(interaction: Interaction, jobs: Sequence[Job], line: JoinLine) -> None:
    bot = interaction.client
    names = ", ".join(f"#{job.id}" for job in jobs)
    title = _("**Joining {count} videos** ({names})", count=number(len(jobs)), names=names)

    async def say(text: str) -> None:
        await interaction.edit_original_response(
            content=f"{title}\n{text}", allowed_mentions=discord.AllowedMentions.none()
        )

    async def told(ahead: int) -> None:
        await say(
            n_(
                "Waiting: {count} join ahead of this one.",
                "Waiting: {count} joins ahead of this one.",
                ahead,
            )
        )

    limit = interaction.filesize_limit
    start_by = join_start_by(interaction.created_at.timestamp())
    async with line.turn(interaction.user.id, told, start_by=start_by):
        await say(_("Fetching the clips…"))
        with tempfile.TemporaryDirectory(prefix="genbot-join-") as folder:
            paths = await _fetch_clips(bot, jobs, Path(folder))
            progress = _Progress()
            loop = asyncio.get_running_loop()

            def moved(share: float) -> None:
                loop.call_soon_threadsafe(setattr, progress, "share", share)

            deadline = time.monotonic() + JOIN_SECONDS
            output = Path(folder) / "joined.mp4"
            shown = _show_progress(say, progress)
            try:
                result = await in_media_thread(
                    join_clips, paths, output, progress=moved, deadline=deadline
                )
                film, size = result.path, result.size
                if size > limit:
                    progress.stage, progress.share = N_("Making it fit the upload limit"), 0.0
                    film, size = await _fit(output, Path(folder), size, limit, deadline)
            except MediaTimeout:
                raise ValidationFailed(
                    N_(
                        "Joining took longer than {seconds} seconds and was stopped; join "
                        "fewer or shorter videos."
                    ),
                    seconds=f"{JOIN_SECONDS:g}",
                ) from None
            except MediaError as exc:
                raise _refusal(exc) from None
            finally:
                shown.cancel()
            await _show_film(interaction, jobs, result, film, size)


async def _show_film(
    interaction: Interaction, jobs: Sequence[Job], result: JoinResult, film: Path, size: int
) -> None:
    """Replace the Join's progress with the joined ``film`` (``size`` bytes) and its card."""
    how = _("stream copy") if result.copied else _("re-encoded to the first clip's size")
    text = _(
        "**Joined film** · {count} videos ({names}) · {seconds} s · {how} · {size}\n"
        "-# Joined by <@{user}>; joining costs no credits.",
        count=number(len(jobs)),
        names=", ".join(f"#{job.id}" for job in jobs),
        seconds=format_decimal(result.duration, "0.0", locale=locale_of()),
        how=how,
        size=format_bytes(size),
        user=interaction.user.id,
    )
    await interaction.edit_original_response(
        content=text,
        attachments=[discord.File(film, "joined.mp4")],
        allowed_mentions=discord.AllowedMentions.none(),
    )


async def _fetch_clips(bot: GenBot, jobs: Sequence[Job], folder: Path) -> list[Path]:
    """Download the jobs' clips into ``folder``, in order, within :data:`JOIN_FETCH_SECONDS`.

    Raises:
        ValidationFailed: the downloads took longer than that.
    """
    paths = []
    try:
        async with asyncio.timeout(JOIN_FETCH_SECONDS):
            for index, job in enumerate(jobs, start=1):
                path = folder / f"clip{index}.mp4"
                await fetch_clip(bot, job, path)
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


def _show_progress(
    say: Callable[[str], Awaitable[None]], progress: _Progress
) -> asyncio.Task[None]:
    async def run() -> None:
        last = -1
        while True:
            percent = int(progress.share * 100)
            if percent != last:
                last = percent
                with contextlib.suppress(discord.HTTPException):
                    await say(_("{stage}… {percent}%", stage=_(progress.stage), percent=percent))
            await asyncio.sleep(PROGRESS_EVERY)

    return asyncio.ensure_future(run())


def mark_public(interaction: Interaction) -> None:
    """Note that ``interaction`` was deferred publicly (an error then replaces it)."""
    interaction.extras[PUBLIC_DEFER] = True
