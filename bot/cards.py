"""Running a generation from a command, a result's button, a context menu or a modal (issue 12).

One path per kind, shared by every entry point, so a click goes through exactly the same
validation, channel check, budgets and caps as the command (all in
:class:`bot.services.generation.GenerationService`), counted to whoever clicked. The request
behind each result is stored (``Store.add_result_request``) so its buttons can rebuild it after
any restart. A video whose known price is above the server's confirmation threshold
(``/config confirm-above``) first asks, ephemerally, for a few minutes.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import discord

from bot.announce import INVALID_FORM_BODY
from bot.errors import ValidationFailed
from bot.queue_status import queue_status
from bot.render import image_result, text_answer
from bot.render.cards import confirm_label, confirm_text
from bot.render.parts import MessageParts
from bot.render.results import text_card
from bot.services.billing import video_cost_cents
from bot.services.generation import (
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_attachment,
    check_video,
)
from bot.tree import send_ephemeral, sentence_for

if TYPE_CHECKING:
    from bot.app import GenBot

log = logging.getLogger(__name__)

CONFIRM_SECONDS = 300.0
"""How long a price confirmation stays valid (issue 12: "a few minutes")."""

VARY_TEMPERATURE_STEP = 0.5
DEFAULT_TEMPERATURE = 0.7
"""Vary re-asks a text at the request's temperature (the spec's default 0.7) plus this, at most
2 (spec 4.5's bound)."""

Interaction = discord.Interaction["GenBot"]


def stored_options(options: TextOptions | ImageOptions | VideoOptions) -> dict[str, Any]:
    """The options as stored with the result (a JSON object)."""
    return dataclasses.asdict(options)


async def video_price(bot: GenBot, who: Requester, options: VideoOptions) -> Decimal | None:
    """Validate ``options`` as ``/video`` does and return its known price, cents (rounded up).

    None when the catalogue's price is not a usable number.

    Raises:
        ValidationFailed: the channel is not allowed or the options are invalid.
        NoApiKeyConfigured, GenAPIError: the catalogue could not be had.
    """
    await bot.generation.check_channel(who)
    model, request = check_video(await bot.generation.catalogue(who.guild_id), options)
    assert request.duration is not None  # check_video always sets it
    return video_cost_cents(model.cost_cents_per_5s, request.duration)


async def start_video(interaction: Interaction, who: Requester, options: VideoOptions) -> None:
    """Submit a video, or first ask to confirm its price above the server's threshold.

    ``interaction`` must already be deferred ephemerally (or be a deferred component update):
    the answer goes to its original response.
    """
    bot = interaction.client
    price = await video_price(bot, who, options)
    threshold = await bot.services.db.cards.confirm_above(who.guild_id)
    if threshold is not None and price is not None and price > threshold:
        view = ConfirmView(who, options, price)
        await interaction.edit_original_response(content=confirm_text(price, threshold), view=view)
        return
    await submit_video(interaction, who, options)


async def submit_video(interaction: Interaction, who: Requester, options: VideoOptions) -> None:
    """Submit the video, store its request for the buttons, post its card, say where."""
    bot = interaction.client
    async with queue_status(interaction, who.user_id, who.guild_id):
        job = await bot.generation.video(who, options)
    await bot.services.db.cards.add_request(
        kind="video",
        guild_id=who.guild_id,
        user_id=who.user_id,
        options=stored_options(options),
        job_id=job.id,
        at=bot.services.clock.time(),
    )
    link = await bot.post_placeholder(job)
    await interaction.edit_original_response(
        content=f"Your video is on its way: {link}. You will be pinged when it is ready.",
        view=None,
    )


async def start_image(interaction: Interaction, who: Requester, options: ImageOptions) -> None:
    """Generate an image; ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set).

    A synchronous result replaces the "thinking…" response, with its buttons; an asynchronous
    one gets a card in the channel and a link here.
    """
    bot = interaction.client
    async with queue_status(interaction, who.user_id, who.guild_id):
        outcome = await bot.generation.image(who, options)
    cards, now = bot.services.db.cards, bot.services.clock.time()
    if outcome.job is not None:
        await cards.add_request(
            kind="image",
            guild_id=who.guild_id,
            user_id=who.user_id,
            options=stored_options(options),
            job_id=outcome.job.id,
            at=now,
        )
        link = await bot.post_placeholder(outcome.job)
        await interaction.edit_original_response(content=f"Your image is on its way: {link}")
        return
    assert outcome.result is not None
    saved = dataclasses.replace(options, model=outcome.model)
    ref = await cards.add_request(
        kind="image",
        guild_id=who.guild_id,
        user_id=who.user_id,
        options=stored_options(saved),
        outputs=outcome.result.outputs,
        at=now,
    )
    parts = image_result(
        outcome.result,
        prompt=options.prompt,
        model=outcome.model,
        requester_id=who.user_id,
        sandbox=bot.services.sandbox,
        ref=f"r{ref}",
    )
    await edit_response(interaction, parts)


async def edit_response(interaction: Interaction, parts: MessageParts) -> None:
    """Edit the deferred response into ``parts``: its card, else the old form.

    Discord answers a payload it refuses (a Components V2 card it does not take) with 400,
    code 50035; the same message then goes in content and embeds.

    Raises:
        discord.HTTPException: Discord refused both forms.
    """
    try:
        await interaction.edit_original_response(**parts.edit_kwargs())
    except discord.HTTPException as exc:
        if parts.card is None or exc.status != 400 or exc.code != INVALID_FORM_BODY:
            raise
        log.warning("Discord refused a card (%s); answered in the old form", exc.code)
        await interaction.edit_original_response(**parts.legacy().edit_kwargs())


async def start_text(interaction: Interaction, who: Requester, options: TextOptions) -> None:
    """Generate text; ``interaction`` must be deferred publicly (``PUBLIC_DEFER`` set)."""
    bot = interaction.client
    async with queue_status(interaction, who.user_id, who.guild_id):
        result = await bot.generation.text(who, options)
    ref = await bot.services.db.cards.add_request(
        kind="text",
        guild_id=who.guild_id,
        user_id=who.user_id,
        options=stored_options(options),
        at=bot.services.clock.time(),
    )
    card = text_card(result, sandbox=bot.services.sandbox, ref=f"r{ref}")
    if card is not None:
        try:
            await interaction.edit_original_response(**card.edit_kwargs())
            return
        except discord.HTTPException as exc:
            if exc.status != 400 or exc.code != INVALID_FORM_BODY:
                raise
            log.warning("Discord refused a card (%s); answered in the old form", exc.code)
    first, *rest = text_answer(result, sandbox=bot.services.sandbox, ref=f"r{ref}")
    await interaction.edit_original_response(**first.edit_kwargs())
    for part in rest:
        await interaction.followup.send(**part.kwargs())


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
            "The uploaded source image's link has expired; use Animate image or Edit image on "
            "the image's message, or the command again."
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


class ConfirmView(discord.ui.View):
    """Generate · $x.xx / Cancel, before a video above the server's threshold (ephemeral).

    Valid for :data:`CONFIRM_SECONDS`; only the member who asked can answer (the message is
    ephemeral anyway). Generate runs the whole request again through the service's checks.
    """

    def __init__(self, who: Requester, options: VideoOptions, price_cents: Decimal) -> None:
        super().__init__(timeout=CONFIRM_SECONDS)
        self.who = who
        self.options = options
        generate: discord.ui.Button[ConfirmView] = discord.ui.Button(
            label=confirm_label(price_cents), style=discord.ButtonStyle.success
        )
        cancel: discord.ui.Button[ConfirmView] = discord.ui.Button(
            label="Cancel", style=discord.ButtonStyle.secondary
        )
        generate.callback = self._generate  # type: ignore[method-assign,assignment]
        cancel.callback = self._cancel  # type: ignore[method-assign,assignment]
        self.add_item(generate)
        self.add_item(cancel)

    async def interaction_check(self, interaction: Interaction) -> bool:  # type: ignore[override]
        """Only the member who asked may confirm."""
        return interaction.user.id == self.who.user_id

    async def _generate(self, interaction: Interaction) -> None:
        self.stop()
        await interaction.response.defer()
        await submit_video(interaction, self.who, self.options)

    async def _cancel(self, interaction: Interaction) -> None:
        self.stop()
        await interaction.response.edit_message(
            content="Cancelled; nothing was charged.", view=None
        )

    async def on_error(  # type: ignore[override]
        self, interaction: Interaction, error: Exception, item: discord.ui.Item[Any]
    ) -> None:
        """Answer with the one sentence for ``error``."""
        await send_ephemeral(interaction, sentence_for(error))


def require_source(message: discord.Message, bot_user_id: int) -> SourceImage:
    """The image of ``message`` to animate or edit (see :func:`message_image`).

    Raises:
        ValidationFailed: the message has no image, or its attachment is too large.
    """
    source = message_image(message, bot_user_id)
    if source is None:
        raise ValidationFailed("That message has no image (attachment or embed image).")
    return source
