"""Generation requests from Discord users: validate, check the budget, call, record the charge.

No Discord here: cogs parse options into the ``*Options`` dataclasses, call these methods and
render what they return. Every check that can fail does so before the upstream call, so bad
input costs nothing; every charge the service reports is committed to the ledger before the
method returns, so before the user is answered.
"""

from __future__ import annotations

import contextlib
import logging
import unicodedata
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from decimal import Decimal
from typing import Any, Final, Literal, TypeVar
from urllib.parse import urlsplit

from pydantic import SecretStr

from bot.clock import Clock
from bot.domain import (
    CAMERA_BY_VALUE,
    BillingMode,
    Charge,
    DeliveryRoute,
    GuildSettings,
    Job,
    Kind,
    NewJob,
    Reservation,
    ResultRequest,
)
from bot.errors import BotError, NoApiKeyConfigured, PromptBlocked, ValidationFailed
from bot.genapi import errors as api
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.client import GenAPIClient
from bot.genapi.outputs import (
    HostResolver,
    ip_literal,
    is_public_address,
    normalise_host,
    resolves_privately,
)
from bot.genapi.ratelimit import HOLD_EXPIRES_AT
from bot.genapi.wire import (
    Catalogue,
    ImageRequest,
    ImageResult,
    PendingTask,
    TextRequest,
    TextResult,
    VideoModel,
    VideoRequest,
)
from bot.i18n import N_, Later
from bot.services.billing import Billing, TextTokens, text_tokens_bound
from bot.services.keys import KeyResolver, ResolvedKey
from bot.services.personal import (
    KEY_CHANGING_PERSONAL,
    KEY_CHANGING_SERVER,
    PAID_BY_CREDITS,
    is_personal,
    paid_by,
)
from bot.services.policy import find_blocked_term
from bot.services.schedule import PollSchedule
from bot.storage import Database

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")
Made = TypeVar("Made")

MAX_PROMPT_LENGTH = 4000

"""Characters; the spec shows no maximum, and Discord's string options allow 6,000."""

MAX_URL_LENGTH = 2000
"""Characters in an image URL; the spec shows no maximum, and a longer URL is no real image's."""

MIN_DURATION_SECONDS = 1
MAX_DURATION_SECONDS = 60
"""Bounds of ``/video``'s ``duration``, seconds: the spec gives none, the catalogue's models
offer 4 to 12 s, and a model without a ``durations`` list is priced per 5 s of whatever is
asked, so an unbounded duration could reserve any amount."""

MAX_ATTACHMENT_BYTES = 20 * 1024 * 1024
"""Largest source image accepted as an attachment (20 MiB): the service fetches it by URL, and
Discord lets a member upload more than any image model needs."""

INVISIBLE = frozenset("\u115f\u1160\u2800\u3164\uffa0")
"""Characters that draw nothing but are neither whitespace nor format characters (Hangul
fillers, the blank Braille pattern); a prompt of these alone is empty."""

KEY_CHANGE_RETRIES = 3
"""Times a request chooses its key again when an admin replaced it while the request was being
reserved (nothing sent yet); past that it is refused, having cost nothing."""

PLACEHOLDER_GRACE = 30.0
"""Seconds a new job waits for its placeholder before it falls due anyway: the default of
``PLACEHOLDER_GRACE_SECONDS``. It bounds Discord's side (a post may wait out a 429), so
``WAIT_SCALE`` leaves it alone."""

MAX_REFERENCE_IMAGES = 4
"""Source images one ``/image`` request may send in ``image_urls``: the spec does not show the
number (docs/genapi.md §8.2); 4 bounds what one member can make the service fetch
(docs/genapi-choices.md)."""

ASPECT_RATIOS = ("16:9", "9:16", "1:1")
"""The aspect ratios the spec names as examples (docs/genapi.md §4.2, §4.4); offered as choices."""

ImageMode = Literal["t2i", "i2i", "i2i_text"]
IMAGE_MODES: dict[str, ImageMode] = {"t2i": "t2i", "i2i": "i2i", "i2i_text": "i2i_text"}
"""The modes of docs/genapi.md §4.4: text to image, image to image, edit the text in an image."""

KeyProblem = Literal["unauthorized", "insufficient_credits"]
NotifyAdmins = Callable[[int, int, KeyProblem], Awaitable[None]]
"""``async (guild_id, admin_channel_id, problem)``: tell a guild's admins of a key problem."""

AdminLog = Callable[[int, int, str], Awaitable[None]]
"""``async (guild_id, admin_channel_id, text)``: post one line in a guild's admin channel."""


@dataclass(frozen=True, slots=True)
class Requester:
    """Who asked, and where: Discord snowflakes.

    Attributes:
        channel_id: where the command was used (a thread's own id in a thread); results go here.
        parent_channel_id: in a thread or a forum post, its parent channel or forum, whose
            allowed-channel setting it inherits; None elsewhere.
        role_ids: the member's roles (the interaction's member object), for role tiers.
        manage_guild: the member has Manage Server here (exempt from cooldowns).
    """

    guild_id: int
    channel_id: int
    user_id: int
    parent_channel_id: int | None = None
    role_ids: frozenset[int] = frozenset()
    manage_guild: bool = False


@dataclass(frozen=True, slots=True)
class TextOptions:
    """``/text`` options (docs/genapi.md §4.5); ``temperature`` 0 to 2, ``max_tokens`` 1 or more."""

    prompt: str
    model: str | None = None
    system: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None


@dataclass(frozen=True, slots=True)
class ImageOptions:
    """``/image`` options (docs/genapi.md §4.4); ``image_uploaded`` as in :class:`VideoOptions`.

    ``image_urls`` are reference images the member typed, ``uploaded_image_urls`` those of
    Discord attachments (already checked by :func:`check_attachment`); both are sent as the
    spec's ``image_urls``, for models that take several references.

    ``stage``: ``"draft"`` or ``"final"`` (Draft → Final, :mod:`bot.services.drafts`): kept
    with its charges (``ledger.stage``) and its jobs' ``details``; None for any other request.
    """

    prompt: str
    model: str | None = None
    aspect_ratio: str | None = None
    mode: str | None = None
    image_url: str | None = None
    image_uploaded: bool = False
    image_urls: tuple[str, ...] = ()
    uploaded_image_urls: tuple[str, ...] = ()
    stage: str | None = None


@dataclass(frozen=True, slots=True)
class VideoOptions:
    """``/video`` options (docs/genapi.md §4.2); ``duration`` in seconds.

    ``model`` is ``""`` while the member gave none: the command then fills in their default
    (:meth:`bot.services.member_settings.MemberSettingsService.apply_member_defaults`).
    ``image_uploaded``: ``image_url`` is a Discord attachment's (already checked by
    :func:`check_attachment`), not a URL the member typed.

    A continued clip (Continue: ``image_url`` is the previous clip's last frame) names it:
    ``continues`` (its job id), ``clip`` (this clip's number in the sequence) and
    ``continues_link`` (the previous card's jump link, if it has one); shown on the card,
    never sent to the service. ``stage``: as :class:`ImageOptions`'.
    """

    prompt: str
    model: str
    duration: float | None = None
    aspect_ratio: str | None = None
    image_url: str | None = None
    generate_audio: bool | None = None
    lock_camera: bool | None = None
    image_uploaded: bool = False
    continues: int | None = None
    clip: int | None = None
    continues_link: str | None = None
    camera: str | None = None
    stage: str | None = None


MAX_TAKES: Final = 4
"""Takes one request may ask for (``takes``: 1 to 4)."""


@dataclass(frozen=True, slots=True)
class TakesOutcome:
    """The takes of one request that were made, and what stopped the others.

    Attributes:
        jobs: the takes' jobs, paid and stored, in order (at least one).
        error: why the next take was not made (the service refused it, or it may have been
            charged without an answer); None when every take was made.
    """

    jobs: tuple[Job, ...]
    error: Exception | None = None


