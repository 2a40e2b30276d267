"""The Discord side of the poller: progress edits, and the delivery of each finished job.

Placeholders are ordinary channel messages the bot posted with its own token, never an
interaction's response: an interaction token dies 15 minutes after the command (then 401, code
50027), and a video can take longer.

A delivery attempt by one route (:class:`bot.domain.DeliveryRoute`) either shows the
result, fails for good on that route (unknown message 10008 or channel 10003, missing access
50001 or permissions 50013, archived thread 50083, DMs closed 50007, ...: the poller falls back
to the next route), or fails transiently (5xx, 429, network errors, time-outs: the poller
retries later). Classifying Discord's answers is this module's job; the schedule is the
poller's (docs/architecture.md, "Delivery").

A completed video or image is downloaded (streamed, at most the channel's upload limit held in
memory, and at most :data:`bot.jobs.byte_budget.DELIVERY_MEMORY_BYTES` across the deliveries of the
process) and attached under the provider's file name, so the result outlives the provider's
URL, which stays as a link too. Too large, not downloadable, or refused by the download rule
(``bot.genapi.outputs``: no private addresses, no redirect to another site): the link alone,
and why.

Every message the delivery posts (a new channel message, a DM, the reply to the placeholder)
carries a nonce derived from the job and the route, with ``enforce_nonce`` (Discord, Create
Message: the same author's message with that nonce from the past few minutes is returned
instead of a new one), so a send retried after an answer that was lost is not posted twice.

A personal job (billed to a member's wallet, asked where the bot may not be a member)
has no channel message: its card is the interaction's original response, edited through the
interaction webhook while its token lives (``bot.services.response_tokens``), never with the bot's
token on the channel, and never after the token expired or Discord refused it (401, 50027). Its only
route is that card. When the token is gone, the result is announced where the bot can still
write: the member's DM with the bot (route ``dm``), for a job asked there and, for one asked
elsewhere, when the member turned DM notices on (``/settings notify dm``). The DM names the
result and how to see it (its Show result button, ``/jobs show``); its link too. Where neither
applies (or the DM is refused), the result waits for the card's Show result button and
``/jobs show`` (route ``jobs``), without a request.

A private server job (private results: :mod:`bot.services.private_cards`) has its card
in the requester's DM, edited and replied to there with the bot's token like a channel card,
or, where the member's DMs are closed, in the command's ephemeral response, edited like a
personal card while its token lives (its followups ephemeral too); once that token is gone its
result falls back to the channel, saying why.

A server that removed the bot (``GUILD_DELETE``, or 403 Missing Access to ``GET /guilds/{id}``)
is skipped: its routes fail at once, without a request, and the result goes by DM.

Results are Components V2 cards (``bot/discord/render/jobs.py``) sent in their old form (content and
embeds) where Discord refuses the card (400, 50035); a card whose edit may not add the file
shows the service's link and the file goes with the completion reply (docs/architecture.md,
"The job card").
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import io
import logging
import os
import re
from collections.abc import Awaitable, Callable, Coroutine
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar, cast
from urllib.parse import urlsplit

import aiohttp
import discord
import httpx2 as httpx

from bot.clock import Clock
from bot.discord.dm_notice import CANNOT_DM, MemberSettingsReader, late_result_text
from bot.discord.locales import GuildLocales
from bot.discord.render import completion_reply, job_finished, job_placeholder, job_unwatched
from bot.discord.render import limits as discord_limits
from bot.discord.render.buttons import dm_buttons, show_buttons
from bot.discord.render.jobs import with_files
from bot.discord.render.parts import MessageParts, ping_only
from bot.discord.render.results import is_web_url
from bot.discord.render.takes import takes_card, takes_ready
from bot.discord.safety_gate import SafetyGate
from bot.discord.shown_files import SHOW_MEMORY_BYTES, ShownFiles
from bot.domain import DeliveryRoute, Job, JobStatus
from bot.genapi.outputs import DownloadRefused, output_client
from bot.i18n import N_, _, using
from bot.jobs.announcer import SHOWN, Attempt, Renew
from bot.jobs.byte_budget import DELIVERY_MEMORY_BYTES, ByteBudget
from bot.services.personal import is_personal
from bot.services.private_cards import CardPlace, PrivateCard, PrivateCards
from bot.services.response_tokens import WEBHOOK_TOKEN_DEAD, ResponseTokens
from bot.services.schedule import PollSchedule
from bot.services.sequences import SequenceService
from bot.services.thumbnails import ThumbnailService

log = logging.getLogger(__name__)

DEFAULT_UPLOAD_LIMIT = 10 * 1024 * 1024
"""Bytes a bot may upload per message where the guild is unknown (Discord: 10 MiB)."""

DM_UPLOAD_LIMIT = DEFAULT_UPLOAD_LIMIT
"""Bytes a bot may upload per direct message (Discord: 10 MiB, whatever the server's boosts)."""

UPLOAD_LIMIT_TTL = 3600.0
"""Seconds a guild's upload limit fetched by REST is kept (it changes with its boost tier)."""

UPLOAD_LIMIT_RETRY = 300.0
"""Seconds a failed upload-limit lookup is remembered (10 MiB assumed meanwhile), so that a
failing ``GET /guilds/{id}`` is not repeated by every route and every job (Discord bans
clients making too many invalid requests)."""

UNREACHABLE_TTL = 3600.0
"""Seconds a server that answered 403 Missing Access (or 404 Unknown Guild) to
``GET /guilds/{id}``, or a channel that answered 403 Missing Access or 404 Unknown Channel, is
skipped by deliveries. ``GUILD_DELETE`` marks a server until the bot joins it again."""

MISSING_ACCESS = 50001
"""Discord's JSON code for 403 "Missing Access": the bot cannot see the server or channel."""

UNKNOWN_CHANNEL = 10003
UNKNOWN_GUILD = 10004

NONCE_ROUTES = {
    DeliveryRoute.PLACEHOLDER: "r",  # the reply to the edited placeholder
    DeliveryRoute.CHANNEL: "c",
    DeliveryRoute.DM: "d",
}

DOWNLOAD_TIMEOUT = httpx.Timeout(10.0, read=30.0)
"""Connect and per-read time-outs of a result download, seconds."""

DOWNLOAD_DEADLINE = 120.0
"""Seconds a whole download may take: a trickling server must not hold a delivery forever."""

REQUEST_TOO_LARGE = 40005
"""Discord's JSON code for 413 "Request entity too large"."""

INVALID_FORM_BODY = 50035
"""Discord's JSON code for a payload it refuses (400): how it would refuse a Components V2
card, or an edit adding a new attachment to one; the message is then sent in another form."""

BOT_LEFT = "the bot is no longer in this server"
"""Why a server's routes are skipped after ``GUILD_DELETE`` or a 403 Missing Access on it."""

PRIVATE_FALLBACK = N_(" (posted here: it could not be shown to you privately)")
"""What a private job's result says where it falls back to the channel."""

HERE = N_("the upload limit here")
"""How the note names an interaction response's upload limit (``Interaction.filesize_limit``)."""

TOO_LARGE_NOTE = N_(
    "The file is not attached (Discord refused it as too large); the link may stop working."
)
"""The note of a result whose file Discord refused (its size above the channel's limit)."""

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


def delivery_nonce(job: Job, route: DeliveryRoute) -> str:
    """The nonce of the message ``route`` posts for ``job``: ``gb<job id><r|c|d>``.

    At most 23 characters (Discord allows 25): ``gb``, a job id of at most 19 digits (a
    64-bit integer) and the route's letter (``r`` the reply to the placeholder, ``c`` a
    channel message, ``d`` a DM). The same for every attempt, so that Discord returns the
    message a lost answer left posted (Create Message, ``enforce_nonce``).
    """
    return f"gb{job.id}{NONCE_ROUTES[route]}"


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
            data = io.BytesIO()
            async for chunk in response.aiter_bytes():
                data.write(chunk)
                if data.tell() > limit:
                    raise TooLarge(None)
            # getvalue() hands BytesIO's own buffer over (CPython shares it): the file is held
            # once, not twice as a bytearray copied into bytes was (peak 1.1x its size, not 2x).
            return data.getvalue()


async def download_to(http: httpx.AsyncClient, url: str, path: Path, limit: int) -> int:
    """Stream ``url`` into the file ``path``, refusing more than ``limit`` bytes.

    For work on a whole clip (its last frame, a join): the file is written chunk by chunk, so
    memory stays flat whatever its size.

    Returns:
        The bytes written.

    Raises:
        TooLarge: the declared or streamed size exceeds ``limit`` (``path`` is removed).
        httpx.HTTPError: the download failed (status, network, time-out).
        TimeoutError: it took longer than :data:`DOWNLOAD_DEADLINE`.
    """
    written = 0
    try:
        async with asyncio.timeout(DOWNLOAD_DEADLINE):
            async with http.stream("GET", url, timeout=DOWNLOAD_TIMEOUT) as response:
                response.raise_for_status()
                declared = response.headers.get("content-length", "")
                if declared.isdigit() and int(declared) > limit:
                    raise TooLarge(int(declared))
                with path.open("wb") as out:
                    async for chunk in response.aiter_bytes():
                        written += len(chunk)
                        if written > limit:
                            raise TooLarge(None)
                        out.write(chunk)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)  # a partial file is never used
        raise
    return written


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


