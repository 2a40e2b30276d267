"""Creative control: ✨ Enhance, a server's styles, members' characters (docs/creative.md).

**Enhance** (:meth:`CreativeService.enhance`) is a member action like ``/text``: the
server's text model (``/config enhance``; default the catalogue's cheapest) rewrites an image
or video prompt under a system prompt per kind (:data:`DEFAULT_IMAGE_SYSTEM`,
:data:`DEFAULT_VIDEO_SYSTEM`), through :meth:`GenerationService.text`, so the rewrite is a text
charge in the ledger like any other (reserved, settled, budgets and tiers). Before the rewrite
the generation's own options are checked as its command would (nothing is spent on a rewrite
of a request that would be refused); after it the rewrite is screened for the server's blocked
terms, and nothing else is spent: the member sees the rewrite, its price and the generation's
price (:class:`Enhanced`) and chooses.

**Styles** and **characters** keep their reference images as the Discord messages that hold
them (:class:`bot.domain.ImageRef`): attachment URLs expire, the message does not, and the
adapter asks it for a fresh URL each time a reference is sent. A style's references are
uploaded images or results made in the server (:meth:`CreativeService.result_references`:
the result card's message and file); each gets a thumbnail when the style is added, for the
dashboard's Styles page. A style may be limited to some role tiers (:meth:`Style.allows`).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Final, Literal, Protocol

from bot.clock import Clock
from bot.domain import Actor, Character, CreativeSettings, ImageRef, Style, StyleThumbnail
from bot.errors import PromptBlocked, ValidationFailed
from bot.genapi.wire import Catalogue
from bot.i18n import N_
from bot.services.billing import ESTIMATE_WINDOW, video_cost_cents
from bot.services.dashboard import DashboardService
from bot.services.generation import (
    MAX_PROMPT_LENGTH,
    MAX_REFERENCE_IMAGES,
    GenerationService,
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_image,
    check_video,
)
from bot.services.thumbnails import make_thumbnail
from bot.storage import Database
from bot.storage.repos.creative import CreativeStore


class Desk(Protocol):
    """The adapter's side of the rewrite's request (as ``bot.services.submissions.Desk``)."""

    def waiting(self) -> AbstractAsyncContextManager[object]:
        """The block in which the request may wait in its key's queue, its place shown."""
        ...

    def charged(self) -> None:
        """The request was charged: never say it failed now."""
        ...


class References(Protocol):
    """The adapter that reads a reference image's current URL from the message holding it."""

    async def url(self, ref: ImageRef) -> str | None:
        """A fresh URL of ``ref``'s attachment; None when the message or attachment is gone."""
        ...


class Audited(Protocol):
    """Audits a block of changes to a server's settings (``GuildConfigService.changing``)."""

    def changing(self, guild_id: int, actor: Actor) -> AbstractAsyncContextManager[object]:
        """The block whose changes are audited as one, by ``actor``."""
        ...


log = logging.getLogger(__name__)

Kind = Literal["image", "video"]

DEFAULT_IMAGE_SYSTEM: Final = (
    "You rewrite prompts for an image generation model. Make the member's prompt vivid and "
    "specific: the subject, the setting, the composition, the lighting, the colours, the style "
    "and the medium, in one paragraph of at most 80 words. Keep everything the member asked "
    "for and add nothing that contradicts it; never add text to the picture unless asked. "
    "Answer in the language of the member's prompt. Reply with the rewritten prompt only: no "
    "preamble, no quotation marks, no notes."
)
"""The system prompt of an image prompt's rewrite unless the server set its own."""

DEFAULT_VIDEO_SYSTEM: Final = (
    "You rewrite prompts for a video generation model that makes one shot of 4 to 12 seconds. "
    "Make the member's prompt vivid and specific: the subject and what it does, the setting, "
    "the camera's movement, the lighting and the mood, in one paragraph of at most 80 words, "
    "with one clear action from start to end. Keep everything the member asked for and add "
    "nothing that contradicts it. Answer in the language of the member's prompt. Reply with "
    "the rewritten prompt only: no preamble, no quotation marks, no notes."
)
"""The system prompt of a video prompt's rewrite unless the server set its own."""

REWRITE_MAX_TOKENS: Final = 400
"""The longest rewrite, tokens: 80 words in any language, with room to spare."""

