"""The buttons under every result, and the Animate image / Edit image context menus.

The buttons are ``discord.ui.DynamicItem`` instances: their custom ids (``gb:<action>:<ref>``,
see :mod:`bot.discord.render.buttons`) carry the result's reference, and the request behind it is
read from the database, so they work after any restart and on messages of any age. Every action
runs through :mod:`bot.discord.request_flows`, so the same validation, channel check, budgets and
caps apply as to the command, counted to whoever clicked; a refusal costs nothing. Discord applies
a server's command permissions (Integrations) to commands only, so each button is held to its
command's (:mod:`bot.discord.command_access`), and a paid button clicked twice runs once
(:class:`bot.discord.click_debounce.ClickDebounce`).

A private result's card lives in its requester's DM, and a result the delivery sent
there as a new message (its card could not be edited or posted) carries the same buttons: a
click there by the requester is the server's, as in the channel it was asked in
(:func:`dm_card_click`): the server's key, budgets, tiers, allowed channels and command
permissions, with the member's roles read from the server.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.clock import Clock
from bot.discord.bot import GenBot
from bot.discord.click_debounce import ALREADY_RUNNING
from bot.discord.enhance_flow import start_enhance
from bot.discord.interactions import (
    allowed_models,
    loaded_cog,
    requester,
    require_placeholder_permissions,
)
from bot.discord.render.buttons import RESULT_CUSTOM_ID
from bot.discord.render.text import truncate
from bot.discord.request_flows import (
    SourceImage,
    check_uploads_fresh,
    defer_video,
    message_image,
    require_source,
    show_job,
    shown_once,
    start_image,
    start_text,
    start_video,
    varied,
)
from bot.discord.result_clicks import (
    Click,
    acting,
    refuse_if_known_barred,
    require_command,
    require_visible,
    result_click,
)
from bot.discord.result_clicks import resolve as resolve_click
from bot.discord.result_clicks import submitted as submitted_as
from bot.discord.tree import (
    PUBLIC_DEFER,
    ActionButton,
    AdmittedModal,
    answer_error,
    send_ephemeral,
)
from bot.domain import ResultRequest
from bot.errors import BotError, ValidationFailed
from bot.i18n import N_, _, money, number
from bot.services.billing import video_cost_cents
from bot.services.generation import (
    MAX_PROMPT_LENGTH,
    GenerationService,
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
)
from bot.services.member_settings import MemberSettingsService
from bot.services.personal import is_personal

Interaction = discord.Interaction[GenBot]

MAX_SELECT_OPTIONS = 25

"""Options in a select menu (Discord: at most 25)."""

IMAGE_EDIT_MODES = (
    (N_("Image to image"), "i2i"),
    (N_("Edit the text in the image"), "i2i_text"),
)
"""The modes of docs/genapi.md §4.4 that take a source image."""

PAID_ACTIONS = frozenset({"again", "vary", "enhance"})
"""The buttons that spend at once (Animate and Edit open a form first)."""

NOT_VARIED = N_(
    "Vary makes a new text at a higher temperature; the service takes nothing to vary an image "
    "or a video by, so use Again (the same request) or Edit instead."
)
"""Vary on an image or a video: the requests of docs/genapi.md §4.2, §4.4 have no seed or strength,
so it could only repeat Again at the same price; it is no longer shown there."""


class ResultAction(ActionButton, template=RESULT_CUSTOM_ID):
    """Again, Vary, Animate, Edit, ✨ Enhance or Delete under a result; restart-safe.

    Args:
        action: the action's name.
        ref: the result's reference, ``j<job id>`` or ``r<result request id>``.
    """

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Run the action; any failure is the command's one ephemeral sentence."""
        debounce = interaction.client.click_debounce
        paid = self.action in PAID_ACTIONS
        message_id = interaction.message.id if interaction.message is not None else 0
        if paid and not debounce.claim(interaction.user.id, message_id, self.action):
            await send_ephemeral(interaction, _(ALREADY_RUNNING))
            return
        sent = True
        try:
            await _ACTIONS[self.action](interaction, self.ref)
        except Exception as exc:
            # A refusal (BotError) comes before any request: retrying it cannot pay twice.
            sent = not isinstance(exc, BotError)
            await answer_error(interaction, exc)
        finally:
            if paid:
                debounce.release(interaction.user.id, message_id, self.action, hold=sent)


