"""``/video``: asynchronous video generation (spec 4.2), finished by the poller."""

from __future__ import annotations

import math

import discord
from discord import app_commands
from discord.ext import commands

from bot.app import GenBot
from bot.cards import start_video
from bot.interactions import (
    MAX_CHOICES,
    model_autocomplete,
    requester,
    require_placeholder_permissions,
)
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_DURATION_SECONDS,
    MAX_PROMPT_LENGTH,
    MAX_URL_LENGTH,
    MIN_DURATION_SECONDS,
    VideoOptions,
    check_attachment,
)

RATIOS = [app_commands.Choice(name=ratio, value=ratio) for ratio in ASPECT_RATIOS]


class VideoCog(commands.Cog):
    """Make videos."""

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot

    @app_commands.command(name="video")
    @app_commands.guild_only()
    @app_commands.autocomplete(model=model_autocomplete("video"))
    @app_commands.choices(aspect_ratio=RATIOS)
    async def video(
        self,
        interaction: discord.Interaction[GenBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
        model: str,
        duration: app_commands.Range[float, MIN_DURATION_SECONDS, MAX_DURATION_SECONDS]
        | None = None,
        aspect_ratio: str | None = None,
        image_url: app_commands.Range[str, 1, MAX_URL_LENGTH] | None = None,
        image: discord.Attachment | None = None,
        generate_audio: bool | None = None,
        lock_camera: bool | None = None,
    ) -> None:
        """Generate a video; it is posted here when ready.

        Args:
            interaction: the interaction.
            prompt: what happens in the video
            model: the video model
            duration: length in seconds (the model's choices)
            aspect_ratio: the video's shape (default 16:9)
            image_url: a source image's URL, for image-to-video models
            image: a source image to upload, for image-to-video models
            generate_audio: add synchronised audio (models that support it)
            lock_camera: keep the camera still (models that support it)
        """
        who = requester(interaction)
        require_placeholder_permissions(interaction)
        if image is not None:
            check_attachment(image.content_type, image.size)
        await interaction.response.defer(ephemeral=True, thinking=True)
        source = image.url if image is not None else image_url
        options = VideoOptions(
            prompt,
            model,
            duration,
            aspect_ratio,
            source,
            generate_audio,
            lock_camera,
            image_uploaded=image is not None,
        )
        await start_video(interaction, who, options)

    @video.autocomplete("duration")
    async def _duration(
        self, interaction: discord.Interaction[GenBot], current: str | float
    ) -> list[app_commands.Choice[float]]:
        # discord.py hands a number option's partial value over as typed, or as NaN when empty.
        catalogue = await self.bot.cached_catalogue(interaction.guild_id)
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
            app_commands.Choice(name=f"{d:g} seconds", value=float(d))
            for d in durations
            if f"{d:g}".startswith(typed)
        ][:MAX_CHOICES]


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(VideoCog(bot))
