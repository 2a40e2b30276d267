"""The Discord side of the poller: progress edits, and the delivery of each finished job.

Placeholders are ordinary channel messages the bot posted with its own token, never an
interaction's response: an interaction token dies 15 minutes after the command (then 401, code
50027), and a video can take longer.

A delivery attempt by one route (:class:`bot.storage.models.DeliveryRoute`) either shows the
result, fails for good on that route (unknown message 10008 or channel 10003, missing access
50001 or permissions 50013, archived thread 50083, DMs closed 50007, ...: the poller falls back
to the next route), or fails transiently (5xx, 429, network errors, time-outs: the poller
retries later). Classifying Discord's answers is this module's job; the schedule is the
poller's (docs/architecture.md, "Delivery").

A completed video or image is downloaded (streamed, at most the channel's upload limit held in
memory) and attached under the provider's file name, so the result outlives the provider's
URL, which stays as a link too. Too large, or not downloadable: the link alone, and why.

Results are Components V2 cards (``bot/render/jobs.py``) sent in their old form (content and
embeds) where Discord refuses the card (400, 50035); a card whose edit may not add the file
shows the service's link and the file goes with the completion reply (docs/architecture.md,
"The job card").
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from pathlib import PurePosixPath
from urllib.parse import urlsplit

import aiohttp
import discord
import httpx2 as httpx

from bot.clock import Clock
from bot.poller import SHOWN, Attempt
from bot.render import completion_reply, job_finished, job_placeholder, job_unwatched
from bot.render import limits as discord_limits
from bot.render.jobs import with_files
from bot.render.parts import MessageParts, ping_only
from bot.render.results import is_web_url
from bot.services.schedule import PollSchedule
from bot.storage.models import DeliveryRoute, Job, JobStatus

log = logging.getLogger(__name__)

DEFAULT_UPLOAD_LIMIT = 10 * 1024 * 1024
"""Bytes a bot may upload per message where the guild is unknown (Discord: 10 MiB)."""

UPLOAD_LIMIT_TTL = 3600.0
"""Seconds a guild's upload limit fetched by REST is kept (it changes with its boost tier)."""

DOWNLOAD_TIMEOUT = httpx.Timeout(10.0, read=30.0)
"""Connect and per-read time-outs of a result download, seconds."""

DOWNLOAD_DEADLINE = 120.0
"""Seconds a whole download may take: a trickling server must not hold a delivery forever."""

REQUEST_TOO_LARGE = 40005
"""Discord's JSON code for 413 "Request entity too large"."""

INVALID_FORM_BODY = 50035
"""Discord's JSON code for a payload it refuses (400): how it would refuse a Components V2
card, or an edit adding a new attachment to one; the message is then sent in another form."""

