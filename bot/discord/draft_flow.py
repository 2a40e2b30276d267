"""Discord's part of Draft → Final: the **Final** button under a draft, and ``/config draft``.

A draft (``/image draft:true``, ``/video draft:true``: :mod:`bot.services.drafts`) is shown as
any result, through the takes as they are; its buttons start with **Final**
(``gb:final:<ref>``, :class:`FinalButton`, restart-safe: its reference is read from the
database). A click makes the draft again on the member's model, through its command's path:

* an image take: ``/image``'s (:func:`bot.discord.request_flows.start_image`) with the take
  as its reference image;
* a video draft: its first frame decoded (PyAV, in the media thread) and posted as an
  ephemeral followup, whose attachment URL the service fetches, as Continue posts a last frame
  (:mod:`bot.discord.sequence_flows`); then ``/video``'s path, a price above
  ``/config confirm-above`` asked first.

The click is held to the command's permissions and charged to whoever clicks, as Again is
(:mod:`bot.discord.result_clicks`); a second click while the first runs pays nothing.
"""

from __future__ import annotations

import io

import discord

from bot.discord.click_debounce import ALREADY_RUNNING
from bot.discord.interactions import require_placeholder_permissions
from bot.discord.render.buttons import FINAL_CUSTOM_ID
from bot.discord.request_flows import (
    Interaction,
    InteractionDesk,
    defer_video,
    private_results,
    show_video_outcome,
    start_image,
)
from bot.discord.result_clicks import require_command, require_visible, resolve, result_click
from bot.discord.tree import PUBLIC_DEFER, ActionButton, answer_error, send_ephemeral
from bot.domain import CreativeSettings, Job
from bot.errors import BotError, ValidationFailed
from bot.i18n import N_, _
from bot.services.drafts import DraftModels


class FinalButton(ActionButton, template=FINAL_CUSTOM_ID):
    """**Final** under a draft's take; restart-safe.

    Args:
        action: ``"final"``.
        ref: the take's reference, ``j<job id>`` or ``r<result request id>``.
    """

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Make the Final; any failure is the command's one ephemeral sentence."""
        debounce = interaction.client.click_debounce
        message_id = interaction.message.id if interaction.message is not None else 0
        if not debounce.claim(interaction.user.id, message_id, f"final:{self.ref}"):
            await send_ephemeral(interaction, _(ALREADY_RUNNING))
            return
        sent = True
        try:
            await final(interaction, self.ref)
        except Exception as exc:
            # A refusal (BotError) comes before any request: retrying it cannot pay twice.
            sent = not isinstance(exc, BotError)
            await answer_error(interaction, exc)
        finally:
            debounce.release(interaction.user.id, message_id, f"final:{self.ref}", hold=sent)


async def final(interaction: Interaction, ref: str) -> None:
    """Final on the draft ``ref``: acknowledged first, then checked, then made.

    Raises:
        ValidationFailed: not a draft, withheld by the safety policy, the command barred, the
            take not finished, or the request's own checks (nothing charged).
    """
    bot = interaction.client
    generation = bot.services.generation
    await require_visible(interaction, ref)
    click = await result_click(interaction, generation, ref)
    request = click.request
    require_placeholder_permissions(interaction)
    if request.kind == "video":
        await defer_video(interaction, click.who)
    else:
        private = await private_results(bot, interaction.user.id)
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
    click = await resolve(interaction, generation, click)
    kind = "video" if request.kind == "video" else "image"
    await require_command(interaction, kind, click.invoker)
    job = None if request.job_id is None else await generation.job(request.job_id)
    drafts = bot.services.drafts
    who = click.who
    if kind == "image":
        await start_image(interaction, who, await drafts.final_image(who, request, job))
        return

    async def frame(clip: Job) -> str:
        return await post_first_frame(interaction, clip)

    outcome = await bot.services.submissions.final_video(
        who, job, request, frame=frame, desk=InteractionDesk(interaction, who)
    )
    await show_video_outcome(interaction, who, outcome)


async def post_first_frame(interaction: Interaction, job: Job) -> str:
    """Post the first frame of ``job``'s clip ephemerally; its attachment's URL.

    Posted as a followup (its URL outlives the response's later edits), like Continue's last
    frame: a URL on Discord's CDN the service can fetch, fresh now.

    Raises:
        ValidationFailed: the clip could not be fetched or read, or Discord kept no file.
    """
    await interaction.edit_original_response(
        content=_("Taking the first frame of draft #{number}…", number=job.id), view=None
    )
    png = await interaction.client.services.joins.first_frame(job)
    posted = await interaction.followup.send(
        _("The first frame of draft #{number}, where its Final starts:", number=job.id),
        file=discord.File(io.BytesIO(png), f"first-frame-{job.id}.png"),
        ephemeral=True,
        wait=True,
    )
    if not posted.attachments:
        raise ValidationFailed(N_("Discord did not keep the frame; try again."))
    return posted.attachments[0].url


def draft_text(settings: CreativeSettings, models: DraftModels) -> str:
    """``/config draft``'s answer: the models drafts use now, and whose choice each is."""
    image = f"`{models.image}`" if models.image else _("none")
    video = f"`{models.video}`" if models.video else _("none")
    if settings.draft_image_model is None:
        image = _("{model} (the cheapest image model)", model=image)
    if settings.draft_video_model is None:
        video = _("{model} (the cheapest video model)", model=video)
    return _(
        "Drafts use {image} for images (4 takes) and {video} for videos (its shortest clip).",
        image=image,
        video=video,
    )


__all__ = ["FinalButton", "draft_text", "final", "post_first_frame"]
