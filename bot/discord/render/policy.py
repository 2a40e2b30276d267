"""Embeds and lines for a server's policy; nothing here pings.

``/config show``'s policy part, ``/config tier list``, the model list, and the audit lines
posted in the admin channel (the bot allows no mentions, so role and user mentions only
render).
"""

from __future__ import annotations

import discord

from bot.discord.render.text import truncate
from bot.domain import UNLIMITED, AuditEntry, ModelLists, Tier
from bot.i18n import _, money, number
from bot.services.guild_config import ServerPolicy
from bot.services.policy import ALL_MODELS, describe_models

FIELD_LIMIT = 1024
"""Characters in an embed field's value (Discord's embed limits)."""

LIST_LIMIT = 512
"""Characters of the model list and blocked terms in ``/config show``: with the other fields,
the embed stays under Discord's 6,000 characters in total."""


def _allowance(cents: int | None) -> str:
    # The service's describe_allowance words the stored audit record (English); this one is
    # read by people, in the answer's locale.
    if cents is None:
        return _("server default")
    if cents == UNLIMITED:
        return _("unlimited")
    return money(cents)


def _models(models: tuple[str, ...] | None) -> str:
    if models is None:
        return _("server list")
    if models == (ALL_MODELS,):
        return _("all")
    if not models:
        return _("none")
    return describe_models(models)


def tier_line(tier: Tier) -> str:
    """One tier for people: ``<@&role>: daily $0.50 · monthly unlimited · ... · models all``.

    Written in the current locale (:func:`bot.i18n.using`).
    """
    videos = _("server default") if tier.videos_at_once is None else number(tier.videos_at_once)
    return _(
        "<@&{role}>: daily {daily} · monthly {monthly} · videos at once {videos} · models {models}",
        role=tier.role_id,
        daily=_allowance(tier.daily_per_user_cents),
        monthly=_allowance(tier.monthly_per_user_cents),
        videos=videos,
        models=_models(tier.models),
    )


def models_line(lists: ModelLists) -> str:
    """The server-wide model list for people, in the current locale."""
    allowed = _models(lists.allowed) if lists.allowed else _("all")
    blocked = _models(lists.blocked) if lists.blocked else _("none")
    return _("allowed: {allowed}; blocked: {blocked}", allowed=allowed, blocked=blocked)


def add_policy_fields(embed: discord.Embed, policy: ServerPolicy) -> discord.Embed:
    """Append the policy to ``embed`` (``/config show``): tiers, models, terms, cooldowns."""
    tiers = "\n".join(tier_line(t) for t in policy.tiers) or _("none: everyone gets the defaults")
    embed.add_field(name=_("Role tiers"), value=truncate(tiers, FIELD_LIMIT), inline=False)
    embed.add_field(
        name=_("Models (members without a tier)"),
        value=truncate(models_line(policy.models), LIST_LIMIT),
        inline=False,
    )
    terms = ", ".join(f"`{t}`" for t in policy.blocked_terms) or _("none")
    embed.add_field(name=_("Blocked terms"), value=truncate(terms, LIST_LIMIT), inline=False)
    cooldowns = " · ".join(
        _("/{command}: {seconds} s", command=kind.value, seconds=number(s))
        for kind, s in policy.cooldowns.items()
    ) or _("none")
    embed.add_field(name=_("Cooldowns per member"), value=cooldowns, inline=False)
    return embed


def tiers_embed(policy: ServerPolicy) -> discord.Embed:
    """``/config tier list``: every tier, and what members without one get."""
    embed = discord.Embed(title=_("Role tiers"), colour=discord.Colour.blurple())
    lines = [tier_line(t) for t in policy.tiers]
    embed.description = truncate(
        "\n".join(lines) or _("No tiers: every member gets the server defaults."), 4096
    )
    embed.set_footer(
        text=_("A member with several tier roles gets the most generous value of each limit.")
    )
    return embed


def audit_lines(entries: list[AuditEntry]) -> str:
    """The admin-channel message for the changes of one ``/config`` command or dashboard save.

    Who (and "on the web dashboard" for a change made there), then one line per setting:
    what, old → new; cut to Discord's 2,000 characters. The heading is in the current locale
    (the caller sets the server's); each setting's name and values are the stored audit
    record's, in English.
    """
    if not entries:
        return ""
    who = entries[0].user_id
    if entries[0].via == "web":
        lines = [_("<@{user}> changed the bot's settings on the web dashboard:", user=who)]
    else:
        lines = [_("<@{user}> changed the bot's settings:", user=who)]
    lines += [f"• {e.what}: {e.old} → {e.new}" for e in entries]
    return truncate("\n".join(lines), 2000)
