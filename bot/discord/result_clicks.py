"""Who a click on a result acts as: the request behind it, its server, the member's rights.

A result's buttons (``cogs/results.py``) and its video actions (``cogs/sequences.py``) act as
the command behind the result, charged to whoever clicks: in the result's own server, or, for
a private card in the member's DM, in the server and channel it came from. Discord applies a
server's command permissions to commands only, never to buttons or forms, so they are held
to them here (Integrations, "Permissions").
"""

from __future__ import annotations

from dataclasses import dataclass

import discord

from bot.discord.bot import GenBot
from bot.discord.command_access import Invoker, invoker_of, member_refusal, refusal
from bot.discord.interactions import requester
from bot.domain import ResultRequest
from bot.errors import ValidationFailed
from bot.i18n import N_
from bot.services.generation import GenerationService, Requester
from bot.services.personal import is_personal

Interaction = discord.Interaction[GenBot]

FORGOTTEN = N_("This result's request is no longer known; use the command again.")

WITHHELD = N_("That result is withheld by the server's safety policy; it cannot be used.")
"""An action on a held, withheld or rejected result (:func:`require_visible`)."""

IN_DM = N_("This button works in the server the result came from; use the command there.")

NOT_THERE = N_(
    "I can no longer act for you in the server this result came from (you or I left it); "
    "use the command where you are."
)


@dataclass(frozen=True, slots=True)
class Click:
    """Who a click on a result acts as, and where.

    Attributes:
        request: the request behind the result.
        who: the requester the action runs as (the clicker here; on a private card in a DM,
            the requester in the server and channel the result came from).
        invoker: on such a DM card, the member as the server's command permissions see them
            in that channel; None where the click's own interaction says it.
        dm_job_id: a DM card's job while the member in its server is not read yet (it may
            take a REST call, which waits for the acknowledgement): :func:`resolve` reads it.
            ``who`` is then provisional (the server, the DM), good for deferring only.
    """

    request: ResultRequest
    who: Requester
    invoker: Invoker | None = None
    dm_job_id: int | None = None


async def require_command(
    interaction: Interaction, command: str, invoker: Invoker | None = None
) -> None:
    """Refuse unless the member may use ``/command`` here (Server Settings → Integrations).

    Discord checks command permissions on commands only, never on buttons or forms.

    Args:
        interaction: the click or the form's submission.
        command: the command the action runs again.
        invoker: the member in the server a DM card came from (:func:`dm_card_click`);
            None: the interaction's own member and channel.

    Raises:
        ValidationFailed: the member may not, or it could not be checked.
    """
    if invoker is not None:
        if not await interaction.client.command_access.allows(command, invoker):
            raise ValidationFailed(refusal(command))
        return
    if is_personal(requester(interaction).guild_id):
        # A server's command permissions govern its own install only; a member's own install
        # has none (Discord applies them to the guild integration).
        return
    await interaction.client.command_access.require(interaction, command)


async def result_click(interaction: Interaction, generation: GenerationService, ref: str) -> Click:
    """Who a click on the result ``ref`` acts as, and where (:class:`Click`).

    Args:
        interaction: the click (or the form it opened).
        generation: where the request behind the result is read.
        ref: the result's reference (``r<id>`` or ``j<job id>``, from its custom id).

    Raises:
        ValidationFailed: the request is forgotten, or the click comes from a DM the result
            cannot be acted on from.
    """
    who = requester(interaction)
    request = await generation.result_request(ref)
    # A personal result's buttons charge whoever clicks, in their own wallet.
    personal = request is not None and is_personal(request.guild_id) and is_personal(who.guild_id)
    if request is not None and (personal or request.guild_id == who.guild_id):
        return Click(request, who)
    if interaction.guild_id is None:
        if (
            request is not None
            and not is_personal(request.guild_id)
            and request.job_id is not None
            and request.user_id == interaction.user.id
        ):
            # A job's result in its requester's DM (a private card, or a result the
            # delivery sent there): the server's, as in the channel it was asked in, read
            # once the click is acknowledged (resolve).
            provisional = Requester(request.guild_id, who.channel_id, who.user_id)
            return Click(request, provisional, dm_job_id=request.job_id)
        # A card an earlier release delivered by DM still shows them: nothing to check or charge.
        raise ValidationFailed(IN_DM)
    raise ValidationFailed(FORGOTTEN)


async def resolve(interaction: Interaction, generation: GenerationService, click: Click) -> Click:
    """``click`` with a DM card's member read from its server (:func:`dm_card_click`).

    Call it after the acknowledgement: it may ask Discord (``GET /guilds/{id}/members/{user}``).

    Raises:
        ValidationFailed: as :func:`dm_card_click`.
    """
    if click.dm_job_id is None:
        return click
    return await dm_card_click(interaction, generation, click.request, click.dm_job_id)