async def send_card(
    channel: discord.abc.Messageable, parts: MessageParts, *, nonce: str | None = None
) -> discord.Message:
    """Post ``parts`` as a Components V2 card, in the old form when Discord refuses the card.

    Args:
        channel: where to post.
        parts: the message.
        nonce: sent with ``enforce_nonce`` (discord.py sets it with any nonce), so that Discord
            returns the message already posted with it in the past few minutes instead of
            posting another; None: a random one (no protection across attempts).

    Raises:
        discord.HTTPException: Discord refused the message in both forms.
    """
    extra: dict[str, Any] = {} if nonce is None else {"nonce": nonce}
    try:
        return await channel.send(**parts.kwargs() | extra)
    except discord.HTTPException as exc:
        if parts.card is None or not _refused_form(exc):
            raise
        log.warning("Discord refused a card (%s); sent in the old form", exc.code)
        # The refused card was not posted: the same nonce cannot match it.
        return await channel.send(**parts.legacy().kwargs() | extra)


_Method = TypeVar("_Method", bound=Callable[..., Coroutine[Any, Any, Any]])


def _in_guild_locale(method: _Method) -> _Method:
    """Run an announcer's method in the language of the job's server (its public card's).

    The poller calls without an interaction: the locale is the server's
    (:class:`bot.discord.locales.GuildLocales`), set around the call and restored after it.
    The method's first argument after ``self`` is the job.
    """

    @functools.wraps(method)
    async def in_locale(self: DiscordAnnouncer, job: Job, *args: Any, **kwargs: Any) -> Any:
        locale = None if self._locales is None else await self._locales.of(job.guild_id)
        with using(locale):
            return await method(self, job, *args, **kwargs)

    return cast(_Method, in_locale)


