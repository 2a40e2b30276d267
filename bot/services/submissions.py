"""A member's paid action, one method each: the checks, the charge, the bookkeeping after it.

Submitting a video (``/video``, its form, Again, Animate, Remix, a confirmed price), its takes,
Continue, an image (``/image``, Again, Edit) or a text (``/text``, Again, Vary, its remix) is
one call of :class:`SubmissionService` that returns an outcome the Discord adapter renders
(:mod:`bot.discord.request_flows`); a conversation's turn is
:meth:`bot.services.conversations.ConversationService.turn`. No Discord here: what only the
adapter can do while a request runs is asked of it through a :class:`Desk` (show the member's
place in the key's queue, mark the interaction charged) and, for Continue, a
:data:`FrameUrl` (the last frame, posted where the service can fetch it).

**After a charge** (the ledger row is written when the generation service returns) the
bookkeeping is best-effort, with one rule, kept in :meth:`SubmissionService._after_charge`: a
failure is logged as an error and never raised, so a paid result always reaches its
requester. That bookkeeping is: the request behind each result is remembered for its buttons
(``r<id>``, ``j<job id>``), takes are recorded together (one shared card), a continued clip is
stored in its sequence. Attaching a job's card to it (``GenerationService.attach_message``) is
done where the card is posted, by the adapter, under the same rule.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager
from decimal import Decimal
from typing import Any, Final, Protocol, TypeVar

from bot.domain import Job, JobStatus
from bot.errors import ValidationFailed
from bot.genapi.wire import ImageResult, TextResult
from bot.i18n import N_
from bot.services.billing import video_cost_cents
from bot.services.generation import (
    MAX_TAKES,
    GenerationService,
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_video,
)
from bot.services.guild_config import GuildConfigService
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import PAID_BY_CREDITS, is_personal
from bot.services.sequences import SequenceService

log = logging.getLogger(__name__)

T = TypeVar("T")

FRAME_CHECK_URL: Final = "https://cdn.discordapp.com/attachments/0/0/last-frame.png"
"""Stands for a Continue's frame URL while its options are checked, before the clip is fetched."""


class Desk(Protocol):
    """The adapter's side of one paid request, called by the service (a port).

    The Discord adapter's is the deferred interaction
    (:class:`bot.discord.request_flows.InteractionDesk`); the tests' records the calls.
    """

    def waiting(self) -> AbstractAsyncContextManager[object]:
        """The block in which the request may wait in its key's queue, its place shown."""
        ...

    def charged(self) -> None:
        """The request was charged (its ledger row is written): never say it failed now."""
        ...


FrameUrl = Callable[[Job, int], Awaitable[str]]
"""``async (job, clip) -> url``: Continue's last frame of ``job``, as a URL the service can
fetch (the adapter downloads the clip, decodes the frame and posts it for a CDN URL).
``clip`` is the new clip's number in the sequence. Raises ValidationFailed when it cannot."""


@dataclasses.dataclass(frozen=True, slots=True)
class ConfirmFirst:
    """A video priced above the server's threshold: nothing was sent; the member confirms first.

    Attributes:
        price_cents: the price of all its takes, cents; None when the catalogue's is unusable.
        threshold_cents: the server's threshold (``/config confirm-above``), cents.
        takes: how many takes were asked.
        options: what a confirmation submits (``video(..., confirmed=True)``).
    """

    price_cents: Decimal | None
    threshold_cents: Decimal
    takes: int
    options: VideoOptions


@dataclasses.dataclass(frozen=True, slots=True)
class VideosSubmitted:
    """Paid videos: their jobs are stored and charged, their cards still to be shown.

    Attributes:
        jobs: the takes made, in order (at least one).
        takes: how many were asked (more than ``len(jobs)`` when ``error`` stopped the rest).
        private: the member's results are private (their cards go by DM); never in a
            personal context.
        grouped: the takes are recorded together: they share one card where public.
        error: what stopped the takes not made; None when every take was made.
    """

    jobs: tuple[Job, ...]
    takes: int = 1
    private: bool = False
    grouped: bool = False
    error: Exception | None = None


VideoOutcome = ConfirmFirst | VideosSubmitted
"""What submitting a video came to: a price to confirm, or the paid videos."""


