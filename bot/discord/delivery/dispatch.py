"""The announcer: the poller's port for Discord, a small dispatcher over the delivery routes.

Each finished job is shown by one route at a time (:class:`bot.domain.DeliveryRoute`, in the
poller's fallback order), and which module shows it depends on where its card is:

- a personal job's card, or a private job's in an ephemeral response: :mod:`~.personal`;
- a server job's public card shared by the takes of one request: :mod:`~.takes`;
- a server job's own card (in its channel, or a private one in the member's DM), or a new
  channel message: :mod:`~.channel_card`;
- a server job's result in the member's DM: :mod:`~.dm`;
- and, whenever a member asks to see a card again: :mod:`~.reshow`.

Every route gets what it shows of a result from one :class:`~.present.Presenter` (files, note,
card): the one place where a result becomes visible.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar, cast

import discord
import httpx2 as httpx

from bot.clock import Clock
from bot.discord.delivery.channel_card import ChannelCardRoute
from bot.discord.delivery.context import DeliveryContext, RepliedJobs
from bot.discord.delivery.dm import DmRoute
from bot.discord.delivery.personal import PersonalRoute
from bot.discord.delivery.places import CardPlaces
from bot.discord.delivery.present import Presenter
from bot.discord.delivery.progress import edit_quietly
from bot.discord.delivery.reach import Reach
from bot.discord.delivery.reshow import ReShow
from bot.discord.delivery.sending import REQUEST_ERRORS, reply
from bot.discord.delivery.takes import TakesRoute
from bot.discord.dm_notice import MemberSettingsReader
from bot.discord.locales import GuildLocales
from bot.discord.render import job_placeholder, job_unwatched
from bot.discord.render.parts import MessageParts
from bot.discord.safety_gate import SafetyGate
from bot.discord.shown_files import ShownFiles
from bot.domain import DeliveryRoute, Job
from bot.genapi.downloads import Downloads
from bot.i18n import using
from bot.jobs.announcer import Attempt, Renew
from bot.jobs.byte_budget import DELIVERY_MEMORY_BYTES, ByteBudget
from bot.services.personal import is_personal
from bot.services.private_cards import CardPlace, PrivateCards
from bot.services.response_tokens import ResponseTokens
from bot.services.schedule import PollSchedule
from bot.services.sequences import SequenceService
from bot.services.thumbnails import ThumbnailService

log = logging.getLogger(__name__)

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
            (:mod:`bot.discord.safety_gate`, applied in :meth:`.Presenter.prepare`); None:
            every result is shown unchecked.
        thumbnails: keeps a thumbnail of each result file downloaded for a delivery, for the
            dashboard (:mod:`bot.services.thumbnails`, in :meth:`.Presenter.prepare`); None:
            none kept.

    Attributes:
        safety: the ``safety`` given (the synchronous image path and the Report select's
            withholding use it to screen and to post review cards).
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
        self.safety = safety
        self._locales = locales
        self._schedule = schedule
        self._sandbox = sandbox
        self._context = DeliveryContext(
            client=client,
            clock=clock,
            places=CardPlaces(client, tokens=tokens, cards=cards),
            reach=Reach(client, clock),
            presenter=Presenter(
                Downloads(http), sandbox=sandbox, safety=safety, thumbnails=thumbnails
            ),
            memory=ByteBudget(memory, clock),
            replied=RepliedJobs(),
        )
        self._personal = PersonalRoute(self._context, members=members)
        self._takes = TakesRoute(self._context, takes=takes, final=final)
        self._channel = ChannelCardRoute(self._context)
        self._dm = DmRoute(self._context)
        self._reshow = ReShow(self._context, sandbox=sandbox, schedule=schedule)

    @property
    def memory(self) -> ByteBudget:
        """The deliveries' bound on downloaded bytes held at once."""
        return self._context.memory

    @property
    def show_memory(self) -> ByteBudget:
        """The re-shows' own bound on downloaded bytes held at once."""
        return self._reshow.memory

    @property
    def shown_files(self) -> ShownFiles:
        """The files re-shows fetched, kept a short while for the job's next re-show."""
        return self._reshow.files

    # -- the poller's port ----------------------------------------------------------------

    @_in_guild_locale
    async def progress(self, job: Job, now: float) -> None:
        """Refresh the placeholder's elapsed time and its ``ready`` estimate.

        A job without a card message (its post failed) has nothing to refresh on any route
        (channel, DM or response): the estimate and the rendering are skipped (they
        were 4 % of the poller's CPU at 10,000 pending jobs, docs/benchmarks.md). A channel
        the bot cannot reach is decided by :func:`~.progress.edit_quietly`: a private card in
        the DM is still edited there.
        """
        if job.message_id is None:
            return
        group = await self._takes.siblings(job)
        if group:
            await self._takes.progress(job, group)
            return
        ready_at = None
        if self._schedule is not None:
            ready_at = await self._schedule.estimated_finish(job, now=now)
        parts = job_placeholder(job, now=now, sandbox=self._sandbox, ready_at=ready_at)
        await self._edit_quietly(job, parts)

    @_in_guild_locale
    async def stopped_watching(self, job: Job, now: float) -> None:
        """Say on the placeholder that the job is still processing and no longer checked."""
        await self._edit_quietly(job, job_unwatched(job, now=now, sandbox=self._sandbox))

    async def _edit_quietly(self, job: Job, parts: MessageParts) -> None:
        await edit_quietly(self._context, job, parts)

    @_in_guild_locale
    async def deliver(self, job: Job, route: DeliveryRoute, renew: Renew | None = None) -> Attempt:
        """Show the result by ``route``, handing it to the route that owns the job's card.

        A server that removed the bot, or a channel it cannot see, fails its routes at once
        (permanently, without a request). The files are held within the process's
        :class:`~bot.jobs.byte_budget.ByteBudget` from their download until the message is sent;
        ``renew`` (the delivery's lease) is awaited while waiting for room and between
        downloads. A 413 (40005) is retried with the link only.

        Raises:
            ValueError: ``route`` is not one Discord shows (``jobs``).
        """
        context = self._context
        context.replied.discard(job.id)  # from an earlier attempt that was not recorded
        if is_personal(job.guild_id):
            return await self._personal.deliver(job, route, renew)
        card = await context.places.private(job)
        placeholder = context.places.message(job)
        if (
            route is DeliveryRoute.PLACEHOLDER
            and card is None
            and placeholder is not None
            and (group := await self._takes.siblings(job))
            and context.reach.unreachable(job) is None
        ):
            return await self._takes.deliver(job, group, placeholder, renew)
        if (
            route is DeliveryRoute.PLACEHOLDER
            and card is not None
            and card.place is CardPlace.RESPONSE
        ):
            return await self._personal.response(job, renew)
        if route is DeliveryRoute.DM:
            return await self._dm.deliver(job, card, renew)
        if route in (DeliveryRoute.PLACEHOLDER, DeliveryRoute.CHANNEL):
            return await self._channel.deliver(job, route, card, renew)
        raise ValueError(f"{route} is not a Discord route")

    @_in_guild_locale
    async def notify(self, job: Job, route: DeliveryRoute) -> None:
        """Reply to the edited placeholder, pinging only the requester (an edit pings nobody).

        Other routes carried their own notice, and ``/jobs`` needs none; a reply that carried
        the files (a card that could not take them by an edit) was part of the delivery. A
        result the safety check held or withheld pings nobody (Approve's delivery does).
        """
        if self._context.replied.take(job.id):
            return
        if route is not DeliveryRoute.PLACEHOLDER or (self.safety and self.safety.quiet(job)):
            return
        places = self._context.places
        try:
            card = await places.private(job)
        except Exception as exc:
            log.info("could not notify the requester of job %s: %s", job.id, type(exc).__name__)
            return
        if places.is_response(job, card):
            # A followup of the interaction (at most 5 on a user install; this is the only one
            # a job sends), while its token lives: the card's edit pinged nobody.
            found = await places.response(job)
            if found is None:
                return
            try:
                await found[0].followup(job, ())
            except REQUEST_ERRORS as exc:
                await places.token_refused(job, exc)
                log.info("could not notify the requester of job %s: %s", job.id, exc)
            return
        message = places.message(job) if card is None else places.in_dm(job, card)
        if message is None:
            return
        try:
            await reply(job, message, ())
        except REQUEST_ERRORS as exc:
            log.info("could not notify the requester of job %s: %s", job.id, exc)

    # -- what the gateway and the commands ask of it ----------------------------------------

    def guild_removed(self, guild_id: int) -> None:
        """The bot was removed from ``guild_id`` (``GUILD_DELETE`` without ``unavailable``).

        Its routes are skipped until :meth:`guild_joined`: every request there would answer
        403 Missing Access (50001), and Discord bans clients that make too many invalid
        requests (10,000 401/403/429 per 10 minutes).
        """
        self._context.reach.guild_removed(guild_id)

    def guild_joined(self, guild_id: int) -> None:
        """The bot is (again) in ``guild_id`` (``GUILD_CREATE``): its routes are tried again."""
        self._context.reach.guild_joined(guild_id)

    async def upload_limit(self, guild_id: int) -> int:
        """Bytes the bot may attach to a message in ``guild_id`` (:meth:`.Reach.upload_limit`)."""
        return await self._context.reach.upload_limit(guild_id)

    async def show_card(
        self, job: Job, limit: int, send: Callable[[MessageParts], Awaitable[None]]
    ) -> None:
        """Build ``job``'s card as it stands now and hand it to ``send`` (:meth:`.ReShow.show`).

        For the card's Show result button and ``/jobs show``.

        Raises:
            discord.HTTPException: ``send`` failed (as it raised it).
        """
        await self._reshow.show(job, limit, send)