class DiscordAnnouncer:
    """Implements :class:`bot.jobs.poller.JobAnnouncer` with the bot's own REST calls.

    Args:
        client: the logged-in bot.
        clock: wall time, for the elapsed time shown.
        sandbox: mark every result as made by the sandbox emulator.
        http: the one pooled client results are downloaded with (``output_client``, built by
            ``bot.wiring``); if None, one under the same rule is made per download, trusting
            no origin (every output must be https on a public address).
        schedule: estimates when a pending job will be ready (shown on its card); None shows
            no estimate.
        memory: bytes of results the deliveries may hold at once (the process's
            :class:`~bot.jobs.byte_budget.ByteBudget`); default
            :data:`~bot.jobs.byte_budget.DELIVERY_MEMORY_BYTES`.
        tokens: the interaction tokens of personal jobs, whose cards are interaction
            responses; None: such cards are never edited (Show result shows them).
        cards: where private server jobs' cards are (the requester's DM, or an ephemeral
            response: :mod:`bot.services.private_cards`); None: every server job's card is in its
            channel.
        members: members' settings (who turned DM notices on), for the DM of a personal result
            whose card's token died; None: only jobs asked in the bot's DM get one.
        takes: finds a job's sibling takes (every take of its request, as stored now; empty
            for a job asked alone): the takes of a request share one channel card
            (:mod:`bot.discord.render.takes`); None: every job has its own.
        final: claims a request's final delivery of its takes in the database
            (:meth:`~bot.services.sequences.SequenceService.claim_final_delivery`), so two
            workers finishing its last takes together make one; None: this process's lock only.
        locales: the language of each server's public messages; None: English.
        safety: scores results before they are shown and applies the server's policy
            (:mod:`bot.discord.safety_gate`); None: every result is shown unchecked.
        thumbnails: keeps a thumbnail of each result file downloaded for a delivery, for the
            dashboard (:mod:`bot.services.thumbnails`); None: none kept.
    """

    def __init__(
        self,
        client: discord.Client,
        *,
        clock: Clock,
        sandbox: bool,
        http: httpx.AsyncClient | None = None,
        schedule: PollSchedule | None = None,
        memory: int = DELIVERY_MEMORY_BYTES,
        tokens: ResponseTokens | None = None,
        cards: PrivateCards | None = None,
        members: MemberSettingsReader | None = None,
        takes: Callable[[Job], Awaitable[tuple[Job, ...]]] | None = None,
        locales: GuildLocales | None = None,
        final: SequenceService | None = None,
        safety: SafetyGate | None = None,
        thumbnails: ThumbnailService | None = None,
    ) -> None:
        self._client = client
        self.safety = safety
        self._thumbnails = thumbnails
        self._final = final
        self._locales = locales
        self._members = members
        self._takes = takes
        # One edit of a takes card at a time per request, each rendered from the latest
        # state, so a slower edit never puts back an older state of the takes.
        self._take_locks: dict[int, asyncio.Lock] = {}
        self._tokens = tokens
        self._cards = cards
        self._schedule = schedule
        self._clock = clock
        self._sandbox = sandbox
        self._http = http
        self.memory = ByteBudget(memory, clock)
        self.show_memory = ByteBudget(SHOW_MEMORY_BYTES, clock)
        self.shown_files = ShownFiles(clock)
        # Jobs whose reply to the placeholder went with the delivery (it carried the files a
        # card could not take by an edit), so notify does not ping a second time; discarded
        # by notify, or by the job's next attempt.
        self._replied: set[int] = set()
        self._upload_limits: dict[int, tuple[int, float]] = {}
        self._lookups: dict[int, asyncio.Future[int]] = {}
        # Servers that removed the bot and channels it cannot see: id -> until (clock time).
        self._gone_guilds: dict[int, float] = {}
        self._gone_channels: dict[int, float] = {}

    def _channel(self, job: Job) -> discord.PartialMessageable:
        return self._client.get_partial_messageable(job.channel_id, guild_id=job.guild_id)

    def _message(self, job: Job) -> discord.PartialMessage | None:
        if job.message_id is None:
            return None
        return self._channel(job).get_partial_message(job.message_id)

    @_in_guild_locale
    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder's elapsed time and its ``ready`` estimate.

        A job without a card message (its post failed) has nothing to refresh on any route
        (channel, DM or response): the estimate and the rendering are skipped (they
        were 4 % of the poller's CPU at 10,000 pending jobs, docs/benchmarks.md). A channel
        the bot cannot reach is decided by ``_edit_quietly``: a private card in the DM is
        still edited there.
        """
        if job.message_id is None:
            return
        group = await self._siblings(job)
        if group:
            async with self._take_lock(group):
                group = await self._siblings(job)
                await self._edit_quietly(job, takes_card(group, sandbox=self._sandbox))
            return
        ready_at = None
        if self._schedule is not None:
            ready_at = await self._schedule.estimated_finish(job, now=now)
        parts = job_placeholder(job, now=now, sandbox=self._sandbox, ready_at=ready_at)
        await self._edit_quietly(job, parts)

    async def _siblings(self, job: Job) -> tuple[Job, ...]:
        """The takes sharing ``job``'s channel card (itself included); empty for none.

        Only a server job's public channel card is shared: a personal or private take has
        its own card.
        """
        if self._takes is None or is_personal(job.guild_id) or not job.details.get("take"):
            return ()  # a job asked alone (no "take" in its details) costs no lookup
        try:
            if await self._private(job) is not None:
                return ()
            group = await self._takes(job)
        except Exception as exc:
            log.info("the takes of job %s were not read (%s)", job.id, type(exc).__name__)
            return ()
        # A take not attached yet (its card being posted) is on its way to the same card.
        shared = all(t.message_id in (None, job.message_id) for t in group)
        return group if len(group) > 1 and shared else ()

    def _take_lock(self, group: tuple[Job, ...]) -> asyncio.Lock:
        lock = self._take_locks.get(group[0].id)
        if lock is None:
            if len(self._take_locks) > 1024:  # idle locks of finished takes
                for key, old in list(self._take_locks.items()):
                    if not old.locked():
                        del self._take_locks[key]
            lock = self._take_locks[group[0].id] = asyncio.Lock()
        return lock

    async def _response(self, job: Job) -> tuple[_ResponseMessage, int] | None:
        """The personal job's card as an editable response and its upload limit, bytes.

        None when there is no live token (expired, refused, never kept) or no card: nothing
        may then be sent about it.
        """
        if self._tokens is None or job.message_id is None:
            return None
        token = await self._tokens.get(job.id)
        app_id = self._client.application_id
        if token is None or app_id is None:
            return None
        # The interaction's own webhook (type 3, "application"), as discord.py's
        # ``Interaction.followup``: only that kind may send ephemeral followups.
        webhook = discord.Webhook.from_state(
            data={"id": app_id, "type": 3, "token": token.token},
            state=self._client._connection,
        )
        message = _ResponseMessage(webhook, job.message_id, private=token.private)
        return message, token.filesize_limit

    async def _private(self, job: Job) -> PrivateCard | None:
        """Where a private server job's card is; None for a channel card (or a personal job).

        Raises:
            Exception: the database could not be read.
        """
        if self._cards is None or is_personal(job.guild_id):
            return None
        return await self._cards.get(job.id)

    def _in_dm(self, job: Job, card: PrivateCard) -> discord.PartialMessage | None:
        """The job's card in the member's DM; None when it was never recorded (a crash)."""
        if card.channel_id is None or job.message_id is None:
            return None
        channel = self._client.get_partial_messageable(card.channel_id)
        return channel.get_partial_message(job.message_id)

    async def _token_refused(self, job: Job, exc: BaseException) -> bool:
        """Forget the job's token if Discord says it is dead (401 50027, 10015); say so."""
        if not isinstance(exc, discord.HTTPException):
            return False
        if exc.status != 401 and exc.code not in WEBHOOK_TOKEN_DEAD:
            return False
        if self._tokens is not None:
            await self._tokens.forget(job.id)
        log.info("job %s: its interaction token is no longer valid; not used again", job.id)
        return True

    @_in_guild_locale
    async def stopped_watching(self, job: Job, now: float) -> None:
        """Say on the placeholder that the job is still processing and no longer checked."""
        await self._edit_quietly(job, job_unwatched(job, now=now, sandbox=self._sandbox))

    async def _edit_quietly(self, job: Job, parts: MessageParts) -> None:
        message: discord.PartialMessage | _ResponseMessage | None
        try:
            card = await self._private(job)
        except Exception as exc:
            log.info("placeholder edit of job %s skipped: %s", job.id, type(exc).__name__)
            return
        response = is_personal(job.guild_id) or (
            card is not None and card.place is CardPlace.RESPONSE
        )
        if response:
            # Its card is the interaction's response: edited with the interaction's token
            # while it lives, never with the bot's token on the channel.
            if is_personal(job.guild_id):
                parts = dataclasses.replace(parts, action_buttons=show_buttons(job.id))
            found = await self._response(job)
            message = None if found is None else found[0]
        elif card is not None:
            message = self._in_dm(job, card)  # the requester's DM, whatever the server does
        elif self._unreachable(job) is not None:
            return
        else:
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
            if response:
                await self._token_refused(job, exc)
            elif card is None:
                self._note_failure(job, exc)
            log.info("placeholder edit of job %s skipped: %s", job.id, exc)

    # -- servers the bot cannot reach -----------------------------------------------------

    def guild_removed(self, guild_id: int) -> None:
        """The bot was removed from ``guild_id`` (``GUILD_DELETE`` without ``unavailable``).

        Its routes are skipped until :meth:`guild_joined`: every request there would answer
        403 Missing Access (50001), and Discord bans clients that make too many invalid
        requests (10,000 401/403/429 per 10 minutes).
        """
        self._gone_guilds[guild_id] = float("inf")
        self._upload_limits.pop(guild_id, None)

    def guild_joined(self, guild_id: int) -> None:
        """The bot is (again) in ``guild_id`` (``GUILD_CREATE``): its routes are tried again."""
        self._gone_guilds.pop(guild_id, None)
        self._upload_limits.pop(guild_id, None)

    def _unreachable(self, job: Job) -> str | None:
        """Why the job's server or channel cannot be reached now; None if it may be."""
        now = self._clock.time()
        for gone, key, why in (
            (self._gone_guilds, job.guild_id, BOT_LEFT),
            (self._gone_channels, job.channel_id, "the bot cannot see this channel"),
        ):
            until = gone.get(key)
            if until is not None:
                if until > now:
                    return why
                del gone[key]
        return None

    def _note_failure(self, job: Job, exc: BaseException) -> None:
        """Remember a channel that answered Missing Access or Unknown Channel.

        The channel route would post there and fail the same way.
        """
        if isinstance(exc, discord.HTTPException) and exc.code in (
            MISSING_ACCESS,
            UNKNOWN_CHANNEL,
        ):
            self._gone_channels[job.channel_id] = self._clock.time() + UNREACHABLE_TTL

    async def upload_limit(self, guild_id: int) -> int:
        """Bytes the bot may attach to a message in ``guild_id`` (``Guild.filesize_limit``).

        From the gateway's guild cache; a process without a gateway connection (``python -m
        bot worker``) fetches the guild by REST (``GET /guilds/{id}``, which carries its boost
        tier) and keeps the limit for :data:`UPLOAD_LIMIT_TTL` seconds. If that fails:
        Discord's default for any guild, 10 MiB, kept :data:`UPLOAD_LIMIT_RETRY` seconds;
        a 403 Missing Access (or 404 Unknown Guild) also marks the server as gone (the bot
        was removed) for :data:`UNREACHABLE_TTL` seconds.
        """
        guild = self._client.get_guild(guild_id)
        if guild is not None:
            return guild.filesize_limit
        cached = self._upload_limits.get(guild_id)
        if cached is not None and cached[1] > self._clock.time():
            return cached[0]
        # Deliveries to one server at the same moment share one lookup.
        lookup = self._lookups.get(guild_id)
        if lookup is None:
            lookup = asyncio.ensure_future(self._fetch_upload_limit(guild_id))
            self._lookups[guild_id] = lookup
            lookup.add_done_callback(lambda _: self._lookups.pop(guild_id, None))
        return await asyncio.shield(lookup)

    async def _fetch_upload_limit(self, guild_id: int) -> int:
        now = self._clock.time()
        try:
            limit = (await self._client.fetch_guild(guild_id)).filesize_limit
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("upload limit of guild %s unknown (%s); using 10 MiB", guild_id, exc)
            self._upload_limits[guild_id] = (DEFAULT_UPLOAD_LIMIT, now + UPLOAD_LIMIT_RETRY)
            if isinstance(exc, discord.HTTPException) and exc.code in (
                MISSING_ACCESS,
                UNKNOWN_GUILD,
            ):
                log.info("guild %s: the bot is no longer there; results go by DM", guild_id)
                self._gone_guilds[guild_id] = now + UNREACHABLE_TTL
            return DEFAULT_UPLOAD_LIMIT
        self._upload_limits[guild_id] = (limit, now + UPLOAD_LIMIT_TTL)
        return limit

    # -- results --------------------------------------------------------------------------

    async def attachments(
        self,
        job: Job,
        limit: int,
        renew: Renew | None = None,
        *,
        limit_name: str = N_("this server's upload limit"),
    ) -> tuple[tuple[tuple[str, bytes], ...], str | None]:
        """Download a completed job's outputs to attach; return them and a note for people.

        Outputs are attached in order while their total stays within ``limit`` bytes (at most
        10, Discord's limit per message). The note says what is attached, or why not.
        ``renew`` (the delivery's lease) is awaited before each download after the first, so
        that ten slow downloads do not outlast the lease. ``limit_name`` names the limit in
        the note (an interaction's response: "the upload limit here").
        """
        urls = [url for url in job.outputs if is_web_url(url)][: discord_limits.FILES_PER_MESSAGE]
        if job.status is not JobStatus.COMPLETED or not urls:
            return (), None
        video = job.kind == "video"
        files: list[tuple[str, bytes]] = []
        why: str | None = None
        for index, url in enumerate(urls):
            if index and renew is not None:
                await renew()
            try:
                data = await self._download(url, limit - sum(len(d) for _, d in files))
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
        if why is not None and video:
            note = _("The video is not attached ({why}); the link may stop working.", why=why)
        elif why is not None:
            note = _("The image is not attached ({why}); the link may stop working.", why=why)
        else:
            name = f"`{files[0][0]}`"
            note = _("Attached as {name}; the service's link may stop working.", name=name)
        if self.safety is not None:  # scored before anyone sees it (docs/safety.md)
            return await self.safety.screen(job, tuple(files), note)
        return tuple(files), note

    async def download_file(self, url: str, path: Path, limit: int) -> int:
        """Stream an output into ``path`` under the download rule (:func:`download_to`)."""
        if self._http is not None:
            return await download_to(self._http, url, path, limit)
        async with output_client(None) as http:
            return await download_to(http, url, path, limit)

    async def _download(self, url: str, limit: int) -> bytes:
        if self._http is not None:
            return await download(self._http, url, limit)
        async with output_client(None) as http:
            return await download(http, url, limit)

    @_in_guild_locale
    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        """Show the result by ``route``; a 413 (40005) is retried with the link only.

        A server that removed the bot, or a channel it cannot see, fails its routes at once
        (permanently, without a request). The files are held within the process's
        :class:`~bot.jobs.byte_budget.ByteBudget` from their download until the message is sent;
        ``renew`` (the delivery's lease) is awaited while waiting for room and between
        downloads.
        """
        self._replied.discard(job.id)  # from an earlier attempt that was not recorded
        if is_personal(job.guild_id):
            return await self._deliver_personal(job, route, renew)
        card = await self._private(job)
        placeholder = self._message(job)
        shared = route is DeliveryRoute.PLACEHOLDER and card is None and placeholder is not None
        if shared and (group := await self._siblings(job)) and self._unreachable(job) is None:
            assert placeholder is not None
            return await self._deliver_take(job, group, placeholder, renew)
        if card is not None and route is DeliveryRoute.PLACEHOLDER:
            if card.place is CardPlace.RESPONSE:
                return await self._deliver_response(job, renew)
            placeholder = self._in_dm(job, card)
        if card is not None and card.place is CardPlace.DM and route is DeliveryRoute.CHANNEL:
            # The member's DM took its card: a private result whose card cannot be edited goes
            # there as a new message (the DM route), not where everyone sees it.
            return Attempt(
                shown=False,
                permanent=True,
                error="a private result goes to the member's DM, not the channel",
                code="private",
            )
        if route is DeliveryRoute.DM or (card is not None and route is DeliveryRoute.PLACEHOLDER):
            limit = DM_UPLOAD_LIMIT  # a DM takes 10 MiB, whatever the server's boosts
        else:
            if (why := self._unreachable(job)) is not None:
                return Attempt(shown=False, permanent=True, error=why, code="unreachable")
            limit = await self.upload_limit(job.guild_id)
            if (why := self._unreachable(job)) is not None:  # the lookup just learnt it
                return Attempt(shown=False, permanent=True, error=why, code="unreachable")
        wanted = limit if job.status is JobStatus.COMPLETED and job.outputs else 0
        async with self.memory.hold(wanted, renew) as held:
            files, note = await self.attachments(job, limit, renew)
            held.shrink(sum(len(data) for _, data in files))
            if files and renew is not None:
                await renew()
            try:
                try:
                    return await self._send(job, route, files, note, placeholder, card)
                except discord.HTTPException as exc:
                    if not files or not _too_large(exc):
                        raise
                note = _(TOO_LARGE_NOTE)
                return await self._send(job, route, (), note, placeholder, card)
            except Exception as exc:
                outcome = classify(exc)
                if outcome is None:
                    raise
                if route is DeliveryRoute.CHANNEL or (
                    route is DeliveryRoute.PLACEHOLDER and card is None
                ):
                    self._note_failure(job, exc)
                return outcome

    async def _deliver_take(
        self,
        job: Job,
        group: tuple[Job, ...],
        placeholder: discord.PartialMessage,
        renew: Renew | None = None,
    ) -> Attempt:
        """Show a finished take on its request's shared card, as every take stands now.

        Until the last take finishes the card shows the service's links. The delivery of the
        last one attaches every take's result that fits the server's upload limit (one
        download each, held within the deliveries' :class:`ByteBudget`), so the results
        outlive the service's links, and pings the requester: the only ping of the takes.
        That final delivery is claimed in the database first (``final``): of two workers
        finishing the last takes together, the one that does not get it leaves the card to
        the other.
        """
        self._replied.add(job.id)  # notify pings nobody for a take
        claimed = False
        try:
            async with self._take_lock(group):
                group = tuple(job if t.id == job.id else t for t in await self._siblings(job))
                if not group:
                    return Attempt(
                        shown=False, permanent=True, error="takes unreadable", code="takes"
                    )
                if any(t.status is JobStatus.PENDING for t in group):
                    parts = takes_card(group, sandbox=self._sandbox)
                    await self._edit_card(placeholder, parts, parts)
                    return SHOWN
                if not await self._claim_final(group[0].id, job.id):
                    return SHOWN  # another take's delivery makes the final one
                claimed = True
                limit = await self.upload_limit(job.guild_id)
                done = [t for t in group if t.status is JobStatus.COMPLETED and t.outputs]
                async with self.memory.hold(limit if done else 0, renew) as held:
                    files: list[tuple[str, bytes]] = []
                    attached: dict[int, str] = {}
                    for take in done:
                        room = limit - sum(len(data) for _, data in files)
                        got, _ = await self.attachments(take, room, renew)
                        if got:
                            files.append(got[0])
                            attached[take.id] = got[0][0]
                    held.shrink(sum(len(data) for _, data in files))
                    plain = takes_card(group, sandbox=self._sandbox)
                    parts = dataclasses.replace(
                        takes_card(group, sandbox=self._sandbox, attached=attached),
                        files=tuple(files),
                    )
                    try:
                        for_reply = await self._edit_card(placeholder, parts, plain)
                    except discord.HTTPException as exc:
                        if not files or not _too_large(exc):
                            raise
                        await self._edit_card(placeholder, plain, plain)
                        for_reply = ()
                    await placeholder.channel.send(
                        content=takes_ready(group),
                        files=[discord.File(io.BytesIO(data), name) for name, data in for_reply],
                        allowed_mentions=ping_only(job.user_id),
                        reference=placeholder.to_reference(fail_if_not_exists=False),
                        mention_author=False,
                        nonce=delivery_nonce(job, DeliveryRoute.PLACEHOLDER),
                    )
        except Exception as exc:
            self._replied.discard(job.id)
            if claimed:
                await self._release_final(group[0].id, job.id)
            outcome = classify(exc)
            if outcome is None:
                raise
            self._note_failure(job, exc)
            return outcome
        return SHOWN

    async def _claim_final(self, group_id: int, job_id: int) -> bool:
        """Whether this take's delivery makes its request's final one (claimed in the database).

        A database that cannot answer lets it through: a second ping beats no result.
        """
        if self._final is None:
            return True
        try:
            return await self._final.claim_final_delivery(group_id, job_id)
        except Exception as exc:
            log.warning("takes of job %s: final delivery not claimed (%r)", group_id, exc)
            return True

    async def _release_final(self, group_id: int, job_id: int) -> None:
        if self._final is None:
            return
        try:
            await self._final.release_final_delivery(group_id, job_id)
        except Exception as exc:  # the same take claims it again when tried again
            log.warning("takes of job %s: final delivery claim kept (%r)", group_id, exc)

    async def show_card(
        self, job: Job, limit: int, send: Callable[[MessageParts], Awaitable[None]]
    ) -> None:
        """Build ``job``'s card as it stands now and hand it to ``send``.

        For the card's Show result button and ``/jobs show``, answered with the
        clicker's fresh interaction: a pending job's card (with Show result), a finished one
        with its buttons and its files downloaded within ``limit`` bytes (the interaction's
        ``filesize_limit``), held in the re-shows' own memory slot until ``send`` returns, and
        reused by the job's next re-show for a short while (:mod:`bot.discord.shown_files`).

        Raises:
            discord.HTTPException: ``send`` failed (as it raised it).
        """
        now = self._clock.time()
        if job.status is JobStatus.PENDING:
            if job.unwatched_at is not None:
                parts = job_unwatched(job, now=now, sandbox=self._sandbox)
            else:
                ready_at = None
                if self._schedule is not None:
                    ready_at = await self._schedule.estimated_finish(job, now=now)
                parts = job_placeholder(job, now=now, sandbox=self._sandbox, ready_at=ready_at)
            await send(dataclasses.replace(parts, action_buttons=show_buttons(job.id)))
            return
        kept = self.shown_files.get(job.id, limit)
        if kept is not None:  # downloaded for a re-show a moment ago: not fetched again
            await send(self._finished_parts(job, *kept)[1])
            return
        wanted = limit if job.status is JobStatus.COMPLETED and job.outputs else 0
        # The re-shows' own slot, never the deliveries' budget: a flood of re-shows cannot
        # make a delivery wait (bot.discord.shown_files).
        async with self.show_memory.hold(wanted) as held:
            files, note = await self.attachments(job, limit, limit_name=HERE)
            held.shrink(sum(len(data) for _, data in files))
            if files:
                self.shown_files.keep(job.id, limit, files, note)
            await send(self._finished_parts(job, files, note)[1])

    async def _deliver_personal(
        self, job: Job, route: DeliveryRoute, renew: Renew | None
    ) -> Attempt:
        """Edit a personal job's card (the interaction's response) into its result.

        The bot may not be a member where it was asked, so there is no channel message. While
        the token lives, the card is edited; once it is gone, the DM route announces the
        result in the member's DM with the bot (:meth:`_late_personal`). Files stay within the
        interaction's upload limit (``Interaction.filesize_limit``).
        """
        if route is DeliveryRoute.DM:
            return await self._late_personal(job)
        if route is not DeliveryRoute.PLACEHOLDER:
            return Attempt(
                shown=False,
                permanent=True,
                error="a personal result has no channel message (its card, or the DM)",
                code="personal",
            )
        return await self._deliver_response(job, renew)

    async def _late_personal(self, job: Job) -> Attempt:
        """Announce a personal result whose card can no longer be edited, in the member's DM.

        The bot's DM with the member is the one place it can always write with its own token.
        Used for a job asked in that DM (its channel is the DM), else only when the member
        turned DM notices on. The message names the result, carries the card's Show result
        button (a click updates the message into the card) and says ``/jobs show``; it
        carries the route's nonce, so a retried send is not posted twice.
        """
        try:
            dm = await self._client.create_dm(discord.Object(job.user_id))
            if dm.id != job.channel_id:
                wanted = (
                    self._members is not None and (await self._members.get(job.user_id)).notify_dm
                )
                if not wanted:
                    return Attempt(
                        shown=False,
                        permanent=True,
                        error="asked outside the bot's DM, and DM notices are off",
                        code="personal",
                    )
            parts = MessageParts(
                content=late_result_text(job),
                action_buttons=show_buttons(job.id),
                allowed_mentions=discord.AllowedMentions.none(),
            )
            await send_card(dm, parts, nonce=delivery_nonce(job, DeliveryRoute.DM))
        except Exception as exc:
            outcome = classify(exc)
            if outcome is None:
                raise
            return outcome
        return SHOWN

    async def _deliver_response(self, job: Job, renew: Renew | None) -> Attempt:
        """Edit a card that is an interaction's response into its result, while its token lives.

        A personal job's card, or a private server job's whose member's DMs are closed (its
        ephemeral response). Without a live token nothing is sent: the attempt fails for good
        (a personal result then waits for Show result and ``/jobs show``; a private one goes
        to the channel, saying why).
        """
        found = await self._response(job)
        if found is None:
            return Attempt(
                shown=False,
                permanent=True,
                error="the interaction token expired",
                code="token_expired",
            )
        message, limit = found
        wanted = limit if job.status is JobStatus.COMPLETED and job.outputs else 0
        async with self.memory.hold(wanted, renew) as held:
            files, note = await self.attachments(job, limit, renew, limit_name=HERE)
            held.shrink(sum(len(data) for _, data in files))
            try:
                try:
                    await self._send_response(job, message, files, note)
                except discord.HTTPException as exc:
                    if not files or not _too_large(exc):
                        raise
                    note = _(TOO_LARGE_NOTE)
                    await self._send_response(job, message, (), note)
            except Exception as exc:
                if await self._token_refused(job, exc):
                    return Attempt(
                        shown=False,
                        permanent=True,
                        error="Discord refused the interaction token (expired)",
                        code="token_expired",
                    )
                outcome = classify(exc)
                if outcome is None:
                    raise
                return outcome
        return SHOWN

    def _finished_parts(
        self, job: Job, files: tuple[tuple[str, bytes], ...], note: str | None
    ) -> tuple[MessageParts, MessageParts]:
        """The finished card of ``job``, and the same card carrying ``files`` and ``note``."""
        finished = job_finished(job, sandbox=self._sandbox, ref=f"j{job.id}")
        if self.safety is not None:
            finished = self.safety.card(job, finished)
        names = [name for name, _ in files]
        return finished, dataclasses.replace(with_files(finished, names, note), files=files)

    async def _send_response(
        self,
        job: Job,
        message: _ResponseMessage,
        files: tuple[tuple[str, bytes], ...],
        note: str | None,
    ) -> None:
        finished, parts = self._finished_parts(job, files, note)
        for_reply = await self._edit_card(message, parts, finished)
        if for_reply:
            await message.followup(job, for_reply)
            self._replied.add(job.id)

    async def _send(
        self,
        job: Job,
        route: DeliveryRoute,
        files: tuple[tuple[str, bytes], ...],
        note: str | None,
        placeholder: discord.PartialMessage | None,
        card: PrivateCard | None,
    ) -> Attempt:
        finished, parts = self._finished_parts(job, files, note)
        if route is DeliveryRoute.PLACEHOLDER:
            message = placeholder
            if message is None:
                return Attempt(
                    shown=False,
                    permanent=True,
                    error="no placeholder was posted",
                    code="no_placeholder",
                )
            for_reply = await self._edit_card(message, parts, finished)
            if for_reply:
                await self._reply(job, message, for_reply)
                self._replied.add(job.id)
        elif route is DeliveryRoute.CHANNEL:
            # A new message carries its own ping: there is no placeholder to reply to. A
            # private result says why it is posted where everyone sees it.
            notice = self._with_notice(parts, job, "" if card is None else _(PRIVATE_FALLBACK))
            await send_card(self._channel(job), notice, nonce=delivery_nonce(job, route))
        elif route is DeliveryRoute.DM:
            dm = await self._client.create_dm(discord.Object(job.user_id))
            channel = f"<#{job.channel_id}>"
            where = _(" (requested in {channel}, where it could not be shown)", channel=channel)
            if card is not None:
                where = _(" (requested in {channel}; private results)", channel=channel)
            buttons = parts.action_buttons
            why = self._unreachable(job)
            if why == BOT_LEFT or (why is not None and card is None):
                # Again, Vary, Animate and Edit act in the server and channel the job came
                # from, as on a private card (cogs.cards.dm_card_click): the bot is no longer
                # in that server, or cannot see the channel a public card's next one goes to.
                buttons = dm_buttons(buttons)
            notice = self._with_notice(
                dataclasses.replace(parts, action_buttons=buttons), job, where
            )
            try:
                await send_card(dm, notice, nonce=delivery_nonce(job, route))
            except discord.HTTPException as exc:
                if card is None or card.place is not CardPlace.DM or exc.code != CANNOT_DM:
                    raise
                # The member closed their DMs after the card went there: the result still
                # reaches them, in the channel, saying why (its channel route was skipped).
                notice = self._with_notice(parts, job, _(PRIVATE_FALLBACK))
                channel_route = DeliveryRoute.CHANNEL
                await send_card(
                    self._channel(job), notice, nonce=delivery_nonce(job, channel_route)
                )
        else:
            raise ValueError(f"{route} is not a Discord route")
        return SHOWN

    async def _edit_card(
        self,
        message: discord.PartialMessage | _ResponseMessage,
        parts: MessageParts,
        finished: MessageParts,
    ) -> tuple[tuple[str, bytes], ...]:
        """Edit the placeholder into the result: the card with its files, else without them.

        Discord may refuse an edit that adds a new attachment to a Components V2 message; the
        card then points at the service's URLs and the files go in the completion reply. A
        placeholder refused a card at all (an old message, a payload Discord rejects) gets the
        old form with the files.

        Returns:
            The files the reply must carry (empty when the edit took them).
        """
        if parts.card is not None:
            try:
                await message.edit(**parts.edit_kwargs())
                return ()
            except discord.HTTPException as exc:
                if not _refused_form(exc):
                    raise
            if parts.files:
                later = _("Attached to the reply below; the service's link may stop working.")
                textual = with_files(finished, (), later, show_attached=False)
                try:
                    await message.edit(**textual.edit_kwargs())
                    return parts.files
                except discord.HTTPException as exc:
                    if not _refused_form(exc):
                        raise
        await message.edit(**parts.legacy().edit_kwargs())
        return ()

    async def _reply(
        self, job: Job, message: discord.PartialMessage, files: tuple[tuple[str, bytes], ...]
    ) -> None:
        """Reply to the placeholder, pinging only the requester, with ``files`` if any.

        The reply carries the job's reply nonce (``enforce_nonce``), so a reply repeated by a
        retry within Discord's few minutes is not posted twice, and does not fail when the
        placeholder was deleted meanwhile (``fail_if_not_exists=False``: it is then posted
        as an ordinary message).

        Raises:
            discord.HTTPException: Discord refused the reply.
        """
        parts = completion_reply(job)
        if files:
            parts = dataclasses.replace(parts, files=files)
        await message.channel.send(
            **parts.kwargs(),
            reference=message.to_reference(fail_if_not_exists=False),
            mention_author=False,
            nonce=delivery_nonce(job, DeliveryRoute.PLACEHOLDER),
        )

    @staticmethod
    def _with_notice(parts: MessageParts, job: Job, where: str) -> MessageParts:
        notice = completion_reply(job).content or ""
        # The sentence's own full stop goes after the place (a Japanese one too).
        stop = "。" if notice.endswith("。") else "."
        notice = notice.removesuffix(stop) + where + stop
        content = notice if not parts.content else f"{notice}\n{parts.content}"
        if len(content) > discord_limits.CONTENT:
            content = notice  # the link buttons and the attachment still carry the result
        card = parts.card
        if card is not None:
            card = dataclasses.replace(card, texts=(notice, *card.texts))
        return dataclasses.replace(
            parts, content=content, card=card, allowed_mentions=ping_only(job.user_id)
        )

    @_in_guild_locale
    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        """Reply to the edited placeholder, pinging only the requester (an edit pings nobody).

        Other routes carried their own notice, and ``/jobs`` needs none; a reply that carried
        the files (a card that could not take them by an edit) was part of the delivery.
        """
        if job.id in self._replied:
            self._replied.discard(job.id)
            return
        if route is not DeliveryRoute.PLACEHOLDER or (self.safety and self.safety.quiet(job)):
            return
        try:
            card = await self._private(job)
        except Exception as exc:
            log.info("could not notify the requester of job %s: %s", job.id, type(exc).__name__)
            return
        if is_personal(job.guild_id) or (card is not None and card.place is CardPlace.RESPONSE):
            # A followup of the interaction (at most 5 on a user install; this is the only one
            # a job sends), while its token lives: the card's edit pinged nobody.
            found = await self._response(job)
            if found is None:
                return
            try:
                await found[0].followup(job, ())
            except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
                await self._token_refused(job, exc)
                log.info("could not notify the requester of job %s: %s", job.id, exc)
            return
        message = self._message(job) if card is None else self._in_dm(job, card)
        if message is None:
            return
        try:
            await self._reply(job, message, ())
        except (discord.HTTPException, aiohttp.ClientError, OSError, TimeoutError) as exc:
            log.info("could not notify the requester of job %s: %s", job.id, exc)


class _ResponseMessage:
    """A personal job's card: a message of an interaction, edited through its webhook.

    Args:
        webhook: the interaction's webhook (``/webhooks/{application_id}/{token}``).
        message_id: the card (the interaction's original response).
        private: the response is ephemeral; so are its followups.
    """

    def __init__(self, webhook: discord.Webhook, message_id: int, *, private: bool = False) -> None:
        self._webhook = webhook
        self._message_id = message_id
        self._private = private

    def __repr__(self) -> str:
        return f"<response message {self._message_id}>"  # never the token

    async def edit(self, **kwargs: Any) -> Any:
        """Edit the card (Discord: Edit Followup Message, which also takes the original)."""
        return await self._webhook.edit_message(self._message_id, **kwargs)

    async def followup(self, job: Job, files: tuple[tuple[str, bytes], ...]) -> None:
        """Send the completion notice as a followup, pinging only the requester."""
        parts = completion_reply(job)
        if files:
            parts = dataclasses.replace(parts, files=files)
        await self._webhook.send(**parts.kwargs(), ephemeral=self._private)
