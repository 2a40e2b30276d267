"""What follows a reviewer's decision on a held or withheld result, on the member's side.

One code for both places a decision is made: the review channel's Approve / Reject
(``cogs/safety.py``) and the dashboard's Review page (through its Discord port,
:meth:`bot.discord.dashboard_directory.RestDirectory.settle_review`), so that a decision on the
web behaves exactly as one in Discord (docs/safety.md, "Reviews"):

* Approve of an asynchronous job: nothing here; :meth:`bot.services.safety.SafetyService.approve`
  made it due for delivery, and the poller shows it on its card as an ordinary completion
  (files, buttons, the requester's ping) within its next pass;
* Approve of a synchronous image (``r<id>``): posted as a reply to its card (or in its
  channel), with its files and the member's ping;
* Reject: the job's card edited into its rejected form, and a reply pinging the member; a
  synchronous image's card gets the reply.

REST only (a gateway's bot or a worker's client alike); failures are logged, never raised: the
decision stands either way.
"""

from __future__ import annotations

import io
import logging
from collections.abc import Awaitable, Callable

import discord
import httpx2 as httpx

from bot.discord.delivery import download
from bot.discord.delivery.reach import DEFAULT_UPLOAD_LIMIT
from bot.discord.locales import GuildLocales
from bot.discord.render.parts import ping_only
from bot.discord.render.results import is_web_url
from bot.discord.render.safety import hidden_card
from bot.domain import Job, SafetyRecord, Visibility
from bot.genapi.outputs import output_client
from bot.i18n import _, using
from bot.services.generation import GenerationService

log = logging.getLogger(__name__)

Download = Callable[[str], Awaitable[bytes]]
"""Downloads a result file under the download rule, within Discord's default upload limit."""

FILES_PER_MESSAGE = 10
"""Files of an approved synchronous image attached at most (Discord's limit per message)."""


def downloader(downloads: httpx.AsyncClient | None) -> Download:
    """How result files are fetched, as a synchronous image's own answer fetched them.

    With the process's pooled client (``Services.downloads``; None: a client of its own per
    file), under the download rule, within Discord's default upload limit.
    """

    async def fetch(url: str) -> bytes:
        if downloads is not None:
            return await download(downloads, url, DEFAULT_UPLOAD_LIMIT)
        async with output_client(None) as http:
            return await download(http, url, DEFAULT_UPLOAD_LIMIT)

    return fetch


class ReviewSettler:
    """Shows an approved result or tells the member of a rejection (the module's rules).

    Args:
        client: the logged-in client that posts (the gateway's bot or a worker's client).
        generation: finds the job or the request behind a result.
        locales: the servers' languages (the member's card and reply are public).
        download: how an approved synchronous image's files are fetched.
    """

    def __init__(
        self,
        client: discord.Client,
        generation: GenerationService,
        locales: GuildLocales,
        download: Download,
    ) -> None:
        self._client = client
        self._generation = generation
        self._locales = locales
        self._download = download

    async def settle(self, record: SafetyRecord) -> None:
        """Act on the member's side of ``record``, as decided (approved or rejected); never raises.

        Args:
            record: the result as :meth:`~bot.services.safety.SafetyService.approve` or
                :meth:`~bot.services.safety.SafetyService.reject` returned it.
        """
        try:
            with using(await self._locales.of(record.guild_id)):
                if record.ref.startswith("j"):
                    # Approved: the poller delivers it again within its next pass (at most 5 s),
                    # as an ordinary completion.
                    if record.state is Visibility.REJECTED:
                        job = await self._generation.job(int(record.ref[1:]))
                        if job is not None:
                            await self._tell_rejected(job)
                elif record.state is Visibility.APPROVED:
                    await self._show_approved_request(record)
                elif record.state is Visibility.REJECTED:
                    await self._reply_on_card(
                        record, rejected_line(record.user_id, record.kind), ()
                    )
        except Exception as exc:  # the decision stands; the member may miss its notice
            log.warning("result %s: the member's side of the decision failed (%r)", record.ref, exc)

    async def _tell_rejected(self, job: Job) -> None:
        """Edit the job's card into its rejected form and reply pinging the member."""
        if job.message_id is None:
            return
        channel = self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)
        message = channel.get_partial_message(job.message_id)
        try:
            await message.edit(**hidden_card(job, Visibility.REJECTED).edit_kwargs())
            await channel.send(
                rejected_line(job.user_id, job.kind),
                reference=message.to_reference(fail_if_not_exists=False),
                mention_author=False,
                allowed_mentions=ping_only(job.user_id),
            )
        except discord.HTTPException as exc:
            log.info("job %s: the member was not told of the rejection (%s)", job.id, exc)

    async def _reply_on_card(
        self, record: SafetyRecord, text: str, files: tuple[tuple[str, bytes], ...]
    ) -> None:
        """Reply to a synchronous result's card (or post in its channel), pinging the member."""
        channel_id, message_id = record.card or (record.channel_id, None)
        channel = self._client.get_partial_messageable(channel_id, guild_id=record.guild_id)
        reference = (
            None
            if message_id is None
            else channel.get_partial_message(message_id).to_reference(fail_if_not_exists=False)
        )
        try:
            await channel.send(
                text,
                files=[discord.File(io.BytesIO(data), name) for name, data in files],
                reference=reference,  # type: ignore[arg-type]
                mention_author=False,
                allowed_mentions=ping_only(record.user_id),
            )
        except discord.HTTPException as exc:
            log.info("result %s: the member was not told (%s)", record.ref, exc)

    async def _show_approved_request(self, record: SafetyRecord) -> None:
        """Post an approved synchronous image on its card's channel, with its files and a ping."""
        request = await self._generation.result_request(record.ref)
        urls = [] if request is None else [u for u in request.outputs if is_web_url(u)]
        files: list[tuple[str, bytes]] = []
        for index, url in enumerate(urls[:FILES_PER_MESSAGE]):
            try:
                files.append((f"{record.ref}-{index + 1}.png", await self._download(url)))
            except Exception as exc:
                log.info("approved result %s: file %d not attached (%s)", record.ref, index, exc)
        text = _("<@{user}> your image is ready.", user=record.user_id)
        if len(files) < len(urls):
            text += "\n" + "\n".join(urls)
        await self._reply_on_card(record, text, tuple(files))


def rejected_line(user_id: int, kind: str) -> str:
    """The reply telling the member their result was rejected (pings them; current locale)."""
    what = _("video") if kind == "video" else _("image")
    return _(
        "<@{user}> the server's moderators rejected your {what}; it stays withheld.",
        user=user_id,
        what=what,
    )
