"""Discord's part of a paid action from a command, a result's button, a context menu or a modal.

One path per kind, shared by every entry point: the use case is one method of
:class:`bot.services.submissions.SubmissionService` (the same validation, channel check,
budgets and caps as the command, counted to whoever clicked; the request behind each result
stored for its buttons), and this module acknowledges, renders the outcome it returns and sends
it. A video whose known price is above the server's confirmation threshold
(``/config confirm-above``) first asks, ephemerally, for a few minutes.

A member with private results on gets a video's or an asynchronous image's card in
their DM instead of the channel (:func:`show_private_card`), or, where their DMs are closed, in
the ephemeral response; in a personal context the card is the response, ephemeral.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import discord

from bot.discord.choices import ChoiceOption, OneChoice, choice_view
from bot.discord.click_debounce import JUST_SHOWN
from bot.discord.delivery import INVALID_FORM_BODY, send_card
from bot.discord.dm_notice import CANNOT_DM
from bot.discord.queue_status import queue_status
from bot.discord.render import image_result, job_placeholder, posted_later, text_answer
from bot.discord.render.buttons import confirm_label, confirm_text, show_buttons
from bot.discord.render.parts import MessageParts
from bot.discord.render.results import is_web_url, text_card
from bot.discord.render.safety import safety_answer
from bot.discord.safety_gate import screen_urls
from bot.discord.safety_review import downloader
from bot.discord.tree import CHARGED, PUBLIC_DEFER, sentence_for
from bot.domain import DRAFT
from bot.errors import ValidationFailed
from bot.i18n import N_, _, number, using
from bot.services.generation import (
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_attachment,
)
from bot.services.personal import is_personal
from bot.services.private_cards import CardPlace, PrivateCard
from bot.services.response_tokens import TOKEN_LIFETIME_SECONDS, TOKEN_MARGIN_SECONDS, ResponseToken
from bot.services.submissions import ImagesMade, VideoOutcome, VideosSubmitted

if TYPE_CHECKING:
    from bot.discord.bot import GenBot
    from bot.domain import Job

log = logging.getLogger(__name__)

CONFIRM_SECONDS = 300.0
"""How long a price confirmation stays valid ("a few minutes")."""

VARY_TEMPERATURE_STEP = 0.5
DEFAULT_TEMPERATURE = 0.7
"""Vary re-asks a text at the request's temperature (the spec's default 0.7) plus this, at most
2 (the bound of docs/genapi.md §4.5)."""

Interaction = discord.Interaction["GenBot"]


async def defer_video(interaction: Interaction, who: Requester) -> None:
    """Defer a video's interaction: ephemerally, or publicly for a personal video.

    A server's video card is a channel message (or a DM, private results), and the response
    only a note about it; a personal video's card (billed to the member, where the
    bot may not be a member) is the response itself, public like a server's card, or
    ephemeral when the member has private results on (``PUBLIC_DEFER`` False). An error after
    a public deferral replaces the "thinking…" message with an ephemeral one.
    """
    if is_personal(who.guild_id):
        private = await private_results(interaction.client, who.user_id)
        interaction.extras[PUBLIC_DEFER] = not private
        await interaction.response.defer(thinking=True, ephemeral=private)
    else:
        await interaction.response.defer(ephemeral=True, thinking=True)


async def private_results(bot: GenBot, user_id: int) -> bool:
    """Whether the member turned private results on (``/settings defaults private``).

    Read before a paid call, never after it (a failure here must cost nothing).
    """
    return (await bot.services.members.get(user_id)).private


async def show_personal_card(interaction: Interaction, job: Job) -> None:
    """Make the response ``job``'s card, and keep its interaction token for the poller.

    Where the bot may not be a member (a personal job) its token cannot post to the
    channel (Discord: 50001), so the card is the interaction's original response, edited by
    the poller through the interaction webhook while the token lives (15 minutes), and by its
    Show result button after that; ephemeral when the response was deferred so (private
    results, ``PUBLIC_DEFER`` False). Never raises (the job is paid for): a card that could
    not be shown leaves the result to ``/jobs show``.
    """
    await _show_response_card(interaction, job, personal=True)


async def _show_response_card(interaction: Interaction, job: Job, *, personal: bool) -> None:
    """Make the response ``job``'s card (personal, or private with DMs closed); never raises."""
    bot = interaction.client
    clock = bot.services.clock
    expires_at = interaction.created_at.timestamp() + TOKEN_LIFETIME_SECONDS
    token = ResponseToken(
        interaction.token,
        expires_at - TOKEN_MARGIN_SECONDS,
        interaction.filesize_limit,
        private=not personal or interaction.extras.get(PUBLIC_DEFER) is False,
    )
    try:
        await bot.response_tokens.keep(job.id, token)
        now = clock.time()
        ready_at = await bot.services.schedule.estimated_finish(job, now=now)
        parts = job_placeholder(job, now=now, sandbox=bot.services.sandbox, ready_at=ready_at)
        if personal:
            parts = dataclasses.replace(parts, action_buttons=show_buttons(job.id))
        try:
            message = await interaction.edit_original_response(**parts.edit_kwargs())
        except discord.HTTPException as exc:
            if exc.status != 400 or exc.code != INVALID_FORM_BODY:
                raise
            message = await interaction.edit_original_response(**parts.legacy().edit_kwargs())
        await bot.generation.attach_message(job, message.id)
        bot.poller.wake()
    except Exception as exc:
        log.error("job %s: its card was not shown in its response (%s)", job.id, exc)