REWRITE_TEMPERATURE: Final = 0.7

MAX_SYSTEM_LENGTH: Final = 2000
"""The longest system prompt ``/config enhance`` takes, characters."""

_QUOTES: Final = "\"'“”«»„`"


@dataclass(frozen=True, slots=True)
class Enhanced:
    """A rewritten prompt, paid; the generation not yet asked.

    Attributes:
        kind: ``"image"`` or ``"video"``.
        original: the member's prompt.
        prompt: the rewrite (the original when the model answered nothing usable).
        rewrite_cents: what the rewrite was charged (the ledger's row), cents.
        generation_cents: the generation's price with either prompt (all its takes), cents;
            None when it is not known before the call (an image model whose price the
            catalogue does not list and nobody paid yet).
        model: the text model that rewrote it.
    """

    kind: Kind
    original: str
    prompt: str
    rewrite_cents: Decimal
    generation_cents: Decimal | None
    model: str


@dataclass(frozen=True, slots=True)
class RewriteRefused:
    """The rewrite, paid, held a term the server blocks: it is not shown; the prompt stands.

    Attributes:
        original: the member's prompt.
        rewrite_cents: what the rewrite was charged, cents.
        generation_cents: the generation's price with the member's prompt, cents (or None).
    """

    original: str
    rewrite_cents: Decimal
    generation_cents: Decimal | None


EnhanceOutcome = Enhanced | RewriteRefused
"""What asking for a rewrite came to."""


def _extra_cents(entry: object, field: str) -> Decimal | None:
    """A price the catalogue lists beyond the spec (``cost_cents_per_request``...), or None."""
    extra = getattr(entry, "model_extra", None) or {}
    value = extra.get(field) if isinstance(extra, Mapping) else None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        cents = Decimal(str(value))
    except InvalidOperation:
        return None
    return cents if cents.is_finite() and cents >= 0 else None


def cheapest_text_model(catalogue: Catalogue) -> str | None:
    """The catalogue's cheapest text model (``cost_cents_per_1k_tokens``), else its first."""
    return _cheapest(catalogue.text, "cost_cents_per_1k_tokens")


def cheapest_image_model(catalogue: Catalogue) -> str | None:
    """The catalogue's cheapest image model (``cost_cents_per_request``), else its first."""
    return _cheapest(catalogue.image, "cost_cents_per_request")


def cheapest_video_model(catalogue: Catalogue) -> str | None:
    """The catalogue's cheapest text-to-video model per 5 s, else its first video model."""
    usable = [
        m for m in catalogue.video if not m.needs_image and math.isfinite(m.cost_cents_per_5s)
    ]
    if not usable:
        return catalogue.video[0].id if catalogue.video else None
    return min(usable, key=lambda m: m.cost_cents_per_5s).id


def _cheapest(models: tuple[object, ...], field: str) -> str | None:
    if not models:
        return None
    priced = [(_extra_cents(m, field), index) for index, m in enumerate(models)]
    known = [(cents, index) for cents, index in priced if cents is not None]
    chosen = min(known)[1] if known else 0
    return str(getattr(models[chosen], "id"))  # noqa: B009 - the catalogue's entries


def clean_rewrite(content: str, original: str) -> str:
    """The model's answer as a prompt: trimmed, unquoted, at most ``MAX_PROMPT_LENGTH``.

    The original prompt when nothing usable is left.
    """
    text = content.strip()
    if len(text) >= 2 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    text = text[:MAX_PROMPT_LENGTH].strip()
    return text or original


def audit_values(settings: CreativeSettings) -> dict[str, str]:
    """The creative settings as the audit log shows them (``GuildConfigService.snapshot``)."""
    return {
        "enhance model": settings.enhance_model or "cheapest text model",
        "enhance image system": settings.image_system or "default",
        "enhance video system": settings.video_system or "default",
        "draft image model": settings.draft_image_model or "cheapest image model",
        "draft video model": settings.draft_video_model or "cheapest video model",
    }


@dataclass(frozen=True, slots=True)
class PickedResult:
    """A result picked as a style's reference (:meth:`CreativeService.result_references`).

    Attributes:
        job_id: the result's job.
        ref: the card's message and the file's place on it; None when the card holds no
            file (a synchronous image's card shows the service's URL).
        url: then, the service's URL of the file, for the adapter to download and keep in a
            message (its ``ImageRef`` is that message's); None with a ``ref``.
        picture: the bytes of the result's kept thumbnail (the reference's thumbnail's
            source); None without one.
    """

    job_id: int
    ref: ImageRef | None
    url: str | None
    picture: bytes | None