@dataclasses.dataclass(frozen=True, slots=True)
class ImageAnswer:
    """A synchronous image, paid: shown now with its buttons.

    Attributes:
        result: the service's answer.
        model: the model that made it.
        ref: its buttons' request (``r<id>``); None when it could not be remembered.
        job_id: its finished job's id (Share, the galleries; docs/results.md); None when it
            could not be recorded.
    """

    result: ImageResult
    model: str
    ref: str | None
    job_id: int | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ImagesMade:
    """Paid images: the asynchronous ones' jobs and the synchronous ones' answers.

    Attributes:
        payer: who paid (``GenerationService.paid_by``), for the answers' footer.
        jobs: the asynchronous takes' jobs, their cards still to be shown.
        answers: the synchronous takes, to show.
        grouped: the jobs are recorded together and share one card.
        takes: how many were asked.
        made: how many were made (``len(jobs) + len(answers)``).
        error: what stopped the takes not made; None when every take was made.
    """

    payer: str
    jobs: tuple[Job, ...] = ()
    answers: tuple[ImageAnswer, ...] = ()
    grouped: bool = False
    takes: int = 1
    made: int = 1
    error: Exception | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class TextAnswered:
    """A paid text answer, to show.

    Attributes:
        result: the service's answer.
        ref: its buttons' request (``r<id>``); None when it could not be remembered.
        payer: who paid, for its footer.
    """

    result: TextResult
    ref: str | None
    payer: str


def stored_options(options: TextOptions | ImageOptions | VideoOptions) -> dict[str, Any]:
    """The options as stored with the result (a JSON object)."""
    return dataclasses.asdict(options)


def needs_confirmation(price_cents: Decimal | None, threshold_cents: Decimal | None) -> bool:
    """Whether a video must be confirmed first (``/config confirm-above``).

    Args:
        price_cents: its known price; None when the catalogue's price is unusable (NaN,
            infinite, negative): unknown, so possibly above the threshold, and asked too.
        threshold_cents: the server's threshold; None when it asks nothing.
    """
    if threshold_cents is None:
        return False
    return price_cents is None or price_cents > threshold_cents


def check_takes(who: Requester, takes: int) -> None:
    """Refuse a number of takes out of range, or several in a personal context.

    Raises:
        ValidationFailed: 1 to :data:`MAX_TAKES` only; one where the card is the response.
    """
    if not 1 <= takes <= MAX_TAKES:
        raise ValidationFailed(N_("Takes must be 1 to {most}."), most=MAX_TAKES)
    if takes > 1 and is_personal(who.guild_id):
        # A personal card is the interaction's one response: it holds one take.
        raise ValidationFailed(N_("Several takes work in servers only; ask for one here."))


def require_clip(job: Job | None, who: Requester) -> Job:
    """``job`` when it is a finished video of this server (or wallet) with a file to use.

    Raises:
        ValidationFailed: it is not (nothing is fetched or charged).
    """
    if job is None or job.guild_id != who.guild_id:
        raise ValidationFailed(N_("That video is not known here; `/jobs` lists yours."))
    if job.kind != "video":
        raise ValidationFailed(N_("Job #{number} is an image, not a video."), number=job.id)
    if job.status is not JobStatus.COMPLETED:
        raise ValidationFailed(
            N_("Video #{number} has not finished; `/jobs` says where it is."), number=job.id
        )
    if not any(url.startswith(("https://", "http://")) for url in job.outputs):
        raise ValidationFailed(
            N_("The service returned no file for video #{number}."), number=job.id
        )
    return job