def _private_on_its_way(what: str, link: str) -> str:
    if what == "video":
        return _(
            "Your video is on its way to your DMs (private results): {link}. "
            "You will be pinged there when it is ready.",
            link=link,
        )
    return _(
        "Your image is on its way to your DMs (private results): {link}. "
        "You will be pinged there when it is ready.",
        link=link,
    )


def _dms_closed(what: str) -> str:
    if what == "video":
        return _(
            "I cannot DM you (your DMs are closed), so your video is shown here, only to you, "
            "while I can edit this message (15 minutes); after that it will be posted in the "
            "channel."
        )
    return _(
        "I cannot DM you (your DMs are closed), so your image is shown here, only to you, "
        "while I can edit this message (15 minutes); after that it will be posted in the "
        "channel."
    )


async def show_private_card(
    interaction: Interaction, job: Job, what: str, *, note: str | None = None
) -> None:
    """Post a private server job's card in the member's DM, not the channel.

    Private results (``/settings defaults private``): the card (placeholder, progress, the
    result with its files and buttons) lives in the bot's DM channel with the member, edited
    by the poller with the bot's token like a channel card; the ephemeral response says so.
    Where Discord refuses the DM (50007: DMs closed) the card is this ephemeral response,
    edited while its token lives (15 minutes), after which the poller posts the result in the
    channel, saying why (``bot.discord.delivery``). The card's place is recorded
    (:class:`bot.services.private_cards.PrivateCards`) before the job is handed to the poller; if it
    cannot be, the card goes to the channel as anyone's. Never raises (the job is paid for).

    Args:
        interaction: the ephemerally deferred interaction.
        job: the paid job.
        what: ``"video"`` or ``"image"``, for the sentences.
        note: said with the answer (a member's default left out).
    """
    bot = interaction.client
    cards = bot.private_cards
    try:
        dm = await interaction.user.create_dm()
        if not await cards.keep(job.id, PrivateCard(CardPlace.DM, dm.id)):
            await _public_card(interaction, job, what, note)
            return
        now = bot.services.clock.time()
        ready_at = await bot.services.schedule.estimated_finish(job, now=now)
        parts = job_placeholder(job, now=now, sandbox=bot.services.sandbox, ready_at=ready_at)
        message = await send_card(dm, parts)
    except Exception as exc:
        if isinstance(exc, discord.HTTPException) and exc.code == CANNOT_DM:
            log.info("job %s: the member's DMs are closed; its card is the response", job.id)
        else:
            log.warning("job %s: its card was not sent by DM (%s); it is the response", job.id, exc)
        if not await cards.keep(job.id, PrivateCard(CardPlace.RESPONSE)):
            await _public_card(interaction, job, what, note)
            return
        await _show_response_card(interaction, job, personal=False)
        try:
            await interaction.followup.send(
                _noted(_dms_closed(what), note),
                ephemeral=True,
                allowed_mentions=discord.AllowedMentions.none(),
            )
        except Exception as exc:
            log.warning("a note about a paid job was not shown (%s)", exc)
        return
    try:
        await bot.generation.attach_message(job, message.id)
        bot.poller.wake()
    except Exception as exc:  # the job falls due after its grace anyway
        log.error("job %s: its DM card was not recorded (%s)", job.id, exc)
    text = _private_on_its_way(what, message.jump_url)
    await tell(interaction, content=_noted(text, note), view=None)


