"""``/image``: image generation (docs/genapi.md §4.4), synchronous or finished by the poller."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.creative_commands import (
    MAX_NAME_LENGTH,
    apply_creative,
    character_autocomplete,
    style_autocomplete,
)
from bot.discord.enhance_flow import start_enhance
from bot.discord.interactions import model_autocomplete, requester, require_placeholder_permissions
from bot.discord.request_flows import send_note, start_image
from bot.discord.tree import PUBLIC_DEFER
from bot.services.drafts import DraftService
from bot.services.generation import (
    ASPECT_RATIOS,
    MAX_PROMPT_LENGTH,
    MAX_REFERENCE_IMAGES,
    MAX_TAKES,
    MAX_URL_LENGTH,
    ImageOptions,
    check_attachment,
)
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import is_personal
from bot.services.sequences import SequenceService

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

    def __init__(
        self, members: MemberSettingsService, sequences: SequenceService, drafts: DraftService
    ) -> None:
        self.members = members
        self.sequences = sequences
        self.drafts = drafts

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
        who = requester(interaction)
        # Checked up front: an asynchronous model's result comes as a channel message.
        require_placeholder_permissions(interaction)
        uploads = [a for a in (image, image2, image3, image4) if a is not None]
        for upload in uploads:
            check_attachment(upload.content_type, upload.size)
        typed = ([image_url] if image_url else []) + (image_urls or "").split()
        if len(uploads) + len(typed) <= 1:
            # One source image: image_url, as before (every image model reads it).
            source = uploads[0].url if uploads else image_url
            options = ImageOptions(
                prompt, model, aspect_ratio, mode, source, image_uploaded=bool(uploads)
            )
        else:
            # Several: all of them as the spec's image_urls (docs/genapi.md §4.4).
            options = ImageOptions(
                prompt,
                model,
                aspect_ratio,
                mode,
                image_urls=tuple(typed),
                uploaded_image_urls=tuple(u.url for u in uploads),
            )
        mine = await self.members.get(interaction.user.id)
        if enhance:
            # The rewrite and the choice are the member's alone; the image comes after.
            await interaction.response.defer(thinking=True, ephemeral=True)
        else:
            # Private results: a synchronous image only the member sees (an
            # asynchronous one still gets its card in the channel; the answer links it).
            interaction.extras[PUBLIC_DEFER] = not mine.private
            await interaction.response.defer(thinking=True, ephemeral=mine.private)
        if draft:  # the draft model, before the member's own (docs/creative.md)
            options = await self.drafts.image_draft(who, options)
            takes = takes or self.drafts.takes(who)
        applied = await self.members.apply_member_defaults(who, options, mine)
        chosen = await apply_creative(
            interaction, who, applied.options, style=style, character=character
        )
        if takes is None and not is_personal(who.guild_id):
            takes = await self.sequences.default_takes(who.user_id)
        if enhance:
            await start_enhance(interaction, who, chosen, takes=takes or 1)
        else:
            await start_image(interaction, who, chosen, takes=takes or 1)
        await send_note(interaction, applied.note)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(ImageCog(services.members, services.sequences, services.drafts))
