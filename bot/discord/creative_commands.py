"""Discord's part of styles and characters (docs/creative.md).

``/config style``, ``/settings character``, the ``style:`` and ``character:`` options, and
the messages that hold reference images.

A reference image is kept as the Discord message holding it: the bot posts the uploaded
files to the server's admin channel (else to the channel the command was used in) and keeps
that message's ids; :class:`MessageReferences` asks the message for its attachment's URL each
time the image is sent, so an expired attachment URL is never stored or sent.
"""

from __future__ import annotations

import io

import discord
from discord import app_commands

from bot.discord.bot import GenBot
from bot.discord.config_groups.common import ConfigGroup
from bot.discord.interactions import MAX_CHOICES, requester
from bot.domain import Actor, ImageRef, Style
from bot.errors import ValidationFailed
from bot.genapi.downloads import Downloads
from bot.i18n import N_, _, n_
from bot.services.creative import (
    MAX_RESULT_NUMBERS,
    CreativeService,
    PickedResult,
    parse_result_numbers,
)
from bot.services.generation import (
    MAX_ATTACHMENT_BYTES,
    check_attachment,
)
from bot.services.personal import is_personal

MAX_NAME_LENGTH = 32
"""The longest style or character name, characters."""

MAX_SUFFIX_LENGTH = 500
"""The longest style suffix, characters."""


class MessageReferences:
    """:class:`bot.services.creative.References` read from Discord (one message fetch each).

    Args:
        client: the bot's client.
    """

    def __init__(self, client: discord.Client) -> None:
        self._client = client

    async def url(self, ref: ImageRef) -> str | None:
        """The attachment's current URL; None when the channel, message or file is gone.

        Raises:
            discord.HTTPException: Discord failed otherwise (not a sign the message is gone).
        """
        try:
            channel = self._client.get_channel(ref.channel_id) or await self._client.fetch_channel(
                ref.channel_id
            )
            if not isinstance(channel, discord.abc.Messageable):
                return None
            message = await channel.fetch_message(ref.message_id)
        except (discord.NotFound, discord.Forbidden):
            return None
        if ref.attachment >= len(message.attachments):
            return None
        return message.attachments[ref.attachment].url


async def keep_uploads(
    interaction: discord.Interaction[GenBot], uploads: list[discord.Attachment], heading: str
) -> list[ImageRef]:
    """Post ``uploads`` in one message and return its references, in order.

    The message goes to the server's admin channel when it has one the bot can post in, else
    to the channel of ``interaction``.

    Raises:
        ValidationFailed: an upload is not an image or too large; no channel to keep them in.
    """
    for upload in uploads:
        check_attachment(upload.content_type, upload.size)
    files = [(upload.filename, await upload.read()) for upload in uploads]
    return await keep_files(interaction, files, heading)


async def keep_files(
    interaction: discord.Interaction[GenBot], files: list[tuple[str, bytes]], heading: str
) -> list[ImageRef]:
    """Post ``(filename, bytes)`` files in one message (as :func:`keep_uploads`); their refs.

    Raises:
        ValidationFailed: no channel to keep them in.
    """
    if not files:
        return []
    channel = await _keeping_channel(interaction)
    if channel is None:
        raise ValidationFailed(N_("There is no channel here the bot can keep the images in."))
    sent = [discord.File(io.BytesIO(data), filename=name) for name, data in files]
    message = await channel.send(content=heading, files=sent)
    return [ImageRef(message.channel.id, message.id, index) for index in range(len(files))]


async def _result_file(interaction: discord.Interaction[GenBot], pick: PickedResult) -> bytes:
    """The file of a result whose card holds none, downloaded from the service's URL once.

    Raises:
        ValidationFailed: it could not be downloaded (expired, too large, refused).
    """
    assert pick.url is not None
    try:
        return await Downloads(interaction.client.services.downloads).fetch(
            pick.url, MAX_ATTACHMENT_BYTES
        )
    except Exception:
        raise ValidationFailed(
            N_("The message holding j{job}'s image is gone; pick another result."),
            job=pick.job_id,
        ) from None


