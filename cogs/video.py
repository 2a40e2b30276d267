"""``/video`` and ``/video-advanced``: asynchronous videos, finished by the poller.

The request is docs/genapi.md §4.2.
"""

from __future__ import annotations

import math
from decimal import Decimal

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.command_flows import video_command
from bot.discord.creative_commands import (
    MAX_NAME_LENGTH,
    character_autocomplete,
    style_autocomplete,
)
from bot.discord.interactions import (
    MAX_CHOICES,
    allowed_models,
    model_autocomplete,
    requester,
    require_placeholder_permissions,
)
from bot.discord.render.text import truncate
from bot.discord.tree import AdmittedModal, answer_error
from bot.discord.video_form import add_duration_select, priced_models
from bot.domain import CAMERA_PRESETS
from bot.errors import ValidationFailed
from bot.genapi.wire import VideoModel
from bot.i18n import N_, _, money, number
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_DURATION_SECONDS,
    MAX_PROMPT_LENGTH,
    MAX_TAKES,
    MAX_URL_LENGTH,
    MIN_DURATION_SECONDS,
    GenerationService,
    default_duration,
)
from bot.services.member_settings import MemberSettingsService
from bot.services.submissions import Upload, VideoRequest

RATIOS = [app_commands.Choice(name=ratio, value=ratio) for ratio in ASPECT_RATIOS]
CAMERAS = [app_commands.Choice(name=preset.label, value=preset.value) for preset in CAMERA_PRESETS]
"""``/video camera:``'s choices (:data:`bot.domain.CAMERA_PRESETS`; Discord: at most 25)."""


"""Options in a select menu (Discord: at most 25)."""