async def _public_card(interaction: Interaction, job: Job, what: str, note: str | None) -> None:
    """Post ``job``'s card in its channel and say where, in the (ephemeral) response."""
    link = await posted_placeholder(interaction.client, job)
    if what == "video":
        text = _(
            "Your video is on its way: {link}. You will be pinged when it is ready.", link=link
        )
    else:
        text = _("Your image is on its way: {link}.", link=link)
    await tell(interaction, content=_noted(text, note), view=None)


async def start_video(
    interaction: Interaction,
    who: Requester,
    options: VideoOptions,
    *,
    note: str | None = None,
    takes: int = 1,
) -> None:
    """Submit a video (``SubmissionService.video``) and show what it came to.

    ``interaction`` must already be deferred ephemerally (or be a deferred component update):
    the answer goes to its original response. A price above the server's threshold is asked
    first (:class:`ConfirmVideo`); paid videos get their cards (:func:`show_videos`).

    Args:
        interaction: the deferred interaction.
        who: the requester.
        options: the video's options.
        note: said with the answer (a member's default left out).
        takes: how many takes (1 to 4): priced, confirmed and held for all of them.

    Raises:
        ValidationFailed: among the checks (takes, channel, options).
    """
    submissions = interaction.client.services.submissions
    desk = InteractionDesk(interaction, who)
    outcome = await submissions.video(who, options, desk=desk, takes=takes)
    await show_video_outcome(interaction, who, outcome, note=note)


async def show_video_outcome(
    interaction: Interaction, who: Requester, outcome: VideoOutcome, *, note: str | None = None
) -> None:
    """Render a video's outcome: its price to confirm, or its paid cards (never raises then)."""
    if isinstance(outcome, VideosSubmitted):
        await show_videos(interaction, who, outcome, note=note)
        return
    bot = interaction.client
    confirm = ConfirmVideo(who, outcome.options, note=note, takes=outcome.takes)
    price = outcome.price_cents
    view = choice_view(bot.choices.open(confirm, CONFIRM_SECONDS), confirm.buttons(price))
    text = confirm_text(price, outcome.threshold_cents)
    if outcome.takes > 1:
        text = _("{count} takes · {question}", count=number(outcome.takes), question=text)
    await interaction.edit_original_response(content=_noted(text, note), view=view)


class InteractionDesk:
    """The Discord side of one paid request (:class:`bot.services.submissions.Desk`).

    While the request waits in its key's queue the deferred response shows its place
    (:func:`bot.discord.queue_status.queue_status`); once charged, the interaction is marked
    so (:data:`CHARGED`) and no error after it is told as a failure.
    """

    def __init__(self, interaction: Interaction, who: Requester) -> None:
        self._interaction = interaction
        self._who = who

    def waiting(self) -> contextlib.AbstractAsyncContextManager[object]:
        """The queue status of the member's request, shown in the deferred response."""
        return queue_status(self._interaction, self._who.user_id, self._who.guild_id)

    def charged(self) -> None:
        """Mark the interaction charged."""
        charged(self._interaction)


def _noted(text: str, note: str | None) -> str:
    return text if note is None else f"{text}\n-# {note}"


async def send_note(interaction: Interaction, note: str | None) -> None:
    """Tell the member, ephemerally, which of their defaults was left out; never raises.

    Sent after the answer (a paid result comes first, whatever happens here).
    """
    if note is None:
        return
    try:
        await interaction.followup.send(
            note, ephemeral=True, allowed_mentions=discord.AllowedMentions.none()
        )
    except Exception as exc:
        log.warning("a note about a member's defaults was not shown (%s)", exc)


