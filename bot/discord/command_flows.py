"""Discord's part of ``/video``, its form and ``/image``: acknowledge, one service call, render.

The cog (or the form) builds a plain request of the options as given
(:class:`~bot.services.submissions.VideoRequest`, :class:`~bot.services.submissions.ImageRequest`);
this module checks what only Discord knows (the channel's permissions) and the attached files
before it acknowledges, so those refusals are answered at once, then makes the one service call
(:meth:`~bot.services.submissions.SubmissionService.video_command`,
:meth:`~bot.services.submissions.SubmissionService.image_command`: the member's defaults, style
and character, takes, Enhance or the paid request) and renders the outcome it returns. The
service is handed two ports: the deferred interaction (:class:`InteractionDesk`) and the
reference images' fresh URLs (:class:`~bot.discord.creative_commands.MessageReferences`).
"""

from __future__ import annotations

from bot.discord.creative_commands import MessageReferences
from bot.discord.enhance_flow import show_rewrite
from bot.discord.interactions import requester, require_placeholder_permissions
from bot.discord.request_flows import (
    Interaction,
    InteractionDesk,
    defer_video,
    private_results,
    send_note,
    show_images,
    show_video_outcome,
)
from bot.discord.tree import PUBLIC_DEFER
from bot.services.submissions import ImageRequest, Rewritten, VideoRequest, check_uploads


async def video_command(interaction: Interaction, request: VideoRequest) -> None:
    """Answer ``/video`` (or ``/video-advanced``'s form) with ``request``.

    Acknowledged ephemerally (a personal video: publicly, unless private results), or
    ephemerally for Enhance (the rewrite and the choice are the member's alone); then
    ``SubmissionService.video_command``, its outcome rendered: a price to confirm, the paid
    videos' cards, or the rewrite's choice.

    Raises:
        ValidationFailed: missing permissions or a bad attachment (answered before the
            acknowledgement), or the service's refusals (nothing charged).
    """
    who = requester(interaction)
    require_placeholder_permissions(interaction)
    check_uploads(request.uploads)
    if request.enhance:
        await interaction.response.defer(ephemeral=True, thinking=True)
    else:
        await defer_video(interaction, who)
    bot = interaction.client
    asked = await bot.services.submissions.video_command(
        who, request, desk=InteractionDesk(interaction, who), references=MessageReferences(bot)
    )
    if isinstance(asked.outcome, Rewritten):
        await show_rewrite(interaction, who, asked.outcome)
        await send_note(interaction, asked.note)
        return
    await show_video_outcome(interaction, who, asked.outcome, note=asked.note)


async def image_command(interaction: Interaction, request: ImageRequest) -> None:
    """Answer ``/image`` with ``request``.

    Acknowledged publicly, or ephemerally where the member has private results on (an
    asynchronous image still gets its card where their results go; the answer links it), or
    ephemerally for Enhance; then ``SubmissionService.image_command``, its outcome rendered,
    then the note about the member's defaults.

    Raises:
        ValidationFailed: missing permissions or a bad attachment (answered before the
            acknowledgement), or the service's refusals (nothing charged).
    """
    who = requester(interaction)
    # Checked up front: an asynchronous model's result comes as a channel message.
    require_placeholder_permissions(interaction)
    check_uploads(request.uploads)
    bot = interaction.client
    private = await private_results(bot, who.user_id)
    if request.enhance:
        # The rewrite and the choice are the member's alone; the image comes after.
        await interaction.response.defer(thinking=True, ephemeral=True)
    else:
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
    asked = await bot.services.submissions.image_command(
        who,
        request,
        desk=InteractionDesk(interaction, who),
        references=MessageReferences(bot),
        public=not private,
    )
    if isinstance(asked.outcome, Rewritten):
        await show_rewrite(interaction, who, asked.outcome)
    else:
        await show_images(interaction, who, asked.options, asked.outcome)
    await send_note(interaction, asked.note)