class SubmissionService:
    """The member actions that charge, one method each (see the module).

    Args:
        generation: the checks, holds and charges of each request.
        sequences: takes and continued clips.
        members: members' settings (private results).
        guild_config: the server's price confirmation threshold.
    """

    def __init__(
        self,
        *,
        generation: GenerationService,
        sequences: SequenceService,
        members: MemberSettingsService,
        guild_config: GuildConfigService,
    ) -> None:
        self._generation = generation
        self._sequences = sequences
        self._members = members
        self._guild_config = guild_config

    async def video_price(self, who: Requester, options: VideoOptions) -> Decimal | None:
        """Validate ``options`` as ``/video`` does and return its known price, cents (rounded up).

        None when the catalogue's price is not a usable number.

        Raises:
            ValidationFailed: the channel is not allowed or the options are invalid.
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        await self._generation.check_channel(who)
        catalogue = await self._generation.catalogue(who.guild_id)
        model, request = check_video(catalogue, options)
        assert request.duration is not None  # check_video always sets it
        return video_cost_cents(model.cost_cents_per_5s, request.duration)

    async def video(
        self,
        who: Requester,
        options: VideoOptions,
        *,
        desk: Desk,
        takes: int = 1,
        confirmed: bool = False,
    ) -> VideoOutcome:
        """Submit a video's ``takes``, or first ask to confirm its price above the threshold.

        Args:
            who: the requester.
            options: the video's options.
            desk: the adapter's side of the request.
            takes: 1 to :data:`MAX_TAKES`: priced, confirmed and held for all of them.
            confirmed: the member confirmed this price (:class:`ConfirmFirst`): submit now.

        Returns:
            :class:`ConfirmFirst` (nothing sent), else :class:`VideosSubmitted` (paid).

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded, ConcurrencyLimitReached:
                before any call; GenAPIError: the first take's call failed.
        """
        if not confirmed:
            check_takes(who, takes)
            each = await self.video_price(who, options)
            price = None if each is None else each * takes
            threshold = await self._guild_config.confirm_above(who.guild_id)
            if threshold is not None and needs_confirmation(price, threshold):
                return ConfirmFirst(price, threshold, takes, options)
        # Read before the paid call: nothing after the charge may fail the request.
        personal = is_personal(who.guild_id)
        private = not personal and (await self._members.get(who.user_id)).private
        async with desk.waiting():
            made = await self._generation.video_takes(who, options, takes)
        desk.charged()
        grouped = takes > 1 and await self._record_takes(made.jobs)
        for job in made.jobs:
            await self._remember("video", who, stored_options(options), job_id=job.id)
        if takes == 1:
            await self._record_clip(who, options, made.jobs[0])
        return VideosSubmitted(made.jobs, takes, private, grouped, made.error)

    async def continue_video(
        self,
        who: Requester,
        job: Job | None,
        *,
        prompt: str,
        model: str,
        duration: float | None,
        continues_link: str | None,
        frame: FrameUrl,
        desk: Desk,
    ) -> VideoOutcome:
        """Continue ``job`` with a new clip from its last frame, through :meth:`video`.

        The clip, the sequence's bound (``/config sequence-length``) and the request as
        ``/video`` would check it (``GenerationService.check_video``: channel, options,
        cooldown, budgets, caps) are checked before anything is fetched; then ``frame`` makes
        the frame's URL, sent as the new clip's ``image_url``.

        Args:
            who: the requester.
            job: the clip to continue (None: not known).
            prompt: what happens next.
            model: the video model.
            duration: seconds; None for the model's default.
            continues_link: the jump link to ``job``'s card, shown on the new one.
            frame: makes the frame's URL (the adapter's).
            desk: the adapter's side of the request.

        Raises:
            ValidationFailed: the clip is not usable, the sequence is at its bound, the options
                fail ``/video``'s checks, or the frame could not be made (nothing charged);
                else as :meth:`video`.
        """
        job = require_clip(job, who)
        clip = await self._sequences.check_room(who.guild_id, job.id)
        options = VideoOptions(
            prompt,
            model,
            duration,
            image_url=FRAME_CHECK_URL,
            image_uploaded=True,
            continues=job.id,
            clip=clip,
            continues_link=continues_link,
        )
        # Refusals before the download: everything /video would refuse, holding nothing.
        await self._generation.check_video(who, options)
        url = await frame(job, clip)
        return await self.video(who, dataclasses.replace(options, image_url=url), desk=desk)

    async def image(
        self,
        who: Requester,
        options: ImageOptions,
        *,
        desk: Desk,
        public: bool,
        takes: int = 1,
    ) -> ImagesMade:
        """Generate an image's ``takes`` (each its own charge), remembering each for its buttons.

        Args:
            who: the requester.
            options: the image's options.
            desk: the adapter's side of the request.
            public: the answer is public (not private results): several asynchronous takes
                then share one card, and are recorded together.
            takes: 1 to :data:`MAX_TAKES`, held together before the first is sent.

        Raises:
            ValidationFailed: takes out of range, or several in a personal context; as the
                following, before any call.
            NoApiKeyConfigured, BudgetExceeded: before any call.
            GenAPIError: the first take's call failed.
        """
        check_takes(who, takes)
        payer = await self._generation.paid_by(who)
        async with desk.waiting():
            outcomes, error = await self._generation.image_takes(who, options, takes)
        desk.charged()
        if any(outcome.by_credits for outcome in outcomes):  # held past the server's budgets
            payer = PAID_BY_CREDITS
        jobs = tuple(outcome.job for outcome in outcomes if outcome.job is not None)
        shared = public and not is_personal(who.guild_id) and len(jobs) > 1
        grouped = shared and await self._record_takes(jobs)
        for job in jobs:
            await self._remember("image", who, stored_options(options), job_id=job.id)
        answers = []
        for outcome in outcomes:
            if outcome.result is None:
                continue
            saved = dataclasses.replace(options, model=outcome.model)
            job_id = None if outcome.answered is None else outcome.answered.id
            ref = await self._remember(
                "image", who, stored_options(saved), outputs=outcome.result.outputs, job_id=job_id
            )
            tag = None if ref is None else f"r{ref}"
            answers.append(ImageAnswer(outcome.result, outcome.model, tag, job_id))
        return ImagesMade(payer, jobs, tuple(answers), grouped, takes, len(outcomes), error)

    async def text(self, who: Requester, options: TextOptions, *, desk: Desk) -> TextAnswered:
        """Generate a text, remembered for its buttons.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded: before any call.
            GenAPIError: the call failed.
        """
        payer = await self._generation.paid_by(who)
        async with desk.waiting():
            paid = await self._generation.paid_text(who, options)
        desk.charged()
        if paid.by_credits:  # held past the server's budgets (server-then-members)
            payer = PAID_BY_CREDITS
        ref = await self._remember("text", who, stored_options(options))
        return TextAnswered(paid.result, None if ref is None else f"r{ref}", payer)

    async def _after_charge(self, step: Awaitable[T], failure: str, *args: object) -> T | None:
        """Await bookkeeping after a charge: a failure is logged as an error, never raised.

        The one rule for what follows a charge: the charge is in the ledger and the result is
        coming, so nothing here may fail the request (docs/architecture.md, money).

        Returns:
            What ``step`` returned; None when it failed.
        """
        try:
            return await step
        except Exception as exc:
            log.error("%s (%s)", failure % args, exc)
            return None

    async def _remember(
        self,
        kind: str,
        who: Requester,
        options: dict[str, Any],
        *,
        job_id: int | None = None,
        outputs: Sequence[str] = (),
    ) -> int | None:
        """Store the request behind a paid result (``remember_request``); its id, or None.

        Without it the result goes out with buttons that say the request is no longer known.
        """
        return await self._after_charge(
            self._generation.remember_request(kind, who, options, job_id=job_id, outputs=outputs),
            "the %s request of guild %s was not stored; its buttons won't work",
            kind,
            who.guild_id,
        )

    async def _record_takes(self, jobs: Sequence[Job]) -> bool:
        """Record takes together; whether they are (two or more, stored): one card then."""

        async def record() -> bool:
            await self._sequences.record_takes([job.id for job in jobs])
            return len(jobs) > 1

        grouped = await self._after_charge(
            record(), "takes of job %s were not grouped; each gets its card", jobs[0].id
        )
        return bool(grouped)

    async def _record_clip(self, who: Requester, options: VideoOptions, job: Job) -> None:
        """Store a paid continuation in its sequence (nothing for a clip continuing none)."""
        previous_id = options.continues
        if previous_id is None:
            return

        async def record() -> None:
            previous = await self._generation.job(previous_id)
            starter = who.user_id if previous is None else previous.user_id
            await self._sequences.add_clip(
                previous_job_id=previous_id,
                job_id=job.id,
                guild_id=who.guild_id,
                starter_id=starter,
            )

        await self._after_charge(record(), "job %s: its place in a sequence was not stored", job.id)
