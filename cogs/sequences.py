"""Video sequences: Continue, Remix and Join on video cards, "Continue video", ``/video-join``.

- **Continue** (a finished video card's button, or the message context menu "Continue video"
  on the bot's video messages): a form with what happens next (prefilled with the clip's
  prompt), an image-to-video model (only those the member's tiers allow, priced, their
  default preselected) and a duration; the new clip starts from the clip's last frame
  (:func:`bot.discord.sequence_flows.start_continue`), a ``/video`` for money and policy.
- **Remix**: a form with the prompt to change; the same model and options otherwise, through
  ``/video``'s path.
- **Join** (a continued clip's card) and ``/video-join``: one MP4 of several videos, the bot's
  own work at no charge (:func:`bot.discord.sequence_flows.join_videos`).

The buttons are ``discord.ui.DynamicItem`` instances (``gb:continue|remix|join:j<job id>``), so
they work after any restart; each is held to its command's permissions
(:mod:`bot.discord.command_access`): ``/video`` for Continue and Remix, ``/video-join`` for
Join.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

import discord
from discord import app_commands
from discord.ext import commands

from bot.clock import Clock
from bot.discord.bot import GenBot
from bot.discord.delivery import file_name
from bot.discord.interactions import (
    allowed_models,
    loaded_cog,
    requester,
    require_placeholder_permissions,
)
from bot.discord.render.buttons import CUSTOM_ID, SEQUENCE_CUSTOM_ID
from bot.discord.render.results import is_web_url
from bot.discord.render.takes import TAKE_SELECT, takes_card
from bot.discord.render.text import truncate
from bot.discord.request_flows import check_uploads_fresh, defer_video, start_video
from bot.discord.result_clicks import (
    Click,
    acting,
    refuse_if_known_barred,
    require_command,
    require_visible,
    result_click,
)
from bot.discord.result_clicks import submitted as submitted_as
from bot.discord.safety_gate import hidden_takes
from bot.discord.sequence_flows import (
    MAX_JOINED,
    join_videos,
    start_continue,
)
from bot.discord.tree import (
    PUBLIC_DEFER,
    ActionButton,
    ActionSelect,
    AdmittedModal,
    answer_error,
)
from bot.discord.video_form import add_duration_select, priced_models
from bot.domain import Job
from bot.errors import ValidationFailed
from bot.genapi.wire import VideoModel
from bot.i18n import N_, _, money, number
from bot.services.generation import (
    MAX_PROMPT_LENGTH,
    GenerationService,
    Requester,
    VideoOptions,
    default_duration,
)
from bot.services.joins import JoinService
from bot.services.member_settings import MemberSettingsService
from bot.services.safety import SafetyService
from bot.services.sequences import SequenceService, require_clip

Interaction = discord.Interaction[GenBot]

NO_VIDEO_CARD = N_("That message is not one of my video cards.")


class SequenceAction(ActionButton, template=SEQUENCE_CUSTOM_ID):
    """Continue, Remix or Join under a video card; restart-safe.

    Args:
        action: ``continue``, ``remix`` or ``join``.
        ref: the card's reference, ``j<job id>``.
    """

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Open the form, or join; any failure is one ephemeral sentence."""
        try:
            if self.action == "continue":
                await _continue(interaction, self.ref)
            elif self.action == "remix":
                await _remix(interaction, self.ref)
            else:
                await _join(interaction, self.ref)
        except Exception as exc:
            await answer_error(interaction, exc)


