"""``/config channels``: where the commands may be used (every channel, or those allowed)."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services, show_settings
from bot.discord.interactions import requester
from bot.i18n import _


class ChannelsGroup(ConfigGroup):
    """``/config channels``: the channels the commands may be used in."""

    def __init__(self) -> None:
        super().__init__(name="channels", description="Where the commands may be used")

    @app_commands.command(name="allow")
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
        await _allow(interaction, channel, allowed=True)
        await show_settings(
            interaction, _("Commands allowed in {channel}.", channel=channel.mention)
        )

    @app_commands.command(name="disallow")
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
        await _allow(interaction, channel, allowed=False)
        await show_settings(interaction, _("{channel} removed.", channel=channel.mention))

    @app_commands.command(name="everywhere")
    async def channels_everywhere(self, interaction: discord.Interaction[GenBot]) -> None:
        """Allow the commands in every channel again."""
        who = requester(interaction)
        await services(interaction).guild_config.allow_everywhere(
            who.guild_id, actor=actor(interaction)
        )
        await show_settings(interaction, _("Commands allowed in every channel."))


async def _allow(
    interaction: discord.Interaction[GenBot],
    channel: discord.TextChannel | discord.ForumChannel,
    *,
    allowed: bool,
) -> None:
    """Add ``channel`` to the server's allowed channels, or remove it (audited as its actor)."""
    await services(interaction).guild_config.allow_channel(
        requester(interaction).guild_id, channel.id, allowed=allowed, actor=actor(interaction)
    )