async def dm_card_click(
    interaction: Interaction, generation: GenerationService, request: ResultRequest, job_id: int
) -> Click:
    """The requester's click on a job's result in the bot's DM, as the server's.

    The result is their private card, or a result the delivery sent by DM as a new message
    (the card could not be edited, nor, for a public one, posted in the channel).

    The action is charged to the server the job came from and checked as a click in its
    channel would be: the member's roles and permissions there are read from the server
    (the gateway's cache, else ``GET /guilds/{id}/members/{user}``), so tiers, cooldown
    exemption, allowed channels and the server's command permissions apply unchanged.

    Raises:
        ValidationFailed: the job is gone, the bot left the server, or the member did
            (Discord: 404 Unknown Member).
    """
    job = await generation.job(job_id)
    guild = interaction.client.get_guild(request.guild_id)
    if job is None or guild is None:
        raise ValidationFailed(NOT_THERE)
    member = guild.get_member(interaction.user.id)
    if member is None:
        try:
            member = await guild.fetch_member(interaction.user.id)
        except discord.NotFound:
            raise ValidationFailed(NOT_THERE) from None
    channel = guild.get_channel_or_thread(job.channel_id)
    parent = channel.parent_id if isinstance(channel, discord.Thread) else None
    permissions = (
        channel.permissions_for(member) if channel is not None else member.guild_permissions
    )
    barred = member_refusal(permissions.value, member.timed_out_until, discord.utils.utcnow())
    if barred is not None:  # as Discord would refuse the command in that channel
        raise ValidationFailed(barred)
    roles = frozenset(int(role_id) for role_id in member._roles)
    who = Requester(
        guild.id,
        job.channel_id,
        member.id,
        parent_channel_id=parent,
        role_ids=roles,
        manage_guild=permissions.manage_guild,
    )
    invoker = Invoker(guild.id, parent or job.channel_id, member.id, roles, permissions.value)
    return Click(request, who, invoker)


def refuse_if_known_barred(
    interaction: Interaction, command: str, invoker: Invoker | None = None
) -> None:
    """Before a form opens: refuse a member already known to be barred from ``/command``.

    The form is the interaction's answer and must come first (no REST call before it), so
    only what is cached is consulted (:meth:`~bot.discord.command_access.CommandAccess.cached`);
    the full check runs on the form's submission (:func:`require_command`).

    Raises:
        ValidationFailed: the member is known to be barred (:func:`refusal`).
    """
    if invoker is None:
        if interaction.guild_id is None or interaction.channel_id is None:
            return  # a DM card not read yet: checked on submission
        if is_personal(requester(interaction).guild_id):
            return
        invoker = invoker_of(interaction)
    if interaction.client.command_access.cached(command, invoker) is False:
        raise ValidationFailed(refusal(command))


def acting(interaction: Interaction, click: Click | None) -> tuple[Requester, Invoker | None]:
    """Who an action (or the form it opened) runs as: a DM card's click acts in its server.

    Returns:
        The requester and, for a private card in a DM (:func:`dm_card_click`), the member as
        its server's command permissions see them; else the interaction's own, and None.
    """
    if click is not None and (click.invoker is not None or click.dm_job_id is not None):
        return click.who, click.invoker
    return requester(interaction), None


async def submitted(
    interaction: Interaction, generation: GenerationService, click: Click | None, command: str
) -> Requester:
    """Who a form's submission acts as, once checked: call it after the acknowledgement.

    Reads a DM card's member in its server (:func:`resolve`) and holds the member to
    ``/command``'s permissions (:func:`require_command`); both may ask Discord.

    Raises:
        ValidationFailed: the member may not, is gone, or it could not be checked.
    """
    if click is not None:
        click = await resolve(interaction, generation, click)
    who, invoker = acting(interaction, click)
    await require_command(interaction, command, invoker)
    return who


async def require_visible(interaction: Interaction, *refs: str) -> None:
    """Refuse an action on a result the server's safety policy holds, withholds or rejected.

    Animate, Edit, Continue, Remix, Join and ``/video-join`` use the result itself (its file,
    its request), so they are refused on such a result before anything is asked or charged
    (issue 37, docs/safety.md). One database read for all of ``refs``.

    Raises:
        ValidationFailed: one of ``refs`` is held, withheld or rejected.
    """
    safety = interaction.client.services.moderation
    if refs and await safety.hidden(refs):
        raise ValidationFailed(WITHHELD)
