"""``/config guard``: spend alerts, the key's runway and the automatic pause (docs/guard.md)."""

from __future__ import annotations

from collections.abc import Sequence

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup, actor, services
from bot.discord.interactions import requester
from bot.discord.render.text import truncate
from bot.domain.guard import GuardAlert, GuardSettings
from bot.errors import ValidationFailed
from bot.i18n import N_, _, money, number, relative_time
from bot.services.guard import describe_alert, describe_thresholds, parse_thresholds
from bot.services.guild_config import parse_budget

GUARD_DESTINATIONS = [
    app_commands.Choice(name="admin channel", value="admin-channel"),
    app_commands.Choice(name="DM to the server's owner", value="owner-dm"),
]
"""``/config guard set destination``'s choices."""


def guard_lines(config: GuardSettings, alerts: Sequence[GuardAlert]) -> list[str]:
    """``/config guard show``'s lines: the guard's settings, the pause, the latest ``alerts``."""
    on, off = _("on"), _("off")
    owner, channel = _("the owner's DMs"), _("the admin channel")
    lines = [
        _("Thresholds: {thresholds}", thresholds=describe_thresholds(config.thresholds)),
        _("Member notes: {state}", state=on if config.member_notes else off),
        _(
            "Alerts go to: {destination}",
            destination=owner if config.destination == "owner-dm" else channel,
        ),
        _("Runway alert below {days} days", days=number(config.runway_days)),
        _(
            "Credits floor: {amount}",
            amount=off if config.credits_floor_cents is None else money(config.credits_floor_cents),
        ),
        _(
            "Anomaly: the last hour above {factor}× a usual hour and above {amount}",
            factor=number(config.anomaly_factor),
            amount=money(config.anomaly_floor_cents),
        ),
        _(
            "One member in 10 minutes: {amount}",
            amount=off if config.member_10min_cents is None else money(config.member_10min_cents),
        ),
        _("Pause on anomaly: {state}", state=on if config.pause_on_anomaly else off),
    ]
    if config.paused_at is not None:
        lines.append(
            _(
                "Paid requests are paused since {when}; resume with `/config guard resume`.",
                when=relative_time(config.paused_at),
            )
        )
    if alerts:
        lines.append(_("Latest alerts:"))
        lines += [
            f"<t:{int(a.at)}:R> {truncate(describe_alert(a).translated(), 150)}" for a in alerts
        ]
    return lines


class GuardGroup(ConfigGroup):
    """``/config guard``: the spend guard's settings, its pause, its latest alerts."""

    def __init__(self) -> None:
        super().__init__(
            name="guard", description="Spend alerts, the key's runway and the automatic pause"
        )

    @app_commands.command(name="set")
    @app_commands.rename(
        member_notes="member-notes",
        runway_days="runway-days",
        credits_floor="credits-floor",
        anomaly_factor="anomaly-factor",
        anomaly_floor="anomaly-floor",
        member_10min="member-10min",
        pause_on_anomaly="pause-on-anomaly",
    )
    @app_commands.choices(destination=GUARD_DESTINATIONS)
    async def guard_set(
        self,
        interaction: discord.Interaction[GenBot],
        thresholds: str | None = None,
        member_notes: bool | None = None,
        destination: str | None = None,
        runway_days: app_commands.Range[int, 1, 365] | None = None,
        credits_floor: str | None = None,
        anomaly_factor: app_commands.Range[float, 1, 100] | None = None,
        anomaly_floor: str | None = None,
        member_10min: str | None = None,
        pause_on_anomaly: bool | None = None,
    ) -> None:
        """Set the spend guard: alert thresholds, where alerts go, the runway and anomalies.

        Args:
            interaction: the interaction.
            thresholds: percentages of the monthly budget that alert, e.g. 50,80,100
            member_notes: tell members when they reach 80 % and 100 % of their allowance
            destination: where alerts go: the admin channel or a DM to the server's owner
            runway_days: alert when the key's credits last fewer days than this
            credits_floor: alert when the key's credits fall below this, in dollars ("off")
            anomaly_factor: the last hour above this many times a usual hour is an anomaly
            anomaly_floor: ...and above this amount in dollars
            member_10min: one member spending more than this in 10 minutes is an anomaly
            pause_on_anomaly: pause new paid requests on an anomaly until an admin resumes
        """
        who = requester(interaction)
        changes: dict[str, object] = {}
        if thresholds is not None:
            changes["thresholds"] = parse_thresholds(thresholds)
        if member_notes is not None:
            changes["member_notes"] = member_notes
        if destination is not None:
            changes["destination"] = destination
        if runway_days is not None:
            changes["runway_days"] = runway_days
        if credits_floor is not None:
            changes["credits_floor_cents"] = parse_budget(credits_floor)
        if anomaly_factor is not None:
            changes["anomaly_factor"] = anomaly_factor
        if anomaly_floor is not None:
            changes["anomaly_floor_cents"] = parse_budget(anomaly_floor)
        if member_10min is not None:
            changes["member_10min_cents"] = parse_budget(member_10min)
        if pause_on_anomaly is not None:
            changes["pause_on_anomaly"] = pause_on_anomaly
        if not changes:
            raise ValidationFailed(N_("Give at least one setting of the guard."))
        found = services(interaction)
        async with found.guild_config.changing(who.guild_id, actor(interaction)):
            await found.guard.update(who.guild_id, **changes)
        await _show_guard(interaction, _("Spend guard updated."))

    @app_commands.command(name="resume")
    async def guard_resume(self, interaction: discord.Interaction[GenBot]) -> None:
        """Resume paid requests the spend guard paused."""
        who = requester(interaction)
        found = services(interaction)
        async with found.guild_config.changing(who.guild_id, actor(interaction)):
            resumed = await found.guard.resume(who.guild_id)
        if resumed:
            text = _("Paid requests are allowed again.")
        else:
            text = _("Paid requests were not paused; nothing changed.")
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="show")
    async def guard_show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show the spend guard's settings, the key's runway and its latest alerts."""
        await _show_guard(interaction, None)


async def _show_guard(interaction: discord.Interaction[GenBot], note: str | None) -> None:
    guild_id = requester(interaction).guild_id
    spend_guard = services(interaction).guard
    config = await spend_guard.settings(guild_id)
    lines = guard_lines(config, await spend_guard.alerts(guild_id, 5))
    text = "\n".join(([note] if note else []) + lines)
    await interaction.response.send_message(
        truncate(text, 2000), ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
    )
