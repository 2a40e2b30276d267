"""``/models``: the catalogue, paged with buttons (spec 4.1)."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.interactions import requester
from bot.discord.render import catalogue_pages
from bot.discord.tree import AdmittedView

KINDS = [
    app_commands.Choice(name="Text", value="text"),
    app_commands.Choice(name="Image", value="image"),
    app_commands.Choice(name="Video", value="video"),
]


class Pager(AdmittedView):
    """Previous / next buttons over a list of embeds, usable only by who asked.

    Args:
        pages: the embeds, one per page.
        owner_id: the user who may turn the pages.
    """

    def __init__(self, pages: list[discord.Embed], owner_id: int) -> None:
        super().__init__(timeout=600)
        self.pages = pages
        self.owner_id = owner_id
        self.index = 0
        self._sync_buttons()

    def _sync_buttons(self) -> None:
        self.previous.disabled = self.index == 0
        self.next.disabled = self.index >= len(self.pages) - 1

    async def interaction_check(self, interaction: discord.Interaction[discord.Client]) -> bool:
        """Only the user who ran the command turns its pages (not while the bot shuts down)."""
        return interaction.user.id == self.owner_id and await super().interaction_check(interaction)

    async def _show(self, interaction: discord.Interaction[discord.Client], step: int) -> None:
        self.index = max(0, min(len(self.pages) - 1, self.index + step))
        self._sync_buttons()
        await interaction.response.edit_message(embed=self.pages[self.index], view=self)

    @discord.ui.button(label="Previous", style=discord.ButtonStyle.secondary)
    async def previous(
        self, interaction: discord.Interaction[discord.Client], _: discord.ui.Button[Pager]
    ) -> None:
        """Show the previous page."""
        await self._show(interaction, -1)

    @discord.ui.button(label="Next", style=discord.ButtonStyle.primary)
    async def next(
        self, interaction: discord.Interaction[discord.Client], _: discord.ui.Button[Pager]
    ) -> None:
        """Show the next page."""
        await self._show(interaction, +1)


class ModelsCog(commands.Cog):
    """Browse the models."""

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot

    @app_commands.command(name="models")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    @app_commands.choices(type=KINDS)
    async def models(
        self, interaction: discord.Interaction[GenBot], type: str | None = None
    ) -> None:
        """List the models, with their prices; those your roles may not use are marked.

        Args:
            interaction: the interaction.
            type: only the text, image or video models
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        catalogue = await self.bot.generation.catalogue(who.guild_id)
        policy = await self.bot.services.billing.member_policy(who.guild_id, who.role_ids)
        pages = catalogue_pages(catalogue, type, policy.allows)
        if len(pages) == 1:
            await interaction.edit_original_response(embed=pages[0])
        else:
            await interaction.edit_original_response(embed=pages[0], view=Pager(pages, who.user_id))


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ModelsCog(bot))