@dataclass(frozen=True, slots=True)
class ImageOutcome:
    """A synchronous image (``result``), or a job the poller will finish (``job``).

    Attributes:
        model: the model used (the default one when none was asked for).
        answered: a synchronous image's finished job row (:meth:`GenerationService.
            record_answered`), for what goes by job id (Share, the galleries); None when
            asynchronous or not recorded.
        by_credits: (a synchronous image) the member's credit balance paid it, decided at
            its hold (``server-then-members``: past the server's budgets; docs/credits.md).
    """

    model: str
    result: ImageResult | None = None
    job: Job | None = None
    answered: Job | None = None
    by_credits: bool = False


@dataclass(frozen=True, slots=True)
class PaidText:
    """A text result and who paid it (:meth:`GenerationService.paid_text`).

    Attributes:
        result: the service's answer; its ``cost_cents`` is what the member's balance paid
            (the markup included) when ``by_credits``, else the charge.
        by_credits: the member's credit balance paid it, decided at its hold
            (``server-then-members``: past the server's budgets; docs/credits.md).
    """

    result: TextResult
    by_credits: bool = False


def may_have_charged(exc: api.GenAPIError) -> bool:
    """Whether a failed generation call may still have been charged by the service.

    True when the request reached the service and we could not read its answer: a timeout, a
    dropped connection, a body that is not the spec's JSON, or a 5xx other than
    ``GENERATION_FAILED`` (a gateway's 502/504 may hide a processed request;
    docs/genapi-choices.md).
    """
    if isinstance(exc, api.ServerError):
        return exc.may_have_charged
    if isinstance(exc, api.APIConnectionError):
        return exc.request_sent
    return isinstance(exc, api.MalformedResponseError)


