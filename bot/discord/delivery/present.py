"""What a route shows of a finished result: its files, the note about them, and its card.

Every route that shows a result (the channel card, a new channel message, the DM, a personal or
private response, the takes' shared card, a re-show) gets it from :class:`Presenter`, and from
nowhere else: the files through :meth:`Presenter.prepare`, the message through
:meth:`Presenter.finished`, :meth:`Presenter.takes` or :meth:`Presenter.late_notice`. A rule
deciding how a result may be shown before it is shown therefore belongs in
:meth:`Presenter.prepare`, which sees each result once per showing and whose :class:`Shown`
every card is rendered from. Two such steps live there:

- the safety check (:mod:`bot.discord.safety_gate`, docs/safety.md): the downloaded files are
  scored, and a result held or withheld loses its files and note, one shown behind a spoiler
  has them renamed; the decision travels in :attr:`Shown.visibility`, and
  :meth:`Presenter.finished` renders the card by it;
- thumbnails for the dashboard (:class:`bot.services.thumbnails.ThumbnailService`): each
  downloaded file's is kept, before the check (reviewers see held results' too).

A completed video or image is downloaded (:mod:`bot.genapi.downloads`) and attached
under the provider's file name, so the result outlives the provider's URL, which stays as a link
too. Too large, not downloadable, or refused by the download rule: the link alone, and why.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass

import discord
import httpx2 as httpx

from bot.discord.delivery.sending import Files
from bot.discord.dm_notice import late_result_text
from bot.discord.render import job_finished
from bot.discord.render import limits as discord_limits
from bot.discord.render.buttons import show_buttons
from bot.discord.render.jobs import with_files
from bot.discord.render.parts import MessageParts
from bot.discord.render.results import is_web_url
from bot.discord.render.takes import takes_card
from bot.discord.safety_gate import SafetyGate, hidden_takes
from bot.domain import Job, JobStatus, Visibility
from bot.genapi.downloads import Downloads, TooLarge, file_name, format_bytes
from bot.genapi.outputs import DownloadRefused
from bot.i18n import N_, _
from bot.jobs.announcer import Renew
from bot.services.thumbnails import ThumbnailService

log = logging.getLogger(__name__)

SERVER_LIMIT = N_("this server's upload limit")
"""How the note names a server's upload limit (``Guild.filesize_limit``)."""

HERE = N_("the upload limit here")
"""How the note names an interaction response's upload limit (``Interaction.filesize_limit``)."""

TOO_LARGE_NOTE = N_(
    "The file is not attached (Discord refused it as too large); the link may stop working."
)
"""The note of a result whose file Discord refused (its size above the channel's limit)."""


@dataclass(frozen=True, slots=True)
class Shown:
    """What a route may show of a finished job besides its card.

    Attributes:
        files: the attachments, (file name, bytes), in the order of the job's outputs.
        note: the sentence saying what is attached, or why not; None when nothing was to be,
            or when the result is hidden (its card says why).
        visibility: the safety check's decision (:class:`bot.domain.Visibility`); None: not
            checked (no check configured, the job not an image or video, or not completed).
    """

    files: Files = ()
    note: str | None = None
    visibility: Visibility | None = None

    @property
    def size(self) -> int:
        """Bytes of the attachments held."""
        return sum(len(data) for _, data in self.files)

    def refused_as_too_large(self) -> Shown:
        """The same result without its files, Discord having refused them (413, 40005)."""
        return Shown((), _(TOO_LARGE_NOTE), self.visibility)