class VideoCog(commands.Cog):
    """Make videos."""

    def __init__(
        self,
        generation: GenerationService,
        members: MemberSettingsService,
    ) -> None:
        self.generation = generation
        self.members = members

    @app_commands.command(name="video")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.autocomplete(
        model=model_autocomplete("video"),
        style=style_autocomplete,
        character=character_autocomplete,
    )
    @app_commands.choices(aspect_ratio=RATIOS, camera=CAMERAS)
    async def video(
        self,
        interaction: discord.Interaction[GenBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
        model: str | None = None,
        duration: app_commands.Range[float, MIN_DURATION_SECONDS, MAX_DURATION_SECONDS]
        | None = None,
        aspect_ratio: str | None = None,
        image_url: app_commands.Range[str, 1, MAX_URL_LENGTH] | None = None,
        image: discord.Attachment | None = None,
        generate_audio: bool | None = None,
        lock_camera: bool | None = None,
        camera: str | None = None,
        takes: app_commands.Range[int, 1, MAX_TAKES] | None = None,
        enhance: bool | None = None,
        style: app_commands.Range[str, 1, MAX_NAME_LENGTH] | None = None,
        character: app_commands.Range[str, 1, MAX_NAME_LENGTH] | None = None,
        draft: bool | None = None,
    ) -> None:
        """Generate a video; it is posted here when ready.

        Args:
            interaction: the interaction.
            prompt: what happens in the video
            model: the video model (default: yours from /settings)
            duration: length in seconds (the model's choices; default: yours, else 5)
            aspect_ratio: the video's shape (default: yours from /settings, else 16:9)
            image_url: a source image's URL, for image-to-video models
            image: a source image to upload, for image-to-video models
            generate_audio: add synchronised audio (models that support it)
            lock_camera: keep the camera still (models that support it)
            camera: a camera movement added to the prompt (static also locks it where possible)
            takes: how many versions to make at once, 1 to 4, each charged (default: yours, else 1)
            enhance: rewrite the prompt with the server's text model first; you see both prices
            style: one of the server's styles (/config style): its words and reference images
            character: one of your characters (/settings character), or one shared here
            draft: a short cheap clip on the server's draft model; Final makes it on yours
        """
        upload = None if image is None else Upload(image.url, image.content_type, image.size)
        request = VideoRequest(
            prompt,
            model=model,
            duration=duration,
            aspect_ratio=aspect_ratio,
            image_url=image_url,
            image=upload,
            generate_audio=generate_audio,
            lock_camera=lock_camera,
            camera=camera,
            takes=takes,
            enhance=bool(enhance),
            style=style,
            character=character,
            draft=bool(draft),
        )
        await video_command(interaction, request)

    @app_commands.command(name="video-advanced")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    async def video_advanced(self, interaction: discord.Interaction[GenBot]) -> None:
        """Make a video from a form: prompt, model, an uploaded reference image, duration.

        The form is the response itself (a modal answers within Discord's 3 seconds, so no
        deferral); its submission goes through ``/video``'s checks and path.

        Raises:
            ValidationFailed: channel not allowed, missing permissions, no model list yet, or
                no video model this member may use (answered ephemerally, costing nothing).
        """
        who = requester(interaction)
        require_placeholder_permissions(interaction)
        await self.generation.check_channel(who)
        models = await allowed_models(interaction, "video")
        if models is None:
            raise ValidationFailed(N_("The model list is still loading; try again in a moment."))
        if not models:
            raise ValidationFailed(N_("No video model is available to you here."))
        mine = await self.members.get(interaction.user.id)
        await VideoModal(models, preferred=mine.video_model).show(interaction)

    @video.autocomplete("duration")
    async def _duration(
        self, interaction: discord.Interaction[GenBot], current: str | float
    ) -> list[app_commands.Choice[float]]:
        # discord.py hands a number option's partial value over as typed, or as NaN when empty.
        catalogue = await self.generation.cached_catalogue(interaction.guild_id)
        chosen = getattr(interaction.namespace, "model", None)
        model = None if catalogue is None or not chosen else catalogue.video_model(chosen)
        if model is not None:
            durations = sorted(model.durations)
        elif catalogue is not None:
            durations = sorted({d for m in catalogue.video for d in m.durations})
        else:
            durations = []
        if isinstance(current, str):
            typed = current.strip()
        else:
            typed = "" if math.isnan(current) else f"{current:g}"
        return [
            app_commands.Choice(name=_("{seconds} seconds", seconds=number(d)), value=float(d))
            for d in durations
            if f"{d:g}".startswith(typed)
        ][:MAX_CHOICES]


class VideoModal(AdmittedModal, title=N_("Advanced video")):
    """``/video-advanced``'s form: prompt, model, reference image and duration.

    Each field is a ``discord.ui.Label`` (component type 18); the reference is a
    ``discord.ui.FileUpload`` (type 19, discord.py 2.7), optional and one file: Discord sends
    its attachment in the submission's resolved data (components reference, "File Upload").

    Args:
        models: the video models the member may use; the cheapest (at its default duration)
            is listed first, at most :data:`~bot.discord.video_form.MAX_SELECT_OPTIONS` of them.
        preferred: the member's default video model (``/settings``), preselected when it is
            among ``models`` (so allowed to them here); else the cheapest is.
    """

    def __init__(
        self,
        models: tuple[VideoModel, ...],
        *,
        preferred: str | None = None,
    ) -> None:
        super().__init__()
        priced = priced_models(models)
        ids = [model.id for _, model in priced]
        self.default_model = preferred if preferred in ids else ids[0]
        self.prompt: discord.ui.TextInput[VideoModal] = discord.ui.TextInput(
            custom_id="prompt",
            style=discord.TextStyle.paragraph,
            max_length=MAX_PROMPT_LENGTH,
            placeholder=_("What happens in the video"),
        )
        self.model: discord.ui.Select[VideoModal] = discord.ui.Select(
            custom_id="model",
            options=[
                discord.SelectOption(
                    label=truncate(model.label, 100),
                    value=model.id,
                    description=truncate(_model_note(price, model), 100),
                    default=model.id == self.default_model,
                )
                for price, model in priced
            ],
        )
        self.reference: discord.ui.FileUpload[VideoModal] = discord.ui.FileUpload(
            custom_id="reference", required=False, min_values=0, max_values=1
        )
        self.add_item(discord.ui.Label(text=_("Prompt"), component=self.prompt))
        self.add_item(discord.ui.Label(text=_("Model"), component=self.model))
        self.add_item(
            discord.ui.Label(
                text=_("Reference image"),
                description=_("For image-to-video models: a PNG, JPEG or WebP to animate."),
                component=self.reference,
            )
        )
        self.duration = add_duration_select(self, priced)

    async def on_submit(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Check the upload as ``/video``'s ``image``, then run ``/video``'s path.

        Raises:
            ValidationFailed: the upload is not an image or too large, or the options fail
                ``/video``'s checks (e.g. an image-to-video model without an image); no
                upstream call is made and nothing is charged.
        """
        upload = self.reference.values[0] if self.reference.values else None
        chosen = self.duration.values if self.duration is not None else []
        request = VideoRequest(
            self.prompt.value,
            self.model.values[0] if self.model.values else self.default_model,
            float(chosen[0]) if chosen else None,
            image=None if upload is None else Upload(upload.url, upload.content_type, upload.size),
            takes=1,  # the form asks for one video
        )
        # The member's defaults for what the form left out: duration, shape, suffix.
        await video_command(interaction, request)

    async def on_error(  # type: ignore[override]
        self, interaction: discord.Interaction[GenBot], error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


def _model_note(price: Decimal | None, model: VideoModel) -> str:
    cost = _("price unknown") if price is None else money(price)
    what = _("animates an image") if model.needs_image else _("from text")
    seconds = number(default_duration(model))
    return _("{cost} for {seconds} s", cost=cost, seconds=seconds) + f" · {what}"


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(VideoCog(services.generation, services.members))