def summarize(prompt: str, limit: int = 300) -> str:
    """Collapse whitespace and cut ``prompt`` to ``limit`` characters for display and storage."""
    text = " ".join(prompt.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _visible(text: str) -> bool:
    """Whether ``text`` draws anything.

    Whitespace, format characters (Unicode category Cf: U+200B, U+200C, U+200D, U+2060,
    U+FEFF...) and :data:`INVISIBLE` draw nothing.
    """
    return any(
        not ch.isspace() and unicodedata.category(ch) != "Cf" and ch not in INVISIBLE for ch in text
    )


def _check_prompt(prompt: str, limit: int = MAX_PROMPT_LENGTH) -> str:
    prompt = prompt.strip()
    if not _visible(prompt):
        raise ValidationFailed(N_("The prompt is empty."))
    if len(prompt) > limit:
        raise ValidationFailed(
            N_("The prompt is too long (at most {limit} characters)."), limit=limit
        )
    return prompt


def _check_url(url: str | None, *, uploaded: bool) -> str | None:
    if url is None or uploaded:
        # An attachment's URL is Discord's own (https on Discord's CDN), not the member's.
        return url
    url = url.strip()
    if len(url) > MAX_URL_LENGTH:
        raise ValidationFailed(
            N_("The image URL is too long (at most {max_url_length} characters)."),
            max_url_length=MAX_URL_LENGTH,
        )
    # Plain http would let anyone on the path swap the image the service is paid to use.
    if not url.lower().startswith("https://") or len(url) == len("https://"):
        raise ValidationFailed(N_("The image URL must start with https://."))
    return _check_host(url)


_PRIVATE_URL = N_(
    "The image URL must point to a public address, not localhost or a private, "
    "loopback or link-local one."
)


def _typed_host(url: str) -> tuple[str, str]:
    """The typed host of ``url`` and its normalised form (:func:`normalise_host`).

    Raises:
        ValidationFailed: the URL or its host cannot be read.
    """
    try:
        parts = urlsplit(url)
        host = (parts.hostname or "").rstrip(".")
        _ = parts.port  # a port that is not a number raises ValueError
    except ValueError:
        raise ValidationFailed(N_("The image URL is not a valid web address.")) from None
    if "@" in parts.netloc:
        raise ValidationFailed(
            N_("The image URL must not contain a user name or password (`user:password@`).")
        )
    if not host or any(ch in host for ch in "%\\ "):
        raise ValidationFailed(N_("The image URL has no valid host name."))
    try:
        return host, normalise_host(host).rstrip(".")
    except ValueError:
        raise ValidationFailed(N_("The image URL has no valid host name.")) from None


def _check_host(url: str) -> str:
    """Refuse a typed URL that would make the service fetch from a private place.

    The service fetches the image from wherever the URL points, possibly from inside its own
    network, and credentials in a URL end up in logs: no userinfo, no ``localhost`` (RFC 6761
    reserves ``*.localhost`` for loopback), no IP literal outside the public internet
    (loopback, private, link-local, reserved; ``bot.genapi.outputs.is_public_address``). The
    host is judged as resolvers read it (UTS #46: ``ⓛⓞⓒⓐⓛⓗⓞⓢⓣ`` is ``localhost``), and the URL
    sent carries that reading (the A-label form), so the service resolves what was checked.
    A name's addresses are checked later, asynchronously (:func:`check_typed_names`).

    Returns:
        ``url``, its host in the normalised form when that differs from what was typed.
    """
    typed, host = _typed_host(url)
    literal = ip_literal(host)
    if (
        host == "localhost"
        or host.endswith(".localhost")
        or (literal is not None and not is_public_address(literal))
    ):
        raise ValidationFailed(_PRIVATE_URL)
    if literal is not None or typed.lower() == host:
        return url
    parts = urlsplit(url)
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return parts._replace(netloc=netloc).geturl()


async def check_typed_names(
    urls: Sequence[str | None], resolve: HostResolver | None = None
) -> None:
    """Refuse typed URLs whose host name resolves here to a private address, before any call.

    The service resolves the name itself, maybe as this machine does (the same cloud network,
    the same internal DNS): a name pointing at ``10.0.0.7`` or loopback is refused like the
    literal. A name this machine cannot resolve is left to the service.

    Args:
        urls: URLs already through :func:`check_video` or :func:`check_image` (None skipped).
        resolve: the resolver; this machine's when None.

    Raises:
        ValidationFailed: a host resolves to an address that is not public.
    """
    names = {_typed_host(url.strip())[1] for url in urls if url and url.strip()}
    for name in sorted(names):
        if ip_literal(name) is None and await resolves_privately(name, resolve):
            raise ValidationFailed(_PRIVATE_URL)


def check_attachment(content_type: str | None, size: int) -> None:
    """Check an uploaded source image before it is used (``discord.Attachment`` fields).

    Args:
        content_type: the MIME type Discord reports, e.g. ``"image/png"``; None if unknown.
        size: the file's size, bytes.

    Raises:
        ValidationFailed: not ``image/*``, empty (0 bytes: the service would charge for
            nothing to work on), or over :data:`MAX_ATTACHMENT_BYTES`.
    """
    if content_type is None or not content_type.lower().startswith("image/"):
        raise ValidationFailed(N_("The attached file is not an image; attach a PNG, JPEG or WebP."))
    if size <= 0:
        raise ValidationFailed(N_("The attached image is empty (0 bytes); attach it again."))
    if size > MAX_ATTACHMENT_BYTES:
        mib = MAX_ATTACHMENT_BYTES // (1024 * 1024)
        raise ValidationFailed(N_("The attached image is too large (at most {mib} MiB)."), mib=mib)


def _seconds(value: float) -> str:
    return f"{value:g} s"


def default_duration(model: VideoModel) -> float:
    """Return the seconds ``/video`` uses when none are given (as ``check_video``).

    5 s where the model offers it (docs/genapi.md §8.2), else the model's shortest.
    """
    return 5.0 if 5 in model.durations or not model.durations else min(model.durations)


def check_video(catalogue: Catalogue, options: VideoOptions) -> tuple[VideoModel, VideoRequest]:
    """Validate ``/video`` options against the catalogue before a call (docs/genapi.md §2.1, §4.2).

    Returns:
        The model and the request to send; ``duration`` defaults to 5 s (docs/genapi.md §8.2) where
        the model allows it, else to the model's shortest duration.

    Raises:
        ValidationFailed: with the sentence to show.
    """
    prompt = _check_prompt(options.prompt)
    model = catalogue.video_model(options.model)
    if model is None:
        raise ValidationFailed(
            N_("`{model}` is not a video model; pick one from the list."), model=options.model
        )
    duration = options.duration
    if duration is not None and not MIN_DURATION_SECONDS <= duration <= MAX_DURATION_SECONDS:
        raise ValidationFailed(
            N_(
                "Duration must be between {min_duration_seconds} and "
                "{max_duration_seconds} seconds."
            ),
            min_duration_seconds=MIN_DURATION_SECONDS,
            max_duration_seconds=MAX_DURATION_SECONDS,
        )
    if duration is None:
        duration = 5.0 if 5 in model.durations or not model.durations else min(model.durations)
    elif model.durations and duration not in model.durations:
        allowed = ", ".join(_seconds(d) for d in model.durations)
        raise ValidationFailed(
            N_("{label} makes videos of {allowed}, not {seconds}."),
            label=model.label,
            allowed=allowed,
            seconds=_seconds(duration),
        )
    if options.aspect_ratio is not None and options.aspect_ratio not in ASPECT_RATIOS:
        raise ValidationFailed(
            N_("Aspect ratio must be one of {join}."), join=", ".join(ASPECT_RATIOS)
        )
    if options.generate_audio and not model.supports_audio:
        raise ValidationFailed(N_("{label} cannot generate audio."), label=model.label)
    if options.lock_camera and not model.supports_lock_camera:
        raise ValidationFailed(N_("{label} cannot lock the camera."), label=model.label)
    prompt, lock_camera = _with_camera(prompt, options, model)
    image_url = _check_url(options.image_url, uploaded=options.image_uploaded)
    if model.needs_image and image_url is None:
        raise ValidationFailed(
            N_("{label} animates an image: attach one or give image_url."), label=model.label
        )
    if image_url is not None and not model.needs_image:
        raise ValidationFailed(
            N_("{label} does not take a source image; pick an image-to-video model."),
            label=model.label,
        )
    request = VideoRequest(
        model=model.id,
        prompt=prompt,
        duration=duration,
        aspect_ratio=options.aspect_ratio,
        image_url=image_url,
        generate_audio=options.generate_audio,
        lock_camera=lock_camera,
    )
    return model, request


def _with_camera(prompt: str, options: VideoOptions, model: VideoModel) -> tuple[str, bool | None]:
    """The prompt with the camera preset's phrase, and ``lock_camera`` to send.

    A preset that locks the camera (static) sends ``lock_camera: true`` only to a model with
    ``supports_lock_camera`` (docs/genapi.md §2.1); the phrase is sent to every model.

    Raises:
        ValidationFailed: an unknown preset, or the prompt too long with the phrase.
    """
    if options.camera is None:
        return prompt, options.lock_camera
    preset = CAMERA_BY_VALUE.get(options.camera)
    if preset is None:
        raise ValidationFailed(N_("`{camera}` is not a camera preset."), camera=options.camera)
    combined = _check_prompt(f"{prompt.rstrip().rstrip('.,')}, {preset.phrase}")
    lock = options.lock_camera or (preset.lock and model.supports_lock_camera) or None
    return combined, lock


def check_image(catalogue: Catalogue, options: ImageOptions) -> ImageRequest:
    """Validate ``/image`` options before any call (docs/genapi.md §4.4); model: the first.

    Raises:
        ValidationFailed: with the sentence to show.
    """
    prompt = _check_prompt(options.prompt)
    if options.model is None:
        if not catalogue.image:
            raise ValidationFailed(N_("The service offers no image model right now."))
        model_id = catalogue.image[0].id
    elif catalogue.image_model(options.model) is None:
        raise ValidationFailed(
            N_("`{model}` is not an image model; pick one from the list."), model=options.model
        )
    else:
        model_id = options.model
    image_url = _check_url(options.image_url, uploaded=options.image_uploaded)
    references = tuple(
        url for url in (_check_url(u, uploaded=False) for u in options.image_urls) if url
    ) + tuple(options.uploaded_image_urls)
    if len(references) > MAX_REFERENCE_IMAGES:
        raise ValidationFailed(
            N_("At most {max_reference_images} reference images per request, not {len}."),
            max_reference_images=MAX_REFERENCE_IMAGES,
            len=len(references),
        )
    mode = IMAGE_MODES.get(options.mode or "t2i")
    if mode is None:
        raise ValidationFailed(N_("Mode must be one of {join}."), join=", ".join(IMAGE_MODES))
    if mode != "t2i" and image_url is None and not references:
        raise ValidationFailed(
            N_("Mode `{mode}` edits an image: attach one or give image_url."), mode=options.mode
        )
    if options.aspect_ratio is not None and options.aspect_ratio not in ASPECT_RATIOS:
        raise ValidationFailed(
            N_("Aspect ratio must be one of {join}."), join=", ".join(ASPECT_RATIOS)
        )
    return ImageRequest(
        model=model_id,
        prompt=prompt,
        aspect_ratio=options.aspect_ratio,
        mode=None if options.mode is None else mode,
        image_url=image_url,
        image_urls=references or None,
    )


def check_text(
    catalogue: Catalogue | None,
    options: TextOptions,
    *,
    prompt_limit: int = MAX_PROMPT_LENGTH,
    system_limit: int = MAX_PROMPT_LENGTH,
) -> TextRequest:
    """Validate ``/text`` options (docs/genapi.md §4.5, §8.2) before any call.

    Args:
        catalogue: the cached catalogue, None before the first fetch.
        options: the options.
        prompt_limit: the longest prompt, characters (a conversation's folded prompt has its
            own bound, ``CHAT_MAX_PROMPT_CHARS``).
        system_limit: the longest system prompt, characters.

    Raises:
        ValidationFailed: with the sentence to show.
    """
    prompt = _check_prompt(options.prompt, prompt_limit)
    known = catalogue is None or options.model is None or catalogue.text_model(options.model)
    if not known:
        raise ValidationFailed(
            N_("`{model}` is not a text model; pick one from the list."), model=options.model
        )
    if options.temperature is not None and not 0 <= options.temperature <= 2:
        raise ValidationFailed(N_("Temperature must be between 0 and 2."))
    if options.max_tokens is not None and options.max_tokens < 1:
        raise ValidationFailed(N_("max_tokens must be at least 1."))
    if options.system is not None and len(options.system) > system_limit:
        raise ValidationFailed(
            N_("The system prompt is too long (at most {system_limit})."), system_limit=system_limit
        )
    return TextRequest(
        prompt=prompt,
        model=options.model,
        system=options.system or None,
        max_tokens=options.max_tokens,
        temperature=options.temperature,
    )


def _usage(result: TextResult) -> TextTokens | None:
    """The prompt and answer tokens a text result was charged for (docs/genapi.md §2.5 ``usage``).

    None when the service did not tell them apart (only ``total_tokens``, or none): such a
    charge says nothing of either rate.
    """
    usage = result.usage
    if usage.prompt_tokens < 0 or usage.completion_tokens < 0:
        return None
    if usage.prompt_tokens + usage.completion_tokens <= 0:
        return None
    return TextTokens(usage.prompt_tokens, usage.completion_tokens)


class GenerationService:
    """Runs ``/text``, ``/image`` and ``/video`` requests against the service, money-safely.

    Args:
        client: the API client.
        catalogue: the cached catalogue.
        billing: budgets, reservations and the ledger.
        keys: which key a guild's requests use.
        db: the database.
        schedule: first poll times of new jobs.
        clock: wall time for charges and jobs.
        notify_admins: called once per key problem per guild, if it has an admin channel.
        placeholder_grace: seconds a new job waits for its placeholder before it falls due
            anyway (``PLACEHOLDER_GRACE_SECONDS``).
        resolve_host: resolves the host names of typed image URLs (:func:`check_typed_names`);
            this machine's resolver when None.
    """

    def __init__(
        self,
        *,
        client: GenAPIClient,
        catalogue: CatalogueCache,
        billing: Billing,
        keys: KeyResolver,
        db: Database,
        schedule: PollSchedule,
        clock: Clock,
        notify_admins: NotifyAdmins | None = None,
        placeholder_grace: float = PLACEHOLDER_GRACE,
        resolve_host: HostResolver | None = None,
    ) -> None:
        self._client = client
        self._resolve_host = resolve_host
        self._placeholder_grace = placeholder_grace
        self._catalogue = catalogue
        self._billing = billing
        self._keys = keys
        self._db = db
        self._schedule = schedule
        self._clock = clock
        self._checks = RequestChecks(db)
        self._health = KeyHealth(db, billing, notify_admins)
        self._holds = KeyedHolds(billing, keys)
        self._records = JobRecords(db, schedule, clock)
        self._catalogues = CatalogueAccess(catalogue, keys, db, self._health)

    def set_admin_notifier(self, notify_admins: NotifyAdmins | None) -> None:
        """Set where key problems are reported (the bot's, once it exists; see ``bot.wiring``).

        Args:
            notify_admins: called once per key problem per guild that has an admin channel;
                None reports nothing.
        """
        self._health.set_notifier(notify_admins)

    def set_admin_log(self, admin_log: AdminLog | None) -> None:
        """Set where blocked-term refusals are posted (:meth:`RequestChecks.set_admin_log`)."""
        self._checks.set_admin_log(admin_log)

    async def _check_terms(
        self, who: Requester, settings: GuildSettings, *texts: str | None
    ) -> None:
        await self._checks.terms(who, settings, *texts)

    async def _check_channel(self, who: Requester) -> GuildSettings:
        return await self._checks.channel(who)

    async def paid_by(self, who: Requester) -> str:
        """Name who will pay for ``who``'s next request (:meth:`RequestChecks.paid_by`)."""
        return await self._checks.paid_by(who)

    async def check_channel(self, who: Requester) -> None:
        """Refuse as the commands do outside their channels (:meth:`RequestChecks.channel`)."""
        await self._checks.channel(who)

    async def check_terms(self, who: Requester, *texts: str | None) -> None:
        """Refuse ``texts`` holding a blocked term (:meth:`RequestChecks.check_terms`)."""
        await self._checks.check_terms(who, *texts)

    async def text(
        self,
        who: Requester,
        options: TextOptions,
        *,
        screened: tuple[str | None, ...] | None = None,
        prompt_limit: int = MAX_PROMPT_LENGTH,
        system_limit: int = MAX_PROMPT_LENGTH,
        summary: str | None = None,
    ) -> TextResult:
        """Generate text: :meth:`paid_text`'s result without who paid (same errors)."""
        paid = await self.paid_text(
            who,
            options,
            screened=screened,
            prompt_limit=prompt_limit,
            system_limit=system_limit,
            summary=summary,
        )
        return paid.result

    async def paid_text(
        self,
        who: Requester,
        options: TextOptions,
        *,
        screened: tuple[str | None, ...] | None = None,
        prompt_limit: int = MAX_PROMPT_LENGTH,
        system_limit: int = MAX_PROMPT_LENGTH,
        summary: str | None = None,
    ) -> PaidText:
        """Generate text (docs/genapi.md §4.5); the charge is in the ledger when this returns.

        Returns it with whether the member's balance paid, decided at the hold (an answer's
        footer names that, not :meth:`paid_by` read before the request).

        Without a model, the first text model the member's role tiers allow is used, as for
        ``/image``: the service's own default (docs/genapi.md §4.5) is a model the
        member's tiers may not allow, and one whose price nobody knows before the call.

        A conversation's turn comes here too, so it is a ``/text`` for money and
        policy: the same channel check, reservation, budgets, tiers, cooldown and ledger row.

        Args:
            who: who asked, and where.
            options: the request.
            screened: the texts checked for blocked terms; default the prompt and the system.
                A conversation passes its new turn and the member's system only: the history
                folded into its prompt was checked turn by turn, and holds the model's answers.
            prompt_limit: the longest prompt, characters.
            system_limit: the longest system prompt, characters.
            summary: what the charge was for, kept with it for the dashboard's Ledger
                (:func:`summarize`d); default the prompt. A conversation passes its new turn
                (its folded prompt holds the history).

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded: before any call.
            GenAPIError: the call failed.
        """
        settings = await self._check_channel(who)
        texts = (options.prompt, options.system) if screened is None else screened
        await self._check_terms(who, settings, *texts)
        key = await self._keys.resolve(who.guild_id)
        catalogue = await self._catalogues.get(who.guild_id)
        if options.model is None:
            policy = await self._billing.member_policy(who.guild_id, who.role_ids)
            usable = [m.id for m in catalogue.text if policy.allows(m.id)]
            if not usable:
                raise ValidationFailed(
                    N_("No text model is available to your roles here.")
                    if catalogue.text
                    else N_("The service offers no text model right now.")
                )
            options = replace(options, model=usable[0])
        request = check_text(
            catalogue, options, prompt_limit=prompt_limit, system_limit=system_limit
        )
        assert request.model is not None  # chosen above when the member gave none
        tokens = text_tokens_bound(request.prompt, request.system, request.max_tokens)
        reservation, key = await self._holds.reserve(
            who, Kind.TEXT, request.model, None, key, tokens
        )
        result = await self._health.charged(
            reservation, settings, self._client.generate_text(key.key, request)
        )
        charge = replace(
            self._charge(who, key, Kind.TEXT, request.model, None, result),
            prompt_summary=summarize(options.prompt if summary is None else summary),
        )
        paid = self._billing.balance_price(reservation, charge.cost_cents)
        await self._billing.settle(reservation, charge, tokens=_usage(result))
        await self._health.works(settings)
        if paid is None:
            return PaidText(result)
        # The member is shown what their balance paid (docs/credits.md).
        return PaidText(result.model_copy(update={"cost_cents": paid}), by_credits=True)

    async def image(self, who: Requester, options: ImageOptions) -> ImageOutcome:
        """Generate an image (docs/genapi.md §4.4): a result, or a job for an asynchronous model.

        Without a model, the first image model the member's role tiers allow is used.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded: before any call.
            GenAPIError: the call failed.
        """
        outcomes, _ = await self.image_takes(who, options, 1)
        return outcomes[0]

    async def image_takes(
        self, who: Requester, options: ImageOptions, takes: int
    ) -> tuple[list[ImageOutcome], Exception | None]:
        """Generate ``takes`` images of the same request (takes), each its own charge.

        As :meth:`video_takes`: every take is checked and held together before the first is
        sent (the hold of each is the model's learned bound), then they are sent one after
        another, each settled before the next; a take that fails stops the rest, whose holds
        are given back.

        Returns:
            The outcomes made (at least one), and the error that stopped the others, if any.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded: before any call.
            GenAPIError: the first take's call failed (nothing else was sent).
        """
        if not 1 <= takes <= MAX_TAKES:
            raise ValidationFailed(N_("Takes must be 1 to {most}."), most=MAX_TAKES)
        settings = await self._check_channel(who)
        await self._check_terms(who, settings, options.prompt)
        key = await self._keys.resolve(who.guild_id)
        catalogue = await self._catalogues.get(who.guild_id)
        if options.model is None:
            # The default is the first image model the member's roles allow.
            policy = await self._billing.member_policy(who.guild_id, who.role_ids)
            usable = [m.id for m in catalogue.image if policy.allows(m.id)]
            if usable:
                options = replace(options, model=usable[0])
        request = check_image(catalogue, options)
        typed = None if options.image_uploaded else options.image_url
        await check_typed_names([typed, *options.image_urls], self._resolve_host)
        reservations, key = await self._holds.reserve_many(
            who, Kind.IMAGE, request.model, None, key, count=takes
        )
        # Read before the call: nothing but the settlement comes between the answer and the
        # ledger (an asynchronous model's first poll needs it).
        first_poll = await self._first_poll_delay(request.model, Kind.IMAGE)

        async def settle(
            index: int, reservation: Reservation, result: ImageResult | PendingTask
        ) -> ImageOutcome:
            charge = self._charge(
                who, key, Kind.IMAGE, request.model, result.task_id, result, options.stage
            )
            if isinstance(result, ImageResult):
                return await self._settle_answered(
                    who, key, request, reservation, charge, result, options.stage
                )
            details: dict[str, Any] = {"aspect_ratio": request.aspect_ratio, "mode": request.mode}
            if takes > 1:
                details["take"] = index + 1
            job = await self._settle_job(
                reservation,
                who,
                key,
                Kind.IMAGE,
                request.model,
                request.prompt,
                details,
                charge,
                result,
                first_poll,
            )
            return ImageOutcome(request.model, job=job)

        return await self._send_takes(
            reservations,
            settings,
            lambda: self._client.generate_image(key.key, request),
            settle,
        )

    async def _settle_answered(
        self,
        who: Requester,
        key: ResolvedKey,
        request: ImageRequest,
        reservation: Reservation,
        charge: Charge,
        result: ImageResult,
        stage: str | None,
    ) -> ImageOutcome:
        """Settle a synchronous image's charge, then record it as a finished job.

        The member sees what their credit balance paid, when it paid (docs/credits.md).
        """
        paid = self._billing.balance_price(reservation, charge.cost_cents)
        await self._billing.settle(reservation, charge)
        answered = await self._records.record_answered(
            who, key, request.model, request.prompt, result, paid_cents=paid, stage=stage
        )
        if paid is not None:
            result = result.model_copy(update={"cost_cents": paid})
        return ImageOutcome(
            request.model, result=result, answered=answered, by_credits=paid is not None
        )

    async def video(self, who: Requester, options: VideoOptions) -> Job:
        """Submit a video (docs/genapi.md §4.2), store its job; the charge is recorded on return.

        The known price (``cost_cents_per_5s`` x duration / 5) is reserved first, together with
        the pending-video caps, so concurrent requests cannot overrun a budget.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded, ConcurrencyLimitReached:
                before any call.
            GenAPIError: the call failed.
        """
        outcome = await self.video_takes(who, options, 1)
        return outcome.jobs[0]

    async def check_video(self, who: Requester, options: VideoOptions) -> None:
        """Refuse now what :meth:`video` would refuse before its call, holding nothing.

        For work done before a video is requested that must not be spent on one bound to be
        refused: Continue checks this before it downloads and decodes the clip it continues.
        The channel, blocked terms, key, options, model access, cooldown, video caps, budgets
        and allowances (:meth:`bot.services.billing.Billing.check`);
        :meth:`video` checks them all again, atomically, when it is asked.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded, ConcurrencyLimitReached,
                CooldownActive: as :meth:`video` would, before any call.
        """
        settings = await self._check_channel(who)
        await self._check_terms(who, settings, options.prompt)
        key = await self._keys.resolve(who.guild_id)
        model, request = check_video(await self._catalogues.get(who.guild_id), options)
        assert request.duration is not None  # check_video always sets it
        await self._billing.check(
            guild_id=who.guild_id,
            user_id=who.user_id,
            kind=Kind.VIDEO,
            model=model.id,
            cost_cents=self._billing.video_hold(model.cost_cents_per_5s, request.duration),
            role_ids=who.role_ids,
            cooldown_exempt=who.manage_guild,
            key_fingerprint=key.fingerprint,
        )

    async def video_takes(self, who: Requester, options: VideoOptions, takes: int) -> TakesOutcome:
        """Submit ``takes`` videos of the same request (takes), each its own job and charge.

        All of them are checked and held together before the first is sent (the budgets must
        have room for every take, the pending-video caps for as many more), so a refusal costs
        nothing. They are then sent one after another, each settled into its ledger row and
        job before the next; a take that fails stops the rest, whose holds are given back
        (one that may have been charged keeps its hold, as any request).

        Args:
            who: the requester.
            options: the request, the same for every take.
            takes: 1 to :data:`MAX_TAKES`.

        Returns:
            The jobs made (at least one), and the error that stopped the others, if any.

        Raises:
            ValidationFailed, NoApiKeyConfigured, BudgetExceeded, ConcurrencyLimitReached:
                before any call.
            GenAPIError: the first take's call failed (nothing else was sent).
        """
        if not 1 <= takes <= MAX_TAKES:
            raise ValidationFailed(N_("Takes must be 1 to {most}."), most=MAX_TAKES)
        settings = await self._check_channel(who)
        await self._check_terms(who, settings, options.prompt)
        key = await self._keys.resolve(who.guild_id)
        model, request = check_video(await self._catalogues.get(who.guild_id), options)
        assert request.duration is not None  # check_video always sets it
        typed = None if options.image_uploaded else options.image_url
        await check_typed_names([typed], self._resolve_host)
        reservations, key = await self._holds.reserve_many(
            who,
            Kind.VIDEO,
            model.id,
            self._billing.video_hold(model.cost_cents_per_5s, request.duration),
            key,
            count=takes,
        )
        first_poll = await self._first_poll_delay(model.id, Kind.VIDEO)
        details: dict[str, Any] = {
            "duration": request.duration,
            "aspect_ratio": request.aspect_ratio or "16:9",
            "generate_audio": bool(request.generate_audio),
            "lock_camera": bool(request.lock_camera),
        }
        if options.continues is not None:
            details["continues"] = options.continues
            details["clip"] = options.clip
            details["continues_link"] = options.continues_link

        async def settle(index: int, reservation: Reservation, task: PendingTask) -> Job:
            charge = self._charge(who, key, Kind.VIDEO, model.id, task.task_id, task, options.stage)
            take_details = details if takes == 1 else {**details, "take": index + 1}
            return await self._settle_job(
                reservation,
                who,
                key,
                Kind.VIDEO,
                model.id,
                request.prompt,
                take_details,
                charge,
                task,
                first_poll,
            )

        jobs, error = await self._send_takes(
            reservations,
            settings,
            lambda: self._client.generate_video(key.key, request),
            settle,
        )
        return TakesOutcome(tuple(jobs), error)

    async def _send_takes(
        self,
        reservations: Sequence[Reservation],
        settings: GuildSettings,
        send: Callable[[], Awaitable[R]],
        settle: Callable[[int, Reservation, R], Awaitable[Made]],
    ) -> tuple[list[Made], Exception | None]:
        """Send the takes held by ``reservations`` in turn, each settled before the next.

        The one charge loop of :meth:`image_takes` and :meth:`video_takes`. A take whose call
        fails stops the rest, whose holds are given back (:meth:`_release_unsent`: a failure
        there is logged, never raised over the takes charged; one that may have been charged
        keeps its own hold, as any request: :meth:`_charged`).

        Args:
            reservations: one hold per take, in order (held together beforehand).
            settings: the guild's settings (its key problems).
            send: makes one take's call (a new awaitable each time).
            settle: records take ``index``'s answer into the ledger; returns what it made.

        Returns:
            What each take made (at least one), and the error that stopped the others, if any.

        Raises:
            GenAPIError: the first take's call failed (nothing else was sent).
        """
        made: list[Made] = []
        for index, reservation in enumerate(reservations):
            try:
                result = await self._health.charged(reservation, settings, send())
            except Exception as exc:
                await self._release_unsent(reservations[index + 1 :])
                if not made:
                    raise
                log.warning("take %d of %d was not made (%s)", index + 1, len(reservations), exc)
                return made, exc
            made.append(await settle(index, reservation, result))
        await self._health.works(settings)
        return made, None

    async def _release_unsent(self, reservations: Sequence[Reservation]) -> None:
        """Give back the holds of takes not sent; a failure is logged, never raised.

        The takes sent before are charged and their results must reach the member: a
        database that cannot take the releases (each reservation then holds its budget until
        it expires, 15 minutes, on the safe side) must not turn them into an error.
        """
        for reservation in reservations:
            try:
                await self._billing.release(reservation)
            except Exception as exc:
                log.error(
                    "hold %s of a take not made was not given back (%r); it expires by itself",
                    reservation.id,
                    exc,
                )

    async def _settle_job(
        self,
        reservation: Reservation,
        who: Requester,
        key: ResolvedKey,
        kind: Kind,
        model: str,
        prompt: str,
        details: dict[str, Any],
        charge: Charge,
        task: PendingTask,
        first_poll: float,
    ) -> Job:
        now = self._clock.time()
        # Whose money it spent, for its card's footer (delivered later, without the requester).
        details = {**details, "paid_by": paid_by(who.guild_id, own_key=key.source == "guild")}
        if charge.stage is not None:  # a draft's, or its Final's: its buttons (Final)
            details["stage"] = charge.stage
        paid = self._billing.balance_price(reservation, charge.cost_cents)
        if paid is not None:  # the card shows what the member's balance paid (docs/credits.md)
            details = {**details, "paid_by": PAID_BY_CREDITS, "paid_cents": str(paid)}
        new_job = NewJob(
            task_id=task.task_id,
            provider=task.provider or "",
            poll_url=task.poll_url,
            kind=kind,
            model=model,
            guild_id=who.guild_id,
            channel_id=who.channel_id,
            message_id=None,
            user_id=who.user_id,
            prompt_summary=summarize(prompt),
            details=details,
            cost_cents=task.cost_cents,
            key_fingerprint=key.fingerprint,
            created_at=now,
            # Due once attach_message records its placeholder; this grace is the safety net
            # when none gets posted (a Discord failure, a crash): shown as a new message then.
            next_poll_at=now + max(first_poll, self._placeholder_grace),
        )
        job = await self._billing.settle(reservation, charge, new_job)
        assert job is not None  # settle returns the job it was given
        return job

    async def _first_poll_delay(self, model: str, kind: Kind) -> float:
        """Seconds from submission to a new job's first poll (the poll schedule's prior)."""
        now = self._clock.time()
        return await self._schedule.first_poll_at(model, kind, now) - now

    def _charge(
        self,
        who: Requester,
        key: ResolvedKey,
        kind: Kind,
        model: str,
        task_id: str | None,
        reported: TextResult | ImageResult | PendingTask,
        stage: str | None = None,
    ) -> Charge:
        return Charge(
            guild_id=who.guild_id,
            channel_id=who.channel_id,
            user_id=who.user_id,
            kind=kind,
            model=model,
            task_id=task_id,
            cost_cents=reported.cost_cents,
            remaining_credits_cents=reported.remaining_credits_cents,
            key_fingerprint=key.fingerprint,
            at=self._clock.time(),
            stage=stage,
        )

    async def catalogue(self, guild_id: int) -> Catalogue:
        """Return the catalogue the guild's account sees (:meth:`CatalogueAccess.get`)."""
        return await self._catalogues.get(guild_id)

    async def cached_catalogue(self, guild_id: int | None) -> Catalogue | None:
        """Return it without waiting on the network (:meth:`CatalogueAccess.cached`)."""
        return await self._catalogues.cached(guild_id)

    async def attach_message(self, job: Job, message_id: int) -> None:
        """Record a job's placeholder message (:meth:`JobRecords.attach_message`)."""
        await self._records.attach_message(job, message_id)

    async def job(self, job_id: int) -> Job | None:
        """Return the job ``job_id``, or None if unknown (:meth:`JobRecords.job`)."""
        return await self._records.job(job_id)

    async def recent_jobs(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's most recent jobs, newest first (:meth:`JobRecords.recent_jobs`)."""
        return await self._records.recent_jobs(guild_id, user_id=user_id, limit=limit)

    async def remember_request(
        self,
        kind: str,
        who: Requester,
        options: Mapping[str, Any],
        *,
        job_id: int | None = None,
        outputs: Sequence[str] = (),
    ) -> int:
        """Store the request behind a paid result (:meth:`JobRecords.remember_request`)."""
        return await self._records.remember_request(
            kind, who, options, job_id=job_id, outputs=outputs
        )

    async def result_request(self, ref: str) -> ResultRequest | None:
        """Return the request behind a result's ``ref`` (:meth:`JobRecords.result_request`)."""
        return await self._records.result_request(ref)

    async def record_answered(
        self, who: Requester, key: ResolvedKey, model: str, prompt: str, result: ImageResult
    ) -> Job | None:
        """Record a synchronous image as a finished job (:meth:`JobRecords.record_answered`)."""
        return await self._records.record_answered(who, key, model, prompt, result)

    async def answered_at(self, job_id: int, message_id: int) -> None:
        """Record the message showing a synchronous image (:meth:`JobRecords.answered_at`)."""
        await self._records.answered_at(job_id, message_id)


class RequestChecks:
    """A request's checks before its reservation (its channel, blocked terms), and its payer.

    Args:
        db: the database.
    """

    def __init__(self, db: Database) -> None:
        self._db = db
        self._admin_log: AdminLog | None = None

    def set_admin_log(self, admin_log: AdminLog | None) -> None:
        """Set where policy refusals worth an admin's eye (blocked terms) are posted.

        Args:
            admin_log: called with a guild's admin channel when it has one; None posts nothing.
        """
        self._admin_log = admin_log

    async def terms(self, who: Requester, settings: GuildSettings, *texts: str | None) -> None:
        """Refuse a prompt with a blocked term, before any reservation or upstream call.

        The member gets one neutral sentence; the admin channel (if set) gets who, where and
        which term.

        Raises:
            PromptBlocked: a text contains one of the guild's blocked terms.
        """
        terms = await self._db.policy.blocked_terms(who.guild_id)
        if not terms:
            return
        for text in texts:
            term = None if text is None else find_blocked_term(text, terms)
            if term is None:
                continue
            log.info("refused a prompt in guild %s: blocked term", who.guild_id)
            if settings.admin_channel_id is not None and self._admin_log is not None:
                await self._admin_log(
                    who.guild_id,
                    settings.admin_channel_id,
                    Later(
                        N_(
                            "Refused a prompt from <@{user}> in <#{channel}>: "
                            "blocked term `{term}`."
                        ),
                        user=who.user_id,
                        channel=who.channel_id,
                        term=term,
                    ),
                )
            raise PromptBlocked(term)

    async def channel(self, who: Requester) -> GuildSettings:
        """Refuse when the guild limits the commands to other channels.

        Also for entry points that ask something before the request (a modal, a price
        confirmation): the member hears the command's refusal first, not after answering.

        A thread (or forum post) is allowed when it or its parent is: threads inherit their
        parent's setting, and a forum's posts are threads of the forum.

        Returns:
            The guild's settings, for the rest of the request.

        Raises:
            ValidationFailed: naming the allowed channels.
        """
        settings = await self._db.guilds.settings(who.guild_id)
        allowed = settings.allowed_channel_ids
        if allowed and who.channel_id not in allowed and who.parent_channel_id not in allowed:
            where = ", ".join(f"<#{channel}>" for channel in sorted(allowed))
            raise ValidationFailed(N_("Generation commands are available in {where}."), where=where)
        return settings

    async def check_terms(self, who: Requester, *texts: str | None) -> None:
        """Refuse ``texts`` holding one of the server's blocked terms, as a prompt is refused.

        For text the bot made from a member's request (an Enhance's rewrite) before it is
        shown or sent; the admin channel is told as for a prompt.

        Raises:
            PromptBlocked: a text holds a blocked term.
        """
        settings = await self._db.guilds.settings(who.guild_id)
        await self.terms(who, settings, *texts)

    async def paid_by(self, who: Requester) -> str:
        """Name who will pay for ``who``'s next request, for its answer's footer.

        Read before the request (a failure here charges nothing): ``"this server"``, or for a
        member's wallet ``"your key"`` (their own key is stored) or ``"your allowance"`` (the
        owner's shared key, ``PERSONAL_DAILY_BUDGET_CENTS``), or ``"your credits"`` in a
        server whose billing mode is ``members`` (docs/credits.md).
        """
        if not is_personal(who.guild_id):
            if await self._db.credits.mode(who.guild_id) is BillingMode.MEMBERS:
                return PAID_BY_CREDITS
            return paid_by(who.guild_id, own_key=True)
        settings = await self._db.guilds.settings(who.guild_id)
        return paid_by(who.guild_id, own_key=settings.api_key_ciphertext is not None)


class KeyHealth:
    """The calls of a guild's key, and its problems told to its admins once.

    Args:
        db: the database (the problem told, kept across restarts).
        billing: releases a reservation whose call charged nothing.
        notify_admins: called once per key problem per guild that has an admin channel.
    """

    def __init__(self, db: Database, billing: Billing, notify_admins: NotifyAdmins | None) -> None:
        self._db = db
        self._billing = billing
        self._notify_admins = notify_admins

    def set_notifier(self, notify_admins: NotifyAdmins | None) -> None:
        """Set where key problems are reported; None reports nothing."""
        self._notify_admins = notify_admins

    async def works(self, settings: GuildSettings) -> None:
        """Clear the guild's key problem after a call that worked; after the settlement.

        The charge is recorded by then and the member's result is waiting: a failure here is
        logged, never raised (after a charge, never say it failed).
        """
        try:
            await self.problem(settings, None)
        except Exception as exc:
            log.warning("guild %s: key problem state not cleared (%s)", settings.guild_id, exc)

    async def charged(
        self, reservation: Reservation, settings: GuildSettings, call: Awaitable[T]
    ) -> T:
        """Await a charging call; release the reservation only if nothing can have been charged.

        A refusal (4xx, ``GENERATION_FAILED``, a queue that could not send it in time) charged
        nothing. A timeout, a dropped connection,
        a body we could not read, another 5xx, or a cancellation may still have been charged: that
        reservation is kept until it expires, holding the budget conservatively.
        """
        # A request still queued for its key's rate window is not sent once the hold could
        # end before its charge is settled (bot.genapi.ratelimit: judged on every wake).
        hold = HOLD_EXPIRES_AT.set(reservation.expires_at)
        try:
            result = await call
        except api.GenAPIError as exc:
            if not may_have_charged(exc):
                await self._billing.release(reservation)
            await self.problem(settings, exc)
            raise
        finally:
            HOLD_EXPIRES_AT.reset(hold)
        # No I/O here: the answer goes straight to the settlement (``works`` comes after).
        return result

    async def call(self, settings: GuildSettings, call: Awaitable[T]) -> T:
        """Await a free call with the guild's key; its key problem told, or cleared."""
        try:
            result = await call
        except api.GenAPIError as exc:
            await self.problem(settings, exc)
            raise
        await self.problem(settings, None)
        return result

    async def problem(self, settings: GuildSettings, exc: api.GenAPIError | None) -> None:
        """Tell the guild's admins once when its key is rejected or out of credits.

        The state is in the database, so "once" holds across restarts; it is cleared by the
        next call that succeeds.
        """
        if exc is not None and settings.api_key_ciphertext is None:
            exc.on_shared_key = True  # no key of its own: the call used the bot's default key
            exc.on_personal_allowance = is_personal(settings.guild_id)  # a member's, no server
        elif exc is not None and is_personal(settings.guild_id):
            exc.on_personal_key = True  # a member's own key: theirs to fix
        problem: KeyProblem | None = None
        if isinstance(exc, api.UnauthorizedError):
            problem = "unauthorized"
        elif isinstance(exc, api.InsufficientCreditsError):
            problem = "insufficient_credits"
        elif exc is not None:
            return
        if problem == settings.notified_problem:
            return
        if not await self._db.guilds.set_notified_problem(settings.guild_id, problem):
            return
        if problem and settings.admin_channel_id is not None and self._notify_admins is not None:
            await self._notify_admins(settings.guild_id, settings.admin_channel_id, problem)


class KeyedHolds:
    """Reservations made on the key a request will be sent with (:class:`GenerationService`).

    Args:
        billing: budgets and reservations.
        keys: which key a guild's requests use.
    """

    def __init__(self, billing: Billing, keys: KeyResolver) -> None:
        self._billing = billing
        self._keys = keys

    async def reserve(
        self,
        who: Requester,
        kind: Kind,
        model: str,
        cost_cents: Decimal | None,
        key: ResolvedKey,
        tokens: TextTokens | None = None,
    ) -> tuple[Reservation, ResolvedKey]:
        """Reserve the request's cost on ``key``; return the reservation and the key to send with.

        The reservation carries the key's fingerprint, which keeps the key while the request is
        in flight. An admin may have replaced the key since it was chosen: then
        the reservation is released and the key chosen again, before anything is sent.
        """
        reservations, key = await self.reserve_many(who, kind, model, cost_cents, key, tokens)
        return reservations[0], key

    async def reserve_many(
        self,
        who: Requester,
        kind: Kind,
        model: str,
        cost_cents: Decimal | None,
        key: ResolvedKey,
        tokens: TextTokens | None = None,
        count: int = 1,
    ) -> tuple[list[Reservation], ResolvedKey]:
        """:meth:`reserve` for ``count`` requests held together (takes), all or none."""
        for _ in range(KEY_CHANGE_RETRIES):
            asked: dict[str, Any] = {
                "guild_id": who.guild_id,
                "user_id": who.user_id,
                "kind": kind,
                "model": model,
                "cost_cents": cost_cents,
                "role_ids": who.role_ids,
                # A released attempt took its cooldown use back, so each attempt is checked.
                "cooldown_exempt": who.manage_guild,
                "key_fingerprint": key.fingerprint,
                "tokens": tokens,
            }
            if count == 1:
                reservations = [await self._billing.reserve(**asked)]
            else:
                reservations = await self._billing.reserve_many(**asked, count=count)
            if await self._keys.still_held(who.guild_id, key):
                return reservations, key
            for reservation in reservations:
                await self._billing.release(reservation)
            log.info("guild %d: its API key changed during a request; choosing again", who.guild_id)
            key = await self._keys.resolve(who.guild_id)
        personal = is_personal(who.guild_id)
        raise ValidationFailed(KEY_CHANGING_PERSONAL if personal else KEY_CHANGING_SERVER)


class JobRecords:
    """The jobs and the requests behind paid results, as the Discord side reads and marks them.

    Args:
        db: the database.
        schedule: first poll times of new jobs.
        clock: wall time (UTC epoch seconds).
    """

    def __init__(self, db: Database, schedule: PollSchedule, clock: Clock) -> None:
        self._db = db
        self._schedule = schedule
        self._clock = clock

    async def attach_message(self, job: Job, message_id: int) -> None:
        """Record the placeholder message that the poller will edit when ``job`` finishes.

        Only now does the job fall due for its first poll: polled before its placeholder
        existed, a fast job would be shown in a message of its own while the placeholder,
        posted after, said "Generating…" forever.
        """
        first = await self._schedule.first_poll_at(job.model, job.kind, job.created_at)
        await self._db.jobs.set_message(job.id, message_id, due_at=first)

    async def job(self, job_id: int) -> Job | None:
        """Return the job ``job_id`` (``/jobs``, a result's buttons), or None if unknown."""
        return await self._db.jobs.get(job_id)

    async def recent_jobs(self, guild_id: int, *, user_id: int | None, limit: int) -> list[Job]:
        """Return a guild's most recent jobs, newest first, whatever their status (``/jobs``).

        Args:
            guild_id: the guild (a member's wallet id for personal jobs).
            user_id: only this member's jobs; None for the whole guild's.
            limit: the most jobs to return.
        """
        return await self._db.jobs.recent(guild_id, user_id=user_id, limit=limit)

    async def remember_request(
        self,
        kind: str,
        who: Requester,
        options: Mapping[str, Any],
        *,
        job_id: int | None = None,
        outputs: Sequence[str] = (),
    ) -> int:
        """Store the request behind a paid result, for its buttons.

        Args:
            kind: ``"text"``, ``"image"`` or ``"video"``.
            who: the requester (its guild and member).
            options: the command's options, JSON-serialisable.
            job_id: the job of an asynchronous result (at most one request per job).
            outputs: result URLs of a synchronous answer.

        Returns:
            The request's id (the ``r<id>`` of its buttons).

        Raises:
            StorageError: it could not be stored (the caller decides what that costs).
        """
        return await self._db.result_requests.add_request(
            kind=kind,
            guild_id=who.guild_id,
            user_id=who.user_id,
            options=options,
            outputs=outputs,
            job_id=job_id,
            at=self._clock.time(),
        )

    async def result_request(self, ref: str) -> ResultRequest | None:
        """Return the request behind a result's ``ref`` (``j<job id>`` or ``r<id>``), or None."""
        return await self._db.result_requests.request(ref)

    async def record_answered(
        self,
        who: Requester,
        key: ResolvedKey,
        model: str,
        prompt: str,
        result: ImageResult,
        *,
        paid_cents: Decimal | None = None,
        stage: str | None = None,
    ) -> Job | None:
        """Record a synchronous image, already settled, as a finished job; never raises.

        ``paid_cents``: what the member's credit balance paid for it (the markup included),
        kept in its details as an asynchronous job's (its card names the balance); None:
        the server or the member's wallet paid. Its ``cost_cents`` is the charge's.
        ``stage``: a draft's or a Final's (kept in its ``details``, for its buttons).

        What goes by job id then holds it as it holds an asynchronous image: Share and the
        showcase, the galleries and their thumbnails, ``/jobs``. The row is finished and
        delivered from the start (``JobStore.record_answered``): no poll, no delivery. It
        records no money: the charge was settled in the ledger before this (docs/results.md,
        "Synchronous images").

        Returns:
            The job; None when it could not be stored (logged: the result is paid for and
            shown anyway, without Share).
        """
        now = self._clock.time()
        try:
            return await self._db.jobs.record_answered(
                NewJob(
                    task_id=result.task_id,
                    provider="",
                    poll_url="",
                    kind=Kind.IMAGE,
                    model=model,
                    guild_id=who.guild_id,
                    channel_id=who.channel_id,
                    message_id=None,
                    user_id=who.user_id,
                    prompt_summary=summarize(prompt),
                    details={
                        **(
                            {"paid_by": paid_by(who.guild_id, own_key=key.source == "guild")}
                            if paid_cents is None
                            else {"paid_by": PAID_BY_CREDITS, "paid_cents": str(paid_cents)}
                        ),
                        **({} if stage is None else {"stage": stage}),
                    },
                    cost_cents=result.cost_cents,
                    key_fingerprint=key.fingerprint,
                    created_at=now,
                    next_poll_at=now,
                ),
                result.outputs,
                DeliveryRoute.PLACEHOLDER,
            )
        except Exception as exc:  # after a charge: logged, never raised
            log.error("synchronous image of guild %s not kept as a job (%s)", who.guild_id, exc)
            return None

    async def answered_at(self, job_id: int, message_id: int) -> None:
        """Record the message showing a synchronous image's job (its files' fresh URLs)."""
        await self._db.jobs.set_message(job_id, message_id)


class CatalogueAccess:
    """The catalogue each guild's account sees, read with the right key.

    Args:
        catalogue: the cached catalogue.
        keys: which key a guild's requests use.
        db: the database (a guild's settings, for its key problems).
        health: tells a guild's admins of its key's problems.
    """

    def __init__(
        self, catalogue: CatalogueCache, keys: KeyResolver, db: Database, health: KeyHealth
    ) -> None:
        self._catalogue = catalogue
        self._keys = keys
        self._db = db
        self._health = health

    async def get(self, guild_id: int) -> Catalogue:
        """Return the catalogue the guild's account sees (cached per key; fetched if none is).

        A server reads the catalogue of the key its requests use (its own, else the bot's
        default): accounts may see different models. A member's wallet reads the shared one,
        fetched with the bot's default key, never with the member's own key: the catalogue is
        work shared by everyone, done with shared keys only (``bot.genapi.catalogue``).

        Raises:
            NoApiKeyConfigured: no shared key to fetch it with, and none cached.
            GenAPIError: the first fetch failed (with the default key for a wallet:
                ``on_shared_key``).
        """
        key = await self._key(guild_id)
        if key is None:
            shared = self._catalogue.current
            if shared is None:
                raise NoApiKeyConfigured
            return shared
        if self._catalogue.cached(key) is not None:
            # At once, no I/O of our own (a stale one is refreshed in the background): a
            # command's checks must not write before its paid call.
            return await self._catalogue.get(key)
        if is_personal(guild_id):
            try:
                return await self._catalogue.get(key)
            except api.GenAPIError as exc:
                # The bot's key failed for a member, not a server: the owner's to fix, and
                # never the member's own key's problem.
                exc.on_shared_key = exc.on_personal_allowance = True
                raise
        settings = await self._db.guilds.settings(guild_id)
        return await self._health.call(settings, self._catalogue.get(key))

    async def cached(self, guild_id: int | None) -> Catalogue | None:
        """Return the catalogue the guild's account sees without waiting on the network.

        For autocomplete, which Discord allows no deferral: a missing or stale catalogue is
        fetched in the background, and None is returned while there is none yet. Outside a
        guild, or when the guild's key cannot be read, the shared catalogue is returned.
        """
        key = None
        if guild_id is not None:
            with contextlib.suppress(BotError):
                key = await self._key(guild_id)
        return self._catalogue.current if key is None else self._catalogue.peek(key)

    async def _key(self, guild_id: int) -> SecretStr | None:
        """The shared key whose account's catalogue serves ``guild_id``; None if there is none.

        A server's own key, else the bot's default; for a member's wallet the bot's default
        key whatever key the member set.

        Raises:
            BotError: the server's key cannot be resolved (``KeyResolver.resolve``).
        """
        if is_personal(guild_id):
            return self._keys.default_key
        return (await self._keys.resolve(guild_id)).key
