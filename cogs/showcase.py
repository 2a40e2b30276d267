"""The showcase's buttons: Share under a finished result, Vote under a showcase post.

Both are ``discord.ui.DynamicItem`` instances whose custom ids carry the job or the entry
(:data:`bot.discord.render.buttons.SHOWCASE_CUSTOM_ID`), so they work after any restart. Share
is for the member who asked for the result only (the service checks it): a private result is
shared by its owner or not at all. A vote is stored once per member and entry. Admins remove
an entry on the dashboard's Showcase page.
"""

from __future__ import annotations

import logging

import discord
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.delivery import send_card
from bot.discord.interactions import loaded_cog
from bot.discord.render.buttons import SHOWCASE_CUSTOM_ID
from bot.discord.render.showcase import (
    SHARED,
    SHARED_BEFORE,
    VOTED,
    VOTED_BEFORE,
    showcase_post,
)
from bot.discord.tree import ActionButton, answer_error, send_ephemeral
from bot.i18n import _, using
from bot.services.showcase import ShowcaseService

log = logging.getLogger(__name__)

Interaction = discord.Interaction[GenBot]


class ShowcaseAction(ActionButton, template=SHOWCASE_CUSTOM_ID):
    """Share (``gb:share:j<job id>``) or Vote (``gb:vote:s<entry id>``); restart-safe.

    Args:
        action: ``share`` or ``vote``.
        ref: ``j<job id>`` or ``s<entry id>``.
    """

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Share or vote; any refusal is one ephemeral sentence."""
        try:
            if self.action == "share" and self.ref.startswith("j"):
                await _share(interaction, int(self.ref[1:]))
            elif self.action == "vote" and self.ref.startswith("s"):
                await _vote(interaction, int(self.ref[1:]))
        except Exception as exc:
            await answer_error(interaction, exc)


async def _share(interaction: Interaction, job_id: int) -> None:
    cog = loaded_cog(interaction, ShowcaseCog)
    entry, added = await cog.showcase.share(job_id, interaction.user.id)
    await send_ephemeral(interaction, _(SHARED) if added else _(SHARED_BEFORE))
    if not added:
        return
    channel_id, _public = await cog.showcase.settings(entry.guild_id)
    if channel_id is None:
        return
    channel = interaction.client.get_partial_messageable(channel_id, guild_id=entry.guild_id)
    try:
        # The channel's post is the server's: in the server's language.
        with using(await interaction.client.locales.of(entry.guild_id)):
            post = showcase_post(entry)
        message = await send_card(channel, post)
    except discord.HTTPException as exc:  # the entry stands; the channel only echoes it
        log.warning("could not post in the showcase channel of %s: %s", entry.guild_id, exc)
        return
    await cog.showcase.posted(entry.id, channel_id, message.id)


async def _vote(interaction: Interaction, entry_id: int) -> None:
    cog = loaded_cog(interaction, ShowcaseCog)
    counted, votes = await cog.showcase.vote(entry_id, interaction.user.id)
    await send_ephemeral(interaction, _(VOTED if counted else VOTED_BEFORE, votes=votes))


class ShowcaseCog(commands.Cog):
    """Registers the Share and Vote buttons."""

    def __init__(self, bot: GenBot, showcase: ShowcaseService) -> None:
        self.bot = bot
        self.showcase = showcase

    async def cog_load(self) -> None:
        """Add the dynamic buttons."""
        self.bot.add_dynamic_items(ShowcaseAction)

    async def cog_unload(self) -> None:
        """Remove them again."""
        self.bot.remove_dynamic_items(ShowcaseAction)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ShowcaseCog(bot, bot.services.showcases))
