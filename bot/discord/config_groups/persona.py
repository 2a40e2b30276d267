"""``/config persona``: a channel's system prompt and model for ``/chat`` and ``/text``."""

from __future__ import annotations

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services
from bot.discord.interactions import model_autocomplete, requester
from bot.discord.render.text import truncate
from bot.i18n import _
from bot.services.guild_config import MAX_PERSONA_CHARS


class PersonaGroup(ConfigGroup):
    """``/config persona``: the channels' personas (their threads get them too)."""

    def __init__(self) -> None:
        super().__init__(
            name="persona", description="A system prompt and model for /chat and /text in a channel"
        )

    @app_commands.command(name="set")
    @app_commands.autocomplete(model=model_autocomplete("text"))
    async def persona_set(
        self,
        interaction: discord.Interaction[GenBot],
        channel: discord.TextChannel,
        system: app_commands.Range[str, 1, MAX_PERSONA_CHARS],
        model: str | None = None,
        locked: bool = False,
    ) -> None:
        """Give a channel a persona for /chat and /text there and in its threads.

        Args:
            interaction: the interaction.
            channel: the channel (its threads get it too)
            system: the system prompt, sent before each member's own
            model: the default text model there (members may still pick another)
            locked: members may not give their own system prompt there (default: they may)
        """
        who = requester(interaction)
        await services(interaction).guild_config.set_persona(
            who.guild_id, channel.id, system, model, locked=locked, actor=actor(interaction)
        )
        text = _("{channel} now has a persona for /chat and /text.", channel=channel.mention)
        if locked:
            text += " " + _("It is locked: members cannot give their own `system` there.")
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="remove")
    async def persona_remove(
        self, interaction: discord.Interaction[GenBot], channel: discord.TextChannel
    ) -> None:
        """Remove a channel's persona.

        Args:
            interaction: the interaction.
            channel: the channel
        """
        removed = await services(interaction).guild_config.remove_persona(
            requester(interaction).guild_id, channel.id, actor=actor(interaction)
        )
        text = (
            _("Persona removed.")
            if removed
            else _("{channel} has no persona.", channel=channel.mention)
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="show")
    async def persona_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the channels' personas."""
        guild_id = requester(interaction).guild_id
        personas = await services(interaction).guild_config.personas(guild_id)
        lines = [
            f"<#{p.channel_id}> · {p.model or _('default model')}"
            f"{' · ' + _('locked') if p.locked else ''}: {truncate(p.system, 300)}"
            for p in personas
        ]
        await interaction.response.send_message(
            truncate("\n".join(lines) or _("No channel has a persona."), 2000),
            ephemeral=True,
            allowed_mentions=discord.AllowedMentions.none(),
        )