class CreativeService:
    """Enhance, styles and characters (see the module).

    Args:
        db: the database.
        clock: wall time for new rows.
        generation: the checks and charges of each request (the rewrite is a ``/text``).
        guild_config: audits the server's settings (``changing``).
    """

    def __init__(
        self,
        db: Database,
        clock: Clock,
        generation: GenerationService,
        guild_config: Audited,
    ) -> None:
        self._db = db
        self._clock = clock
        self._generation = generation
        self._guild_config = guild_config
        self._results = DashboardService(db, clock)

    @property
    def _store(self) -> CreativeStore:
        return self._db.creative

    async def settings(self, guild_id: int) -> CreativeSettings:
        """The server's Enhance and Draft settings (None fields: the defaults)."""
        return await self._store.settings(guild_id)

    async def set_enhance(
        self,
        guild_id: int,
        *,
        actor: Actor,
        model: str | None = None,
        image_system: str | None = None,
        video_system: str | None = None,
        reset: bool = False,
    ) -> CreativeSettings:
        """Set ``/config enhance``: the text model and the system prompts (those given).

        Args:
            guild_id: the server.
            actor: who changes it (audited).
            model: a text model of the catalogue.
            image_system: the image rewrite's system prompt.
            video_system: the video rewrite's system prompt.
            reset: back to the defaults first (the cheapest model, the default prompts).

        Returns:
            The settings after the change.

        Raises:
            ValidationFailed: not a text model, or a system prompt too long (nothing changed).
        """
        if model is not None:
            catalogue = await self._generation.catalogue(guild_id)
            if catalogue.text_model(model) is None:
                raise ValidationFailed(
                    N_("`{model}` is not a text model; pick one from the list."), model=model
                )
        for system in (image_system, video_system):
            if system is not None and len(system) > MAX_SYSTEM_LENGTH:
                raise ValidationFailed(
                    N_("The system prompt is too long (at most {system_limit})."),
                    system_limit=MAX_SYSTEM_LENGTH,
                )
        values: dict[str, str | None] = {}
        if reset:
            values = {"enhance_model": None, "image_system": None, "video_system": None}
        given = {"enhance_model": model, "image_system": image_system, "video_system": video_system}
        values.update({name: value for name, value in given.items() if value is not None})
        async with self._guild_config.changing(guild_id, actor):
            await self._store.update_settings(guild_id, **values)
        return await self.settings(guild_id)

    async def enhance_model(self, guild_id: int) -> str | None:
        """The text model that rewrites prompts here: the server's, else the cheapest listed.

        Raises:
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        chosen = (await self.settings(guild_id)).enhance_model
        if chosen is not None:
            return chosen
        return cheapest_text_model(await self._generation.catalogue(guild_id))

    async def generation_price(
        self, who: Requester, options: ImageOptions | VideoOptions, takes: int = 1
    ) -> Decimal | None:
        """Check ``options`` as their command would and return the price of ``takes``, cents.

        A video's price is the catalogue's (``cost_cents_per_5s`` × duration / 5); an image's
        the catalogue's ``cost_cents_per_request`` when it lists one, else the highest of the
        model's recent charges (what billing holds for it), else None (unknown).

        Raises:
            ValidationFailed: the channel or the options are refused (nothing spent).
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        await self._generation.check_channel(who)
        catalogue = await self._generation.catalogue(who.guild_id)
        if isinstance(options, VideoOptions):
            model, request = check_video(catalogue, options)
            assert request.duration is not None  # check_video always sets it
            each = video_cost_cents(model.cost_cents_per_5s, request.duration)
        else:
            request_model = check_image(catalogue, options).model
            entry = catalogue.image_model(request_model)
            each = _extra_cents(entry, "cost_cents_per_request")
            if each is None:
                recent = await self._db.ledger.recent_costs(request_model, ESTIMATE_WINDOW)
                each = max(recent) if recent else None
        return None if each is None else each * takes

    async def enhance(
        self,
        who: Requester,
        options: ImageOptions | VideoOptions,
        *,
        desk: Desk,
        takes: int = 1,
    ) -> EnhanceOutcome:
        """Rewrite ``options.prompt`` with the server's text model; spend nothing else.

        The generation's options are checked first (as :meth:`generation_price`), then the
        rewrite is asked as a ``/text`` (its charge in the ledger when this returns), then
        screened for the server's blocked terms.

        Args:
            who: the requester.
            options: the image's or video's options, as the member gave them.
            desk: the adapter's side of the rewrite's request.
            takes: how many takes the generation would make (its price is of all of them).

        Returns:
            :class:`Enhanced`, or :class:`RewriteRefused` when the rewrite held a blocked term
            (paid; not shown).

        Raises:
            ValidationFailed, PromptBlocked, NoApiKeyConfigured, BudgetExceeded: before any
                call (the member's own prompt is screened by the rewrite's request).
            GenAPIError: the rewrite's call failed.
        """
        kind: Kind = "video" if isinstance(options, VideoOptions) else "image"
        price = await self.generation_price(who, options, takes)
        settings = await self.settings(who.guild_id)
        model = await self.enhance_model(who.guild_id)
        if model is None:
            raise ValidationFailed(N_("The service offers no text model right now."))
        default = DEFAULT_VIDEO_SYSTEM if kind == "video" else DEFAULT_IMAGE_SYSTEM
        system = (settings.video_system if kind == "video" else settings.image_system) or default
        text = TextOptions(
            options.prompt,
            model,
            system,
            max_tokens=REWRITE_MAX_TOKENS,
            temperature=REWRITE_TEMPERATURE,
        )
        async with desk.waiting():
            result = await self._generation.text(
                who,
                text,
                screened=(options.prompt,),
                system_limit=MAX_SYSTEM_LENGTH,
                summary=f"Enhance: {options.prompt}",
            )
        desk.charged()
        cost = Decimal(result.cost_cents) if result.cost_cents.is_finite() else Decimal(0)
        rewrite = clean_rewrite(result.content, options.prompt)
        try:
            await self._generation.check_terms(who, rewrite)
        except PromptBlocked:
            return RewriteRefused(options.prompt, cost, price)
        return Enhanced(kind, options.prompt, rewrite, cost, price, result.model)

    # -- styles ----------------------------------------------------------------------------

    async def styles(self, guild_id: int) -> list[Style]:
        """The server's styles, by name."""
        return await self._store.styles(guild_id)

    async def style(self, guild_id: int, name: str) -> Style:
        """The server's style ``name``.

        Raises:
            ValidationFailed: there is none of that name.
        """
        for style in await self.styles(guild_id):
            if style.name == name:
                return style
        raise ValidationFailed(N_("This server has no style named `{name}`."), name=name)

    async def usable_styles(self, who: Requester) -> list[Style]:
        """The server's styles ``who`` may use, by name (:meth:`Style.allows`: their tiers)."""
        return [
            style
            for style in await self.styles(who.guild_id)
            if style.allows(who.role_ids, who.manage_guild)
        ]

    async def usable_style(self, who: Requester, name: str) -> Style:
        """The style ``name``, if ``who``'s tiers may use it.

        Raises:
            ValidationFailed: no style of that name here, or it is for other tiers.
        """
        style = await self.style(who.guild_id, name)
        if not style.allows(who.role_ids, who.manage_guild):
            raise ValidationFailed(
                N_("The style `{name}` is for other tiers than yours."), name=name
            )
        return style

    async def set_style_tiers(
        self, guild_id: int, name: str, role_ids: Collection[int], *, actor: Actor
    ) -> Style:
        """Limit a style to the members of some tiers (empty: every member); audited.

        Args:
            guild_id: the server.
            name: the style.
            role_ids: roles of the server's tiers (``/config tier``).
            actor: who changes it.

        Raises:
            ValidationFailed: no style of that name, or a role that is no tier here.
        """
        tiers = {tier.role_id for tier in await self._db.policy.tiers(guild_id)}
        if any(role_id not in tiers for role_id in role_ids):
            raise ValidationFailed(
                N_("A style is limited to tiers: pick roles that have one (/config tier set).")
            )
        await self.style(guild_id, name)
        async with self._guild_config.changing(guild_id, actor):
            await self._store.set_style_roles(guild_id, name, sorted(set(role_ids)))
        return await self.style(guild_id, name)

    async def result_references(
        self, guild_id: int, text: str, references: References
    ) -> list[PickedResult]:
        """The references picked from results made in the server (``from-results:``).

        ``text`` names image results by their number (``j12``, ``#12``, ``12`` or a dashboard
        link ending in ``/results/12``), separated by spaces or commas. A result whose card
        holds its file becomes that message and the file's place on it (never its URL); one
        whose card shows the service's URL instead (a synchronous image) carries that URL, for
        the adapter to download once and keep in a message of its own. Each comes with the
        bytes of its kept thumbnail (None without one), the source of the style's own.

        Raises:
            ValidationFailed: a token that is no result number; a result not of this server,
                not an image, held or withheld by the safety policy, or whose file is on no
                message and has no URL (nothing is kept).
        """
        picked: list[PickedResult] = []
        for job_id in parse_result_numbers(text):
            item = await self._results.result(job_id)
            if item is None or item.guild_id != guild_id or item.kind != "image":
                raise ValidationFailed(
                    N_("j{job} is not an image result made in this server."), job=job_id
                )
            if await self._db.safety.hidden((f"j{job_id}",)):
                raise ValidationFailed(
                    N_("j{job} is withheld by the server's safety policy; it cannot be used."),
                    job=job_id,
                )
            thumb = await self._db.reports.thumbnails.get(job_id, 0)
            picture = None if thumb is None else thumb.data
            place = await self._results.card_file(item, 0)
            if place is not None and item.message_id is not None:
                ref = ImageRef(item.channel_id, item.message_id, place[0])
                if await references.url(ref) is not None:
                    picked.append(PickedResult(job_id, ref, None, picture))
                    continue
            url = item.outputs[0] if item.outputs else ""
            if not url.startswith(("https://", "http://")):
                raise ValidationFailed(
                    N_("The message holding j{job}'s image is gone; pick another result."),
                    job=job_id,
                )
            picked.append(PickedResult(job_id, None, url, picture))
        return picked

    async def add_style(
        self,
        guild_id: int,
        name: str,
        suffix: str,
        references: list[ImageRef],
        *,
        actor: Actor,
        pictures: Sequence[bytes | None] = (),
    ) -> Style:
        """Add a style (audited), and its references' thumbnails.

        Args:
            guild_id: the server.
            name: unique in the server.
            suffix: appended to prompts.
            references: the messages holding its images, in order.
            actor: who adds it.
            pictures: each reference's image (or a picture of it), in the same order, whose
                thumbnail the dashboard shows; None or missing: no thumbnail.

        Raises:
            ValidationFailed: the name is taken, or more than four references.
        """
        if len(references) > 4:
            raise ValidationFailed(N_("A style takes at most 4 reference images."))
        if len(await self.styles(guild_id)) >= MAX_STYLES:
            raise ValidationFailed(
                N_("This server has {most} styles already; remove one first."), most=MAX_STYLES
            )
        async with self._guild_config.changing(guild_id, actor):
            style = await self._store.add_style(
                guild_id,
                name,
                suffix,
                references,
                created_by=actor.user_id,
                at=self._clock.time(),
            )
        if style is None:
            raise ValidationFailed(N_("This server has a style named `{name}` already."), name=name)
        await self._keep_thumbnails(style, pictures)
        return style

    async def _keep_thumbnails(self, style: Style, pictures: Sequence[bytes | None]) -> None:
        """Make and store the references' thumbnails; never raises (a thumbnail is a courtesy)."""
        for position, data in enumerate(pictures[: len(style.references)]):
            if not data:
                continue
            try:
                made = await make_thumbnail("image", data)
                thumbnail = StyleThumbnail(
                    style.id, position, made.digest, made.mime, made.width, made.height, made.data
                )
                await self._store.put_style_thumbnail(thumbnail, at=self._clock.time())
            except Exception as exc:
                log.info("style %s: no thumbnail of reference %d (%r)", style.id, position, exc)

    async def style_thumbnails(
        self, style_ids: Sequence[int]
    ) -> dict[tuple[int, int], StyleThumbnail]:
        """The kept thumbnails of the styles' references, without their bytes."""
        return await self._store.style_thumbnails(style_ids)

    async def style_thumbnail(
        self, guild_id: int, style_id: int, position: int
    ) -> StyleThumbnail | None:
        """One reference's thumbnail with its bytes, if the style is the server's; else None."""
        if not any(style.id == style_id for style in await self.styles(guild_id)):
            return None
        return await self._store.style_thumbnail(style_id, position)

    async def check_style_name(self, guild_id: int, name: str) -> None:
        """Refuse now a name ``add_style`` would refuse (before the images are kept anywhere).

        Raises:
            ValidationFailed: the name is taken, or the server has :data:`MAX_STYLES`.
        """
        styles = await self.styles(guild_id)
        if any(style.name == name for style in styles):
            raise ValidationFailed(N_("This server has a style named `{name}` already."), name=name)
        if len(styles) >= MAX_STYLES:
            raise ValidationFailed(
                N_("This server has {most} styles already; remove one first."), most=MAX_STYLES
            )

    async def remove_style(self, guild_id: int, name: str, *, actor: Actor) -> None:
        """Remove a style (audited).

        Raises:
            ValidationFailed: there is none of that name.
        """
        async with self._guild_config.changing(guild_id, actor):
            removed = await self._store.remove_style(guild_id, name)
        if not removed:
            raise ValidationFailed(N_("This server has no style named `{name}`."), name=name)

    async def style_report(self, guild_id: int, references: References) -> list[tuple[Style, int]]:
        """The server's styles by name, each with how many of its references are gone.

        A reference is gone when the message holding it (or its attachment) no longer is:
        ``/config style list`` says so, and applying the style sends the others only.
        """
        report = []
        for style in await self.styles(guild_id):
            urls = [await references.url(ref) for ref in style.references]
            report.append((style, sum(1 for url in urls if url is None)))
        return report

    async def apply(
        self,
        who: Requester,
        options: ImageOptions | VideoOptions,
        references: References,
        *,
        style: str | None = None,
        character: str | None = None,
    ) -> ImageOptions | VideoOptions:
        """``options`` with a style and a character applied (docs/creative.md).

        The style's suffix is appended to the prompt. Reference images (the character's first,
        then the style's), each asked for a fresh URL now, go to the model as image input: an
        image's ``image_urls`` (after the member's own, up to :data:`MAX_REFERENCE_IMAGES`);
        the first as a video's ``image_url`` when its model animates an image and the member
        gave none. A text-to-video model gets the suffix only. A reference whose message is
        gone is left out.

        Raises:
            ValidationFailed: no style of that name here (or one for other tiers than the
                member's), or no character of that name this member may use (theirs, or
                shared to this server).
            NoApiKeyConfigured, GenAPIError: a video's catalogue could not be had.
        """
        refs: list[ImageRef] = []
        if character is not None:
            refs.append((await self.character(who, character)).image)
        if style is not None:
            chosen = await self.usable_style(who, style)
            options = with_suffix(options, chosen.suffix)
            refs.extend(chosen.references)
        if not refs:
            return options
        if isinstance(options, VideoOptions):
            return await self._video_reference(who, options, refs, references)
        held = len(options.image_urls) + len(options.uploaded_image_urls)
        urls = await _fresh(refs, references, MAX_REFERENCE_IMAGES - held)
        return replace(options, uploaded_image_urls=options.uploaded_image_urls + tuple(urls))

    async def _video_reference(
        self,
        who: Requester,
        options: VideoOptions,
        refs: list[ImageRef],
        references: References,
    ) -> VideoOptions:
        if options.image_url is not None:
            return options
        model = (await self._generation.catalogue(who.guild_id)).video_model(options.model)
        if model is None or not model.needs_image:
            return options
        urls = await _fresh(refs, references, 1)
        if not urls:
            return options
        return replace(options, image_url=urls[0], image_uploaded=True)

    # -- characters ------------------------------------------------------------------------

    async def characters(self, user_id: int, guild_id: int | None) -> list[Character]:
        """The characters ``user_id`` may use here: their own, then those shared here."""
        return await self._store.characters(user_id, guild_id)

    async def character(self, who: Requester, name: str) -> Character:
        """The character ``name`` that ``who`` may use (their own first).

        Raises:
            ValidationFailed: none of that name is theirs or shared here.
        """
        for character in await self.characters(who.user_id, who.guild_id):
            if character.name == name:
                return character
        raise ValidationFailed(N_("You have no character named `{name}`."), name=name)

    async def add_character(
        self, who: Requester, name: str, image: ImageRef, *, shared: bool = False
    ) -> Character:
        """Add a member's character.

        Raises:
            ValidationFailed: they have :data:`MAX_CHARACTERS` already, or one of that name.
        """
        if await self._store.count_characters(who.user_id) >= MAX_CHARACTERS:
            raise ValidationFailed(
                N_("You have {most} characters already; remove one first."), most=MAX_CHARACTERS
            )
        character = await self._store.add_character(
            who.user_id, who.guild_id, name, image, shared=shared, at=self._clock.time()
        )
        if character is None:
            raise ValidationFailed(N_("You have a character named `{name}` already."), name=name)
        return character

    async def check_character_name(self, who: Requester, name: str) -> None:
        """Refuse now what ``add_character`` would refuse (before the image is kept anywhere).

        Raises:
            ValidationFailed: they have :data:`MAX_CHARACTERS`, or one named ``name``.
        """
        if await self._store.count_characters(who.user_id) >= MAX_CHARACTERS:
            raise ValidationFailed(
                N_("You have {most} characters already; remove one first."), most=MAX_CHARACTERS
            )
        if any(
            c.name == name and c.user_id == who.user_id
            for c in await self.characters(who.user_id, None)
        ):
            raise ValidationFailed(N_("You have a character named `{name}` already."), name=name)

    async def remove_character(self, user_id: int, name: str) -> None:
        """Remove a member's own character.

        Raises:
            ValidationFailed: they have none of that name.
        """
        if not await self._store.remove_character(user_id, name):
            raise ValidationFailed(N_("You have no character named `{name}`."), name=name)