def _result_filename(pick: PickedResult) -> str:
    """A kept result's filename: its URL's, when that names an image, else ``j<id>.png``."""
    name = (pick.url or "").split("?", 1)[0].rsplit("/", 1)[-1]
    if name.lower().endswith((".png", ".jpg", ".jpeg", ".webp", ".gif")):
        return name
    return f"j{pick.job_id}.png"


async def _keeping_channel(
    interaction: discord.Interaction[GenBot],
) -> discord.abc.Messageable | None:
    if interaction.guild_id is not None:
        admin = await interaction.client.services.guild_config.admin_channel(interaction.guild_id)
        channel = None if admin is None else interaction.client.get_channel(admin)
        if isinstance(channel, discord.abc.Messageable):
            return channel
    here = interaction.channel
    return here if isinstance(here, discord.abc.Messageable) else None


async def style_autocomplete(
    interaction: discord.Interaction[GenBot], current: str
) -> list[app_commands.Choice[str]]:
    """The server's styles the member's tiers may use whose name holds what was typed.

    At most 25; an admin (Manage Server) sees every style (``Style.allows``).
    """
    if interaction.guild_id is None:
        return []
    styles = await interaction.client.services.creative.usable_styles(requester(interaction))
    typed = current.casefold()
    return [
        app_commands.Choice(name=style.name, value=style.name)
        for style in styles
        if typed in style.name.casefold()
    ][:MAX_CHOICES]


async def character_autocomplete(
    interaction: discord.Interaction[GenBot], current: str
) -> list[app_commands.Choice[str]]:
    """The member's own characters and those shared here, whose name holds what was typed."""
    characters = await interaction.client.services.creative.characters(
        interaction.user.id, interaction.guild_id
    )
    typed = current.casefold()
    return [
        app_commands.Choice(name=character.name, value=character.name)
        for character in characters
        if typed in character.name.casefold()
    ][:MAX_CHOICES]


RECENT_RESULTS = 100
"""The server's latest results ``from-results:``'s autocomplete looks through."""


async def result_autocomplete(
    interaction: discord.Interaction[GenBot], current: str
) -> list[app_commands.Choice[str]]:
    """The server's latest image results for ``from-results:`` (held or withheld left out).

    What was typed before the last space or comma is kept: each choice is it followed by one
    more result (``j12 j15``), so several results can be picked one after another. A result
    matches by its number or its prompt.
    """
    if interaction.guild_id is None:
        return []
    head, _sep, last = current.rpartition(" ")
    head = head.strip()
    try:
        picked = parse_result_numbers(head)
    except ValidationFailed:
        return []
    if len(picked) >= MAX_RESULT_NUMBERS:
        return []
    services = interaction.client.services
    items = await services.dashboard.results(
        guild_id=interaction.guild_id, user_id=None, kind="image", limit=RECENT_RESULTS
    )
    typed = last.strip().lstrip("j#").casefold()
    choices = []
    for item in items:
        if item.job_id in picked or not (
            typed in str(item.job_id) or typed in item.prompt.casefold()
        ):
            continue
        if await services.moderation.is_hidden(f"j{item.job_id}"):
            continue
        value = f"{head} j{item.job_id}".strip()
        label = f"j{item.job_id} · {item.prompt}"
        choices.append(app_commands.Choice(name=label[:100], value=value[:100]))
        if len(choices) >= MAX_CHOICES:
            break
    return choices


def _creative(interaction: discord.Interaction[GenBot]) -> CreativeService:
    return interaction.client.services.creative