async def _again(interaction: Interaction, ref: str, *, vary: bool = False) -> None:
    """Again (or Vary): the request behind the result, made again by the clicker.

    Acknowledged (deferred) before anything that may ask Discord: the DM card's member and
    the command permissions are read after it (Discord allows 3 s for the acknowledgement).
    """
    click = await _request(interaction, ref)
    request = click.request
    if vary and request.kind != "text":
        raise ValidationFailed(NOT_VARIED)
    options = request.options
    cog = _cog(interaction)
    check_uploads_fresh(options, cog.clock.time())
    if vary and (await cog.members.get(interaction.user.id)).remix:
        # Remix (/settings defaults remix): change the prompt before it is re-asked;
        # the form is the answer, so the command permissions are checked on its submission.
        refuse_if_known_barred(interaction, "text", click.invoker)
        await RemixModal(varied(TextOptions(**options)), click=click).show(interaction)
        return
    if request.kind == "video":
        require_placeholder_permissions(interaction)
        await defer_video(interaction, click.who)
    else:
        # Private results hold for a button's answer as for the command's.
        private = (await cog.members.get(interaction.user.id)).private
        interaction.extras[PUBLIC_DEFER] = not private
        if request.kind == "image":
            require_placeholder_permissions(interaction)
        await interaction.response.defer(thinking=True, ephemeral=private)
    click = await resolve(interaction, click)
    await require_command(interaction, request.kind, click.invoker)
    if request.kind == "video":
        await start_video(interaction, click.who, VideoOptions(**options))
    elif request.kind == "image":
        await start_image(interaction, click.who, ImageOptions(**options))
    else:
        text = TextOptions(**options)
        await start_text(interaction, click.who, varied(text) if vary else text)


async def _vary(interaction: Interaction, ref: str) -> None:
    await _again(interaction, ref, vary=True)


async def _delete(interaction: Interaction, ref: str) -> None:
    owner: int | None = None
    request = await _cog(interaction).generation.result_request(ref)
    if request is not None:
        owner = request.user_id
    elif ref.startswith("j"):
        job = await _cog(interaction).generation.job(int(ref[1:]))
        owner = None if job is None else job.user_id
    if interaction.user.id != owner and not interaction.permissions.manage_messages:
        raise ValidationFailed(
            N_(
                "Only the member who asked for it, or someone with Manage Messages, "
                "can delete this."
            )
        )
    message = interaction.message
    ephemeral = message is not None and message.flags.ephemeral
    posted = message is not None and message.interaction_metadata is None  # with the bot token
    if ephemeral or (is_personal(requester(interaction).guild_id) and not posted):
        # Where the bot may not be a member (a user install) its token cannot touch
        # the channel (50001), and an ephemeral card (private results) has no channel message:
        # an interaction response, which the click's own token deletes (after a deferred
        # update, "@original" is the clicked message). A card the bot posted (in a channel
        # or a member's DM) is deleted with the bot's token.
        await interaction.response.defer()
        await interaction.delete_original_response()
        await interaction.followup.send(_("Deleted."), ephemeral=True)
        return
    await interaction.response.defer(ephemeral=True, thinking=True)
    if interaction.message is not None:
        await interaction.message.delete()
    await interaction.followup.send(_("Deleted."), ephemeral=True)


async def _source(interaction: Interaction, request: ResultRequest) -> SourceImage:
    assert interaction.client.user is not None
    if interaction.message is not None:
        found = message_image(interaction.message, interaction.client.user.id)
        if found is not None:
            return found
    if request.outputs:
        return SourceImage(request.outputs[0], trusted=True)
    raise ValidationFailed(N_("That message has no image (attachment or embed image)."))


