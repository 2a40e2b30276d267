"""A member's paid action, one method each: the checks, the charge, the bookkeeping after it.

``/video`` (or its form) and ``/image`` as the member filled them in (:class:`VideoRequest`,
:class:`ImageRequest`: the member's defaults, the style and character, the default takes, then
the paid request or ✨ Enhance's rewrite) are :meth:`SubmissionService.video_command` and
:meth:`SubmissionService.image_command`. Submitting a video (Again, Animate, Remix, a confirmed
price), its takes, Continue, an image (Again, Edit) or a text (``/text``, Again, Vary, its
remix) is one call of :class:`SubmissionService` too; each returns an outcome the Discord
adapter renders (:mod:`bot.discord.command_flows`, :mod:`bot.discord.request_flows`). A
conversation's turn is :meth:`bot.services.conversations.ConversationService.first_turn` or
``turn``, a join :meth:`bot.services.joins.JoinService.join`. No Discord here: what only the
adapter can do while a request runs is asked of it through ports: a :class:`Desk` (show the
member's place in the key's queue, mark the interaction charged), the reference images' fresh
URLs (:class:`bot.services.creative.References`) and, for Continue, a :data:`FrameUrl` (the
last frame, posted where the service can fetch it).

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
from typing import Any, Protocol, TypeVar, cast

from bot.domain import Job, ResultRequest
from bot.errors import ValidationFailed
from bot.genapi.wire import ImageResult, TextResult
from bot.i18n import N_
from bot.services.billing import video_cost_cents
from bot.services.creative import CreativeService, EnhanceOutcome, References
from bot.services.drafts import DraftService, FirstFrame
from bot.services.generation import (
    MAX_TAKES,
    GenerationService,
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_attachment,
    check_video,
)
from bot.services.guild_config import GuildConfigService
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import PAID_BY_CREDITS, is_personal
from bot.services.sequences import FRAME_CHECK_URL, SequenceService, require_clip

log = logging.getLogger(__name__)

T = TypeVar("T")
OptionsT = TypeVar("OptionsT", ImageOptions, VideoOptions)


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


@dataclasses.dataclass(frozen=True, slots=True)
class Upload:
    """A file a member attached to a command (``discord.Attachment``'s fields).

    Attributes:
        url: its Discord CDN URL, which the service fetches.
        content_type: the MIME type Discord reports; None if unknown.
        size: bytes.
    """

    url: str
    content_type: str | None
    size: int


def check_uploads(uploads: Sequence[Upload]) -> None:
    """Refuse an attached file that is no usable image (``check_attachment``), first to last.

    The adapter calls it before it acknowledges the command, so a bad file is answered at
    once and nothing is deferred, read or charged.

    Raises:
        ValidationFailed: not an image, empty, or too large.
    """
    for upload in uploads:
        check_attachment(upload.content_type, upload.size)


@dataclasses.dataclass(frozen=True, slots=True)
class VideoRequest:
    """``/video`` (or its form) as the member filled it in: nothing applied yet.

    Attributes:
        prompt: what happens in the video.
        model: the video model; None: the member's default (``/settings``).
        duration: seconds; None: the member's default, else the model's.
        aspect_ratio: e.g. ``"16:9"``; None: the member's default.
        image_url: a source image's URL the member typed.
        image: a source image the member attached (used instead of ``image_url``).
        generate_audio: synchronised audio, where the model makes it.
        lock_camera: a still camera, where the model offers it.
        camera: a camera preset (:data:`bot.domain.CAMERA_PRESETS`).
        takes: 1 to :data:`MAX_TAKES`; None: the member's default in a server, else 1.
        enhance: rewrite the prompt first (✨ Enhance) and let the member choose.
        style: one of the server's styles, by name.
        character: one of the member's (or the server's shared) characters, by name.
        draft: a draft first (``DraftService.video_draft``: the draft model, its shortest
            duration), before the member's own defaults.
    """

    prompt: str
    model: str | None = None
    duration: float | None = None
    aspect_ratio: str | None = None
    image_url: str | None = None
    image: Upload | None = None
    generate_audio: bool | None = None
    lock_camera: bool | None = None
    camera: str | None = None
    takes: int | None = None
    enhance: bool = False
    style: str | None = None
    character: str | None = None
    draft: bool = False

    @property
    def uploads(self) -> tuple[Upload, ...]:
        """The attached files, to check before anything else (:func:`check_uploads`)."""
        return () if self.image is None else (self.image,)

    def options(self) -> VideoOptions:
        """The video's options as given; the member's defaults are applied by the service."""
        return VideoOptions(
            self.prompt,
            self.model or "",  # none given: the member's default (apply_member_defaults)
            self.duration,
            self.aspect_ratio,
            self.image.url if self.image is not None else self.image_url,
            self.generate_audio,
            self.lock_camera,
            image_uploaded=self.image is not None,
            camera=self.camera,
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ImageRequest:
    """``/image`` as the member filled it in: nothing applied yet.

    Attributes:
        prompt: what the image shows.
        model: the image model; None: the member's default, else the first listed.
        aspect_ratio: the image's shape; None: the member's default.
        mode: ``t2i``, ``i2i`` or ``i2i_text``; None: text to image.
        image_url: a source image's URL the member typed.
        image_urls: more source images' URLs, separated by blanks, as typed.
        uploads: the attached images, in the order of the command's options.
        takes: 1 to :data:`MAX_TAKES`; None: the member's default in a server, else 1.
        enhance: rewrite the prompt first (✨ Enhance) and let the member choose.
        style: one of the server's styles, by name.
        character: one of the member's (or the server's shared) characters, by name.
        draft: drafts first (``DraftService.image_draft``: the draft model, its takes), before
            the member's own defaults.
    """

    prompt: str
    model: str | None = None
    aspect_ratio: str | None = None
    mode: str | None = None
    image_url: str | None = None
    image_urls: str | None = None
    uploads: tuple[Upload, ...] = ()
    takes: int | None = None
    enhance: bool = False
    style: str | None = None
    character: str | None = None
    draft: bool = False

    def options(self) -> ImageOptions:
        """The image's options as given; the member's defaults are applied by the service.

        One source image is ``image_url``; several are ``image_urls`` (docs/genapi.md §4.4).
        """
        uploads = self.uploads
        typed = ([self.image_url] if self.image_url else []) + (self.image_urls or "").split()
        if len(uploads) + len(typed) <= 1:
            # One source image: image_url, as before (every image model reads it).
            source = uploads[0].url if uploads else self.image_url
            return ImageOptions(
                self.prompt,
                self.model,
                self.aspect_ratio,
                self.mode,
                source,
                image_uploaded=bool(uploads),
            )
        return ImageOptions(
            self.prompt,
            self.model,
            self.aspect_ratio,
            self.mode,
            image_urls=tuple(typed),
            uploaded_image_urls=tuple(u.url for u in uploads),
        )


@dataclasses.dataclass(frozen=True, slots=True)
class Rewritten:
    """✨ Enhance's rewrite, paid; the member now chooses what is generated.

    Attributes:
        outcome: the rewrite (or its refusal).
        options: the generation's options with the member's own prompt, defaults, style
            and character applied.
        takes: how many takes the generation makes.
    """

    outcome: EnhanceOutcome
    options: ImageOptions | VideoOptions
    takes: int


@dataclasses.dataclass(frozen=True, slots=True)
class VideoAsked:
    """What ``/video`` (or its form) came to, for the adapter to render.

    Attributes:
        outcome: a price to confirm, the paid videos, or Enhance's rewrite to choose from.
        note: which of the member's defaults was left out (said with the answer); None.
    """

    outcome: VideoOutcome | Rewritten
    note: str | None = None


@dataclasses.dataclass(frozen=True, slots=True)
class ImagesAsked:
    """What ``/image`` came to, for the adapter to render.

    Attributes:
        outcome: the paid images, or Enhance's rewrite to choose from.
        options: the options the images were made with (their answers show the prompt).
        note: which of the member's defaults was left out (said after the answer); None.
    """

    outcome: ImagesMade | Rewritten
    options: ImageOptions
    note: str | None = None


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


class SubmissionService:
    """The member actions that charge, one method each (see the module).

    Args:
        generation: the checks, holds and charges of each request.
        sequences: takes and continued clips.
        members: members' settings (private results, the defaults a command leaves out).
        guild_config: the server's price confirmation threshold.
        creative: styles, characters and ✨ Enhance.
        drafts: Draft → Final (a draft's options, a Final's).
    """

    def __init__(
        self,
        *,
        generation: GenerationService,
        sequences: SequenceService,
        members: MemberSettingsService,
        guild_config: GuildConfigService,
        creative: CreativeService,
        drafts: DraftService,
    ) -> None:
        self._generation = generation
        self._sequences = sequences
        self._members = members
        self._guild_config = guild_config
        self._creative = creative
        self._drafts = drafts

    async def video_command(
        self, who: Requester, request: VideoRequest, *, desk: Desk, references: References
    ) -> VideoAsked:
        """``/video`` (or ``/video-advanced``'s form), from the options as given to the outcome.

        The member's defaults, the style and the character are applied, then the video is
        submitted (:meth:`video`), or, with ``request.enhance``, its prompt is rewritten first
        (``CreativeService.enhance``: the rewrite's charge only) for the member to choose.

        Args:
            who: the requester.
            request: the command's options as given (its uploads checked already:
                :func:`check_uploads`).
            desk: the adapter's side of the request.
            references: reads the style's and character's reference images' fresh URLs.

        Returns:
            The outcome to render and the note about the member's defaults.

        Raises:
            ValidationFailed: no such style or character, no usable model, or as :meth:`video`
                and ``CreativeService.enhance``, before any call.
            NoApiKeyConfigured, BudgetExceeded, GenAPIError...: as :meth:`video`.
        """
        options, takes_asked = request.options(), request.takes
        if request.draft:  # the draft model and duration, before the member's own
            options = await self._drafts.video_draft(who, options)
            takes_asked = takes_asked or 1
        applied = await self._members.apply_member_defaults(who, options)
        chosen = await self._creative_applied(
            who, applied.options, references, request.style, request.character
        )
        takes = await self._takes(who, takes_asked)
        if not request.enhance:
            return VideoAsked(await self.video(who, chosen, desk=desk, takes=takes), applied.note)
        rewrite = await self._creative.enhance(who, chosen, desk=desk, takes=takes)
        return VideoAsked(Rewritten(rewrite, chosen, takes), applied.note)

    async def image_command(
        self,
        who: Requester,
        request: ImageRequest,
        *,
        desk: Desk,
        references: References,
        public: bool,
    ) -> ImagesAsked:
        """``/image``, from the options as given to the outcome.

        The member's defaults, the style and the character are applied, then the images are
        made (:meth:`image`), or, with ``request.enhance``, the prompt is rewritten first.

        Args:
            who: the requester.
            request: the command's options as given (its uploads checked already).
            desk: the adapter's side of the request.
            references: reads the style's and character's reference images' fresh URLs.
            public: the answer is public (the member's results are not private).

        Raises:
            ValidationFailed: no such style or character, or as :meth:`image` and
                ``CreativeService.enhance``, before any call.
            NoApiKeyConfigured, BudgetExceeded, GenAPIError...: as :meth:`image`.
        """
        options, takes_asked = request.options(), request.takes
        if request.draft:  # the draft model, before the member's own
            options = await self._drafts.image_draft(who, options)
            takes_asked = takes_asked or self._drafts.takes(who)
        applied = await self._members.apply_member_defaults(who, options)
        chosen = await self._creative_applied(
            who, applied.options, references, request.style, request.character
        )
        takes = await self._takes(who, takes_asked)
        if not request.enhance:
            made = await self.image(who, chosen, desk=desk, public=public, takes=takes)
            return ImagesAsked(made, chosen, applied.note)
        rewrite = await self._creative.enhance(who, chosen, desk=desk, takes=takes)
        return ImagesAsked(Rewritten(rewrite, chosen, takes), chosen, applied.note)

    async def _creative_applied(
        self,
        who: Requester,
        options: OptionsT,
        references: References,
        style: str | None,
        character: str | None,
    ) -> OptionsT:
        """``options`` with the chosen style and character (``CreativeService.apply``)."""
        if style is None and character is None:
            return options
        applied = await self._creative.apply(
            who, options, references, style=style, character=character
        )
        return cast(OptionsT, applied)  # apply keeps the kind of its options

    async def _takes(self, who: Requester, takes: int | None) -> int:
        """The takes asked, else the member's default in a server (``/settings``), else 1."""
        if takes is None and not is_personal(who.guild_id):
            takes = await self._sequences.default_takes(who.user_id)
        return takes or 1

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

    async def final_video(
        self,
        who: Requester,
        job: Job | None,
        request: ResultRequest,
        *,
        frame: FirstFrame,
        desk: Desk,
    ) -> VideoOutcome:
        """Submit a video draft's Final (:meth:`video`: confirmed as usual).

        Everything ``/video`` would refuse is refused before the clip is fetched
        (``GenerationService.check_video``); then ``frame`` makes the first frame's URL, sent
        as ``image_url``.

        Raises:
            ValidationFailed: as ``DraftService.final_video_options``, the request's checks, or the
                frame could not be made (nothing charged); else as :meth:`video`.
        """
        clip, options = await self._drafts.final_video_options(who, job, request)
        await self._generation.check_video(who, options)
        url = await frame(clip)
        return await self.video(who, dataclasses.replace(options, image_url=url), desk=desk)

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