async def submit_video(
    interaction: Interaction,
    who: Requester,
    options: VideoOptions,
    *,
    note: str | None = None,
    takes: int = 1,
) -> None:
    """Submit a video whose price the member confirmed, and show its cards."""
    submissions = interaction.client.services.submissions
    desk = InteractionDesk(interaction, who)
    outcome = await submissions.video(who, options, desk=desk, takes=takes, confirmed=True)
    await show_video_outcome(interaction, who, outcome, note=note)


async def show_videos(
    interaction: Interaction, who: Requester, made: VideosSubmitted, *, note: str | None
) -> None:
    """Show paid videos' cards; say where, and which takes were not made. Never raises.

    Takes recorded together share one channel card (:mod:`bot.discord.render.takes`); a
    personal or private request shows each on its own card (a personal card is the response,
    a private one goes by DM: :func:`show_private_card`). A take the service did not make is
    said in a note: the others are paid for and coming, so nothing is reported as failed.
    """
    bot = interaction.client
    jobs = list(made.jobs)
    personal = is_personal(who.guild_id)
    if made.grouped and not made.private and not personal:
        try:
            link = await bot.post_takes_placeholder(jobs)
        except Exception as exc:
            log.error("takes of job %s: card not posted (%s)", jobs[0].id, exc)
            link = posted_later(who.channel_id)
        text = _(
            "Your {count} takes are on their way: {link}. You will be pinged when ready.",
            count=number(len(jobs)),
            link=link,
        )
        await tell(interaction, content=_noted(text, note), view=None)
    else:
        for index, job in enumerate(jobs):
            if personal and index == 0:
                await show_personal_card(interaction, job)
            elif made.private:
                await show_private_card(interaction, job, "video", note=note)
            else:
                await _public_card(interaction, job, "video", note)
    if made.error is not None:
        await send_note(
            interaction,
            _(
                "{missing} of the {takes} takes could not be made (nothing was charged for them "
                "unless the service says so in `/usage`): {reason}",
                missing=number(made.takes - len(jobs)),
                takes=number(made.takes),
                reason=sentence_for(made.error),
            ),
        )


def charged(interaction: Interaction) -> None:
    """Mark ``interaction``'s request as charged (see :data:`CHARGED`)."""
    interaction.extras[CHARGED] = True


async def posted_placeholder(bot: GenBot, job: Job) -> str:
    """Post ``job``'s card (``GenBot.post_placeholder``); never raises.

    Returns:
        A link to the card, or a sentence saying where the result will be posted (a job
        whose card could not be posted falls due anyway and is shown as a new message).
    """
    try:
        return await bot.post_placeholder(job)
    except Exception as exc:
        log.error("job %s: placeholder not posted (%s); the result will be posted", job.id, exc)
        return posted_later(job.channel_id)


async def tell(interaction: Interaction, **edit: Any) -> None:
    """Edit the (ephemeral) response into a note about a paid job; never raises.

    The job's card in the channel is what counts; the note is a courtesy, logged if lost.
    """
    try:
        await interaction.edit_original_response(**edit)
    except Exception as exc:
        log.warning("a note about a paid job was not shown (%s)", exc)


async def start_image(
    interaction: Interaction, who: Requester, options: ImageOptions, *, takes: int = 1
) -> None:
    """Generate an image (``SubmissionService.image``); ``interaction`` must be deferred.

    ``PUBLIC_DEFER`` set: a synchronous result replaces the "thinking…" response, with its
    buttons; an asynchronous one gets a card in the channel and a link here (a personal one:
    its card is this response; a private one, deferred ephemerally with ``PUBLIC_DEFER``
    False: in the member's DM, :func:`show_private_card`). Several synchronous takes are
    shown one after another (the response, then followups), each with its buttons;
    asynchronous ones share one channel card (:mod:`bot.discord.render.takes`) where public.

    Raises:
        ValidationFailed: among the checks (takes out of range, several in a personal
            context), before anything is sent.
    """
    private = interaction.extras.get(PUBLIC_DEFER) is False
    made = await interaction.client.services.submissions.image(
        who, options, desk=InteractionDesk(interaction, who), public=not private, takes=takes
    )
    await show_images(interaction, who, options, made)