async def _animate(interaction: Interaction, ref: str) -> None:
    await require_visible(interaction, ref)
    click = await _request(interaction, ref)
    source = await _source(interaction, click.request)
    prompt = str(click.request.options.get("prompt") or "")
    await open_animate(interaction, source, prompt, click)


async def _edit(interaction: Interaction, ref: str) -> None:
    await require_visible(interaction, ref)
    click = await _request(interaction, ref)
    source = await _source(interaction, click.request)
    await open_edit(interaction, source, click.request.options.get("model"), click)


async def _show(interaction: Interaction, ref: str) -> None:
    """Show result: update the clicked card with its job as it stands now.

    A personal job's card is an interaction response the poller can edit only while that
    interaction's token lives (15 minutes); a click brings a fresh token, which answers by
    updating the card itself (``edit_message``; deferred first when files must be downloaded,
    Discord's 3 s being short for that). Files stay within this interaction's upload limit.
    Nothing is charged, so anyone who sees the card may click.
    """
    job = None
    if ref.startswith("j"):
        job = await _cog(interaction).generation.job(int(ref[1:]))
    if job is None:
        raise ValidationFailed(N_("This job is no longer known."))
    async with shown_once(interaction, job.id, "show"):
        await show_job(interaction, job, update=True)


async def _enhance(interaction: Interaction, ref: str) -> None:
    """✨ Enhance: the result's prompt rewritten (a text charge), then the member's choice.

    Acknowledged ephemerally first; the request is then checked as Again checks it, and the
    generation, if the member chooses one, runs through its command's path
    (:mod:`bot.discord.enhance_flow`).
    """
    click = await _request(interaction, ref)
    request = click.request
    if request.kind not in ("image", "video"):
        raise ValidationFailed(N_("Enhance rewrites image and video prompts only."))
    options = request.options
    check_uploads_fresh(options, _cog(interaction).clock.time())
    require_placeholder_permissions(interaction)
    await interaction.response.defer(ephemeral=True, thinking=True)
    click = await resolve(interaction, click)
    await require_command(interaction, request.kind, click.invoker)
    chosen = VideoOptions(**options) if request.kind == "video" else ImageOptions(**options)
    await start_enhance(interaction, click.who, chosen)


_ACTIONS = {
    "enhance": _enhance,
    "again": _again,
    "vary": _vary,
    "animate": _animate,
    "edit": _edit,
    "delete": _delete,
    "show": _show,
}


async def open_animate(
    interaction: Interaction, source: SourceImage, prompt: str, click: Click | None = None
) -> None:
    """Open the Animate modal: a prompt and a select of image-to-video models, cheapest first.

    Refuses first (ephemerally, costing nothing) where the member could not use ``/video``
    (channel, Discord's command permissions). Lists only the models the member's role tiers
    (or the server's model list) allow, as ``/video-advanced`` does.

    Raises:
        ValidationFailed: channel not allowed, missing permissions, ``/video`` barred, no
            model list yet, or no image-to-video model this member may use.
    """
    who, invoker = acting(interaction, click)
    require_placeholder_permissions(interaction)
    if click is None or click.dm_job_id is None:  # a DM card's channel: checked on submission
        await _cog(interaction).generation.check_channel(who)
    refuse_if_known_barred(interaction, "video", invoker)
    # Only the models the member's tiers allow, as /video-advanced lists them.
    models = await allowed_models(interaction, "video")
    if models is None:
        raise ValidationFailed(N_("The model list is still loading; try again in a moment."))
    priced = []
    for model in models:
        if not model.needs_image:
            continue
        duration = 5.0 if 5 in model.durations or not model.durations else min(model.durations)
        priced.append((video_cost_cents(model.cost_cents_per_5s, duration), duration, model))
    if not priced:
        raise ValidationFailed(N_("No image-to-video model is available to you here."))
    priced.sort(key=lambda p: (p[0] is None, p[0] or 0))
    await AnimateModal(source, prompt, priced, click=click).show(interaction)