class Presenter:
    """Turns a finished job into what a route shows; the one step every route goes through.

    Args:
        downloads: how outputs are downloaded (the process's pooled client).
        sandbox: mark every result as made by the sandbox emulator.
        safety: scores results before they are shown and applies the server's policy
            (:mod:`bot.discord.safety_gate`); None: every result is shown unchecked.
        thumbnails: keeps a thumbnail of each result file downloaded, for the dashboard
            (:mod:`bot.services.thumbnails`); None: none kept.
    """

    def __init__(
        self,
        downloads: Downloads,
        *,
        sandbox: bool,
        safety: SafetyGate | None = None,
        thumbnails: ThumbnailService | None = None,
    ) -> None:
        self.downloads = downloads
        self._sandbox = sandbox
        self.safety = safety
        self._thumbnails = thumbnails

    async def prepare(
        self,
        job: Job,
        limit: int,
        renew: Renew | None = None,
        *,
        limit_name: str = SERVER_LIMIT,
    ) -> Shown:
        """Download a completed job's outputs to attach; return them and a note for people.

        Outputs are attached in order while their total stays within ``limit`` bytes (at most
        10, Discord's limit per message). The note says what is attached, or why not.
        ``renew`` (the delivery's lease) is awaited before each download after the first, so
        that ten slow downloads do not outlast the lease. ``limit_name`` names the limit in
        the note (an interaction's response: :data:`HERE`). A job that did not complete, or
        has no output, shows nothing more than its card.

        The files downloaded have their thumbnails kept (never failing the delivery), then are
        scored by the safety check, which may hold or withhold them (no files, no note) or
        rename them as spoilers; :attr:`Shown.visibility` carries its decision.
        """
        urls = [url for url in job.outputs if is_web_url(url)][: discord_limits.FILES_PER_MESSAGE]
        if job.status is not JobStatus.COMPLETED or not urls:
            return Shown()
        files: list[tuple[str, bytes]] = []
        why: str | None = None
        for index, url in enumerate(urls):
            if index and renew is not None:
                await renew()
            try:
                data = await self.downloads.fetch(url, limit - sum(len(d) for _, d in files))
            except TooLarge:
                why = _(
                    "larger than {limit_name} ({size})",
                    limit_name=_(limit_name),
                    size=format_bytes(limit),
                )
                break
            except DownloadRefused as exc:
                why = _("not downloaded: {reason}", reason=exc.reason)
                break
            except (httpx.HTTPError, TimeoutError) as exc:
                log.info("download of job %s output failed: %s", job.id, type(exc).__name__)
                why = _("the download from the service failed")
                break
            files.append((file_name(job.task_id, url, index, job.kind), data))
        if self._thumbnails is not None:  # for the dashboard; never fails a delivery
            await self._thumbnails.keep(job.id, job.kind, [data for _, data in files])
        note = _note(job, files, why)
        if self.safety is None:
            return Shown(tuple(files), note)
        # Scored before anyone sees it (docs/safety.md).
        return Shown(*await self.safety.screen(job, tuple(files), note))

    def finished(self, job: Job, shown: Shown) -> tuple[MessageParts, MessageParts]:
        """The finished card of ``job``, and the same card carrying ``shown``'s files and note.

        Both as the safety check's decision (:attr:`Shown.visibility`) allows: a held result's
        card says why and carries nothing of it, a spoiler's is blurred.
        """
        finished = job_finished(job, sandbox=self._sandbox, ref=f"j{job.id}")
        if self.safety is not None:
            finished = self.safety.card(job, finished, shown.visibility)
        names = [name for name, _ in shown.files]
        parts = with_files(finished, names, shown.note)
        return finished, dataclasses.replace(parts, files=shown.files)

    def takes(
        self,
        group: tuple[Job, ...],
        attached: dict[int, str] | None = None,
        hidden: Mapping[int, Visibility] | None = None,
    ) -> MessageParts:
        """The shared card of a request's takes as they stand; ``attached``: take id -> file.

        ``hidden`` (:meth:`hidden_takes`): the takes the safety check held or withheld, shown
        without their file or link.
        """
        return takes_card(group, sandbox=self._sandbox, attached=attached, hidden=hidden)

    async def hidden_takes(self, group: tuple[Job, ...]) -> dict[int, Visibility]:
        """The finished takes of ``group`` members may not see (:func:`hidden_takes`).

        Each take is screened by its own delivery (:meth:`prepare`) before the shared card
        shows it, and only decisions other than "shown" are recorded, so the records say all.
        """
        return await hidden_takes(None if self.safety is None else self.safety.service, group)

    async def decided(self, job: Job) -> Visibility | None:
        """The safety decision recorded on ``job``'s result when members may not see it.

        Held, withheld or rejected; None when it was shown, is not checked, or not decided yet.
        """
        if self.safety is None or not self.safety.active:
            return None
        record = await self.safety.service.record(f"j{job.id}")
        return record.state if record is not None and record.state.hidden else None

    @staticmethod
    def late_notice(job: Job, visibility: Visibility | None = None) -> MessageParts:
        """The DM naming a personal result whose card can no longer be edited.

        It names the result, carries the card's Show result button (a click updates the
        message into the card) and says ``/jobs show``; its link too, unless the safety
        check holds or withholds it (``visibility``, from :meth:`decided`).
        """
        return MessageParts(
            content=late_result_text(job, visibility),
            action_buttons=show_buttons(job.id),
            allowed_mentions=discord.AllowedMentions.none(),
        )


def _note(job: Job, files: list[tuple[str, bytes]], why: str | None) -> str:
    if why is not None and job.kind == "video":
        return _("The video is not attached ({why}); the link may stop working.", why=why)
    if why is not None:
        return _("The image is not attached ({why}); the link may stop working.", why=why)
    name = f"`{files[0][0]}`"
    return _("Attached as {name}; the service's link may stop working.", name=name)
