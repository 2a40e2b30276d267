"""``/settings``: the member's own settings, wherever they are (personal mode).

``/settings api-key set|remove`` manages the member's personal API key, which pays for their
requests where the member pays (:func:`bot.services.personal.who_pays`: a user install in any
server, the bot's DM, a group DM). It is the server key's flow with the member's wallet id
(:func:`bot.services.personal.wallet_id`): asked in a private form, checked with a free
``GET /models`` call (docs/genapi.md §4.1), stored encrypted with ``KEY_ENCRYPTION_KEY``, shown
only as "ending in XXXX", and retired, not forgotten, while jobs made with it run.

``/settings defaults`` holds the member's own defaults (models, aspect ratio, video duration,
prompt suffix, private results, remix), applied where a command's option is left out
(:class:`bot.services.member_settings.MemberSettingsService`); ``/settings notify dm`` turns a
DM of finished videos and images on or off. Both follow the member everywhere (keyed by user).
"""

from __future__ import annotations

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.bot import GenBot
from bot.discord.creative_commands import CharacterGroup
from bot.discord.interactions import model_autocomplete
from bot.discord.render.admin import old_key_note
from bot.discord.tree import AdmittedModal, send_ephemeral, sentence_for
from bot.domain import Actor, MemberSettings
from bot.i18n import N_, _, money, number
from bot.services.generation import ASPECT_RATIOS, MAX_DURATION_SECONDS, MAX_TAKES
from bot.services.guild_config import GuildConfigService
from bot.services.member_settings import MAX_SUFFIX_LENGTH, MemberSettingsService
from bot.services.personal import SET_KEY_SENTENCE, wallet_id
from bot.services.sequences import SequenceService

CLEAR = "none"
"""Typed in a text option of ``/settings defaults``: remove that default."""

RATIOS = [app_commands.Choice(name=ratio, value=ratio) for ratio in ASPECT_RATIOS] + [
    app_commands.Choice(name="none (the model's default)", value=CLEAR)
]
ON_OFF = [app_commands.Choice(name="on", value="on"), app_commands.Choice(name="off", value="off")]


