"""Embeds and lines for a server's policy; nothing here pings.

``/config show``'s policy part, ``/config tier list``, the model list, and the audit lines
posted in the admin channel (the bot allows no mentions, so role and user mentions only
render).
"""

from __future__ import annotations

import discord

from bot.discord.render.text import truncate
from bot.domain import AuditEntry, ModelLists, Tier
from bot.services.guild_config import ServerPolicy
from bot.services.policy import describe_allowance, describe_models

FIELD_LIMIT = 1024
"""Characters in an embed field's value (Discord's embed limits)."""

LIST_LIMIT = 512
"""Characters of the model list and blocked terms in ``/config show``: with the other fields,
the embed stays under Discord's 6,000 characters in total."""


def tier_line(tier: Tier) -> str:
    """One tier for people: ``<@&role>: daily $0.50 · monthly unlimited · ... · models all``."""
    videos = "server default" if tier.videos_at_once is None else str(tier.videos_at_once)
    return (
        f"<@&{tier.role_id}>: daily {describe_allowance(tier.daily_per_user_cents)}"
        f" · monthly {describe_allowance(tier.monthly_per_user_cents)}"
        f" · videos at once {videos} · models {describe_models(tier.models)}"
    )


def models_line(lists: ModelLists) -> str:
    """The server-wide model list for people."""
    allowed = describe_models(lists.allowed) if lists.allowed else "all"
    blocked = describe_models(lists.blocked) if lists.blocked else "none"
    return f"allowed: {allowed}; blocked: {blocked}"


def add_policy_fields(embed: discord.Embed, policy: ServerPolicy) -> discord.Embed:
    """Append the policy to ``embed`` (``/config show``): tiers, models, terms, cooldowns."""
    tiers = "\n".join(tier_line(t) for t in policy.tiers) or "none: everyone gets the defaults"
    embed.add_field(name="Role tiers", value=truncate(tiers, FIELD_LIMIT), inline=False)
    embed.add_field(
        name="Models (members without a tier)",
        value=truncate(models_line(policy.models), LIST_LIMIT),
        inline=False,
    )
    terms = ", ".join(f"`{t}`" for t in policy.blocked_terms) or "none"
    embed.add_field(name="Blocked terms", value=truncate(terms, LIST_LIMIT), inline=False)
    cooldowns = (
        " · ".join(f"/{kind.value}: {s} s" for kind, s in policy.cooldowns.items()) or "none"
    )
    embed.add_field(name="Cooldowns per member", value=cooldowns, inline=False)
    return embed


def tiers_embed(policy: ServerPolicy) -> discord.Embed:
    """``/config tier list``: every tier, and what members without one get."""
    embed = discord.Embed(title="Role tiers", colour=discord.Colour.blurple())
    lines = [tier_line(t) for t in policy.tiers]
    embed.description = truncate(
        "\n".join(lines) or "No tiers: every member gets the server defaults.", 4096
    )
    embed.set_footer(
        text="A member with several tier roles gets the most generous value of each limit."
    )
    return embed


def audit_lines(entries: list[AuditEntry]) -> str:
    """The admin-channel message for the changes of one ``/config`` command or dashboard save.

    Who (and "on the web dashboard" for a change made there), then one line per setting:
    what, old → new; cut to Discord's 2,000 characters.
    """
    if not entries:
        return ""
    who = entries[0].user_id
    where = " on the web dashboard" if entries[0].via == "web" else ""
    lines = [f"<@{who}> changed the bot's settings{where}:"]
    lines += [f"• {e.what}: {e.old} → {e.new}" for e in entries]
    return truncate("\n".join(lines), 2000)