async def open_edit(
    interaction: Interaction, source: SourceImage, model: Any, click: Click | None = None
) -> None:
    """Open the Edit modal: a new prompt and a mode (``i2i`` or ``i2i_text``).

    Raises:
        ValidationFailed: channel not allowed, missing permissions or ``/image`` barred.
    """
    who, invoker = acting(interaction, click)
    require_placeholder_permissions(interaction)
    if click is None or click.dm_job_id is None:  # a DM card's channel: checked on submission
        await _cog(interaction).generation.check_channel(who)
    refuse_if_known_barred(interaction, "image", invoker)
    await EditModal(source, model if isinstance(model, str) else None, click=click).show(
        interaction
    )


class AnimateModal(AdmittedModal, title=N_("Animate image")):
    """A prompt and an image-to-video model (its price shown), for an image.

    Args:
        source: the image, sent as ``image_url`` (docs/genapi.md §4.2).
        prompt: the prompt to start from (the image's own, if known).
        priced: ``(price cents or None, duration s, model)``, cheapest first; the first is
            the default.
        click: the click that opened the form; on a private card in a DM, its submission
            acts in the card's server (:func:`acting`).
    """

    def __init__(
        self, source: SourceImage, prompt: str, priced: list[Any], *, click: Click | None = None
    ) -> None:
        super().__init__()
        self.source = source
        self.click = click
        self.prompt: discord.ui.TextInput[AnimateModal] = discord.ui.TextInput(
            label=_("Prompt"),
            style=discord.TextStyle.paragraph,
            default=prompt[:MAX_PROMPT_LENGTH] or None,
            max_length=MAX_PROMPT_LENGTH,
            placeholder=_("What happens in the video"),
        )
        options = []
        for index, (price, duration, model) in enumerate(priced[:MAX_SELECT_OPTIONS]):
            cost = _("price unknown") if price is None else money(price)
            options.append(
                discord.SelectOption(
                    label=truncate(model.label, 100),
                    value=model.id,
                    description=truncate(
                        _("{cost} for {seconds} s", cost=cost, seconds=number(duration)), 100
                    ),
                    default=index == 0,
                )
            )
        self.default_model = priced[0][2].id
        self.model: discord.ui.Select[AnimateModal] = discord.ui.Select(options=options)
        self.add_item(self.prompt)
        self.add_item(discord.ui.Label(text=_("Model"), component=self.model))

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Make the video through ``/video``'s path (confirmation above the threshold).

        Deferred first; the checks that may ask Discord come after (:func:`submitted`).
        """
        require_placeholder_permissions(interaction)
        await defer_video(interaction, acting(interaction, self.click)[0])
        who = await submitted(interaction, self.click, "video")
        model = self.model.values[0] if self.model.values else self.default_model
        options = VideoOptions(
            self.prompt.value,
            model,
            image_url=self.source.url,
            image_uploaded=self.source.trusted,
        )
        await start_video(interaction, who, options)

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


class RemixModal(AdmittedModal, title=N_("Vary (remix)")):
    """Vary on a text answer for a member with remix on: the prompt, prefilled, to change first.

    Submitting runs ``/text``'s path (checks, budgets, ledger) with the varied options and the
    prompt as submitted, charged to whoever submits.

    Args:
        options: the varied request (its temperature already raised).
        click: the click that opened the form; on a private card in a DM, its submission
            acts in the card's server (:func:`acting`).
    """

    def __init__(self, options: TextOptions, *, click: Click | None = None) -> None:
        super().__init__()
        self.options = options
        self.click = click
        self.prompt: discord.ui.TextInput[RemixModal] = discord.ui.TextInput(
            label=_("Prompt"),
            style=discord.TextStyle.paragraph,
            max_length=MAX_PROMPT_LENGTH,
            default=options.prompt[:MAX_PROMPT_LENGTH],
        )
        self.add_item(self.prompt)

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Ask the varied request with the submitted prompt (deferred before the checks)."""
        private = (await _cog(interaction).members.get(interaction.user.id)).private
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
        who = await submitted(interaction, self.click, "text")
        options = dataclasses.replace(self.options, prompt=self.prompt.value)
        await start_text(interaction, who, options)

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