async def show_images(
    interaction: Interaction, who: Requester, options: ImageOptions, made: ImagesMade
) -> None:
    """Render paid images (:func:`start_image`'s answer): cards, answers, takes not made.

    ``options``: what they were made with (their answers show its prompt).
    """
    bot = interaction.client
    private = interaction.extras.get(PUBLIC_DEFER) is False
    jobs = list(made.jobs)
    if made.grouped:
        try:
            link = await bot.post_takes_placeholder(jobs)
        except Exception as exc:
            log.error("takes of job %s: card not posted (%s)", jobs[0].id, exc)
            link = posted_later(who.channel_id)
        await tell(
            interaction,
            content=_("Your {count} takes are on their way: {link}.", count=len(jobs), link=link),
        )
    else:
        for job in jobs:
            if is_personal(who.guild_id):
                await show_personal_card(interaction, job)
            elif private:
                await show_private_card(interaction, job, "image")
            else:
                await _public_card(interaction, job, "image", None)
    await _show_images(interaction, who, options, made)


async def _show_images(
    interaction: Interaction, who: Requester, options: ImageOptions, made: ImagesMade
) -> None:
    """Show the synchronous takes of ``made``, then say which takes were not made."""
    locale = await answer_locale(interaction, who)
    bot = interaction.client
    shown = []
    for answer in made.answers:
        parts = image_result(
            answer.result,
            locale=locale,
            prompt=options.prompt,
            model=answer.model,
            requester_id=who.user_id,
            sandbox=bot.services.sandbox,
            ref=answer.ref,
            paid_by=made.payer,
            job_id=answer.job_id,
            draft=options.stage == DRAFT,
        )
        shown.append(await safety_checked(bot, who, answer.ref, options.prompt, parts, locale))
    if shown:
        first = await show_paid(interaction, who, shown)
        await _keep_answered(bot, made, first)
    if made.error is not None:
        await send_note(
            interaction,
            _(
                "{missing} of the {takes} takes could not be made: {reason}",
                missing=made.takes - made.made,
                takes=made.takes,
                reason=sentence_for(made.error),
            ),
        )


async def _keep_answered(bot: GenBot, made: ImagesMade, first: discord.Message | None) -> None:
    """After the answer: each synchronous image's job gets its message and thumbnails.

    The message (the first shown: the response, else its post in the channel; none by DM)
    lets the dashboard fetch fresh attachment URLs; the thumbnails let its galleries show the
    image without asking Discord. Never raises: the result is shown and paid for.
    """
    for answer in made.answers:
        if answer.job_id is None:
            continue
        try:
            if first is not None and len(made.answers) == 1:
                await bot.generation.answered_at(answer.job_id, first.id)
            urls = [u for u in answer.result.outputs if is_web_url(u)]
            files = [await fetch_result(bot, url) for url in urls]
            await bot.services.thumbnails.keep(answer.job_id, "image", files)
        except Exception as exc:
            log.warning(
                "job %s: answered image not kept for the dashboard (%s)", answer.job_id, exc
            )


async def fetch_result(bot: GenBot, url: str) -> bytes:
    """Download a result file under the download rule, within Discord's default upload limit.

    Raises:
        TooLarge, DownloadRefused, httpx.HTTPError: as :func:`bot.discord.delivery.download`.
    """
    return await downloader(bot.services.downloads)(url)


async def safety_checked(
    bot: GenBot,
    who: Requester,
    ref: str | None,
    prompt: str,
    answer: MessageParts,
    locale: str | None,
) -> MessageParts:
    """A synchronous image's answer as the server's safety policy allows (docs/safety.md).

    Its files are downloaded and scored before it is shown (:func:`screen_urls`): a held or
    withheld result's answer carries no image and says why, a spoiler's carries its files
    blurred; a shown one gets the Report select. Never raises: a paid result is answered.
    """
    gate = bot.announcer.safety
    if gate is None or not gate.active or ref is None:
        return answer
    request = await bot.generation.result_request(ref)
    urls = [] if request is None else [u for u in request.outputs if is_web_url(u)]
    screening, files = await screen_urls(
        gate,
        ref=ref,
        guild_id=who.guild_id,
        channel_id=who.channel_id,
        user_id=who.user_id,
        prompt=prompt,
        urls=urls,
        download=lambda url: fetch_result(bot, url),
    )
    with using(locale):
        return safety_answer(answer, screening.visibility, files, ref)