MAX_CHARACTERS: Final = 5
"""Characters a member may keep."""

MAX_STYLES: Final = 25
"""Styles a server may keep: what ``style:``'s autocomplete can list (Discord: 25 choices)."""


MAX_RESULT_NUMBERS: Final = 4
"""Results ``from-results:`` takes (a style holds at most 4 references)."""

_RESULT_NUMBER: Final = re.compile(r"^(?:j|#)?([0-9]{1,18})$|/results/([0-9]{1,18})/?$")


def parse_result_numbers(text: str) -> list[int]:
    """The job ids of ``from-results:``: ``j12``, ``#12``, ``12`` or ``.../results/12``.

    Separated by spaces or commas; each once, in order.

    Raises:
        ValidationFailed: a token that is none of these, or more than
            :data:`MAX_RESULT_NUMBERS`.
    """
    numbers: list[int] = []
    for token in re.split(r"[\s,]+", text.strip()):
        if not token:
            continue
        found = _RESULT_NUMBER.search(token.casefold())
        if found is None:
            raise ValidationFailed(
                N_("`{token}` is not a result: name results by their number, like j12."),
                token=token[:40],
            )
        number = int(found.group(1) or found.group(2))
        if number not in numbers:
            numbers.append(number)
    if len(numbers) > MAX_RESULT_NUMBERS:
        raise ValidationFailed(N_("A style takes at most 4 reference images."))
    return numbers


async def _fresh(refs: list[ImageRef], references: References, most: int) -> list[str]:
    """Fresh URLs of the first ``most`` references still there, in order."""
    urls: list[str] = []
    for ref in refs:
        if len(urls) >= most:
            break
        url = await references.url(ref)
        if url is not None:
            urls.append(url)
    return urls


def with_suffix(options: ImageOptions | VideoOptions, suffix: str) -> ImageOptions | VideoOptions:
    """``options`` with ``suffix`` appended to its prompt (a style's), within the prompt's bound."""
    if not suffix.strip():
        return options
    prompt = f"{options.prompt.rstrip()}, {suffix.strip()}"[:MAX_PROMPT_LENGTH]
    return replace(options, prompt=prompt)


__all__ = [
    "DEFAULT_IMAGE_SYSTEM",
    "DEFAULT_VIDEO_SYSTEM",
    "MAX_CHARACTERS",
    "MAX_STYLES",
    "CreativeService",
    "EnhanceOutcome",
    "Enhanced",
    "PickedResult",
    "References",
    "RewriteRefused",
    "audit_values",
    "cheapest_image_model",
    "cheapest_text_model",
    "cheapest_video_model",
    "clean_rewrite",
    "parse_result_numbers",
    "with_suffix",
]
