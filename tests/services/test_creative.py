"""Creative control's services: Enhance's rewrite is one text charge and nothing more.

:meth:`bot.services.creative.CreativeService.enhance` on the emulator: what it charges, what it
sends, the rewrite screened for blocked terms; the server's settings audited; styles and
characters stored with the messages that hold their references.
"""

import contextlib
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from bot.domain import CAMERA_PRESETS, Actor, ImageRef
from bot.errors import ValidationFailed
from bot.services.creative import (
    DEFAULT_IMAGE_SYSTEM,
    CreativeService,
    Enhanced,
    RewriteRefused,
    clean_rewrite,
)
from bot.services.generation import ImageOptions, Requester, VideoOptions, check_video
from tests.support.stack import Stack

SYNC_IMAGE = "black-forest-labs/flux-schnell"  # 3 cents a request
TEXT_TO_VIDEO = "aurora-lite/text-to-video"  # 20 cents per 5 s
ADMIN = Actor(7)


class RecordingDesk:
    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        self.events.append("waiting")
        yield

    def charged(self) -> None:
        self.events.append("charged")


def creative(stack: Stack) -> CreativeService:
    return stack.services.creative


def posted(stack: Stack) -> list[dict[str, object]]:
    return [r.json or {} for r in stack.api.requests if r.method == "POST"]