async def edit_response(interaction: Interaction, parts: MessageParts) -> discord.Message:
    """Edit the deferred response into ``parts``: its card, else the old form.

    Discord answers a payload it refuses (a Components V2 card it does not take) with 400,
    code 50035; the same message then goes in content and embeds.

    Returns:
        The response as edited.

    Raises:
        discord.HTTPException: Discord refused both forms.
    """
    try:
        return await interaction.edit_original_response(**parts.edit_kwargs())
    except discord.HTTPException as exc:
        if parts.card is None or exc.status != 400 or exc.code != INVALID_FORM_BODY:
            raise
        log.warning("Discord refused a card (%s); answered in the old form", exc.code)
        return await interaction.edit_original_response(**parts.legacy().edit_kwargs())


async def show_job(interaction: Interaction, job: Job, *, update: bool) -> None:
    """Answer ``interaction`` with ``job``'s card as it stands now, with its buttons.

    Used by a card's Show result button (``update``: the clicked card itself is updated, the
    click's fresh token answering where the card's own may have expired) and by
    ``/jobs show`` (a new response, ``update`` False, deferred publicly by the caller). A
    finished job's files are downloaded within the interaction's upload limit
    (``Interaction.filesize_limit``), so the response is deferred first when there are any.

    Raises:
        discord.HTTPException: Discord refused the answer.
    """

    async def send(parts: MessageParts) -> None:
        if interaction.response.is_done():
            await edit_response(interaction, parts)
        else:
            await interaction.response.edit_message(**parts.edit_kwargs())

    if update and job.status == "completed" and job.outputs:
        await interaction.response.defer()  # a deferred update: "@original" is the card
    await interaction.client.announcer.show_card(job, interaction.filesize_limit, send)


@contextlib.asynccontextmanager
async def shown_once(interaction: Interaction, job_id: int, entry: str) -> AsyncIterator[None]:
    """Run one re-show of ``job_id`` by the interaction's member, debounced per job and member.

    Show result and ``/jobs show`` each (``entry``) may download the result's files; the same
    member's same re-show of the job again within
    :data:`~bot.discord.click_debounce.SHOW_DEBOUNCE_SECONDS` of the last is refused before
    anything is fetched (the file a re-show fetched is reused by others meanwhile:
    :mod:`bot.discord.shown_files`).

    Raises:
        ValidationFailed: :data:`~bot.discord.click_debounce.JUST_SHOWN`, answered before any
            acknowledgement (nothing deferred, fetched or changed).
    """
    debounce = interaction.client.show_debounce
    user_id = interaction.user.id
    if not debounce.claim(user_id, job_id, entry):
        raise ValidationFailed(JUST_SHOWN, job_id=job_id)
    try:
        yield
    finally:
        debounce.release(user_id, job_id, entry)


async def answer_locale(interaction: Interaction, who: Requester) -> str | None:
    """The language of a paid answer: the server's when it is public, else the member's (None).

    A public answer in a server that added the bot is read by the channel; an ephemeral one
    (private results) or one of personal use is the member's own.
    """
    if interaction.extras.get(PUBLIC_DEFER) is False or is_personal(who.guild_id):
        return None
    return await interaction.client.locales.of(interaction.guild_id)


async def start_text(interaction: Interaction, who: Requester, options: TextOptions) -> None:
    """Generate text; ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set).

    The answer is paid for once ``SubmissionService.text`` returns: it is shown whatever
    fails after (:func:`show_paid`), without buttons if its request could not be stored.
    """
    bot = interaction.client
    desk = InteractionDesk(interaction, who)
    answered = await bot.services.submissions.text(who, options, desk=desk)
    sandbox = bot.services.sandbox
    locale = await answer_locale(interaction, who)
    result, ref, payer = answered.result, answered.ref, answered.payer
    messages = text_answer(result, sandbox=sandbox, ref=ref, paid_by=payer, locale=locale)
    card = text_card(result, sandbox=sandbox, ref=ref, paid_by=payer, locale=locale)
    await show_paid(interaction, who, messages, card=card)


