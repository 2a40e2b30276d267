"""Small pieces of Discord glue the cogs share: who asked, who pays, permission checks, choices."""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import TYPE_CHECKING, Any, Literal, TypeVar, overload

import discord
from discord import app_commands
from discord.ext import commands

from bot.discord.permissions import (
    CHAT_PERMISSIONS,
    COMMAND_PERMISSIONS,
    PLACEHOLDER_PERMISSIONS,
    permission_names,
)
from bot.errors import ValidationFailed
from bot.genapi.wire import ImageModel, TextModel, VideoModel
from bot.i18n import N_
from bot.services.generation import Requester
from bot.services.personal import (
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


CLICKS = (discord.InteractionType.component, discord.InteractionType.modal_submit)
"""Interactions that act on a message (a button, or a form it opened): on a personal card
they carry the card owner's install, and whoever clicks pays (:func:`who_pays`)."""

C = TypeVar("C", bound=commands.Cog)


def loaded_cog(interaction: discord.Interaction[Any], cog_type: type[C]) -> C:
    """The loaded instance of ``cog_type``, which holds the services its ``setup`` gave it.

    How a cog module's restart-safe buttons (``DynamicItem``), which discord.py builds from a
    custom id and not from the cog, reach those services: through the cog, the one way every
    part of a cog module reaches them.

    Raises:
        RuntimeError: the cog is not loaded (its extension failed or was unloaded).
    """
    cog = interaction.client.get_cog(cog_type.__cog_name__)
    if not isinstance(cog, cog_type):
        raise RuntimeError(f"the {cog_type.__cog_name__} cog is not loaded")
    return cog


MAX_CHOICES = 25
"""Discord accepts at most 25 autocomplete choices (application command docs)."""


def requester(interaction: discord.Interaction[discord.Client]) -> Requester:
    """Return who invoked ``interaction``, where, and whose wallet pays.

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
        raise ValidationFailed(N_("This command cannot be used here."))
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

    Raises:
        BotNotInServer: a server install without the bot as a member authorised it.
        NotYourInstall: no install of the member's authorised it (and no DM or card click).
    """
    guild_id = interaction.guild_id
    return who_pays(
        guild_id=guild_id,
        user_id=interaction.user.id,
        owners={int(k): int(v) for k, v in interaction._integration_owners.items()},
        bot_in_guild=guild_id is not None and interaction.client.get_guild(guild_id) is not None,
        click=interaction.type in CLICKS,
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


def require_placeholder_permissions(interaction: discord.Interaction[discord.Client]) -> None:
    """Check that the bot may post, edit and reply to a placeholder where it was asked.

    Uses the interaction's ``app_permissions`` (the bot's permissions in that channel); in a
    thread, posting needs Send Messages in Threads instead of Send Messages.

    A personal request (billed to the member's wallet, where the bot may not be a
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
            N_("I need these permissions in this channel first: {permission_names}."),
            permission_names=permission_names(missing),
        )


def require_chat_permissions(interaction: discord.Interaction[discord.Client]) -> None:
    """Check that ``/chat`` may answer in this text channel and go on in a thread of it.

    The placeholder's permissions (:func:`require_placeholder_permissions`, for the answer)
    and :data:`CHAT_PERMISSIONS` (the thread), checked together so that the sentence names
    every one missing, before anything is charged.

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
            N_("I need these permissions in this channel first: {permission_names}."),
            permission_names=permission_names(missing),
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
