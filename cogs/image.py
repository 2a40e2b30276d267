"""``/image``: image generation (docs/genapi.md §4.4), synchronous or finished by the poller."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.command_flows import image_command
from bot.discord.creative_commands import (
    MAX_NAME_LENGTH,
    character_autocomplete,
    style_autocomplete,
)
from bot.discord.interactions import model_autocomplete
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_PROMPT_LENGTH,
    MAX_REFERENCE_IMAGES,
    MAX_TAKES,
    MAX_URL_LENGTH,
)
from bot.services.submissions import ImageRequest, Upload

MODES = [
    app_commands.Choice(name="Text to image", value="t2i"),
    app_commands.Choice(name="Image to image", value="i2i"),
    app_commands.Choice(name="Edit the text in an image", value="i2i_text"),
]
MAX_REFERENCE_URLS_LENGTH = MAX_REFERENCE_IMAGES * (MAX_URL_LENGTH + 1)
"""Characters of ``image_urls``: that many URLs and the spaces between them (Discord: 6000)."""

RATIOS = [app_commands.Choice(name=ratio, value=ratio) for ratio in ASPECT_RATIOS]


class ImageCog(commands.Cog):
    """Make images."""

    @app_commands.command(name="image")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.autocomplete(
        model=model_autocomplete("image"),
        style=style_autocomplete,
        character=character_autocomplete,
    )
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
        image_urls: app_commands.Range[str, 1, MAX_REFERENCE_URLS_LENGTH] | None = None,
        image2: discord.Attachment | None = None,
        image3: discord.Attachment | None = None,
        image4: discord.Attachment | None = None,
        takes: app_commands.Range[int, 1, MAX_TAKES] | None = None,
        enhance: bool | None = None,
        style: app_commands.Range[str, 1, MAX_NAME_LENGTH] | None = None,
        character: app_commands.Range[str, 1, MAX_NAME_LENGTH] | None = None,
        draft: bool | None = None,
    ) -> None:
        """Generate an image.

        Args:
            interaction: the interaction.
            prompt: what the image shows
            model: the image model (default: yours from /settings, else the first in /models)
            aspect_ratio: the image's shape (default: yours from /settings)
            mode: text to image (default), image to image, or edit the text in an image
            image_url: a source image's URL, for the image modes
            image: a source image to upload, for the image modes
            image_urls: reference images' URLs, separated by spaces (models that take several)
            image2: a second reference image to upload (models that take several)
            image3: a third reference image to upload (models that take several)
            image4: a fourth reference image to upload (models that take several)
            takes: how many versions to make at once, 1 to 4, each charged (default: yours, else 1)
            enhance: rewrite the prompt with the server's text model first; you see both prices
            style: one of the server's styles (/config style): its words and reference images
            character: one of your characters (/settings character), or one shared here
            draft: 4 cheap takes on the server's draft model; Final makes the one you pick on yours
        """
        uploads = tuple(
            Upload(a.url, a.content_type, a.size)
            for a in (image, image2, image3, image4)
            if a is not None
        )
        request = ImageRequest(
            prompt,
            model=model,
            aspect_ratio=aspect_ratio,
            mode=mode,
            image_url=image_url,
            image_urls=image_urls,
            uploads=uploads,
            takes=takes,
            enhance=bool(enhance),
            style=style,
            character=character,
            draft=bool(draft),
        )
        await image_command(interaction, request)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ImageCog())