class PersonalKeyModal(AdmittedModal, title=N_("Set your Generation API key")):
    """Asks for the member's key in a modal, so it never shows as a visible command option."""

    key: discord.ui.TextInput[PersonalKeyModal] = discord.ui.TextInput(
        label=N_("API key"),
        placeholder=N_("Paste the key from your account settings"),
        max_length=256,
    )

    def __init__(self, service: GuildConfigService) -> None:
        super().__init__()
        self.service = service

    async def on_submit(self, interaction: discord.Interaction[GenBot]) -> None:  # type: ignore[override]
        """Check the key with the service, then store it encrypted for the submitter; never echo it.

        The wallet is the submitter's (the modal's interaction user), whoever opened the form.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        change = await self.service.set_api_key(
            wallet_id(interaction.user.id), self.key.value, actor=Actor(interaction.user.id)
        )
        last4 = f"`{change.last4}`"
        saved = _(
            "Your API key is saved (ending in {last4}); it pays for your requests outside "
            "servers that added me (your own install, DMs).",
            last4=last4,
        )
        await interaction.edit_original_response(content=saved + old_key_note(change))

    async def on_error(  # type: ignore[override]
        self, interaction: discord.Interaction[GenBot], error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await send_ephemeral(interaction, sentence_for(error))


@app_commands.allowed_installs(guilds=True, users=True)
@app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
class SettingsCog(commands.GroupCog, group_name="settings", group_description="Your own settings"):
    """The member's own settings (any member, any context)."""

    api_key = app_commands.Group(
        name="api-key", description="Your own Generation API key, for personal use"
    )

    notify = app_commands.Group(name="notify", description="How you hear of finished results")
    character = CharacterGroup()

    def __init__(
        self,
        service: GuildConfigService,
        members: MemberSettingsService,
        sequences: SequenceService,
        *,
        personal_daily_budget_cents: int,
        shared_key: bool,
    ) -> None:
        self.service = service
        self.members = members
        self.sequences = sequences
        self.personal_daily_budget_cents = personal_daily_budget_cents
        self.shared_key = shared_key

    @api_key.command(name="set")
    async def api_key_set(self, interaction: discord.Interaction[GenBot]) -> None:
        """Set your API key (asked in a private form, checked before it is stored)."""
        await PersonalKeyModal(self.service).show(interaction)

    @api_key.command(name="remove")
    async def api_key_remove(self, interaction: discord.Interaction[GenBot]) -> None:
        """Remove your API key (kept only until the jobs made with it finish)."""
        change = await self.service.remove_api_key(
            wallet_id(interaction.user.id), actor=Actor(interaction.user.id)
        )
        if not change.had_key:
            text = _("You have no API key stored; nothing was removed.")
        else:
            text = _("Your API key was removed.")
        await interaction.response.send_message(text + old_key_note(change), ephemeral=True)

    @app_commands.command(name="defaults")
    @app_commands.autocomplete(
        text_model=model_autocomplete("text"),
        image_model=model_autocomplete("image"),
        video_model=model_autocomplete("video"),
    )
    @app_commands.choices(aspect_ratio=RATIOS)
    async def defaults(
        self,
        interaction: discord.Interaction[GenBot],
        text_model: app_commands.Range[str, 1, 200] | None = None,
        image_model: app_commands.Range[str, 1, 200] | None = None,
        video_model: app_commands.Range[str, 1, 200] | None = None,
        aspect_ratio: str | None = None,
        video_duration: app_commands.Range[float, 0, MAX_DURATION_SECONDS] | None = None,
        prompt_suffix: app_commands.Range[str, 1, MAX_SUFFIX_LENGTH] | None = None,
        private: bool | None = None,
        remix: bool | None = None,
        takes: app_commands.Range[int, 0, MAX_TAKES] | None = None,
    ) -> None:
        """Set your defaults, used where you leave a command's option out (none: remove one).

        Args:
            interaction: the interaction.
            text_model: your /text model (none: remove)
            image_model: your /image model (none: remove)
            video_model: your /video model (none: remove)
            aspect_ratio: your /image and /video shape
            video_duration: your /video length in seconds (0: remove)
            prompt_suffix: added after your /image and /video prompts (none: remove)
            private: answers only you see; in servers, video cards in your DM
            remix: Vary on a text answer opens a form with its prompt, to change it first
            takes: how many takes your /video makes at once, 1 to 4 (0: remove)
        """
        given: dict[str, object] = {
            "text_model": text_model,
            "image_model": image_model,
            "video_model": video_model,
            "aspect_ratio": aspect_ratio,
            "prompt_suffix": prompt_suffix,
        }
        changes: dict[str, object] = {
            name: None if str(value).strip().casefold() == CLEAR else value
            for name, value in given.items()
            if value is not None
        }
        if video_duration is not None:
            changes["video_duration"] = None if video_duration == 0 else video_duration
        if private is not None:
            changes["private"] = private
        if remix is not None:
            changes["remix"] = remix
        if takes is not None:
            await self.sequences.set_default_takes(interaction.user.id, takes or None)
        if not changes:
            mine = await self.members.get(interaction.user.id)
            saved = (
                _("Saved.")
                if takes is not None
                else _("Nothing changed (give an option to set it).")
            )
            text = saved + "\n" + defaults_text(mine)
        else:
            mine = await self.members.update(interaction.user.id, changes)
            text = _("Saved.") + "\n" + defaults_text(mine)
        takes_now = await self.sequences.default_takes(interaction.user.id)
        text += " · " + _("takes: {count}", count=takes_now)
        await interaction.response.send_message(text, ephemeral=True)

    @notify.command(name="dm")
    @app_commands.choices(state=ON_OFF)
    async def notify_dm(self, interaction: discord.Interaction[GenBot], state: str) -> None:
        """A DM when your videos and images are finished, besides their usual message.

        Args:
            interaction: the interaction.
            state: on or off
        """
        on = state == "on"
        await self.members.update(interaction.user.id, {"notify_dm": on})
        text = (
            _(
                "I will DM you when your videos and images are finished (if your privacy "
                "settings let me; if not, nothing else changes)."
            )
            if on
            else _("No more DMs about finished results.")
        )
        await interaction.response.send_message(text, ephemeral=True)

    @app_commands.command(name="show")
    async def show(self, interaction: discord.Interaction[GenBot]) -> None:
        """Show your own settings: your defaults, your API key (by its end) and what pays where."""
        key_last4 = await self.service.key_last4(wallet_id(interaction.user.id))
        mine = await self.members.get(interaction.user.id)
        wallet_text = personal_settings_text(
            key_last4,
            self.personal_daily_budget_cents,
            shared_key=self.shared_key,
        )
        await interaction.response.send_message(
            f"{defaults_text(mine)}\n{wallet_text}", ephemeral=True
        )