async def show_paid(
    interaction: Interaction,
    who: Requester,
    messages: Sequence[MessageParts],
    *,
    card: MessageParts | None = None,
) -> discord.Message | None:
    """Show a paid result somewhere, whatever fails; never raises.

    Routes, each taking over the messages not shown yet: the deferred response (``card``
    first when given, else ``messages``: the first as the edit, the rest as followups); then
    the channel, with the bot's token (an interaction token dies after 15 minutes, and a
    webhook may be gone), except for a private result; then the requester's DM, without the
    result's buttons (a DM card's buttons work or are not shown). Only when all
    fail is it lost, logged as an error (the charge is in the ledger).

    Args:
        interaction: the publicly deferred interaction.
        who: the requester, and where they asked.
        messages: the result as messages (their own card or old form each).
        card: the result as one Components V2 card, shown instead of ``messages`` when
            Discord takes it (400 / 50035 falls back to ``messages``).

    Returns:
        The message showing the result's first part: the response, else its post in the
        channel (a conversation starts its thread from either); None when it went by DM or
        was lost.
    """
    left = list(messages)
    first: discord.Message | None = None
    try:
        if card is not None:
            first = await _edit_card(interaction, card)
            if first is not None:
                return first
        first = await edit_response(interaction, left[0])
        left.pop(0)
        while left:
            await interaction.followup.send(**left[0].kwargs())
            left.pop(0)
        return first
    except Exception as exc:
        log.warning(
            "a paid result was not shown in its response (%s); posting it in the channel", exc
        )
    bot = interaction.client
    # A private result (``/settings defaults private``: deferred ephemerally, the
    # flag set False) never falls back to the channel, where everyone would see it.
    if interaction.extras.get(PUBLIC_DEFER) is not False:
        channel = bot.get_partial_messageable(who.channel_id, guild_id=who.guild_id)
        try:
            while left:
                posted = await send_card(channel, left[0])
                first = first or posted
                left.pop(0)
            return first
        except Exception as exc:
            log.warning("a paid result was not posted in its channel (%s); sending it by DM", exc)
    try:
        await interaction.user.send(
            _(
                "Your result from <#{channel}>, which could not be shown there:",
                channel=who.channel_id,
            )
        )
        while left:
            # Without its buttons: they act in the server from where they are pressed, and a
            # synchronous result's stored request names no channel to act in from a DM.
            await send_card(interaction.user, dataclasses.replace(left[0], action_buttons=()))
            left.pop(0)
    except Exception as exc:
        log.error("a paid result of guild %s could not be shown anywhere (%s)", who.guild_id, exc)
    return first


async def _edit_card(interaction: Interaction, card: MessageParts) -> discord.Message | None:
    """Edit the response into ``card``; None when Discord refuses the card (400 / 50035)."""
    try:
        return await interaction.edit_original_response(**card.edit_kwargs())
    except discord.HTTPException as exc:
        if exc.status != 400 or exc.code != INVALID_FORM_BODY:
            raise
        log.warning("Discord refused a card (%s); answered in the old form", exc.code)
        return None


def upload_expired(url: str, now: float) -> bool:
    """Whether a Discord attachment URL's signature has expired (its ``ex`` query parameter).

    Discord signs attachment URLs for about a day (``ex``: expiry, hex UTC epoch seconds); a
    service asked to fetch an expired one fails after charging, so Again refuses it first.
    """
    values = parse_qs(urlsplit(url).query).get("ex")
    if not values:
        return False
    try:
        return int(values[0], 16) <= now
    except ValueError:
        return False


def check_uploads_fresh(options: dict[str, Any], now: float) -> None:
    """Refuse a stored request whose uploaded source image's link has expired.

    Raises:
        ValidationFailed: saying to use the image again instead.
    """
    uploads = list(options.get("uploaded_image_urls") or [])
    if options.get("image_uploaded") and options.get("image_url"):
        uploads.append(options["image_url"])
    if any(upload_expired(str(url), now) for url in uploads):
        raise ValidationFailed(
            N_(
                "The uploaded source image's link has expired; use Animate image or "
                "Edit image on the image's message, or the command again."
            )
        )


def varied(options: TextOptions) -> TextOptions:
    """``options`` re-asked with a higher temperature (Vary on a text result)."""
    base = DEFAULT_TEMPERATURE if options.temperature is None else options.temperature
    return dataclasses.replace(options, temperature=min(2.0, base + VARY_TEMPERATURE_STEP))