_EXTENSION = re.compile(r"\.[A-Za-z0-9]{1,5}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


class TooLarge(Exception):
    """The file is larger than the upload limit; ``size`` in bytes when known."""

    def __init__(self, size: int | None) -> None:
        super().__init__("larger than the upload limit")
        self.size = size


def file_name(task_id: str, url: str, index: int, kind: str) -> str:
    """The attachment name of output ``index`` (0-based) of ``task_id``.

    ``<task_id>.mp4`` or ``<task_id>.png``, the extension taken from the URL's path (else the
    kind's usual one); the second output on is ``<task_id>-2.png`` and so on.
    """
    suffix = PurePosixPath(urlsplit(url).path).suffix
    if not _EXTENSION.fullmatch(suffix):
        suffix = ".mp4" if kind == "video" else ".png"
    stem = _UNSAFE.sub("_", task_id) or "result"
    return f"{stem}{'' if index == 0 else f'-{index + 1}'}{suffix.lower()}"


def format_bytes(size: int) -> str:
    """Render a size for people, in MiB as Discord states its limits (``"10 MB"``)."""
    return f"{size / (1024 * 1024):.0f} MB" if size >= 1024 * 1024 else f"{size:,} bytes"


async def download(http: httpx.AsyncClient, url: str, limit: int) -> bytes:
    """Stream ``url`` into memory, refusing more than ``limit`` bytes.

    Raises:
        TooLarge: the declared or streamed size exceeds ``limit``.
        httpx.HTTPError: the download failed (status, network, time-out).
        TimeoutError: it took longer than :data:`DOWNLOAD_DEADLINE`.
    """
    async with asyncio.timeout(DOWNLOAD_DEADLINE):
        async with http.stream("GET", url, timeout=DOWNLOAD_TIMEOUT) as response:
            response.raise_for_status()
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise TooLarge(int(declared))
            data = bytearray()
            async for chunk in response.aiter_bytes():
                data += chunk
                if len(data) > limit:
                    raise TooLarge(None)
            return bytes(data)


def classify(exc: Exception) -> Attempt | None:
    """How a failed Discord request counts for delivery; None for an unexpected exception.

    5xx, 429 and network errors are transient; any other HTTP error (404 unknown message or
    channel, 403 missing access or permissions, 400 archived thread or DMs closed) means this
    route cannot work.
    """
    if isinstance(exc, discord.RateLimited):
        return Attempt(
            shown=False, error="rate limited by Discord", retry_after=exc.retry_after, code="429"
        )
    if isinstance(exc, discord.HTTPException):
        error = f"{exc.status} {exc.code} {exc.text}"[:200]
        code = str(exc.code) if exc.code else ("429" if exc.status == 429 else f"http_{exc.status}")
        if exc.status >= 500 or exc.status in (401, 408, 429):
            return Attempt(shown=False, error=error, code=code)
        return Attempt(shown=False, permanent=True, error=error, code=code)
    if isinstance(exc, aiohttp.ClientError | OSError | TimeoutError):
        return Attempt(shown=False, error=f"network: {type(exc).__name__}", code="network")
    return None


def _too_large(exc: discord.HTTPException) -> bool:
    return exc.status == 413 or exc.code == REQUEST_TOO_LARGE


def _refused_form(exc: discord.HTTPException) -> bool:
    return exc.status == 400 and exc.code == INVALID_FORM_BODY


async def send_card(channel: discord.abc.Messageable, parts: MessageParts) -> discord.Message:
    """Post ``parts`` as a Components V2 card, in the old form when Discord refuses the card.

    Raises:
        discord.HTTPException: Discord refused the message in both forms.
    """
    try:
        return await channel.send(**parts.kwargs())
    except discord.HTTPException as exc:
        if parts.card is None or not _refused_form(exc):
            raise
        log.warning("Discord refused a card (%s); sent in the old form", exc.code)
        return await channel.send(**parts.legacy().kwargs())


class DiscordAnnouncer:
    """Implements :class:`bot.poller.JobAnnouncer` with the bot's own REST calls.

    Args:
        client: the logged-in bot.
        clock: wall time, for the elapsed time shown.
        sandbox: mark every result as made by the sandbox emulator.
        http: the client results are downloaded with; one is made per download if None.
        schedule: estimates when a pending job will be ready (shown on its card); None shows
            no estimate.
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        clock: Clock,
        sandbox: bool,
        http: httpx.AsyncClient | None = None,
        schedule: PollSchedule | None = None,
    ) -> None:
        self._client = client
        self._schedule = schedule
        self._clock = clock
        self._sandbox = sandbox
        self._http = http
        # Attachments a Components V2 card could not take by an edit, for the completion reply
        # (job id -> files); popped by notify, so at most the jobs being delivered.
        self._reply_files: dict[int, tuple[tuple[str, bytes], ...]] = {}
        self._upload_limits: dict[int, tuple[int, float]] = {}

    def _channel(self, job: Job) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)

    def _message(self, job: Job) -> discord.PartialMessage | None:
        if job.message_id is None:
            return None
        return self._channel(job).get_partial_message(job.message_id)

    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder's elapsed time and its ``ready`` estimate."""
        ready_at = None
        if self._schedule is not None:
            ready_at = await self._schedule.estimated_finish(job, now=now)
        parts = job_placeholder(job, now=now, sandbox=self._sandbox, ready_at=ready_at)
        await self._edit_quietly(job, parts)

    async def stopped_watching(self, job: Job, now: float) -> None:
        """Say on the placeholder that the job is still processing and no longer checked."""
        await self._edit_quietly(job, job_unwatched(job, now=now, sandbox=self._sandbox))

    async def _edit_quietly(self, job: Job, parts: MessageParts) -> None:
        message = self._message(job)
        if message is None:
            return
        try:
            try:
                await message.edit(**parts.edit_kwargs())
            except discord.HTTPException as exc:
                if parts.card is None or not _refused_form(exc):
                    raise
                await message.edit(**parts.legacy().edit_kwargs())
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("placeholder edit of job %s skipped: %s", job.id, exc)

    async def upload_limit(self, guild_id: int) -> int:
        """Bytes the bot may attach to a message in ``guild_id`` (``Guild.filesize_limit``).

        From the gateway's guild cache; a process without a gateway connection (``python -m
        bot worker``) fetches the guild by REST (``GET /guilds/{id}``, which carries its boost
        tier) and keeps the limit for :data:`UPLOAD_LIMIT_TTL` seconds. If that fails:
        Discord's default for any guild, 10 MiB.
        """
        guild = self._client.get_guild(guild_id)
        if guild is not None:
            return guild.filesize_limit
        now = self._clock.time()
        cached = self._upload_limits.get(guild_id)
        if cached is not None and cached[1] > now:
            return cached[0]
        try:
            limit = (await self._client.fetch_guild(guild_id)).filesize_limit
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("upload limit of guild %s unknown (%s); using 10 MiB", guild_id, exc)
            return DEFAULT_UPLOAD_LIMIT
        self._upload_limits[guild_id] = (limit, now + UPLOAD_LIMIT_TTL)
        return limit

    async def attachments(
        self, job: Job, limit: int
    ) -> tuple[tuple[tuple[str, bytes], ...], str | None]:
        """Download a completed job's outputs to attach; return them and a note for people.

        Outputs are attached in order while their total stays within ``limit`` bytes (at most
        10, Discord's limit per message). The note says what is attached, or why not.
        """
        urls = [url for url in job.outputs if is_web_url(url)][: discord_limits.FILES_PER_MESSAGE]
        if job.status is not JobStatus.COMPLETED or not urls:
            return (), None
        noun = "video" if job.kind == "video" else "image"
        files: list[tuple[str, bytes]] = []
        why: str | None = None
        for index, url in enumerate(urls):
            try:
                data = await self._download(url, limit - sum(len(d) for _, d in files))
            except TooLarge:
                why = f"larger than this server's upload limit ({format_bytes(limit)})"
                break
            except (httpx.HTTPError, TimeoutError) as exc:
                log.info("download of job %s output failed: %s", job.id, type(exc).__name__)
                why = "the download from the service failed"
                break
            files.append((file_name(job.task_id, url, index, job.kind), data))
        if why is not None:
            note = f"The {noun} is not attached ({why}); the link may stop working."
        else:
            note = f"Attached as `{files[0][0]}`; the service's link may stop working."
        return tuple(files), note

    async def _download(self, url: str, limit: int) -> bytes:
        if self._http is not None:
            return await download(self._http, url, limit)
        async with httpx.AsyncClient(follow_redirects=True) as http:
            return await download(http, url, limit)

    async def deliver(self, job: Job, route: DeliveryRoute) -> Attempt:
        """Show the result by ``route``; a 413 (40005) is retried with the link only."""
        self._reply_files.pop(job.id, None)  # a file left from an earlier, unrecorded attempt
        files, note = await self.attachments(job, await self.upload_limit(job.guild_id))
        try:
            try:
                return await self._send(job, route, files, note)
            except discord.HTTPException as exc:
                if not files or not _too_large(exc):
                    raise
            note = "The file is not attached (Discord refused it as too large); "
            note += "the link may stop working."
            return await self._send(job, route, (), note)
        except Exception as exc:
            outcome = classify(exc)
            if outcome is None:
                raise
            return outcome

    async def _send(
        self,
        job: Job,
        route: DeliveryRoute,
        files: tuple[tuple[str, bytes], ...],
        note: str | None,
    ) -> Attempt:
        finished = job_finished(job, sandbox=self._sandbox, ref=f"j{job.id}")
        names = [name for name, _ in files]
        parts = dataclasses.replace(with_files(finished, names, note), files=files)
        if route is DeliveryRoute.PLACEHOLDER:
            message = self._message(job)
            if message is None:
                return Attempt(
                    shown=False,
                    permanent=True,
                    error="no placeholder was posted",
                    code="no_placeholder",
                )
            await self._edit_card(job, message, parts, finished)
        elif route is DeliveryRoute.CHANNEL:
            # A new message carries its own ping: there is no placeholder to reply to.
            await send_card(self._channel(job), self._with_notice(parts, job, ""))
        elif route is DeliveryRoute.DM:
            dm = await self._client.create_dm(discord.Object(job.user_id))
            where = f" (requested in <#{job.channel_id}>, where it could not be shown)"
            await send_card(dm, self._with_notice(parts, job, where))
        else:
            raise ValueError(f"{route} is not a Discord route")
        return SHOWN

    async def _edit_card(
        self,
        job: Job,
        message: discord.PartialMessage,
        parts: MessageParts,
        finished: MessageParts,
    ) -> None:
        """Edit the placeholder into the result: the card with its files, else without them.

        Discord may refuse an edit that adds a new attachment to a Components V2 message; the
        card then points at the service's URLs and the files go in the completion reply. A
        placeholder refused a card at all (an old message, a payload Discord rejects) gets the
        old form with the files.
        """
        if parts.card is not None:
            try:
                await message.edit(**parts.edit_kwargs())
                return
            except discord.HTTPException as exc:
                if not _refused_form(exc):
                    raise
            if parts.files:
                later = "Attached to the reply below; the service's link may stop working."
                textual = with_files(finished, (), later, show_attached=False)
                try:
                    await message.edit(**textual.edit_kwargs())
                    self._reply_files[job.id] = parts.files
                    return
                except discord.HTTPException as exc:
                    if not _refused_form(exc):
                        raise
        await message.edit(**parts.legacy().edit_kwargs())

    @staticmethod
    def _with_notice(parts: MessageParts, job: Job, where: str) -> MessageParts:
        notice = completion_reply(job).content or ""
        notice = notice.removesuffix(".") + where + "."
        content = notice if not parts.content else f"{notice}\n{parts.content}"
        if len(content) > discord_limits.CONTENT:
            content = notice  # the link buttons and the attachment still carry the result
        card = parts.card
        if card is not None:
            card = dataclasses.replace(card, texts=(notice, *card.texts))
        return dataclasses.replace(
            parts, content=content, card=card, allowed_mentions=ping_only(job.user_id)
        )

    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        """Reply to the edited placeholder, pinging only the requester (an edit pings nobody).

        Other routes carried their own notice, and ``/jobs`` needs none.
        """
        message = self._message(job)
        if route is not DeliveryRoute.PLACEHOLDER or message is None:
            return
        parts = completion_reply(job)
        files = self._reply_files.pop(job.id, ())
        if files:
            parts = dataclasses.replace(parts, files=files)
        try:
            await message.reply(**parts.kwargs(), mention_author=False)
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("could not notify the requester of job %s: %s", job.id, exc)