class StyleGroup(ConfigGroup):
    """``/config style``: the server's styles (a prompt suffix and up to 4 reference images).

    A :class:`~bot.discord.config_groups.common.ConfigGroup`: Manage Server, as all of ``/config``.
    """

    def __init__(self) -> None:
        super().__init__(name="style", description="Looks members can apply with style:")

    @app_commands.command(name="add")
    @app_commands.rename(from_results="from-results")
    @app_commands.autocomplete(from_results=result_autocomplete)
    async def add(
        self,
        interaction: discord.Interaction[GenBot],
        name: app_commands.Range[str, 1, MAX_NAME_LENGTH],
        suffix: app_commands.Range[str, 1, MAX_SUFFIX_LENGTH],
        image1: discord.Attachment | None = None,
        image2: discord.Attachment | None = None,
        image3: discord.Attachment | None = None,
        image4: discord.Attachment | None = None,
        from_results: app_commands.Range[str, 1, 100] | None = None,
    ) -> None:
        """Add a style: words added to the prompt, and reference images for models that take them.

        Args:
            interaction: the interaction.
            name: what members pick it by
            suffix: words added to the end of the prompt
            image1: a reference image
            image2: a second reference image
            image3: a third reference image
            image4: a fourth reference image
            from_results: images made here as references, by number (j12 j15), after the uploads
        """
        who = requester(interaction)
        uploads = [a for a in (image1, image2, image3, image4) if a is not None]
        await interaction.response.defer(ephemeral=True, thinking=True)
        name = name.strip()
        creative = _creative(interaction)
        await creative.check_style_name(who.guild_id, name)
        references = MessageReferences(interaction.client)
        picked = await creative.result_references(who.guild_id, from_results or "", references)
        if len(uploads) + len(picked) > MAX_RESULT_NUMBERS:
            raise ValidationFailed(N_("A style takes at most 4 reference images."))
        for upload in uploads:
            check_attachment(upload.content_type, upload.size)
        files = [(upload.filename, await upload.read()) for upload in uploads]
        pictures: list[bytes | None] = [data for _, data in files]
        for pick in picked:
            if pick.ref is None:  # a card showing the service's URL: its file kept here
                files.append((_result_filename(pick), await _result_file(interaction, pick)))
        heading = _("References of the style `{name}` (kept while this message is).", name=name)
        kept = iter(await keep_files(interaction, files, heading))
        refs = [next(kept) for _ in uploads]
        for pick in picked:
            refs.append(pick.ref or next(kept))
            pictures.append(pick.picture)
        actor = Actor(interaction.user.id, "discord")
        style = await creative.add_style(
            who.guild_id, name, suffix, refs, actor=actor, pictures=pictures
        )
        await interaction.edit_original_response(
            content=n_(
                "Style `{name}` added, with {count} reference image.",
                "Style `{name}` added, with {count} reference images.",
                len(style.references),
                name=style.name,
            )
        )

    @app_commands.command(name="remove")
    @app_commands.autocomplete(name=style_autocomplete)
    async def remove(self, interaction: discord.Interaction[GenBot], name: str) -> None:
        """Remove a style.

        Args:
            interaction: the interaction.
            name: the style
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        actor = Actor(interaction.user.id, "discord")
        await _creative(interaction).remove_style(who.guild_id, name, actor=actor)
        await interaction.edit_original_response(content=_("Style `{name}` removed.", name=name))

    @app_commands.command(name="tiers")
    @app_commands.autocomplete(name=style_autocomplete)
    async def tiers(
        self,
        interaction: discord.Interaction[GenBot],
        name: str,
        tier1: discord.Role | None = None,
        tier2: discord.Role | None = None,
        tier3: discord.Role | None = None,
    ) -> None:
        """Limit a style to some tiers' members (none given: every member may use it).

        Args:
            interaction: the interaction.
            name: the style
            tier1: a tier's role whose members may use it
            tier2: another tier's role
            tier3: another tier's role
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        roles = [r.id for r in (tier1, tier2, tier3) if r is not None]
        actor = Actor(interaction.user.id, "discord")
        style = await _creative(interaction).set_style_tiers(who.guild_id, name, roles, actor=actor)
        if not style.roles:
            text = _("Every member may use the style `{name}` now.", name=name)
        else:
            text = _(
                "Only members of {tiers} may use the style `{name}` now (admins too).",
                name=name,
                tiers=", ".join(f"<@&{r}>" for r in style.roles),
            )
        await interaction.edit_original_response(
            content=text, allowed_mentions=discord.AllowedMentions.none()
        )

    @app_commands.command(name="list")
    async def list_(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the server's styles, saying which lost reference images.

        Args:
            interaction: the interaction.
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        references = MessageReferences(interaction.client)
        report = await _creative(interaction).style_report(who.guild_id, references)
        await interaction.edit_original_response(
            content=_style_lines(report), allowed_mentions=discord.AllowedMentions.none()
        )


def _style_lines(report: list[tuple[Style, int]]) -> str:
    if not report:
        return _("This server has no styles yet: add one with /config style add.")
    lines = []
    for style, gone in report:
        line = n_(
            "`{name}`: {suffix} ({count} reference image)",
            "`{name}`: {suffix} ({count} reference images)",
            len(style.references),
            name=style.name,
            suffix=style.suffix,
        )
        if style.roles:
            line += " — " + _("for {tiers}", tiers=", ".join(f"<@&{r}>" for r in style.roles))
        if gone:
            line += " — " + n_(
                "{count} of them is gone (its message was deleted); add the style again.",
                "{count} of them are gone (their message was deleted); add the style again.",
                gone,
            )
        lines.append("- " + line)
    return "\n".join(lines)[:2000]


class CharacterGroup(app_commands.Group):
    """``/settings character``: a member's characters (a named reference image, up to 5)."""

    def __init__(self) -> None:
        super().__init__(name="character", description="Your characters, used with character:")

    @app_commands.command(name="add")
    async def add(
        self,
        interaction: discord.Interaction[GenBot],
        name: app_commands.Range[str, 1, MAX_NAME_LENGTH],
        image: discord.Attachment,
        shared: bool | None = None,
    ) -> None:
        """Add a character: an image of someone or something to keep in your results.

        Args:
            interaction: the interaction.
            name: what you pick it by
            image: the character's reference image
            shared: let everyone in this server use it too (default: only you)
        """
        who = requester(interaction)
        await interaction.response.defer(ephemeral=True, thinking=True)
        name = name.strip()
        creative = _creative(interaction)
        await creative.check_character_name(who, name)
        heading = _(
            "The character `{name}` of {member}.", name=name, member=interaction.user.mention
        )
        (ref,) = await keep_uploads(interaction, [image], heading)
        await creative.add_character(
            who, name, ref, shared=bool(shared) and not is_personal(who.guild_id)
        )
        await interaction.edit_original_response(
            content=_("Character `{name}` added; use it with character:.", name=name)
        )

    @app_commands.command(name="remove")
    @app_commands.autocomplete(name=character_autocomplete)
    async def remove(self, interaction: discord.Interaction[GenBot], name: str) -> None:
        """Remove one of your characters.

        Args:
            interaction: the interaction.
            name: the character
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        await _creative(interaction).remove_character(interaction.user.id, name)
        await interaction.edit_original_response(
            content=_("Character `{name}` removed.", name=name)
        )

    @app_commands.command(name="list")
    async def list_(self, interaction: discord.Interaction[GenBot]) -> None:
        """List the characters you may use: yours and those shared here.

        Args:
            interaction: the interaction.
        """
        await interaction.response.defer(ephemeral=True, thinking=True)
        mine = await _creative(interaction).characters(interaction.user.id, interaction.guild_id)
        if not mine:
            text = _("You have no characters yet: add one with /settings character add.")
        else:
            text = "\n".join(
                "- `" + c.name + "`" + (" " + _("(shared)") if c.shared else "") for c in mine
            )
        await interaction.edit_original_response(content=text)