async def test_enhance_charges_exactly_the_rewrite_and_prices_the_generation(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_next_text("  \u201ca red fox in fresh snow at dawn, soft golden light\u201d ")
    desk = RecordingDesk()

    outcome = await creative(stack).enhance(
        who, ImageOptions("a fox", SYNC_IMAGE), desk=desk, takes=2
    )

    assert isinstance(outcome, Enhanced)
    assert outcome.prompt == "a red fox in fresh snow at dawn, soft golden light"
    assert outcome.original == "a fox"
    assert outcome.generation_cents == Decimal(6)  # two takes at 3 cents, not spent
    (sent,) = posted(stack)  # the rewrite only
    assert sent["model"] == "openai/gpt-4o-mini"  # the catalogue's cheapest text model
    assert sent["prompt"] == "a fox" and sent["system"] == DEFAULT_IMAGE_SYSTEM
    assert "language of the member's prompt" in DEFAULT_IMAGE_SYSTEM
    assert await stack.db.ledger.total(who.guild_id) == outcome.rewrite_cents > 0
    assert desk.events == ["waiting", "charged"]


async def test_a_video_rewrite_uses_the_servers_model_and_system_and_prices_the_video(
    stack: Stack, who: Requester
) -> None:
    await creative(stack).set_enhance(
        who.guild_id, actor=ADMIN, model="anthropic/claude-3-haiku", video_system="Be brief."
    )
    stack.api.set_next_text("a fox runs, the camera follows")

    outcome = await creative(stack).enhance(
        who, VideoOptions("a fox", TEXT_TO_VIDEO, 10), desk=RecordingDesk()
    )

    assert isinstance(outcome, Enhanced) and outcome.kind == "video"
    assert outcome.generation_cents == Decimal(40)
    (sent,) = posted(stack)
    assert sent["model"] == "anthropic/claude-3-haiku" and sent["system"] == "Be brief."
    audit = await stack.services.guild_config.audit(who.guild_id, 50)
    assert {entry.what for entry in audit} >= {"enhance model", "enhance video system"}


async def test_a_rewrite_with_a_blocked_term_is_refused_and_only_the_rewrite_is_charged(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.add_blocked_term(who.guild_id, "dragon", actor=ADMIN)
    stack.api.set_next_text("a fox riding a dragon")

    outcome = await creative(stack).enhance(
        who, ImageOptions("a fox", SYNC_IMAGE), desk=RecordingDesk()
    )

    assert isinstance(outcome, RewriteRefused)
    assert outcome.original == "a fox" and outcome.generation_cents == Decimal(3)
    assert len(posted(stack)) == 1
    assert await stack.db.ledger.total(who.guild_id) == outcome.rewrite_cents


async def test_a_request_its_command_would_refuse_spends_nothing_on_a_rewrite(
    stack: Stack, who: Requester
) -> None:
    with pytest.raises(ValidationFailed):
        await creative(stack).enhance(
            who, ImageOptions("a fox", "no/such-model"), desk=RecordingDesk()
        )
    with pytest.raises(ValidationFailed):
        await creative(stack).set_enhance(who.guild_id, actor=ADMIN, model=SYNC_IMAGE)

    assert posted(stack) == []
    assert await stack.db.ledger.total(who.guild_id) == 0


def test_an_empty_rewrite_keeps_the_members_prompt() -> None:
    assert clean_rewrite('  ""  ', "a fox") == "a fox"
    assert clean_rewrite("'un renard'", "a fox") == "un renard"


async def test_styles_keep_the_messages_of_their_references_and_are_audited(
    stack: Stack, who: Requester
) -> None:
    refs = [ImageRef(50, 500, 0), ImageRef(50, 500, 1)]
    await creative(stack).add_style(who.guild_id, "noir", "film noir", refs, actor=ADMIN)

    (style,) = await creative(stack).styles(who.guild_id)
    assert (style.name, style.suffix, style.references) == ("noir", "film noir", tuple(refs))
    with pytest.raises(ValidationFailed):
        await creative(stack).add_style(who.guild_id, "noir", "again", [], actor=ADMIN)
    await creative(stack).remove_style(who.guild_id, "noir", actor=ADMIN)
    assert await creative(stack).styles(who.guild_id) == []
    audit = await stack.services.guild_config.audit(who.guild_id, 50)
    assert "style noir" in {entry.what for entry in audit}


async def test_a_character_is_its_owners_unless_shared_and_five_at_most(
    stack: Stack, who: Requester
) -> None:
    other = Requester(guild_id=who.guild_id, channel_id=who.channel_id, user_id=101)
    service = creative(stack)
    await service.add_character(who, "kit", ImageRef(50, 501))
    await service.add_character(who, "rex", ImageRef(50, 502), shared=True)

    assert [c.name for c in await service.characters(who.user_id, who.guild_id)] == [
        "kit",
        "rex",
    ]
    assert [c.name for c in await service.characters(other.user_id, who.guild_id)] == ["rex"]
    with pytest.raises(ValidationFailed):
        await service.character(other, "kit")
    for name in ("a", "b", "c"):
        await service.add_character(who, name, ImageRef(50, 503))
    with pytest.raises(ValidationFailed):
        await service.add_character(who, "six", ImageRef(50, 504))


@pytest.mark.parametrize(
    ("model", "locked"),
    [("nimbus-pro/text-to-video", True), ("aurora-lite/text-to-video", None)],
)
async def test_the_static_camera_adds_its_phrase_and_locks_where_the_model_can(
    stack: Stack, who: Requester, model: str, locked: bool | None
) -> None:
    await stack.generation.video(who, VideoOptions("a fox.", model, camera="static"))

    (sent,) = posted(stack)
    assert sent["prompt"] == "a fox, static shot, locked-off camera, no camera movement"
    assert sent.get("lock_camera") is locked


async def test_every_camera_preset_is_a_phrase_and_an_unknown_one_spends_nothing(
    stack: Stack, who: Requester
) -> None:
    catalogue = await stack.generation.catalogue(who.guild_id)
    for preset in CAMERA_PRESETS:
        options = VideoOptions("a fox", TEXT_TO_VIDEO, camera=preset.value)
        assert check_video(catalogue, options)[1].prompt == f"a fox, {preset.phrase}"
    assert {p.value for p in CAMERA_PRESETS} >= {"dolly-in", "orbit", "crane-up", "handheld"}
    with pytest.raises(ValidationFailed):
        await stack.generation.video(who, VideoOptions("a fox", TEXT_TO_VIDEO, camera="spin"))
    assert posted(stack) == []


class MessageStore:
    """The adapter's side: each message's attachments as Discord serves them *now*."""

    def __init__(self) -> None:
        self.messages: dict[tuple[int, int], list[str]] = {}
        self.asked = 0

    def post(self, channel_id: int, message_id: int, *names: str) -> list[ImageRef]:
        self.messages[(channel_id, message_id)] = list(names)
        return [ImageRef(channel_id, message_id, i) for i in range(len(names))]

    async def url(self, ref: ImageRef) -> str | None:
        self.asked += 1
        names = self.messages.get((ref.channel_id, ref.message_id))
        if names is None or ref.attachment >= len(names):
            return None
        # A fresh signature each time: never a URL kept from when the style was made.
        return f"https://cdn.discordapp.com/attachments/{ref.channel_id}/{ref.message_id}/{names[ref.attachment]}?ex={self.asked}"


async def test_a_style_sends_its_suffix_and_fresh_references_to_an_image_model(
    stack: Stack, who: Requester
) -> None:
    store = MessageStore()
    refs = store.post(60, 600, "a.png", "b.png")
    await creative(stack).add_style(
        who.guild_id, "noir", "film noir, high contrast", refs, actor=ADMIN
    )
    options = ImageOptions(
        "a fox", SYNC_IMAGE, uploaded_image_urls=("https://cdn.discordapp.com/mine.png",)
    )

    applied = await creative(stack).apply(who, options, store, style="noir")
    await stack.generation.image(who, applied)

    (sent,) = posted(stack)
    assert sent["prompt"] == "a fox, film noir, high contrast"
    assert sent["image_urls"] == [
        "https://cdn.discordapp.com/mine.png",
        "https://cdn.discordapp.com/attachments/60/600/a.png?ex=1",
        "https://cdn.discordapp.com/attachments/60/600/b.png?ex=2",
    ]


async def test_a_style_gives_image_to_video_its_first_reference_and_text_to_video_the_suffix(
    stack: Stack, who: Requester
) -> None:
    store = MessageStore()
    refs = store.post(60, 600, "gone.png") + store.post(60, 601, "first.png", "second.png")
    del store.messages[(60, 600)]  # its message was deleted: left out
    await creative(stack).add_style(who.guild_id, "noir", "film noir", refs, actor=ADMIN)

    i2v = await creative(stack).apply(
        who, VideoOptions("a fox", "aurora-lite/image-to-video"), store, style="noir"
    )
    t2v = await creative(stack).apply(
        who, VideoOptions("a fox", TEXT_TO_VIDEO), store, style="noir"
    )

    assert isinstance(i2v, VideoOptions) and isinstance(t2v, VideoOptions)
    assert i2v.image_url is not None and "/601/first.png" in i2v.image_url
    assert (t2v.prompt, t2v.image_url) == ("a fox, film noir", None)
    await stack.generation.video(who, i2v)
    (sent,) = posted(stack)
    assert sent["image_url"] == i2v.image_url and sent["prompt"] == "a fox, film noir"
    ((style, gone),) = await creative(stack).style_report(who.guild_id, store)
    assert (style.name, gone) == ("noir", 1)


async def test_a_character_applies_for_its_owner_only_unless_shared(
    stack: Stack, who: Requester
) -> None:
    store = MessageStore()
    (kit,) = store.post(70, 700, "kit.png")
    (rex,) = store.post(70, 701, "rex.png")
    other = Requester(guild_id=who.guild_id, channel_id=who.channel_id, user_id=101)
    await creative(stack).add_character(who, "kit", kit)
    await creative(stack).add_character(who, "rex", rex, shared=True)

    mine = await creative(stack).apply(
        who, ImageOptions("a fox", SYNC_IMAGE), store, character="kit"
    )
    shared = await creative(stack).apply(
        other, ImageOptions("a fox", SYNC_IMAGE), store, character="rex"
    )

    assert isinstance(mine, ImageOptions) and isinstance(shared, ImageOptions)
    assert "/700/kit.png" in mine.uploaded_image_urls[0]
    assert "/701/rex.png" in shared.uploaded_image_urls[0]
    with pytest.raises(ValidationFailed):
        await creative(stack).apply(
            other, ImageOptions("a fox", SYNC_IMAGE), store, character="kit"
        )
