"""Embeds for admins and members: ``/config show`` and ``/usage``. Nothing here pings."""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal

import discord
from babel.lists import format_list

from bot.domain import DRAFT, FINAL, Kind
from bot.i18n import LANGUAGE_NAMES, N_, SOURCE, _, current, locale_of, money, n_, number
from bot.services.billing import UsageReport
from bot.services.guild_config import GuildConfig
from bot.services.keys import KeyChange

TOP_USERS = 10
"""Members listed in a guild report; the embed field value limit is 1,024 characters."""


def _budget(cents: int | None) -> str:
    return _("unlimited") if cents is None else money(cents)


def dashboard_link(public_url: str, guild_id: int) -> str:
    """The line of ``/config show`` that leads to the server's page on the web dashboard."""
    link = f"{public_url}/servers/{guild_id}"
    return _("Spend, ledger, audit log and results on the web: {link}", link=link)


def config_embed(config: GuildConfig) -> discord.Embed:
    """Render a guild's settings; the key appears only as set or not, with its last 4."""
    embed = discord.Embed(title=_("genbot settings"), colour=discord.Colour.blurple())
    if config.key_source == "guild":
        last4 = f"`{config.key_last4}`"
        key = _("this server's own key, ending in {last4}", last4=last4)
    elif config.key_source == "default":
        key = _("not set; the bot's default key is used")
    else:
        key = _("not set; commands will not work until an admin runs `/config api-key set`")
    if not config.encryption_available:
        key += "\n" + _("(the bot owner has not enabled key storage: `KEY_ENCRYPTION_KEY`)")
    embed.add_field(name=_("API key"), value=key, inline=False)
    limits = config.limits
    embed.add_field(name=_("Monthly budget"), value=_budget(limits.monthly_budget_cents))
    daily = _budget(limits.user_daily_budget_cents)
    embed.add_field(name=_("Daily budget per member"), value=daily)
    embed.add_field(
        name=_("Videos in progress"),
        value=_(
            "{member} per member, {server} per server",
            member=number(limits.max_pending_videos_per_user),
            server=number(limits.max_pending_videos_per_guild),
        ),
    )
    channels = config.allowed_channel_ids
    embed.add_field(
        name=_("Channels"),
        value=" ".join(f"<#{c}>" for c in sorted(channels))[:1024] if channels else _("all"),
        inline=False,
    )
    admin = config.admin_channel_id
    shown = f"<#{admin}>" if admin else _("off")
    embed.add_field(name=_("Admin notices"), value=shown, inline=False)
    language = LANGUAGE_NAMES.get(config.locale or "", _("server default"))
    embed.add_field(name=_("Language of public messages"), value=language, inline=False)
    return embed


NO_KEY_YET = N_(
    "This server has no Generation API key yet, so members' commands cannot generate anything. "
    "Set one with `/config api-key set` (only admins see this)."
)
"""Told once, ephemerally, to the first admin who runs a command in a server without a key."""


def key_problem_notice(problem: str, *, shared: bool) -> str:
    """The notice posted in a server's admin channel when its key is refused or out of credits.

    Args:
        problem: ``"unauthorized"`` or ``"insufficient_credits"``
            (:data:`bot.services.generation.KeyProblem`).
        shared: the server has no key of its own and uses the bot's default key: it cannot top
            that up, only tell the bot owner or set its own.
    """
    if shared and problem == "unauthorized":
        return _(
            "The Generation API rejected the bot's shared API key (this server has no key of "
            "its own); generation commands fail until the bot's owner fixes it, or until an "
            "admin sets this server's own key with `/config api-key set`."
        )
    if shared:
        return _(
            "The bot's shared Generation API key is out of credits (this server has no key of "
            "its own); generation commands fail until the bot's owner fixes it, or until an "
            "admin sets this server's own key with `/config api-key set`."
        )
    if problem == "unauthorized":
        return _(
            "The Generation API rejected this server's API key. "
            "Set a valid one with `/config api-key set`."
        )
    return _(
        "The Generation API key of this server is out of credits; "
        "generation commands will fail until it is topped up."
    )


def missing_key_notice(key_fingerprint: str) -> str:
    """The notice posted in a server's admin channel when a job waits for a key known nowhere.

    The job was submitted with a key that is neither this server's key, nor one kept for its
    jobs, nor the bot's default key: it is paid for and is never failed for that;
    it is polled again every few minutes until the key is back.

    Args:
        key_fingerprint: the key's fingerprint (never the key), as the logs show it.
    """
    fingerprint = f"`{key_fingerprint}`"
    return _(
        "A video or image made here waits: the API key it was made with ({fingerprint}) "
        "is no longer configured. If this server's key was changed, set the previous one again "
        "with `/config api-key set` until it arrives; if it was the bot's shared key, only "
        "the bot's owner can bring it back (the bot's log says how). Nothing is lost: it is "
        "checked again every few minutes.",
        fingerprint=fingerprint,
    )


def missing_permissions_notice(names: str) -> str:
    """The sentence posted in a server's admin channel when the bot's roles lack permissions.

    Posted once per process per server, from the start-up permission check: a
    missing permission gets a sentence naming it, so an admin knows what to grant.

    Args:
        names: the missing permissions as Discord's client names them, comma-separated.
    """
    return _(
        "I am missing these permissions in this server: {names}. Results and /chat need "
        "them; please grant them to my role (Server Settings → Roles).",
        names=names,
    )


