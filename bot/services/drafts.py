"""Draft → Final: cheap drafts first, then the chosen one made on the member's model.

``/image draft:true`` makes :data:`DRAFT_TAKES` takes with the server's draft image model
(``/config draft``; default the catalogue's cheapest image model), through the takes as they
are; ``/video draft:true`` makes one clip with the draft video model at its shortest duration.
A draft's options carry ``stage="draft"``, so its charges are marked so in the ledger
(``ledger.stage``) and its results get a **Final** button.

**Final** makes the draft again on the member's chosen model, as a new request priced and
confirmed as usual, with the draft's take as image input (:meth:`DraftService.final_image`,
:meth:`SubmissionService.final_video`): an image take as the spec's ``image_urls``; a video draft's
first frame as ``image_url`` (the adapter decodes it and posts it where the service can fetch
it, as Continue does with a last frame). Its charges are marked ``stage="final"``. docs/creative.md.

No Discord here: the adapter is :mod:`bot.discord.draft_flow`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Final, Protocol

from bot.domain import DRAFT, FINAL, Actor, CreativeSettings, Job, ResultRequest
from bot.errors import ValidationFailed
from bot.genapi.wire import Catalogue, VideoModel
from bot.i18n import N_
from bot.services.billing import Billing
from bot.services.creative import cheapest_image_model, cheapest_video_model
from bot.services.generation import (
    MAX_TAKES,
    GenerationService,
    ImageOptions,
    Requester,
    VideoOptions,
    default_duration,
)
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import is_personal
from bot.services.sequences import FRAME_CHECK_URL, require_clip
from bot.storage import Database

DRAFT_TAKES: Final = MAX_TAKES
"""Takes of an image draft in a server (a personal context makes one: its card holds one)."""

NOT_A_DRAFT: Final = N_("Final works on a draft's result only (`draft:true`).")

DRAFT_MODEL_GIVEN: Final = N_(
    "A draft uses the server's draft model (`/config draft`); leave `model:` (and a video's "
    "`duration:`) out. **Final** then uses yours from `/settings`."
)

DRAFT_IMAGE_GIVEN: Final = N_(
    "A video draft is made from the prompt alone; leave the source image out."
)

FirstFrame = Callable[[Job], Awaitable[str]]
"""``async (job) -> url``: the first frame of a draft clip, as a URL the service can fetch (the
adapter downloads the clip, decodes the frame and posts it). Raises ValidationFailed when it
cannot (nothing charged)."""


class Audited(Protocol):
    """Audits a block of changes to a server's settings (``GuildConfigService.changing``)."""

    def changing(self, guild_id: int, actor: Actor) -> AbstractAsyncContextManager[object]:
        """The block whose changes are audited as one, by ``actor``."""
        ...


@dataclass(frozen=True, slots=True)
class DraftModels:
    """The models drafts use in a server.

    Attributes:
        image: the draft image model; None when the catalogue has no image model.
        video: the draft video model; None when it has no video model.
        image_chosen: the image model is the server's choice (else the cheapest).
        video_chosen: likewise for the video model.
    """

    image: str | None
    video: str | None
    image_chosen: bool = False
    video_chosen: bool = False


def is_draft(options: dict[str, object]) -> bool:
    """Whether stored options (a result's request, a job's details) are a draft's."""
    return options.get("stage") == DRAFT


def shortest_duration(model: VideoModel) -> float:
    """The shortest clip ``model`` makes, seconds (its default when it lists none)."""
    return float(min(model.durations)) if model.durations else default_duration(model)


def final_video_model(
    catalogue: Catalogue, allows: Callable[[str], bool], preferred: str | None
) -> VideoModel | None:
    """The image-to-video model a video draft's Final uses (docs/creative.md).

    The member's model (``preferred``: their ``/settings`` default) when it animates an image;
    else its image-to-video sibling (the catalogue's model whose id shares its family, the part
    before the first ``/``: ``nimbus-pro/text-to-video`` → ``nimbus-pro/image-to-video``); else
    the cheapest image-to-video model (per 5 s). Only models ``allows`` (the member's tiers,
    the server's model list). None when no image-to-video model is allowed.
    """
    animating = [m for m in catalogue.video if m.needs_image and allows(m.id)]
    if not animating:
        return None
    chosen = None if preferred is None else catalogue.video_model(preferred)
    if chosen is not None and chosen in animating:
        return chosen
    if chosen is not None:
        family = chosen.id.split("/", 1)[0]
        for model in animating:
            if model.id.split("/", 1)[0] == family:
                return model
    priced = [m for m in animating if math.isfinite(m.cost_cents_per_5s)]
    return min(priced or animating, key=lambda m: m.cost_cents_per_5s)