class EditModal(AdmittedModal, title=N_("Edit image")):
    """A new prompt and a mode for an image (``i2i`` / ``i2i_text``, docs/genapi.md §4.4).

    Args:
        source: the image, sent as ``image_url``.
        model: the image model that made it, if known (else the default model).
        click: the click that opened the form; on a private card in a DM, its submission
            acts in the card's server (:func:`acting`).
    """

    def __init__(
        self, source: SourceImage, model: str | None, *, click: Click | None = None
    ) -> None:
        super().__init__()
        self.source = source
        self.click = click
        self.image_model = model
        self.prompt: discord.ui.TextInput[EditModal] = discord.ui.TextInput(
            label=_("Prompt"),
            style=discord.TextStyle.paragraph,
            max_length=MAX_PROMPT_LENGTH,
            placeholder=_("What to change"),
        )
        self.mode: discord.ui.Select[EditModal] = discord.ui.Select(
            options=[
                discord.SelectOption(label=_(label), value=value, default=value == "i2i")
                for label, value in IMAGE_EDIT_MODES
            ]
        )
        self.add_item(self.prompt)
        self.add_item(discord.ui.Label(text=_("Mode"), component=self.mode))

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Make the image through ``/image``'s path (deferred before the checks)."""
        require_placeholder_permissions(interaction)
        private = (await _cog(interaction).members.get(interaction.user.id)).private
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
        who = await submitted(interaction, self.click, "image")
        options = ImageOptions(
            self.prompt.value,
            self.image_model,
            mode=self.mode.values[0] if self.mode.values else "i2i",
            image_url=self.source.url,
            image_uploaded=self.source.trusted,
        )
        await start_image(interaction, who, options)

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


@app_commands.guild_only()
async def animate_image(interaction: Interaction, message: discord.Message) -> None:
    """Message context menu "Animate image": a video from the message's image."""
    assert interaction.client.user is not None
    source = require_source(message, interaction.client.user.id)
    await open_animate(interaction, source, "")


@app_commands.guild_only()
async def edit_image(interaction: Interaction, message: discord.Message) -> None:
    """Message context menu "Edit image": a new image from the message's image."""
    assert interaction.client.user is not None
    source = require_source(message, interaction.client.user.id)
    await open_edit(interaction, source, None)


class ResultsCog(commands.Cog):
    """Registers the result buttons and the image context menus."""

    def __init__(
        self,
        bot: GenBot,
        generation: GenerationService,
        members: MemberSettingsService,
        clock: Clock,
    ) -> None:
        self.bot = bot
        self.generation = generation
        self.members = members
        self.clock = clock
        self.menus = (
            app_commands.ContextMenu(name="Animate image", callback=animate_image),
            app_commands.ContextMenu(name="Edit image", callback=edit_image),
        )

    async def cog_load(self) -> None:
        """Add the dynamic buttons and the context menus."""
        self.bot.add_dynamic_items(ResultAction)
        for menu in self.menus:
            self.bot.tree.add_command(menu)

    async def cog_unload(self) -> None:
        """Remove them again."""
        self.bot.remove_dynamic_items(ResultAction)
        for menu in self.menus:
            self.bot.tree.remove_command(menu.name, type=menu.type)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(ResultsCog(bot, services.generation, services.members, services.clock))


async def _request(interaction: Interaction, ref: str) -> Click:
    return await result_click(interaction, _cog(interaction).generation, ref)


async def resolve(interaction: Interaction, click: Click) -> Click:
    """``click`` with a DM card's member read from its server, after the acknowledgement."""
    return await resolve_click(interaction, _cog(interaction).generation, click)


async def submitted(interaction: Interaction, click: Click | None, command: str) -> Requester:
    """Who a form's submission acts as, once checked (after the acknowledgement)."""
    return await submitted_as(interaction, _cog(interaction).generation, click, command)


def _cog(interaction: Interaction) -> ResultsCog:
    """The loaded results cog: the buttons, forms and menus reach its services through it."""
    return loaded_cog(interaction, ResultsCog)