def _jobs_of(kind: Kind, count: int) -> str:
    if kind is Kind.VIDEO:
        return n_("{count} video", "{count} videos", count)
    if kind is Kind.IMAGE:
        return n_("{count} image", "{count} images", count)
    return n_("{count} text", "{count} texts", count)


def old_key_note(change: KeyChange) -> str:
    """Tell an admin who replaced or removed the server's key what happens to the old one.

    Jobs belong to the key that submitted them, so it is kept until they end (module doc of
    :mod:`bot.services.keys`), and while a request made with it is in flight (a reservation,
    whose job is stored a moment later). Empty when the server had no key of its own.
    """
    if not change.had_key:
        return ""
    jobs = change.jobs_on_old_key
    if jobs is None:
        return " " + _("The old key is kept (encrypted) until the jobs submitted with it finish.")
    total = sum(jobs.values())
    if total == 0 and change.old_key_kept:
        # A reservation keeps it: the request's job may be stored a moment later.
        return " " + _(
            "A request made with the old key is still in flight; the key is kept until it ends."
        )
    if total == 0:
        return " " + _("No job was using the old key; it was deleted.")
    counts = [
        _jobs_of(kind, jobs[kind]) for kind in (Kind.VIDEO, Kind.IMAGE, Kind.TEXT) if jobs.get(kind)
    ]
    # CLDR's list pattern: "1 video and 2 images", "1 vídeo y 2 imágenes", "1 動画、2 画像".
    things = (
        format_list(counts, locale=locale_of()) if current() != SOURCE else " and ".join(counts)
    )
    return " " + n_(
        "{things} is still being made with the old key; it is kept until it finishes.",
        "{things} are still being made with the old key; it is kept until they finish.",
        total,
        things=things,
    )


def usage_embed(report: UsageReport, *, user_id: int | None) -> discord.Embed:
    """Render a usage report: a member's own (``user_id``) or the whole guild's (None)."""
    title = _("This server's usage") if user_id is None else _("Usage")
    embed = discord.Embed(title=title, colour=discord.Colour.blurple())
    if user_id is not None:
        embed.description = f"<@{user_id}>"
    embed.add_field(name=_("This month (UTC)"), value=money(report.month_cents))
    embed.add_field(name=_("Today (UTC)"), value=money(report.today_cents))
    if report.reserved_cents:
        embed.add_field(name=_("In flight"), value=money(report.reserved_cents))
    kinds = " · ".join(f"{kind_name(kind.value)}: {money(c)}" for kind, c in report.by_kind.items())
    embed.add_field(name=_("By kind, this month"), value=kinds, inline=False)
    if user_id is None and report.by_user:
        top = "\n".join(
            f"{number(rank)}. <@{member}> {money(cents)}"
            for rank, (member, cents) in enumerate(report.by_user[:TOP_USERS], start=1)
        )
        embed.add_field(name=_("Top members, this month"), value=top, inline=False)
    if report.by_model:
        models = "\n".join(
            f"`{model}` × {number(count)}: {money(cents)}"
            for model, count, cents in report.by_model[:TOP_USERS]
        )
        embed.add_field(name=_("By model, this month"), value=models[:1024], inline=False)
    if report.by_stage:
        embed.add_field(name=_("Draft → Final, this month"), value=stage_line(report.by_stage))
    if user_id is None and report.by_tier:
        tiers = "\n".join(f"{name}: {money(cents)}" for name, cents in report.by_tier)
        embed.add_field(name=_("By tier, this month"), value=tiers[:1024], inline=False)
    if user_id is None and report.anomalies:
        embed.add_field(
            name=_("Charges to check"),
            value=n_(
                "{count} charge this month came with an amount that makes no sense (negative, "
                "not a number, absurd); it is logged and not counted here. Check it with the "
                "provider.",
                "{count} charges this month came with an amount that makes no sense (negative, "
                "not a number, absurd); they are logged and not counted here. Check them with "
                "the provider.",
                report.anomalies,
            ),
            inline=False,
        )
    if user_id is None and report.reused_task_ids:
        embed.add_field(
            name=_("Task ids given again"),
            value=n_(
                "{count} task this month got an id the service had given the same key before. "
                "It was charged and delivered on its own; tell the provider their task ids "
                "repeat.",
                "{count} tasks this month got an id the service had given the same key before. "
                "Each was charged and delivered on its own; tell the provider their task ids "
                "repeat.",
                report.reused_task_ids,
            ),
            inline=False,
        )
    if report.last_remaining_credits_cents is not None:
        left = money(report.last_remaining_credits_cents)
        embed.set_footer(text=_("Credits left on the key: {amount}", amount=left))
    return embed


def stage_line(by_stage: Mapping[str, tuple[int, Decimal]]) -> str:
    """Drafts' and Finals' spend for ``/usage``: ``Drafts: 4 for $0.12 · Finals: 1 for $0.04``."""
    drafts = by_stage.get(DRAFT, (0, Decimal(0)))
    finals = by_stage.get(FINAL, (0, Decimal(0)))
    return " · ".join(
        (
            _("Drafts: {count} for {amount}", count=number(drafts[0]), amount=money(drafts[1])),
            _("Finals: {count} for {amount}", count=number(finals[0]), amount=money(finals[1])),
        )
    )


def kind_name(kind: str) -> str:
    """What a job makes, for people: ``"video"``, ``"image"``, ``"text"`` in the locale."""
    names = {"video": _("video"), "image": _("image"), "text": _("text")}
    return names.get(kind, kind)