def _web_url(url: object) -> bool:
    return isinstance(url, str) and url.startswith(("https://", "http://"))


class DraftService:
    """Draft → Final's rules (see the module).

    Args:
        db: the database (the server's draft settings, in ``creative_settings``).
        generation: the catalogue, the checks and the jobs.
        billing: the member's policy (which models their tiers allow).
        members: members' own defaults (the Final's model and duration).
        guild_config: audits ``/config draft``.
    """

    def __init__(
        self,
        *,
        db: Database,
        generation: GenerationService,
        billing: Billing,
        members: MemberSettingsService,
        guild_config: Audited,
    ) -> None:
        self._db = db
        self._generation = generation
        self._billing = billing
        self._members = members
        self._guild_config = guild_config

    # -- /config draft -------------------------------------------------------------------

    async def models(self, guild_id: int) -> DraftModels:
        """The server's draft models: its ``/config draft``, else the catalogue's cheapest.

        Raises:
            NoApiKeyConfigured, GenAPIError: a default was needed and the catalogue could
                not be had.
        """
        settings = await self._db.creative.settings(guild_id)
        image, video = settings.draft_image_model, settings.draft_video_model
        if image is None or video is None:
            catalogue = await self._generation.catalogue(guild_id)
            image = image or cheapest_image_model(catalogue)
            video = video or cheapest_video_model(catalogue)
        return DraftModels(
            image,
            video,
            image_chosen=settings.draft_image_model is not None,
            video_chosen=settings.draft_video_model is not None,
        )

    async def set_models(
        self,
        guild_id: int,
        *,
        actor: Actor,
        image_model: str | None = None,
        video_model: str | None = None,
        reset: bool = False,
    ) -> CreativeSettings:
        """Set ``/config draft``: the draft image and video models (those given), audited.

        Args:
            guild_id: the server.
            actor: who changes it (audited as ``draft image model``, ``draft video model``).
            image_model: an image model of the catalogue.
            video_model: a text-to-video model of the catalogue (a draft is made from the
                prompt alone).
            reset: back to the defaults (the cheapest models) first.

        Returns:
            The settings after the change.

        Raises:
            ValidationFailed: not an image model, or not a text-to-video model (nothing
                changed).
        """
        if image_model is not None or video_model is not None:
            catalogue = await self._generation.catalogue(guild_id)
            if image_model is not None and catalogue.image_model(image_model) is None:
                raise ValidationFailed(
                    N_("`{model}` is not an image model; pick one from the list."),
                    model=image_model,
                )
            if video_model is not None:
                found = catalogue.video_model(video_model)
                if found is None or found.needs_image:
                    raise ValidationFailed(
                        N_(
                            "`{model}` is not a text-to-video model; a video draft is made "
                            "from the prompt alone."
                        ),
                        model=video_model,
                    )
        values: dict[str, str | None] = {}
        if reset:
            values = {"draft_image_model": None, "draft_video_model": None}
        if image_model is not None:
            values["draft_image_model"] = image_model
        if video_model is not None:
            values["draft_video_model"] = video_model
        async with self._guild_config.changing(guild_id, actor):
            await self._db.creative.update_settings(guild_id, **values)
        return await self._db.creative.settings(guild_id)

    # -- drafts ----------------------------------------------------------------------------

    @staticmethod
    def takes(who: Requester) -> int:
        """How many takes an image draft makes: :data:`DRAFT_TAKES`, one in a personal context."""
        return 1 if is_personal(who.guild_id) else DRAFT_TAKES

    async def image_draft(self, who: Requester, options: ImageOptions) -> ImageOptions:
        """``options`` as an image draft: the server's draft model, marked ``draft``.

        Call it before the member's defaults are applied (their model must not replace the
        draft's; their aspect ratio and suffix still apply).

        Raises:
            ValidationFailed: a model was given, or the service offers no image model.
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        if options.model is not None:
            raise ValidationFailed(DRAFT_MODEL_GIVEN)
        model = (await self.models(who.guild_id)).image
        if model is None:
            raise ValidationFailed(N_("The service offers no image model right now."))
        return dataclasses.replace(options, model=model, stage=DRAFT)

    async def video_draft(self, who: Requester, options: VideoOptions) -> VideoOptions:
        """``options`` as a video draft: the draft video model at its shortest duration.

        Call it before the member's defaults are applied (as :meth:`image_draft`).

        Raises:
            ValidationFailed: a model, a duration or a source image was given, or the
                service offers no video model.
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        if options.model or options.duration is not None:
            raise ValidationFailed(DRAFT_MODEL_GIVEN)
        if options.image_url is not None:
            raise ValidationFailed(DRAFT_IMAGE_GIVEN)
        model_id = (await self.models(who.guild_id)).video
        catalogue = await self._generation.catalogue(who.guild_id)
        model = None if model_id is None else catalogue.video_model(model_id)
        if model is None:
            raise ValidationFailed(N_("The service offers no video model right now."))
        return dataclasses.replace(
            options, model=model.id, duration=shortest_duration(model), stage=DRAFT
        )

    # -- Final -----------------------------------------------------------------------------

    async def final_image(
        self, who: Requester, request: ResultRequest, job: Job | None = None
    ) -> ImageOptions:
        """The Final of an image draft's take: its prompt on the member's model, the take as input.

        The model is the member's ``/settings`` image model where their tiers allow it, else
        the server's default (the first image model they may use: ``GenerationService``'s).
        The take (its result as the service gave it, as Animate and Edit send a result) is
        the one reference image (``image_urls``); the draft's own references are not sent
        again (the take holds them). Aspect ratio and prompt are the draft's.

        Args:
            who: who clicked.
            request: the request behind the take (``r<id>`` of a synchronous one, or its job's).
            job: the take's job, for an asynchronous take (its outputs).

        Raises:
            ValidationFailed: not an image draft, or the take has no image (yet).
        """
        if request.kind != "image" or not is_draft(request.options):
            raise ValidationFailed(NOT_A_DRAFT)
        outputs = request.outputs or (() if job is None else job.outputs)
        take = next((url for url in outputs if _web_url(url)), None)
        if take is None:
            raise ValidationFailed(N_("This take has no image yet; wait for it to finish."))
        model = await self._member_model(who, "image")
        ratio = request.options.get("aspect_ratio")
        return ImageOptions(
            str(request.options.get("prompt") or ""),
            model,
            ratio if isinstance(ratio, str) else None,
            uploaded_image_urls=(take,),
            stage=FINAL,
        )

    async def final_video_options(
        self, who: Requester, job: Job | None, request: ResultRequest
    ) -> tuple[Job, VideoOptions]:
        """The Final of a video draft, its ``image_url`` still to come (``FRAME_CHECK_URL``).

        The model is :func:`final_video_model` of the member's ``/settings`` video model; the
        duration the member's ``/settings`` one where that model makes it, else its default.
        Prompt, aspect ratio and camera are the draft's; audio and a locked camera where the
        draft asked them and the model can.

        Raises:
            ValidationFailed: not a finished video draft of this server, or no image-to-video
                model the member may use.
            NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
        """
        if request.kind != "video" or not is_draft(request.options):
            raise ValidationFailed(NOT_A_DRAFT)
        clip = require_clip(job, who)
        catalogue = await self._generation.catalogue(who.guild_id)
        policy = await self._billing.member_policy(who.guild_id, who.role_ids)
        mine = await self._members.get(who.user_id)
        model = final_video_model(catalogue, policy.allows, mine.video_model)
        if model is None:
            raise ValidationFailed(N_("No image-to-video model is available to you here."))
        duration = mine.video_duration
        if duration is None or (model.durations and duration not in model.durations):
            duration = default_duration(model)
        stored = request.options
        ratio, camera = stored.get("aspect_ratio"), stored.get("camera")
        options = VideoOptions(
            str(stored.get("prompt") or ""),
            model.id,
            duration,
            ratio if isinstance(ratio, str) else None,
            FRAME_CHECK_URL,
            generate_audio=(bool(stored.get("generate_audio")) and model.supports_audio) or None,
            lock_camera=(bool(stored.get("lock_camera")) and model.supports_lock_camera) or None,
            image_uploaded=True,
            camera=camera if isinstance(camera, str) else None,
            stage=FINAL,
        )
        return clip, options

    async def _member_model(self, who: Requester, kind: str) -> str | None:
        """The member's ``/settings`` model of ``kind`` when usable here, else None."""
        mine = await self._members.get(who.user_id)
        model = mine.image_model if kind == "image" else mine.video_model
        if model is None:
            return None
        catalogue = await self._generation.catalogue(who.guild_id)
        listed = catalogue.image_model(model) if kind == "image" else catalogue.video_model(model)
        if listed is None:
            return None
        policy = await self._billing.member_policy(who.guild_id, who.role_ids)
        return model if policy.allows(model) else None


__all__ = [
    "DRAFT_TAKES",
    "DraftModels",
    "DraftService",
    "FirstFrame",
    "final_video_model",
    "is_draft",
    "shortest_duration",
]