@dataclasses.dataclass(frozen=True, slots=True)
class SourceImage:
    """An image found on a message, to animate or edit.

    Attributes:
        url: where the service can fetch it.
        trusted: a Discord attachment (already checked) or the service's own output, not a
            URL a member typed (``image_uploaded`` of the options).
    """

    url: str
    trusted: bool


def message_image(message: discord.Message, bot_user_id: int) -> SourceImage | None:
    """The first image of ``message``: an image attachment, else an embed's or a card's image.

    An embed image or a media gallery item (Components V2) of the bot's own messages
    (``bot_user_id``) is the service's output.

    Raises:
        ValidationFailed: the first image attachment is too large (as ``/video``'s ``image``).
    """
    for attachment in message.attachments:
        if (attachment.content_type or "").lower().startswith("image/"):
            check_attachment(attachment.content_type, attachment.size)
            return SourceImage(attachment.url, trusted=True)
    for embed in message.embeds:
        if embed.image.url:
            # Our own results' embed images are the service's URLs; anyone else's are checked
            # as a typed URL would be (https, length).
            return SourceImage(embed.image.url, trusted=message.author.id == bot_user_id)
    for url in _gallery_images(message.components):
        return SourceImage(url, trusted=message.author.id == bot_user_id)
    return None


_IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp", ".gif")


def _gallery_images(components: Sequence[Any]) -> list[str]:
    """The web URLs of the images in the media galleries of a Components V2 message.

    An item is an image when Discord says so (``content_type``) or, unresolved, when its
    path ends like one: a video card's gallery holds its video, which is no image input.
    """
    found: list[str] = []
    for component in components:
        if isinstance(component, discord.MediaGalleryComponent):
            for item in component.items:
                url, kind = item.media.url, (item.media.content_type or "").lower()
                image = kind.startswith("image/") or (
                    not kind and urlsplit(url).path.lower().endswith(_IMAGE_SUFFIXES)
                )
                if image and url.startswith(("https://", "http://")):
                    found.append(url)
        found += _gallery_images(getattr(component, "children", ()) or ())
    return found


ALREADY_GENERATING = N_("This video is already on its way.")
ALREADY_CANCELLED = N_("This video was cancelled; nothing was charged.")


class ConfirmVideo(OneChoice):
    """Generate · $x.xx / Cancel, before a video above the server's threshold (ephemeral).

    A :class:`~bot.discord.choices.OneChoice`, open for :data:`CONFIRM_SECONDS`; only the member
    who asked can answer (the message is ephemeral anyway). Generate runs the whole request
    again through the service's checks; a second press of it (a double click) is told the
    first one is on its way and pays nothing.
    """

    GENERATE = "generate"

    def __init__(
        self,
        who: Requester,
        options: VideoOptions,
        *,
        note: str | None = None,
        takes: int = 1,
    ) -> None:
        super().__init__(who)
        self.options = options
        self.note = note
        self.takes = takes

    def buttons(self, price_cents: Decimal | None) -> list[ChoiceOption]:
        """The two buttons, Generate showing the price."""
        return [
            ChoiceOption(self.GENERATE, confirm_label(price_cents), discord.ButtonStyle.success),
            ChoiceOption(self.CANCEL, _("Cancel")),
        ]

    def already(self, option: str) -> str:
        """The first press's fate: on its way, or cancelled."""
        return _(ALREADY_GENERATING) if option == self.GENERATE else _(ALREADY_CANCELLED)

    async def chosen(self, interaction: Interaction, option: str) -> None:
        """Submit the video, or cancel."""
        if option == self.GENERATE:
            await interaction.response.defer()
            await submit_video(
                interaction, self.who, self.options, note=self.note, takes=self.takes
            )
        else:
            await interaction.response.edit_message(
                content=_("Cancelled; nothing was charged."), view=None
            )


def require_source(message: discord.Message, bot_user_id: int) -> SourceImage:
    """The image of ``message`` to animate or edit (see :func:`message_image`).

    Raises:
        ValidationFailed: the message has no image, or its attachment is too large.
    """
    source = message_image(message, bot_user_id)
    if source is None:
        raise ValidationFailed(N_("That message has no image (attachment or embed image)."))
    return source