def defaults_text(mine: MemberSettings) -> str:
    """Describe the member's defaults for ``/settings show`` and ``/settings defaults``.

    Server policy still wins: a default model the member's roles do not allow where they use a
    command is left out, with a note (:mod:`bot.services.member_settings`).
    """

    def shown(value: str | None) -> str:
        return "—" if value is None else f"`{value}`"

    duration = "—"
    if mine.video_duration is not None:
        duration = _("{seconds} s", seconds=number(mine.video_duration))
    lines = [
        _("**Your defaults** (where you leave an option out; a server's rules still win):"),
        _(
            "text model: {text} · image model: {image} · video model: {video}",
            text=shown(mine.text_model),
            image=shown(mine.image_model),
            video=shown(mine.video_model),
        ),
        _(
            "aspect ratio: {ratio} · video duration: {duration} · prompt suffix: {suffix}",
            ratio=shown(mine.aspect_ratio),
            duration=duration,
            suffix=shown(mine.prompt_suffix),
        ),
        _(
            "private results: {private} · remix: {remix} · DM when finished: {dm}",
            private=_on(mine.private),
            remix=_on(mine.remix),
            dm=_on(mine.notify_dm),
        ),
    ]
    return "\n".join(lines)


def _on(flag: bool) -> str:
    return _("on") if flag else _("off")


def personal_settings_text(last4: str | None, allowance_cents: int, *, shared_key: bool) -> str:
    """Describe the member's personal wallet for ``/settings show`` (never the key itself).

    Args:
        last4: the last four characters of the member's key; None without a key.
        allowance_cents: ``PERSONAL_DAILY_BUDGET_CENTS``, per member per UTC day.
        shared_key: the bot has a default key (``GENAPI_API_KEY``) the allowance is spent on.
    """
    if last4 is not None:
        ending = f"`{last4}`"
        key = _("Your API key: ending in {last4}; it pays for your personal use.", last4=ending)
    elif allowance_cents > 0 and shared_key:
        key = _(
            "You have no API key of your own; the bot's owner grants you {amount} a day (UTC) "
            "of personal use. Set your own with `/settings api-key set`.",
            amount=money(allowance_cents),
        )
    else:
        key = _("You have no API key of your own.") + " " + _(SET_KEY_SENTENCE)
    return (
        key
        + "\n"
        + _(
            "Personal use is where the server did not add me (your own install, DMs); in "
            "servers that added me, the server pays by its own rules."
        )
    )


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        SettingsCog(
            services.guild_config,
            services.members,
            services.sequences,
            personal_daily_budget_cents=services.settings.personal_daily_budget_cents,
            shared_key=services.default_key is not None,
        )
    )
