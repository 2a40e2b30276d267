"""Small pieces of Discord glue the cogs share: who asked, what the bot may do, choices."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

import discord
from discord import app_commands

from bot.errors import ValidationFailed
from bot.genapi.models import ImageModel, TextModel, VideoModel
from bot.services.generation import Requester
from bot.services.personal import (
    GUILD_INSTALL,
    USER_INSTALL,
    Payer,
    wallet_id,
    who_pays,
)

if TYPE_CHECKING:
    from bot.discord.bot import GenBot

ModelKind = Literal["text", "image", "video"]
ModelAutocomplete = Callable[
    ["discord.Interaction[GenBot]", str], Coroutine[Any, Any, list[app_commands.Choice[str]]]
]

PLACEHOLDER_PERMISSIONS = (
    "view_channel",
    "send_messages",
    "send_messages_in_threads",
    "embed_links",
    "attach_files",
    "read_message_history",
)
"""What posting, editing and replying to a placeholder needs in the channel (Discord docs:
replies need Read Message History; embeds need Embed Links; a result edited in as a file needs
Attach Files; a thread needs Send Messages in Threads instead of Send Messages). The one list
behind both the check and the invite URL (:func:`invite_url`)."""

CHAT_PERMISSIONS = ("create_public_threads", "send_messages_in_threads")
"""What ``/chat`` needs besides :data:`PLACEHOLDER_PERMISSIONS` in a text channel: starting a
conversation's thread from its answer (Discord docs, "Start Thread from Message") and answering
there (Send Messages in Threads; issue 21, Delivery)."""

COMMAND_PERMISSIONS = tuple(dict.fromkeys((*PLACEHOLDER_PERMISSIONS, *CHAT_PERMISSIONS)))
"""Every permission the commands need: the one list behind the invite URL
(:func:`invite_permissions`) and the start-up check (:func:`missing_permissions`)."""

INVITE_SCOPES = ("bot", "applications.commands")
"""OAuth2 scopes of the invite: the bot user and its slash commands (Discord OAuth2 docs)."""

MAX_CHOICES = 25
"""Discord accepts at most 25 autocomplete choices (application command docs)."""


def requester(interaction: discord.Interaction[discord.Client]) -> Requester:
    """Return who invoked ``interaction``, where, and whose wallet pays (issue 22).

    In a thread (a forum post is one), ``parent_channel_id`` is the thread's parent, from the
    interaction's partial channel (Discord sends ``parent_id`` for threads).

    When the server's own install authorised the command in a server the bot is a member of,
    the server pays (``guild_id`` is the server's). Otherwise (a user install in any server,
    the bot's DM, a group DM) the member pays: ``guild_id`` is the member's wallet id
    (:func:`bot.services.personal.wallet_id`), with no roles and no Manage Server, so no
    server's key, budget, tiers or channels apply (:func:`bot.services.personal.who_pays`).

    Raises:
        ValidationFailed: the interaction has no channel.
    """
    if interaction.channel_id is None:
        raise ValidationFailed("This command cannot be used here.")
    if payer(interaction) is Payer.MEMBER:
        return Requester(
            wallet_id(interaction.user.id), interaction.channel_id, interaction.user.id
        )
    assert interaction.guild_id is not None  # Payer.GUILD needs a guild
    channel = interaction.channel
    parent_id = channel.parent_id if isinstance(channel, discord.Thread) else None
    return Requester(
        interaction.guild_id,
        interaction.channel_id,
        interaction.user.id,
        parent_channel_id=parent_id,
        role_ids=member_role_ids(interaction),
        manage_guild=interaction.permissions.manage_guild,
    )


def payer(interaction: discord.Interaction[discord.Client]) -> Payer:
    """Return whose wallet ``interaction`` spends from (:func:`bot.services.personal.who_pays`).

    The bot is a member of a guild when its gateway cache holds it (the guilds intent).
    """
    guild_id = interaction.guild_id
    return who_pays(
        guild_id=guild_id,
        user_id=interaction.user.id,
        owners={int(k): int(v) for k, v in interaction._integration_owners.items()},
        bot_in_guild=guild_id is not None and interaction.client.get_guild(guild_id) is not None,
    )


def member_role_ids(interaction: discord.Interaction[Any]) -> frozenset[int]:
    """Return the invoking member's role ids, from the interaction's member object.

    Discord sends the member's ``roles`` (ids) with every guild interaction, so no member
    intent or cache is needed; discord.py keeps them as ``Member._roles`` whether or not the
    guild's roles are cached (``Member.roles`` would drop the uncached ones).
    """
    user = interaction.user
    if not isinstance(user, discord.Member):
        return frozenset()
    return frozenset(int(role_id) for role_id in user._roles)


PERMISSION_TITLES = {"send_messages_in_threads": "Send Messages in Threads"}
"""Names Discord's client spells otherwise than title case."""


def require_placeholder_permissions(interaction: discord.Interaction[discord.Client]) -> None:
    """Check that the bot may post, edit and reply to a placeholder where it was asked.

    Uses the interaction's ``app_permissions`` (the bot's permissions in that channel); in a
    thread, posting needs Send Messages in Threads instead of Send Messages.

    A personal request (issue 22: billed to the member's wallet, where the bot may not be a
    member) needs none: its card is the interaction's own response, which Discord lets the
    app post and edit without any channel permission.

    Raises:
        ValidationFailed: naming every missing permission, e.g. "Send Messages, Embed Links".
    """
    if payer(interaction) is Payer.MEMBER:
        return
    thread = isinstance(interaction.channel, discord.Thread)
    not_here = "send_messages" if thread else "send_messages_in_threads"
    names = [name for name in PLACEHOLDER_PERMISSIONS if name != not_here]
    granted = interaction.app_permissions
    missing = [name for name in names if not getattr(granted, name)]
    if missing:
        raise ValidationFailed(
            f"I need these permissions in this channel first: {permission_names(missing)}."
        )


def require_chat_permissions(interaction: discord.Interaction[discord.Client]) -> None:
    """Check that ``/chat`` may answer in this text channel and go on in a thread of it.

    The placeholder's permissions (:func:`require_placeholder_permissions`, for the answer)
    and :data:`CHAT_PERMISSIONS` (the thread), checked together so that the sentence names
    every one missing (issue 21, Delivery), before anything is charged.

    Raises:
        ValidationFailed: naming every missing permission, e.g. "Create Public Threads, Send
            Messages in Threads".
    """
    names = [name for name in COMMAND_PERMISSIONS if name != "send_messages_in_threads"]
    names += [name for name in CHAT_PERMISSIONS if name not in names]
    granted = interaction.app_permissions
    missing = [name for name in names if not getattr(granted, name)]
    if missing:
        raise ValidationFailed(
            f"I need these permissions in this channel first: {permission_names(missing)}."
        )


def permission_names(names: Iterable[str]) -> str:
    """Return permissions as Discord's client names them, e.g. "Create Public Threads".

    Args:
        names: discord.py attribute names (``send_messages_in_threads``).

    Returns:
        The names joined with ", ", e.g. "Create Public Threads, Send Messages in Threads".
    """
    return ", ".join(PERMISSION_TITLES.get(name, name.replace("_", " ").title()) for name in names)


def missing_permissions(granted: discord.Permissions) -> list[str]:
    """Return which of :data:`COMMAND_PERMISSIONS` ``granted`` lacks, in that list's order.

    Args:
        granted: the bot's permissions, e.g. its roles' in a server (``Guild.me``'s
            ``guild_permissions``: channel overwrites aside, which each command checks).

    Returns:
        discord.py attribute names (empty when nothing is missing).
    """
    if granted.administrator:
        return []
    return [name for name in COMMAND_PERMISSIONS if not getattr(granted, name)]


def invite_permissions() -> discord.Permissions:
    """Return every permission the commands check (the invite asks for exactly these).

    :data:`COMMAND_PERMISSIONS`: :func:`require_placeholder_permissions`'s and ``/chat``'s
    (:data:`CHAT_PERMISSIONS`). Its ``value`` is the ``permissions`` integer of the invite URL.
    """
    return discord.Permissions(**dict.fromkeys(COMMAND_PERMISSIONS, True))


def invite_url(application_id: int) -> str:
    """Return the URL that adds the bot to a server with the permissions its checks need.

    The server install (``integration_type=0``, Discord OAuth2 docs, "Installation
    Context"): the bot joins the server and the server pays for its members' requests.

    Args:
        application_id: the Discord application's id (the bot user's id, for bots).
    """
    url = discord.utils.oauth_url(
        application_id, permissions=invite_permissions(), scopes=INVITE_SCOPES
    )
    return f"{url}&integration_type={GUILD_INSTALL}"


def user_install_url(application_id: int) -> str:
    """Return the URL that installs the bot to a member's account (issue 22, personal use).

    The user install (``integration_type=1``, scope ``applications.commands`` only, Discord
    OAuth2 docs): the member's commands work in any server, the bot's DM and group DMs, and
    are billed to the member (:func:`bot.services.personal.who_pays`).

    Args:
        application_id: the Discord application's id.
    """
    url = discord.utils.oauth_url(application_id, scopes=("applications.commands",))
    return f"{url}&integration_type={USER_INSTALL}"


def install_links(application_id: int) -> str:
    """Return both install links, one a line, labelled (``python -m bot invite``)."""
    return (
        f"server install: {invite_url(application_id)}\n"
        f"user install: {user_install_url(application_id)}"
    )


def model_choices(
    models: Iterable[tuple[str, str]], current: str
) -> list[app_commands.Choice[str]]:
    """Filter ``(id, label)`` pairs by what the user typed, for autocomplete.

    Matches on id or label, case-insensitively; at most :data:`MAX_CHOICES`, names cut to
    Discord's 100 characters.
    """
    typed = current.casefold().strip()
    choices = []
    for model_id, label in models:
        if typed in model_id.casefold() or typed in label.casefold():
            name = f"{label} ({model_id})"
            choices.append(app_commands.Choice(name=name[:100], value=model_id))
            if len(choices) == MAX_CHOICES:
                break
    return choices


def model_autocomplete(kind: ModelKind) -> ModelAutocomplete:
    """Return the autocomplete callback of a ``model`` option offering the ``kind`` models.

    One helper for every command with a model option: it reads the cached catalogue (Discord
    allows autocomplete no deferral), keeps the models the member's role tiers (or the
    server's model list) allow, and filters them with :func:`model_choices`. Use it as
    ``@app_commands.autocomplete(model=model_autocomplete("video"))``.
    """

    async def complete(
        interaction: discord.Interaction[GenBot], current: str
    ) -> list[app_commands.Choice[str]]:
        models = await allowed_models(interaction, kind)
        if models is None:
            return []
        return model_choices(((m.id, m.label) for m in models), current)

    return complete


@overload
async def allowed_models(
    interaction: discord.Interaction[GenBot], kind: Literal["video"]
) -> tuple[VideoModel, ...] | None: ...


@overload
async def allowed_models(
    interaction: discord.Interaction[GenBot], kind: ModelKind
) -> tuple[TextModel | ImageModel | VideoModel, ...] | None: ...


async def allowed_models(
    interaction: discord.Interaction[GenBot], kind: ModelKind
) -> tuple[TextModel | ImageModel | VideoModel, ...] | None:
    """Return the cached catalogue's ``kind`` models that the invoking member may use.

    Reads the catalogue without waiting on the network (:meth:`GenBot.cached_catalogue`), so
    autocomplete and a modal can answer within Discord's 3 seconds; keeps the models the
    member's role tiers (or the server's model list) allow, in catalogue order.

    Returns:
        The models, or None while no catalogue is cached yet (a fetch has been started).
    """
    catalogue = await interaction.client.cached_catalogue(interaction.guild_id)
    if catalogue is None:
        return None
    models: tuple[TextModel | ImageModel | VideoModel, ...]
    if kind == "text":
        models = catalogue.text
    elif kind == "image":
        models = catalogue.image
    else:
        models = catalogue.video
    if interaction.guild_id is not None:
        policy = await interaction.client.services.billing.member_policy(
            interaction.guild_id, member_role_ids(interaction)
        )
        models = tuple(m for m in models if policy.allows(m.id))
    return models
