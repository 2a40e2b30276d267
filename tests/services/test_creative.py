"""Creative control's services: Enhance's rewrite is one text charge and nothing more.

:meth:`bot.services.creative.CreativeService.enhance` on the emulator: what it charges, what it
sends, the rewrite screened for blocked terms; the server's settings audited; styles and
characters stored with the messages that hold their references.
"""

import contextlib
import dataclasses
import io
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest
from PIL import Image

from bot.domain import (
    CAMERA_PRESETS,
    Actor,
    ImageRef,
    JobStatus,
    Kind,
    SafetyRecord,
    Visibility,
)
from bot.errors import ValidationFailed
from bot.services.creative import (
    DEFAULT_IMAGE_SYSTEM,
    CreativeService,
    Enhanced,
    RewriteRefused,
    clean_rewrite,
    parse_result_numbers,
)
from bot.services.generation import ImageOptions, Requester, VideoOptions, check_video
from tests.support.jobs import new_job
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


async def test_a_style_limited_to_tiers_is_offered_and_applied_to_their_members_only(
    stack: Stack, who: Requester
) -> None:
    gold = 500
    await stack.services.guild_config.set_tier(who.guild_id, gold, "Gold", actor=ADMIN)
    service = creative(stack)
    await service.add_style(who.guild_id, "noir", "film noir", [], actor=ADMIN)
    await service.add_style(who.guild_id, "open", "bright", [], actor=ADMIN)
    with pytest.raises(ValidationFailed, match="pick roles that have one"):
        await service.set_style_tiers(who.guild_id, "noir", [999], actor=ADMIN)
    await service.set_style_tiers(who.guild_id, "noir", [gold], actor=ADMIN)
    member = who
    patron = Requester(who.guild_id, who.channel_id, 101, role_ids=frozenset({gold}))
    admin = Requester(who.guild_id, who.channel_id, 102, manage_guild=True)

    assert [s.name for s in await service.usable_styles(member)] == ["open"]
    assert [s.name for s in await service.usable_styles(patron)] == ["noir", "open"]
    assert [s.name for s in await service.usable_styles(admin)] == ["noir", "open"]
    with pytest.raises(ValidationFailed, match="for other tiers than yours"):
        await service.apply(member, ImageOptions("a fox", SYNC_IMAGE), MessageStore(), style="noir")
    applied = await service.apply(
        patron, ImageOptions("a fox", SYNC_IMAGE), MessageStore(), style="noir"
    )
    assert applied.prompt == "a fox, film noir"
    audit = await stack.services.guild_config.audit(who.guild_id, 50)
    assert any(e.what == "style noir" and f"<@&{gold}>" in e.new for e in audit)
    await service.set_style_tiers(who.guild_id, "noir", [], actor=ADMIN)
    assert len(await service.usable_styles(member)) == 2


def png(rgb: tuple[int, int, int]) -> bytes:
    picture = io.BytesIO()
    Image.new("RGB", (64, 48), rgb).save(picture, "PNG")
    return picture.getvalue()


async def image_result(
    stack: Stack, who: Requester, *, message_id: int | None, output: str = "https://x/a.png"
) -> int:
    """A finished image of the server's, on its card ``message_id`` in channel 80."""
    job = await stack.db.jobs.insert(
        dataclasses.replace(
            new_job(f"img-{message_id}", kind=Kind.IMAGE, guild=who.guild_id, model=SYNC_IMAGE),
            channel_id=80,
            message_id=message_id,
        )
    )
    await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, (output,), None, 1.0)
    assert await stack.services.thumbnails.keep(job.id, "image", [png((200, 10, 10))]) == 1
    return job.id


async def test_references_picked_from_results_are_their_cards_files_never_held_ones(
    stack: Stack, who: Requester
) -> None:
    store = MessageStore()
    store.post(80, 900, "result.png")
    store.post(80, 901, "held.png")
    on_card = await image_result(stack, who, message_id=900)
    held = await image_result(stack, who, message_id=901)
    by_url = await image_result(stack, who, message_id=902)  # its card shows the URL only
    lost = await image_result(stack, who, message_id=None, output="")
    record = SafetyRecord(
        f"j{held}", who.guild_id, 80, who.user_id, "image", "p", 0.7, Visibility.HELD, "s", 0.0
    )
    assert await stack.db.safety.add(record)
    service = creative(stack)

    card, url = await service.result_references(who.guild_id, f"j{on_card} {by_url}", store)

    assert (card.job_id, card.ref, card.url) == (on_card, ImageRef(80, 900, 0), None)
    assert (url.job_id, url.ref, url.url) == (by_url, None, "https://x/a.png")
    assert card.picture and url.picture  # the results' thumbnails: the style's own
    for text, refusal in (
        (f"#{held}", "withheld by the server's safety policy"),
        (str(lost), "is gone"),
        ("j999999", "not an image result made in this server"),
        ("a fox", "is not a result"),
        ("1 2 3 4 5", "at most 4"),
    ):
        with pytest.raises(ValidationFailed, match=refusal):
            await service.result_references(who.guild_id, text, store)
    with pytest.raises(ValidationFailed, match="not an image result made in this server"):
        await service.result_references(2, f"j{on_card}", store)  # another server's
    assert parse_result_numbers(f"j{on_card}, #7 https://dash/results/8 7") == [on_card, 7, 8]


async def test_a_styles_references_get_thumbnails_removed_with_it(
    stack: Stack, who: Requester
) -> None:
    service = creative(stack)
    refs = [ImageRef(50, 500, 0), ImageRef(50, 500, 1), ImageRef(50, 500, 2)]
    style = await service.add_style(
        who.guild_id,
        "noir",
        "film noir",
        refs,
        actor=ADMIN,
        pictures=[png((0, 0, 0)), None, b"not a picture"],
    )

    kept = await service.style_thumbnails([style.id])
    assert list(kept) == [(style.id, 0)]  # none asked of the second, none made of the third
    thumb = await service.style_thumbnail(who.guild_id, style.id, 0)
    assert thumb is not None and thumb.mime == "image/webp" and thumb.data
    assert await service.style_thumbnail(2, style.id, 0) is None  # another server's page
    await service.remove_style(who.guild_id, "noir", actor=ADMIN)
    assert await service.style_thumbnails([style.id]) == {}