class TakeSelect(ActionSelect, template=TAKE_SELECT):
    """The select of a takes card: which take its action buttons act on; restart-safe.

    Args:
        ref: ``j<the first take's job id>``.
    """

    action = "take"

    async def callback(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Redraw the card with the buttons acting on the chosen take (nothing is charged)."""
        try:
            chosen = self.chosen(interaction)
            cog = _cog(interaction)
            takes = await cog.sequences.takes_of(int(self.ref[1:]))
            jobs = [await cog.generation.job(job_id) for job_id in takes]
            found = tuple(job for job in jobs if job is not None)
            if len(found) < 2 or not chosen.startswith("j") or not chosen[1:].isdigit():
                raise ValidationFailed(N_("These takes are no longer known; `/jobs` lists yours."))
            # The results the card carries as attachments stay, and its gallery shows them.
            names = (
                set()
                if interaction.message is None
                else {a.filename for a in interaction.message.attachments}
            )
            attached: dict[int, str] = {}
            for job in found:
                urls = [url for url in job.outputs if is_web_url(url)]
                name = file_name(job.task_id, urls[0], 0, job.kind) if urls else None
                if name is not None and name in names:
                    attached[job.id] = name
            locale = await interaction.client.locales.of(found[0].guild_id)  # a public card
            parts = takes_card(
                found,
                sandbox=cog.sandbox,
                chosen=int(chosen[1:]),
                attached=attached,
                hidden=await hidden_takes(cog.safety, found),
                locale=locale,
            )
            kwargs = parts.edit_kwargs()
            del kwargs["attachments"]  # kept as they are
            await interaction.response.edit_message(**kwargs)
        except Exception as exc:
            await answer_error(interaction, exc)


def _cog(interaction: Interaction) -> SequencesCog:
    return loaded_cog(interaction, SequencesCog)


async def _request(interaction: Interaction, ref: str) -> Click:
    return await result_click(interaction, _cog(interaction).generation, ref)


async def submitted(interaction: Interaction, click: Click | None, command: str) -> Requester:
    """Who a form's submission acts as, once checked (after the acknowledgement)."""
    return await submitted_as(interaction, _cog(interaction).generation, click, command)


async def _job_of(interaction: Interaction, ref: str) -> Job:
    job = None
    if ref.startswith("j"):
        job = await _cog(interaction).generation.job(int(ref[1:]))
    if job is None or job.kind != "video":
        raise ValidationFailed(N_("This video is no longer known; `/jobs` lists yours."))
    return job


async def _continue(interaction: Interaction, ref: str) -> None:
    await require_visible(interaction, ref)
    click = await _request(interaction, ref)
    job = await _job_of(interaction, ref)
    prompt = str(click.request.options.get("prompt") or job.prompt_summary)
    await open_continue(interaction, job, prompt, click)


async def open_continue(
    interaction: Interaction, job: Job, prompt: str, click: Click | None = None
) -> None:
    """Open the Continue form for ``job``: what happens next, a model, a duration.

    Refuses first (ephemerally, costing nothing) an unfinished clip, a channel where
    ``/video`` is not allowed, a member known to be barred from it, and a member with no
    image-to-video model. Lists only the image-to-video models the member's tiers allow
    (as Animate does), cheapest first, their default video model preselected when listed.

    Raises:
        ValidationFailed: as above.
    """
    cog = _cog(interaction)
    who, invoker = acting(interaction, click)
    require_clip(job, who)
    await cog.sequences.check_room(who.guild_id, job.id)
    require_placeholder_permissions(interaction)
    if click is None or click.dm_job_id is None:  # a DM card's channel: checked on submission
        await cog.generation.check_channel(who)
    refuse_if_known_barred(interaction, "video", invoker)
    models = await allowed_models(interaction, "video")
    if models is None:
        raise ValidationFailed(N_("The model list is still loading; try again in a moment."))
    animating = tuple(model for model in models if model.needs_image)
    if not animating:
        raise ValidationFailed(N_("No image-to-video model is available to you here."))
    mine = await cog.members.get(interaction.user.id)
    await ContinueModal(job, prompt, animating, preferred=mine.video_model, click=click).show(
        interaction
    )


class ContinueModal(AdmittedModal, title=N_("Continue video")):
    """What happens next, an image-to-video model and a duration, for a finished clip.

    Args:
        job: the clip continued.
        prompt: the clip's own prompt, prefilled.
        models: the image-to-video models the member may use.
        preferred: the member's default video model (``/settings``), preselected when listed.
        click: the click that opened the form; on a private card in a DM, its submission
            acts in the card's server (:func:`cogs.results.acting`).
    """

    def __init__(
        self,
        job: Job,
        prompt: str,
        models: tuple[VideoModel, ...],
        *,
        preferred: str | None = None,
        click: Click | None = None,
    ) -> None:
        super().__init__()
        self.job_id = job.id
        self.click = click
        priced = priced_models(models)
        ids = [model.id for _, model in priced]
        self.default_model = preferred if preferred in ids else ids[0]
        self.prompt: discord.ui.TextInput[ContinueModal] = discord.ui.TextInput(
            custom_id="prompt",
            style=discord.TextStyle.paragraph,
            default=prompt[:MAX_PROMPT_LENGTH] or None,
            max_length=MAX_PROMPT_LENGTH,
            placeholder=_("What happens next"),
        )
        self.model: discord.ui.Select[ContinueModal] = discord.ui.Select(
            custom_id="model",
            options=[
                discord.SelectOption(
                    label=truncate(model.label, 100),
                    value=model.id,
                    description=truncate(
                        _(
                            "{price} for {seconds} s",
                            price=_("price unknown") if price is None else money(price),
                            seconds=number(default_duration(model)),
                        ),
                        100,
                    ),
                    default=model.id == self.default_model,
                )
                for price, model in priced
            ],
        )
        self.add_item(discord.ui.Label(text=_("What happens next"), component=self.prompt))
        self.add_item(discord.ui.Label(text=_("Model"), component=self.model))
        self.duration = add_duration_select(self, priced)

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Continue the clip through ``/video``'s path (deferred before the checks)."""
        require_placeholder_permissions(interaction)
        await defer_video(interaction, acting(interaction, self.click)[0])
        who = await submitted(interaction, self.click, "video")
        job = await _cog(interaction).generation.job(self.job_id)
        if job is None:
            raise ValidationFailed(N_("This video is no longer known; `/jobs` lists yours."))
        chosen = self.duration.values if self.duration is not None else []
        await start_continue(
            interaction,
            who,
            job,
            prompt=self.prompt.value,
            model=self.model.values[0] if self.model.values else self.default_model,
            duration=float(chosen[0]) if chosen else None,
        )

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


async def _remix(interaction: Interaction, ref: str) -> None:
    """Remix: the video's request, its prompt changed in a form first."""
    await require_visible(interaction, ref)
    click = await _request(interaction, ref)
    if click.request.kind != "video":
        raise ValidationFailed(N_("Remix works on videos."))
    options = VideoOptions(**click.request.options)
    check_uploads_fresh(click.request.options, _cog(interaction).clock.time())
    refuse_if_known_barred(interaction, "video", click.invoker)
    await RemixVideoModal(options, click=click).show(interaction)


class RemixVideoModal(AdmittedModal, title=N_("Remix video")):
    """The video's prompt, prefilled, to change; the same model and options otherwise.

    Submitting runs ``/video``'s path (confirmation, holds, budgets, caps, one ledger row),
    charged to whoever submits.

    Args:
        options: the video's stored request.
        click: the click that opened the form.
    """

    def __init__(self, options: VideoOptions, *, click: Click | None = None) -> None:
        super().__init__()
        self.options = options
        self.click = click
        self.prompt: discord.ui.TextInput[RemixVideoModal] = discord.ui.TextInput(
            label=_("Prompt"),
            style=discord.TextStyle.paragraph,
            max_length=MAX_PROMPT_LENGTH,
            default=options.prompt[:MAX_PROMPT_LENGTH],
        )
        self.add_item(self.prompt)

    async def on_submit(self, interaction: Interaction) -> None:  # type: ignore[override]
        """Make the remixed video (deferred before the checks)."""
        require_placeholder_permissions(interaction)
        await defer_video(interaction, acting(interaction, self.click)[0])
        who = await submitted(interaction, self.click, "video")
        await start_video(
            interaction, who, dataclasses.replace(self.options, prompt=self.prompt.value)
        )

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await answer_error(interaction, error)


async def _join(interaction: Interaction, ref: str) -> None:
    """Join: the card's sequence up to this clip, as one film (no charge)."""
    cog = _cog(interaction)
    job = await _job_of(interaction, ref)
    who = requester(interaction)
    clips = await cog.sequences.clips_upto(job.id)
    if len(clips) < 2:
        raise ValidationFailed(N_("This video was not continued from another; nothing to join."))
    clips = clips[-MAX_JOINED:]
    jobs = [require_clip(await cog.generation.job(job_id), who) for job_id in clips]
    await require_visible(interaction, *(f"j{job_id}" for job_id in clips))
    cog.joins.refuse_if_queued(interaction.user.id)  # ephemeral, before the deferral
    await _defer_join(interaction)
    await require_command(interaction, "video-join")
    await join_videos(interaction, jobs, cog.joins)


async def _defer_join(interaction: Interaction) -> None:
    interaction.extras[PUBLIC_DEFER] = True
    await interaction.response.defer(thinking=True)


def parse_numbers(text: str) -> list[int]:
    """``/video-join``'s numbers (``12, 13 14``), in order.

    Raises:
        ValidationFailed: not numbers, fewer than 2, more than :data:`MAX_JOINED`, or repeated.
    """
    parts = [p for p in re.split(r"[,\s]+", text.replace("#", " ").strip()) if p]
    if not parts or not all(p.isdigit() for p in parts):
        raise ValidationFailed(
            N_(
                "Give the videos' numbers from `/jobs`, separated by commas or spaces (e.g. 12, 15)."  # noqa: E501
            )
        )
    numbers = [int(p) for p in parts]
    if not 2 <= len(numbers) <= MAX_JOINED:
        raise ValidationFailed(N_("Join 2 to {most} videos."), most=MAX_JOINED)
    return numbers


def own_videos(jobs: list[Job | None], numbers: list[int], who: Requester) -> list[Job]:
    """The member's own finished videos of this server, in ``numbers``' order.

    Raises:
        ValidationFailed: one is unknown, someone else's, from elsewhere or not a finished video.
    """
    found = []
    for wanted, job in zip(numbers, jobs, strict=True):
        if job is None or job.user_id != who.user_id or job.guild_id != who.guild_id:
            raise ValidationFailed(
                N_("You have no video #{number} here; `/jobs` lists yours."), number=wanted
            )
        found.append(require_clip(job, who))
    return found


def _video_job_id(message: discord.Message) -> int | None:
    """The job id behind one of the bot's video cards: from its buttons' custom ids."""
    stack: list[Any] = list(message.components)
    while stack:
        component = stack.pop(0)
        found = re.fullmatch(CUSTOM_ID, str(getattr(component, "custom_id", None) or ""))
        if found is not None and found["ref"].startswith("j"):
            return int(found["ref"][1:])
        stack += list(getattr(component, "children", ()) or ())
        accessory = getattr(component, "accessory", None)
        if accessory is not None:
            stack.append(accessory)
    return None


@app_commands.guild_only()
async def continue_video(interaction: Interaction, message: discord.Message) -> None:
    """Message context menu "Continue video": a next clip from the video's last frame."""
    bot = interaction.client
    assert bot.user is not None
    job_id = _video_job_id(message) if message.author.id == bot.user.id else None
    if job_id is None:
        raise ValidationFailed(NO_VIDEO_CARD)
    await require_visible(interaction, f"j{job_id}")
    click = await _request(interaction, f"j{job_id}")
    job = await _job_of(interaction, f"j{job_id}")
    prompt = str(click.request.options.get("prompt") or job.prompt_summary)
    await open_continue(interaction, job, prompt, click)


class SequencesCog(commands.Cog):
    """Continue, Remix and Join: sequences of videos.

    Args:
        bot: the bot (its dynamic items and command tree).
        generation: jobs and channel checks.
        sequences: sequences, their bound and takes.
        members: members' defaults (the model Continue preselects).
        clock: the time (uploads' freshness).
        sandbox: results come from the built-in emulator.
        joins: Join (several videos as one film).
        safety: the safety policy (held takes stay off the takes card); None: not checked.
    """

    def __init__(
        self,
        bot: GenBot,
        generation: GenerationService,
        sequences: SequenceService,
        members: MemberSettingsService,
        clock: Clock,
        *,
        sandbox: bool,
        joins: JoinService,
        safety: SafetyService | None = None,
    ) -> None:
        self.bot = bot
        self.generation = generation
        self.safety = safety
        self.sequences = sequences
        self.joins = joins
        self.members = members
        self.clock = clock
        self.sandbox = sandbox
        self.menu = app_commands.ContextMenu(name="Continue video", callback=continue_video)

    async def cog_load(self) -> None:
        """Add the dynamic buttons and the context menu."""
        self.bot.add_dynamic_items(SequenceAction, TakeSelect)
        self.bot.tree.add_command(self.menu)

    async def cog_unload(self) -> None:
        """Remove them again."""
        self.bot.remove_dynamic_items(SequenceAction, TakeSelect)
        self.bot.tree.remove_command(self.menu.name, type=self.menu.type)

    @app_commands.command(name="video-join")
    @app_commands.allowed_installs(guilds=True, users=True)
    @app_commands.allowed_contexts(guilds=True, dms=True, private_channels=True)
    async def video_join(
        self, interaction: discord.Interaction[GenBot], videos: app_commands.Range[str, 1, 200]
    ) -> None:
        """Join up to 8 of your finished videos into one, in the order given (no charge).

        Args:
            interaction: the interaction.
            videos: the videos' numbers from /jobs, in order, e.g. 12, 15, 16
        """
        who = requester(interaction)
        numbers = parse_numbers(videos)
        jobs = own_videos([await self.generation.job(n) for n in numbers], numbers, who)
        await require_visible(interaction, *(f"j{job.id}" for job in jobs))
        self.joins.refuse_if_queued(interaction.user.id)  # ephemeral, before deferring
        await _defer_join(interaction)
        await join_videos(interaction, jobs, self.joins)


async def setup(bot: GenBot) -> None:
    """Load the extension."""
    services = bot.services
    await bot.add_cog(
        SequencesCog(
            bot,
            services.generation,
            services.sequences,
            services.members,
            services.clock,
            sandbox=services.sandbox,
            joins=services.joins,
            safety=services.moderation,
        )
    )
