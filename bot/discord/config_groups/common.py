"""What ``/config``'s commands share: Manage Server, the audit's actor, the settings embed.

:class:`ConfigGroup` is the base of ``/config``'s nested groups (``bot/discord/config_groups/``,
and ``/config style``): a group's commands are bound to the group, so the cog's own
``interaction_check`` never sees them and the group checks Manage Server itself.
"""

from __future__ import annotations

from collections.abc import Iterable

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.interactions import requester
from bot.discord.render.admin import config_embed, dashboard_link
from bot.discord.render.buttons import confirm_above_text
from bot.discord.render.policy import add_policy_fields
from bot.domain import Actor
from bot.i18n import N_, _, number
from bot.services.generation import GenerationService
from bot.services.guild_config import GuildConfigService
from bot.services.policy import model_matches
from bot.services.sequences import SequenceService
from bot.wiring import Services

BILLING_MODE_NAMES = {
    "server": N_("the server (its key and budgets)"),
    "members": N_("each member, from their credit balance (`/credits`)"),
    "server-then-members": N_(
        "the server within its budgets, then each member from their credit balance"
    ),
}
"""How ``/config show`` names each billing mode (docs/credits.md)."""


def actor(interaction: discord.Interaction[GenBot]) -> Actor:
    """The admin who runs the command, as the audit log names them (via ``/config``)."""
    return Actor(interaction.user.id, "discord")


def require_manage_guild(interaction: discord.Interaction[GenBot]) -> None:
    """Refuse a member without Manage Server.

    ``default_permissions`` only hides the command; a server can override it, so every
    ``/config`` command checks here too.

    Raises:
        app_commands.MissingPermissions: the member lacks Manage Server here.
    """
    if not interaction.permissions.manage_guild:
        raise app_commands.MissingPermissions(["manage_guild"])


def services(interaction: discord.Interaction[GenBot]) -> Services:
    """The bot's services, as a group's command reaches them."""
    return interaction.client.services


class ConfigGroup(app_commands.Group):
    """A nested group of ``/config``: every command of it needs Manage Server."""

    async def interaction_check(self, interaction: discord.Interaction[GenBot], /) -> bool:  # type: ignore[override]
        """Every subcommand needs Manage Server, whatever the server's overrides say."""
        require_manage_guild(interaction)
        return True


async def unmatched_note(
    generation: GenerationService,
    interaction: discord.Interaction[GenBot],
    patterns: Iterable[str],
) -> str:
    """A warning naming the patterns that match no model of the cached catalogue, or "".

    Kept anyway: a model may join the catalogue later, and a prefix is meant for those.
    """
    catalogue = await generation.cached_catalogue(interaction.guild_id)
    if catalogue is None:
        return ""
    ids = [m.id for m in catalogue.text]
    ids += [m.id for m in catalogue.image] + [m.id for m in catalogue.video]
    unmatched = [p for p in patterns if not any(model_matches(p, i) for i in ids)]
    if not unmatched:
        return ""
    names = ", ".join(f"`{p}`" for p in unmatched[:10])
    return "\n" + _("Note: {names} matches no model in the catalogue right now.", names=names)


async def config_show_embed(
    service: GuildConfigService,
    sequences: SequenceService,
    guild_id: int,
    dashboard_url: str | None,
) -> discord.Embed:
    """``/config show``'s embed: the server's settings and policy, and its dashboard link."""
    config = await service.show(guild_id)
    embed = add_policy_fields(config_embed(config), config.policy)
    threshold = await service.confirm_above(guild_id)
    embed.add_field(name=_("Confirm above"), value=confirm_above_text(threshold), inline=False)
    embed.add_field(
        name=_("Who pays"),
        value=_(BILLING_MODE_NAMES[(await service.billing_mode(guild_id)).value]),
        inline=False,
    )
    clips = await sequences.max_clips(guild_id)
    embed.add_field(
        name=_("Sequence length"),
        value=_("{count} clips at most", count=number(clips)),
        inline=False,
    )
    if dashboard_url is not None:
        embed.add_field(
            name=_("Dashboard"), value=dashboard_link(dashboard_url, guild_id), inline=False
        )
    return embed


async def show_settings(interaction: discord.Interaction[GenBot], note: str | None) -> None:
    """Answer with ``note`` (if any) above ``/config show``'s embed, ephemerally."""
    found = services(interaction)
    settings = found.settings
    dashboard_url = settings.dashboard_public_url if settings.dashboard_enabled else None
    guild_id = requester(interaction).guild_id
    embed = await config_show_embed(found.guild_config, found.sequences, guild_id, dashboard_url)
    await interaction.response.send_message(content=note, embed=embed, ephemeral=True)
