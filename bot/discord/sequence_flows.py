"""Continue a video from its last frame, and join videos into one film.

**Continue**: one call, :meth:`bot.services.submissions.SubmissionService.continue_video`.
The request is checked first as ``/video`` would check it (channel, options, cooldown, budgets,
caps: :meth:`bot.services.generation.GenerationService.check_video`), so a refused request
downloads nothing; then the clip's last frame comes from
:meth:`bot.services.joins.JoinService.last_frame` (the clip streamed to a temporary file, at
most :data:`~bot.services.joins.MAX_CLIP_BYTES`, decoded with PyAV), posted with the member's
response so that it has a Discord CDN URL the service can fetch (the service's
:data:`~bot.services.submissions.FrameUrl`), and that URL is the new video's ``image_url``. The
rest is ``/video``'s path: its confirmation, holds, budgets, caps, cooldowns and one ledger
row. Its card names and links the clip it continues; the clips form a sequence
(:mod:`bot.services.sequences`), bounded per server.

**Join**: the bot's own work, costing no credits: one service call
(:meth:`bot.services.joins.JoinService.join`: the line, the downloads, PyAV, the deadlines and
the upload limit); this module shows the join's card (the interaction's response) with its
place in line and its progress (:class:`JoinCard`, the service's
:class:`~bot.services.joins.JoinDesk`), then the film. Discord lets the bot edit the response
for 15 minutes: a join still waiting when too little of that is left for its fetching and
joining (:func:`join_start_by`) leaves the line with a sentence.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Final

import discord
from babel.numbers import format_decimal

from bot.discord.request_flows import InteractionDesk, show_video_outcome
from bot.discord.tree import PUBLIC_DEFER
from bot.domain import Job
from bot.errors import ValidationFailed
from bot.genapi.downloads import format_bytes
from bot.i18n import N_, _, locale_of, n_, number, using
from bot.services.generation import Requester
from bot.services.joins import (
    JOIN_FETCH_SECONDS,
    JOIN_SECONDS,
    MAX_JOINED,
    JoinedFilm,
    JoinProgress,
    JoinService,
)
from bot.services.response_tokens import TOKEN_LIFETIME_SECONDS, TOKEN_MARGIN_SECONDS

if TYPE_CHECKING:
    from bot.discord.bot import GenBot  # noqa: F401 (the Interaction alias names it)

log = logging.getLogger(__name__)

Interaction = discord.Interaction["GenBot"]

__all__ = ["MAX_JOINED", "join_start_by", "join_videos", "start_continue"]

PROGRESS_EVERY: Final = 2.0
"""Seconds between two progress edits of a join's card (Discord rate-limits edits)."""


def card_link(job: Job) -> str | None:
    """The jump link to ``job``'s card in its server's channel; None where it has none."""
    if job.message_id is None or job.guild_id <= 0:
        return None
    return f"https://discord.com/channels/{job.guild_id}/{job.channel_id}/{job.message_id}"


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
        png = await bot.services.joins.last_frame(clip_job)
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


async def join_videos(interaction: Interaction, jobs: Sequence[Job], joins: JoinService) -> None:
    """Join ``jobs``' videos in order into one MP4 and post it as the response.

    ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set): the response is the
    join's card, edited with its place in line and its progress, then holding the film.

    Raises:
        ValidationFailed: as :meth:`JoinService.join` (a clip could not be fetched or read,
            the work passed its deadline, or the film cannot fit the upload limit).
    """
    bot = interaction.client
    # The join's card is public: the server's language (a refusal, the member's).
    with using(await bot.locales.of(interaction.guild_id)):
        card = JoinCard(interaction, jobs)
        async with joins.join(
            interaction.user.id,
            jobs,
            limit=interaction.filesize_limit,
            start_by=join_start_by(interaction.created_at.timestamp()),
            desk=card,
        ) as film:
            await _show_film(interaction, jobs, film)


class JoinCard:
    """A join's card, the interaction's response (:class:`~bot.services.joins.JoinDesk`).

    Its title names the videos; below it, the join's place in line, then its stage and
    percentage, edited at most every :data:`PROGRESS_EVERY` seconds.
    """

    def __init__(self, interaction: Interaction, jobs: Sequence[Job]) -> None:
        self._interaction = interaction
        names = ", ".join(f"#{job.id}" for job in jobs)
        self._title = _(
            "**Joining {count} videos** ({names})", count=number(len(jobs)), names=names
        )

    async def say(self, text: str) -> None:
        """Edit the card into its title and ``text``."""
        await self._interaction.edit_original_response(
            content=f"{self._title}\n{text}", allowed_mentions=discord.AllowedMentions.none()
        )

    async def waiting(self, ahead: int) -> None:
        """Say how many joins are ahead of this one."""
        await self.say(
            n_(
                "Waiting: {count} join ahead of this one.",
                "Waiting: {count} joins ahead of this one.",
                ahead,
            )
        )

    async def fetching(self) -> None:
        """Say the clips are being fetched."""
        await self.say(_("Fetching the clips…"))

    @contextlib.asynccontextmanager
    async def working(self, progress: JoinProgress) -> AsyncIterator[None]:
        """Show ``progress`` while the block runs."""
        shown = _show_progress(self.say, progress)
        try:
            yield
        finally:
            shown.cancel()


async def _show_film(interaction: Interaction, jobs: Sequence[Job], film: JoinedFilm) -> None:
    """Replace the Join's progress with the joined ``film`` and its card."""
    how = _("stream copy") if film.copied else _("re-encoded to the first clip's size")
    text = _(
        "**Joined film** · {count} videos ({names}) · {seconds} s · {how} · {size}\n"
        "-# Joined by <@{user}>; joining costs no credits.",
        count=number(len(jobs)),
        names=", ".join(f"#{job.id}" for job in jobs),
        seconds=format_decimal(film.duration, "0.0", locale=locale_of()),
        how=how,
        size=format_bytes(film.size),
        user=interaction.user.id,
    )
    await interaction.edit_original_response(
        content=text,
        attachments=[discord.File(film.path, "joined.mp4")],
        allowed_mentions=discord.AllowedMentions.none(),
    )


def _show_progress(
    say: Callable[[str], Awaitable[None]], progress: JoinProgress
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
