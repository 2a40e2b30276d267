"""``/image``: image generation (spec 4.4), synchronous or finished by the poller."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.app import GenBot
from bot.cards import start_image
from bot.interactions import model_autocomplete, requester, require_placeholder_permissions
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_PROMPT_LENGTH,
    MAX_URL_LENGTH,
    ImageOptions,
    check_attachment,
)
from bot.tree import PUBLIC_DEFER

MODES = [
    app_commands.Choice(name="Text to image", value="t2i"),
    app_commands.Choice(name="Image to image", value="i2i"),
    app_commands.Choice(name="Edit the text in an image", value="i2i_text"),
]
RATIOS = [app_commands.Choice(name=ratio, value=ratio) for ratio in ASPECT_RATIOS]


class ImageCog(commands.Cog):
    """Make images."""

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot

    @app_commands.command(name="image")
    @app_commands.guild_only()
    @app_commands.autocomplete(model=model_autocomplete("image"))
    @app_commands.choices(mode=MODES, aspect_ratio=RATIOS)
    async def image(
        self,
        interaction: discord.Interaction[GenBot],
        prompt: app_commands.Range[str, 1, MAX_PROMPT_LENGTH],
        model: str | None = None,
        aspect_ratio: str | None = None,
        mode: str | None = None,
        image_url: app_commands.Range[str, 1, MAX_URL_LENGTH] | None = None,
        image: discord.Attachment | None = None,
    ) -> None:
        """Generate an image.

        Args:
            interaction: the interaction.
            prompt: what the image shows
            model: the image model (default: the first in /models)
            aspect_ratio: the image's shape
            mode: text to image (default), image to image, or edit the text in an image
            image_url: a source image's URL, for the image modes
            image: a source image to upload, for the image modes
        """
        who = requester(interaction)
        # Checked up front: an asynchronous model's result comes as a channel message.
        require_placeholder_permissions(interaction)
        if image is not None:
            check_attachment(image.content_type, image.size)
        interaction.extras[PUBLIC_DEFER] = True
        await interaction.response.defer(thinking=True)
        source = image.url if image is not None else image_url
        options = ImageOptions(
            prompt, model, aspect_ratio, mode, source, image_uploaded=image is not None
        )
        await start_image(interaction, who, options)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ImageCog(bot))
