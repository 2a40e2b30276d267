"""``/config``: a server's API key, budgets, caps and channels (Manage Server only)."""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.app import GenBot
from bot.errors import ValidationFailed
from bot.interactions import requester
from bot.render.admin import config_embed, old_key_note
from bot.services.guild_config import GuildConfigService, parse_budget
from bot.storage import UNSET, LimitUpdate
from bot.tree import send_ephemeral, sentence_for


def _require_manage_guild(interaction: discord.Interaction[GenBot]) -> None:
    # default_permissions only hides the command; a server can override it, so check here too.
    if not interaction.permissions.manage_guild:
        raise app_commands.MissingPermissions(["manage_guild"])


class ApiKeyModal(discord.ui.Modal, title="Set the Generation API key"):
    """Asks for the key in a modal, so that it never shows as a visible command option."""

    key: discord.ui.TextInput[ApiKeyModal] = discord.ui.TextInput(
        label="API key", placeholder="Paste the key from your account settings", max_length=256
    )

    def __init__(self, service: GuildConfigService, guild_id: int) -> None:
        super().__init__()
        self.service = service
        self.guild_id = guild_id

    async def on_submit(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Check the key with the service, then store it encrypted; never echo it."""
        _require_manage_guild(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        change = await self.service.set_api_key(self.guild_id, self.key.value)
        await interaction.edit_original_response(
            content=f"API key saved (ending in `{change.last4}`); this server's requests now "
            f"use it.{old_key_note(change)}"
        )

    async def on_error(  # type: ignore[override]
        self, interaction: discord.Interaction[GenBot], error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await send_ephemeral(interaction, sentence_for(error))


@app_commands.guild_only()
@app_commands.default_permissions(manage_guild=True)
class ConfigCog(
    commands.GroupCog, group_name="config", group_description="Set up genbot for this server"
):
    """Server settings, for members with Manage Server."""

    api_key = app_commands.Group(name="api-key", description="This server's Generation API key")
    channels = app_commands.Group(name="channels", description="Where the commands may be used")

    def __init__(self, bot: GenBot) -> None:
        self.bot = bot
        self.service = bot.guild_config

    async def interaction_check(self, interaction: discord.Interaction[GenBot]) -> bool:  # type: ignore[override]
        """Every subcommand needs Manage Server, whatever the server's overrides say."""
        _require_manage_guild(interaction)
        return True

    @api_key.command(name="set")
    async def api_key_set(self, interaction: discord.Interaction[GenBot]) -> None:
        """Set this server's API key (asked in a private form, checked before it is stored)."""
        who = requester(interaction)
        await interaction.response.send_modal(ApiKeyModal(self.service, who.guild_id))

    @api_key.command(name="remove")
    async def api_key_remove(self, interaction: discord.Interaction[GenBot]) -> None:
        """Remove this server's API key (kept only until the jobs made with it finish)."""
        who = requester(interaction)
        change = await self.service.remove_api_key(who.guild_id)
        if not change.had_key:
            text = "This server has no API key of its own; nothing was removed."
        elif self.bot.services.default_key is not None:
            text = "This server's API key was removed; requests now use the bot's shared key."
        else:
            text = "This server's API key was removed; commands need a key again to work."
        await interaction.response.send_message(text + old_key_note(change), ephemeral=True)

    @app_commands.command(name="budget")
    async def budget(
        self,
        interaction: discord.Interaction[GenBot],
        monthly: str | None = None,
        daily_per_user: str | None = None,
    ) -> None:
        """Set spending budgets in dollars (e.g. 25 or 12.50; "unlimited" removes one).

        Args:
            interaction: the interaction.
            monthly: the server's budget per calendar month (UTC)
            daily_per_user: each member's budget per day (UTC)
        """
        who = requester(interaction)
        if monthly is None and daily_per_user is None:
            raise ValidationFailed("Give `monthly`, `daily_per_user`, or both.")
        new_monthly: LimitUpdate = UNSET if monthly is None else parse_budget(monthly)
        new_daily: LimitUpdate = UNSET if daily_per_user is None else parse_budget(daily_per_user)
        await self.service.set_budgets(who.guild_id, monthly=new_monthly, daily_per_user=new_daily)
        await self._show(interaction, "Budgets updated.")

    @app_commands.command(name="limits")
    async def limits(
        self,
        interaction: discord.Interaction[GenBot],
        videos_per_user: app_commands.Range[int, 1, 100] | None = None,
        videos_per_server: app_commands.Range[int, 1, 1000] | None = None,
    ) -> None:
        """Cap how many videos may be in progress at once.

        Args:
            interaction: the interaction.
            videos_per_user: videos one member may have in progress
            videos_per_server: videos the whole server may have in progress
        """
        who = requester(interaction)
        await self.service.set_caps(
            who.guild_id,
            per_user=UNSET if videos_per_user is None else videos_per_user,
            per_guild=UNSET if videos_per_server is None else videos_per_server,
        )
        await self._show(interaction, "Limits updated.")

    @channels.command(name="allow")
    async def channels_allow(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel | discord.ForumChannel,
    ) -> None:
        """Allow the commands in a channel (once any is allowed, only those are).

        Args:
            interaction: the interaction.
            channel: the channel to allow
        """
        who = requester(interaction)
        await self.service.allow_channel(who.guild_id, channel.id, allowed=True)
        await self._show(interaction, f"Commands allowed in {channel.mention}.")

    @channels.command(name="disallow")
    async def channels_disallow(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel | discord.ForumChannel,
    ) -> None:
        """Stop allowing the commands in a channel.

        Args:
            interaction: the interaction.
            channel: the channel to remove
        """
        who = requester(interaction)
        await self.service.allow_channel(who.guild_id, channel.id, allowed=False)
        await self._show(interaction, f"{channel.mention} removed.")

    @channels.command(name="everywhere")
    async def channels_everywhere(self, interaction: discord.Interaction[GenBot]) -> None:
        """Allow the commands in every channel again."""
        who = requester(interaction)
        await self.service.allow_everywhere(who.guild_id)
        await self._show(interaction, "Commands allowed in every channel.")

    @app_commands.command(name="admin-channel")
    async def admin_channel(
        self, interaction: discord.Interaction[GenBot], channel: discord.TextChannel | None = None
    ) -> None:
        """Set where key problems are announced (leave empty to stop).

        Args:
            interaction: the interaction.
            channel: the channel for notices to admins
        """
        who = requester(interaction)
        await self.service.set_admin_channel(who.guild_id, channel.id if channel else None)
        await self._show(interaction, "Admin channel updated.")

    @app_commands.command(name="show")
    async def show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show this server's settings."""
        await self._show(interaction, None)

    async def _show(self, interaction: discord.Interaction[GenBot], note: str | None) -> None:
        config = await self.service.show(requester(interaction).guild_id)
        await interaction.response.send_message(
            content=note, embed=config_embed(config), ephemeral=True
        )


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    await bot.add_cog(ConfigCog(bot))
