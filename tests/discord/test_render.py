from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

import discord
import pytest

from bot.discord.render import (
    NO_PINGS,
    MessageParts,
    catalogue_pages,
    completion_reply,
    format_duration,
    image_result,
    job_finished,
    job_placeholder,
    ping_only,
    split_message,
    text_answer,
    truncate,
)
from bot.discord.render.admin import usage_embed
from bot.discord.render.chat import chat_footer
from bot.discord.render.jobs import job_unwatched, posted_later, with_files
from bot.discord.render.policy import add_policy_fields, audit_lines
from bot.discord.render.results import text_card
from bot.discord.render.takes import takes_card
from bot.domain import UNLIMITED, AuditEntry, Kind, Tier
from bot.genapi.wire import Catalogue, ImageModel, ImageResult, TextResult, Usage, VideoModel
from bot.i18n import using
from bot.services.billing import UsageReport
from bot.services.conversations import ChatAnswer
from bot.services.guild_config import ServerPolicy

VIDEO_URL = "https://cdn.example.com/out/video-1.mp4"
IMAGE_URLS = tuple(f"https://cdn.example.com/out/image-{i}.png" for i in range(1, 4))
CREATED = 1_700_000_000.0


@dataclass(frozen=True)
class FakeJob:
    prompt_summary: str = "a red fox running through snow @everyone"
    model: str = "veo-fast"
    kind: str = "video"
    details: Mapping[str, Any] = field(
        default_factory=lambda: {"duration": 8, "aspect_ratio": "16:9", "generate_audio": True}
    )
    cost_cents: int = 120
    user_id: int = 111_111_111_111_111_111
    created_at: float = CREATED
    status: str = "pending"
    finished_at: float | None = None
    outputs: Sequence[str] = ()
    error: str | None = None
    poll_count: int = 0


def fence_lines(chunk: str) -> list[str]:
    return [line for line in chunk.split("\n") if line.lstrip().startswith("```")]


def fields(embed: discord.Embed) -> dict[str, str]:
    return {f.name or "": f.value or "" for f in embed.fields}


def buttons(parts: MessageParts) -> list[discord.ui.Button[discord.ui.View]]:
    view = parts.kwargs().get("view")
    if view is None:
        return []
    return [item for item in view.walk_children() if isinstance(item, discord.ui.Button)]


def assert_pings_nobody(mentions: discord.AllowedMentions) -> None:
    assert mentions.everyone is False
    assert mentions.users is False
    assert mentions.roles is False
    assert mentions.replied_user is False


# -- helpers ---------------------------------------------------------------------------------


def test_truncate_marks_the_cut() -> None:
    assert truncate("short", 10) == "short"
    cut = truncate("word " * 100, 50)
    assert len(cut) <= 50
    assert cut.endswith("…")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(45, "45 s"), (125, "2 m 05 s"), (3720, "1 h 02 m"), (0.4, "0 s"), (-3, "0 s")],
)
def test_format_duration(seconds: float, shown: str) -> None:
    assert format_duration(seconds) == shown


# -- split_message ---------------------------------------------------------------------------


def test_split_long_prose_on_paragraphs() -> None:
    paragraph = ("The quick brown fox jumps over the lazy dog. " * 12).strip()
    text = "\n\n".join([paragraph] * 20)
    chunks = split_message(text)
    assert len(chunks) > 1
    assert all(0 < len(chunk) <= 2000 for chunk in chunks)
    assert "".join(chunks) == text
    # Every chunk but the last ends at a paragraph break, so no paragraph is cut in two.
    assert all(chunk.endswith("\n\n") for chunk in chunks[:-1])


def test_split_long_code_block_keeps_fences_and_language() -> None:
    code = "\n".join(f"    value_{i} = compute({i})  # step {i}" for i in range(400))
    text = f"Here is the script:\n\n```python\n{code}\n```\n\nRun it with python."
    chunks = split_message(text)
    assert len(chunks) > 2
    for chunk in chunks:
        assert 0 < len(chunk) <= 2000
        fences = fence_lines(chunk)
        assert len(fences) % 2 == 0, chunk[:80]
        assert all(opening == "```python" for opening in fences[::2])
    assert all(chunk.startswith("```python\n") for chunk in chunks[1:])
    # The code survives whole and in order, indentation included.
    body_lines = [
        line for chunk in chunks for line in chunk.split("\n") if line.startswith("    value_")
    ]
    assert body_lines == code.split("\n")
    assert chunks[-1].rstrip().endswith("Run it with python.")


def test_split_single_long_line_is_cut_hard() -> None:
    text = "x" * 5000
    chunks = split_message(text)
    assert [len(chunk) for chunk in chunks] == [2000, 2000, 1000]
    assert "".join(chunks) == text


def test_split_prefers_spaces_over_hard_cuts() -> None:
    text = " ".join(f"word{i}" for i in range(1500))
    chunks = split_message(text)
    assert "".join(chunks) == text
    assert all(chunk.endswith(" ") for chunk in chunks[:-1])


def test_split_drops_blank_text() -> None:
    assert split_message("") == []
    assert split_message(" \n\n ") == []


# -- text_answer -----------------------------------------------------------------------------


def text_result(content: str, tokens: int = 123, cents: int = 2) -> TextResult:
    return TextResult(
        content=content,
        model="gpt-mini",
        usage=Usage(total_tokens=tokens),
        cost_cents=cents,
        remaining_credits_cents=1000,
    )


def test_text_answer_pings_nobody() -> None:
    parts = text_answer(text_result("@everyone <@123> <@&456> hi"), sandbox=False)
    assert len(parts) == 1
    assert "@everyone <@123>" in (parts[0].content or "")
    mentions = parts[0].kwargs()["allowed_mentions"]
    assert_pings_nobody(mentions)
    assert mentions.to_dict() == {"parse": []}


def test_text_answer_footer_on_last_message() -> None:
    parts = text_answer(text_result("The answer is 42."), sandbox=True)
    assert parts[0].content == "The answer is 42.\n-# gpt-mini · 123 tokens · $0.02 · sandbox"


def test_text_answer_long_answer_is_split_with_footer_at_end() -> None:
    content = "\n\n".join(("Sentence number one is here. " * 10).strip() for _ in range(15))
    parts = text_answer(text_result(content), sandbox=False)
    assert len(parts) > 1
    assert all(len(p.content or "") <= 2000 for p in parts)
    assert all(p.allowed_mentions is NO_PINGS for p in parts)
    assert (parts[-1].content or "").endswith("\n-# gpt-mini · 123 tokens · $0.02")
    assert not any("-# gpt-mini" in (p.content or "") for p in parts[:-1])


def test_text_answer_footer_alone_when_last_chunk_is_full() -> None:
    parts = text_answer(text_result("y" * 2000), sandbox=False)
    assert [p.content for p in parts] == ["y" * 2000, "-# gpt-mini · 123 tokens · $0.02"]


def test_text_answer_attaches_very_long_answers() -> None:
    content = "Ünïcode answer line.\n" * 500  # > 6000 characters
    parts = text_answer(text_result(content), sandbox=False)
    assert len(parts) == 1
    only = parts[0]
    assert only.files == (("answer.md", content.encode("utf-8")),)
    assert len(only.content or "") <= 2000
    assert (only.content or "").startswith("Ünïcode answer line.")
    assert (only.content or "").endswith("-# gpt-mini · 123 tokens · $0.02")
    sent = only.kwargs()["files"]
    assert [f.filename for f in sent] == ["answer.md"]
    assert sent[0].fp.read() == content.encode("utf-8")
    # An edit of the deferred reply takes the file as an attachment.
    assert [f.filename for f in only.edit_kwargs()["attachments"]] == ["answer.md"]


def test_text_answer_footer_stays_out_of_an_unclosed_code_block() -> None:
    parts = text_answer(text_result("Intro\n\n```\ncode\n"), sandbox=False)
    assert [p.content for p in parts] == [
        "Intro\n\n```\ncode\n",
        "-# gpt-mini · 123 tokens · $0.02",
    ]


def test_text_answer_attachment_excerpt_of_code_is_closed() -> None:
    content = "Sure:\n\n```py\n" + "print(1)\n" * 900
    (only,) = text_answer(text_result(content), sandbox=False)
    text = only.content or ""
    assert len(fence_lines(text)) == 2
    assert text.count("print(1)") <= 12


def test_plain_message_kwargs_leave_out_empty_parts() -> None:
    # An interaction followup refuses view=None, so a send without buttons must not pass one.
    assert MessageParts(content="hi").kwargs() == {"content": "hi", "allowed_mentions": NO_PINGS}


# -- image_result ----------------------------------------------------------------------------


async def test_image_result_embeds_and_buttons() -> None:
    result = ImageResult(
        task_id="t1", outputs=IMAGE_URLS, cost_cents=4, remaining_credits_cents=100
    )
    parts = image_result(
        result, prompt="a cat <@999> " * 40, model="flux", requester_id=42, sandbox=True
    )
    assert [e.image.url for e in parts.embeds] == list(IMAGE_URLS)
    first = parts.embeds[0]
    assert first.title is not None
    assert len(first.title) <= 256
    assert first.title.startswith("a cat")
    assert first.footer.text == "flux · $0.04 · sandbox"
    assert "<@42>" in (first.description or "")
    assert [(b.label, b.url) for b in buttons(parts)] == [
        (f"Open image {i}", url) for i, url in enumerate(IMAGE_URLS, 1)
    ]
    assert_pings_nobody(parts.allowed_mentions)


async def test_image_result_caps_embeds_and_button_rows() -> None:
    urls = tuple(f"https://cdn.example.com/{i}.png" for i in range(30))
    result = ImageResult(task_id="t", outputs=urls, cost_cents=1, remaining_credits_cents=1)
    parts = image_result(result, prompt="p", model="m", requester_id=1, sandbox=False)
    assert len(parts.embeds) == 10
    shown = buttons(parts.legacy())
    assert len(shown) == 25
    assert {b.row for b in shown} == {0, 1, 2, 3, 4}
    # The card: 10 images in the gallery, their links, 15 link buttons in 3 rows, and it
    # stays within Discord's 40 components.
    (container, *rows) = card_json(parts)
    (gallery,) = [c for c in container["components"] if c["type"] == 12]
    assert len(gallery["items"]) == 10
    assert all(url in card_text(parts) for url in urls[:10])
    assert [len(row["components"]) for row in rows] == [5, 5, 5]
    flat = [container, *container["components"], *rows, *(b for r in rows for b in r["components"])]
    assert len(flat) <= 40


# -- catalogue_pages -------------------------------------------------------------------------


def video_model(i: int) -> VideoModel:
    return VideoModel(
        id=f"video-model-{i}",
        label=f"Video Model {i} Ultra",
        tier="premium",
        supports_audio=i % 2 == 0,
        supports_lock_camera=False,
        durations=(4, 8),
        cost_cents_per_5s=50,
        mode="text-to-video",
        provider="acme",
    )


def test_catalogue_pages_stay_within_embed_limits() -> None:
    catalogue = Catalogue(video=tuple(video_model(i) for i in range(60)))
    pages = catalogue_pages(catalogue, "video")
    assert len(pages) > 1
    for number, page in enumerate(pages, 1):
        assert len(page.fields) <= 25
        assert len(page) <= 6000
        assert page.footer.text == f"Page {number}/{len(pages)}"
    values = [f.value or "" for page in pages for f in page.fields]
    assert len(values) == 60
    assert "`video-model-0`" in values[0]
    assert "4 s, 8 s" in values[0]
    assert "Audio: yes" in values[0]
    assert "Audio: no" in values[1]
    assert "Camera lock: no" in values[0]
    assert "$0.50 per 5 s" in values[0]


def test_catalogue_pages_all_kinds_and_async_images() -> None:
    catalogue = Catalogue(
        video=(video_model(1),),
        image=(
            ImageModel.model_validate({"id": "img-fast", "label": "Fast", "async": True}),
            ImageModel(id="img-sync", label="Sync"),
        ),
    )
    pages = catalogue_pages(catalogue, None)
    assert [p.title for p in pages] == ["Video models", "Image models"]
    image_values = [f.value for f in pages[1].fields]
    assert image_values == ["`img-fast` · async", "`img-sync`"]
    empty = catalogue_pages(Catalogue(), "text")
    assert len(empty) == 1
    assert "No text models" in (empty[0].description or "")


def test_a_catalogue_rendered_again_reads_in_each_readers_language() -> None:
    # Entries are rendered once per catalogue and language (a burst of /models): a
    # reader in another language still reads theirs, a new catalogue its own models.
    catalogue = Catalogue(video=(video_model(1),))
    with using("fr"):
        french = [f.value for f in catalogue_pages(catalogue, "video")[0].fields]
    with using("de"):
        german = [f.value for f in catalogue_pages(catalogue, "video")[0].fields]
    with using("fr"):
        again = [f.value for f in catalogue_pages(catalogue, "video")[0].fields]
    assert again == french != german
    assert "Durées : 4 s, 8 s" in (french[0] or "")
    assert "Dauern: 4 s, 8 s" in (german[0] or "")
    renewed = Catalogue(video=(video_model(2),))
    with using("fr"):
        (field,) = catalogue_pages(renewed, "video")[0].fields
    assert "video-model-2" in (field.value or "")


# -- jobs ------------------------------------------------------------------------------------


def test_job_placeholder() -> None:
    parts = job_placeholder(FakeJob(), now=CREATED + 130, sandbox=True)
    assert parts.content is None
    (embed,) = parts.embeds
    assert embed.title == "Generating video…"
    assert embed.description == "a red fox running through snow @everyone"
    shown = fields(embed)
    assert shown["Duration"] == "8 s"
    assert shown["Aspect ratio"] == "16:9"
    assert shown["Cost"] == "$1.20 charged"
    assert shown["Requested by"] == "<@111111111111111111>"
    assert shown["Status"] == f"Running · started <t:{int(CREATED)}:R> · 2 m 10 s elapsed"
    assert embed.footer.text == "sandbox"
    assert_pings_nobody(parts.allowed_mentions)


def test_job_placeholder_shows_the_ready_estimate() -> None:
    parts = job_placeholder(FakeJob(), now=CREATED + 130, sandbox=False, ready_at=CREATED + 200.7)
    status = fields(parts.embeds[0])["Status"]
    assert status.endswith(f" · ready <t:{int(CREATED + 200.7)}:R>")
    late = job_placeholder(FakeJob(), now=CREATED + 300, sandbox=False, ready_at=CREATED + 200)
    assert "ready" not in fields(late.embeds[0])["Status"]  # a past estimate is not shown


def test_finished_results_carry_restart_safe_buttons() -> None:
    video = FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,))
    parts = job_finished(video, sandbox=False, ref="j42")
    assert parts.action_buttons == (
        ("Again · $1.20", "gb:again:j42"),
        ("Continue", "gb:continue:j42"),  # a next clip from its last frame
        ("Remix · $1.20", "gb:remix:j42"),
        ("Share", "gb:share:j42"),  # to the server's showcase (the requester only)
        ("Delete", "gb:delete:j42"),  # no Vary: a video request takes nothing to vary by
        ("Enhance", "gb:enhance:j42"),  # the prompt rewritten first; a row of its own
    )
    view = parts.view()
    assert view is not None
    assert not view.is_dispatchable()  # answered by the DynamicItem, not kept in memory
    styles = {b.custom_id: b.style for b in buttons(parts)}
    assert styles["gb:delete:j42"] is discord.ButtonStyle.danger
    failed = FakeJob(status="failed", error="nope")
    labels = [label for label, _ in job_finished(failed, sandbox=False, ref="j7").action_buttons]
    assert labels == ["Again · $1.20", "Delete"]
    assert job_finished(video, sandbox=False).action_buttons == ()


async def test_job_finished_video() -> None:
    job = FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,))
    parts = job_finished(job, sandbox=False)
    assert parts.content == VIDEO_URL
    assert fields(parts.embeds[0])["Status"] == "Completed in 1 m 23 s"
    assert parts.embeds[0].colour == discord.Colour.green()
    assert [(b.label, b.url) for b in buttons(parts)] == [("Open video", VIDEO_URL)]
    assert_pings_nobody(parts.allowed_mentions)
    # An edit replaces everything: old buttons and text of the placeholder go away.
    edit = parts.legacy().edit_kwargs()
    assert edit["content"] == VIDEO_URL
    assert edit["attachments"] == []
    # The card clears content and embeds (Discord refuses them beside IS_COMPONENTS_V2).
    card = parts.edit_kwargs()
    assert (card["content"], card["embeds"], card["attachments"]) == (None, [], [])
    assert isinstance(card["view"], discord.ui.LayoutView)


async def test_job_finished_image() -> None:
    job = FakeJob(kind="image", status="completed", finished_at=CREATED + 5, outputs=IMAGE_URLS)
    parts = job_finished(job, sandbox=False)
    assert parts.content is None
    assert [e.image.url for e in parts.embeds] == list(IMAGE_URLS)
    assert parts.embeds[0].title == "Image ready"
    assert "Duration" not in fields(parts.embeds[0])
    assert [b.label for b in buttons(parts)] == ["Open image 1", "Open image 2", "Open image 3"]


def test_job_finished_failed_shows_reason() -> None:
    job = FakeJob(status="failed", finished_at=CREATED + 60, error="Content policy violation.")
    parts = job_finished(job, sandbox=False)
    assert parts.content is None
    assert parts.link_buttons == ()
    (embed,) = parts.embeds
    assert embed.colour == discord.Colour.red()
    assert fields(embed)["Status"] == "Failed"
    assert fields(embed)["Reason"] == "Content policy violation."
    assert parts.legacy().edit_kwargs()["view"] is None
    no_reason = job_finished(FakeJob(status="failed"), sandbox=False)
    assert fields(no_reason.embeds[0])["Reason"] == "The service gave no reason."
    long = job_finished(FakeJob(status="failed", error="e" * 5000), sandbox=False)
    assert len(fields(long.embeds[0])["Reason"]) <= 1024


def test_completion_reply_pings_only_the_requester() -> None:
    done = completion_reply(FakeJob(status="completed", outputs=(VIDEO_URL,)))
    assert done.content == "<@111111111111111111> your video is ready."
    mentions = done.kwargs()["allowed_mentions"]
    assert mentions.to_dict() == {"parse": [], "users": [111111111111111111]}
    assert mentions.everyone is False
    assert mentions.roles is False

    image = completion_reply(FakeJob(kind="image", status="completed"))
    assert image.content == "<@111111111111111111> your image is ready."


def test_completion_reply_failure_reason_cannot_ping() -> None:
    error = "@everyone blocked by <@&222222222222222222>.\n" + "x" * 3000
    parts = completion_reply(FakeJob(status="failed", error=error))
    content = parts.content or ""
    assert content.startswith("<@111111111111111111> your video failed: ")
    assert len(content) <= 2000
    assert "@everyone" not in content  # defused with a zero-width space
    assert re.search(r"<@&\d+>", content) is None
    assert parts.allowed_mentions.to_dict() == {"parse": [], "users": [111111111111111111]}
    assert ping_only(5).to_dict() == {"parse": [], "users": [5]}


def test_pending_job_has_no_completion() -> None:
    with pytest.raises(ValueError, match="pending"):
        completion_reply(FakeJob())


def card_text(parts: MessageParts) -> str:
    view = parts.view()
    assert isinstance(view, discord.ui.LayoutView)
    return "\n".join(
        item.content for item in view.walk_children() if isinstance(item, discord.ui.TextDisplay)
    )


def card_json(parts: MessageParts) -> list[dict[str, Any]]:
    view = parts.view()
    assert isinstance(view, discord.ui.LayoutView)
    components: list[dict[str, Any]] = view.to_components()
    return components


def test_the_job_card_changes_state_by_colour_and_word() -> None:
    queued = job_placeholder(FakeJob(), now=CREATED + 5, sandbox=False)
    running = job_placeholder(
        FakeJob(poll_count=2), now=CREATED + 130, sandbox=True, ready_at=CREATED + 200
    )
    done = job_finished(
        FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,)), sandbox=False
    )
    failed = job_finished(
        FakeJob(status="failed", error="Content policy violation."), sandbox=False
    )
    unwatched = job_unwatched(FakeJob(poll_count=9), now=CREATED + 4000, sandbox=False)
    colours = [card_json(p)[0]["accent_color"] for p in (queued, running, done, failed, unwatched)]
    assert len(set(colours)) == 5
    assert colours[2] == discord.Colour.green().value
    assert colours[3] == discord.Colour.red().value
    words = ["queued", "running", "done", "failed", "stopped watching"]
    for parts, word in zip((queued, running, done, failed, unwatched), words, strict=True):
        assert card_text(parts).startswith(f"**Video** · {word}")
    text = card_text(running)
    assert "`veo-fast` · 8 s · 16:9 · audio yes · $1.20 reserved" in text
    assert f"started <t:{int(CREATED)}:R>" in text
    assert f"ready <t:{int(CREATED + 200)}:R>" in text
    assert "sandbox" in text
    assert "$1.20 charged" in card_text(done)
    assert "**Reason:** Content policy violation." in card_text(failed)
    assert "/jobs" in card_text(unwatched)


def test_the_card_defuses_pings_and_stays_within_discords_text_limit() -> None:
    job = FakeJob(prompt_summary="@everyone <@&123456789012345678> " + "word " * 2000, poll_count=1)
    parts = job_placeholder(job, now=CREATED + 1, sandbox=False)
    text = card_text(parts)
    assert "@everyone" not in text
    assert "<@&123456789012345678>" not in text
    assert len(text) <= 4000
    assert_pings_nobody(parts.allowed_mentions)
    kwargs = parts.kwargs()
    assert "content" not in kwargs and "embeds" not in kwargs
    long_failure = FakeJob(status="failed", error="e" * 5000, prompt_summary="p " * 3000)
    assert len(card_text(job_finished(long_failure, sandbox=False))) <= 4000


def test_a_finished_card_shows_the_result_in_a_gallery_with_its_file_name() -> None:
    job = FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,))
    parts = job_finished(job, sandbox=False, ref="j42")
    (container, links, actions, more) = card_json(parts)
    gallery = next(c for c in container["components"] if c["type"] == 12)
    assert [i["media"]["url"] for i in gallery["items"]] == [VIDEO_URL]
    assert VIDEO_URL in card_text(parts)  # findable even where the media cannot show
    assert [b["url"] for b in links["components"]] == [VIDEO_URL]
    assert [b["custom_id"] for b in actions["components"]] == [
        "gb:again:j42",
        "gb:continue:j42",
        "gb:remix:j42",
        "gb:share:j42",
        "gb:delete:j42",
    ]
    assert [b["custom_id"] for b in more["components"]] == ["gb:enhance:j42"]
    attached = with_files(parts, ["task_1.mp4"], "Attached as `task_1.mp4`.")
    gallery = next(c for c in card_json(attached)[0]["components"] if c["type"] == 12)
    assert [i["media"]["url"] for i in gallery["items"]] == ["attachment://task_1.mp4"]
    assert "Attached as `task_1.mp4`." in card_text(attached)
    assert fields(attached.legacy().embeds[0])["File"] == "Attached as `task_1.mp4`."
    elsewhere = with_files(
        job_finished(job, sandbox=False), [], "In the reply.", show_attached=False
    )
    gallery = next(c for c in card_json(elsewhere)[0]["components"] if c["type"] == 12)
    assert [i["media"]["url"] for i in gallery["items"]] == [VIDEO_URL]


def test_a_short_text_answer_is_one_card_and_a_long_one_keeps_the_split_form() -> None:
    answer = "@everyone <@&123456789012345678> " + "word " * 700  # ~3,500 characters
    parts = text_card(text_result(answer), sandbox=True, ref="r9")
    assert parts is not None
    text = card_text(parts)
    assert text.startswith("@everyone")  # the model's text as it is: nobody is pinged
    assert_pings_nobody(parts.allowed_mentions)
    assert text.endswith("· sandbox") and len(text) <= 4000
    assert [b.custom_id for b in buttons(parts)] == ["gb:again:r9", "gb:vary:r9", "gb:delete:r9"]
    assert "content" not in parts.kwargs()
    assert text_card(text_result("word " * 900), sandbox=False) is None  # 4,500 characters


def test_a_result_posted_later_names_its_channel_not_this_one() -> None:
    # A card that could not be posted may come from a DM card's button: "this channel" would
    # be the DM, where the result does not go.
    text = posted_later(1234)
    assert "<#1234>" in text and "this channel" not in text
    assert "direct message" in text and "/jobs" in text


def test_every_answers_footer_names_who_paid() -> None:
    """The footer of a /text answer, an image, a job's card and a /chat answer."""
    text = text_answer(text_result("42."), sandbox=False, paid_by="your key")
    assert (text[-1].content or "").endswith("$0.02 · paid by your key")
    card = text_card(text_result("42."), sandbox=False, paid_by="this server")
    assert card is not None and card.card is not None
    assert "paid by this server" in card.card.notes[-1]
    job = FakeJob(details={"duration": 8, "paid_by": "your allowance"})
    done = FakeJob(details=job.details, status="completed", finished_at=CREATED + 60)
    for parts in (
        job_placeholder(job, now=CREATED, sandbox=False),
        job_finished(done, sandbox=False),
    ):
        assert parts.card is not None and "paid by your allowance" in parts.card.notes[-1]
        assert parts.embeds[0].footer.text == "paid by your allowance"
    reply = ChatAnswer("Four.", "gpt-mini", Decimal(1), 0, 0, 10, 5, 2)
    assert "paid by this server" in chat_footer(reply, sandbox=False)


def test_a_continued_clip_names_its_previous_clip_offers_join_and_past_three_suggests_a_cut() -> (
    None
):
    link = "https://discord.com/channels/1/2/3"
    details = {"duration": 5, "continues": 41, "clip": 2, "continues_link": link}
    second = FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,))
    second = dataclasses.replace(second, details=details)
    parts = job_finished(second, sandbox=False, ref="j42")
    text = card_text(parts)
    assert f"Clip 2 · continues [video #41]({link})" in text
    assert "consider a cut" not in text
    assert ("Join", "gb:join:j42") in parts.action_buttons
    fourth = dataclasses.replace(second, details={**details, "clip": 4})
    assert "consider a cut" in card_text(job_finished(fourth, sandbox=False, ref="j43"))
    alone = FakeJob(status="completed", finished_at=CREATED + 83, outputs=(VIDEO_URL,))
    assert all(a != "Join" for a, _ in job_finished(alone, sandbox=False, ref="j9").action_buttons)


@dataclass(frozen=True)
class FakeTake(FakeJob):
    id: int = 0


def test_a_takes_card_fills_in_shows_a_failed_take_and_acts_on_the_chosen_one() -> None:
    done = FakeTake(id=11, status="completed", finished_at=CREATED + 9, outputs=(VIDEO_URL,))
    failed = FakeTake(id=12, status="failed", finished_at=CREATED + 9, error="no luck")
    running = FakeTake(id=13)
    parts = takes_card([failed, done, running], sandbox=False)
    text = card_text(parts)
    assert "3 takes · 1 done, 1 failed, 1 running" in text
    assert "Take 1 · failed: no luck" in text and "Take 3 · running" in text
    gallery = next(c for c in card_json(parts)[0]["components"] if c["type"] == 12)
    assert [i["media"]["url"] for i in gallery["items"]] == [VIDEO_URL]
    assert ("Continue", "gb:continue:j11") in parts.action_buttons  # the take with a result
    assert parts.select is not None and parts.select.chosen == "j11"
    chosen = takes_card([failed, done, running], sandbox=False, chosen=12)
    assert [cid for _, cid in chosen.action_buttons] == ["gb:again:j12", "gb:delete:j12"]
    waiting = takes_card([running, dataclasses.replace(running, id=14)], sandbox=False)
    assert waiting.select is None and waiting.action_buttons == ()  # nothing to act on yet


def test_a_drafts_results_start_with_final_and_a_final_has_none() -> None:
    """Draft → Final (docs/creative.md): each take of a draft acts on itself with Final."""
    draft = {"aspect_ratio": "1:1", "stage": "draft", "take": 2}
    first = FakeTake(id=21, kind="image", status="completed", outputs=IMAGE_URLS[:1], details=draft)
    second = dataclasses.replace(first, id=22)
    card = takes_card([first, second], sandbox=False, chosen=22)
    assert card.action_buttons[0] == ("Final", "gb:final:j22")
    job = job_finished(first, sandbox=False, ref="j21")
    assert job.action_buttons[0] == ("Final", "gb:final:j21")
    final = dataclasses.replace(first, details={**draft, "stage": "final"})
    assert all(a != "Final" for a, _ in job_finished(final, sandbox=False, ref="j9").action_buttons)
    answer = image_result(
        ImageResult(
            task_id="t",
            status="completed",
            outputs=list(IMAGE_URLS[:1]),
            cost_cents=3,
            remaining_credits_cents=9,
        ),
        prompt="a fox",
        model="flux",
        requester_id=1,
        sandbox=False,
        ref="r5",
        draft=True,
    )
    assert answer.action_buttons[0] == ("Final", "gb:final:r5")


def test_usage_shows_drafts_and_finals_apart() -> None:
    report = UsageReport(
        month_cents=Decimal(19),
        today_cents=Decimal(19),
        reserved_cents=Decimal(0),
        by_user=[],
        by_kind={},
        by_model=[],
        last_remaining_credits_cents=None,
        by_stage={"draft": (4, Decimal(12)), "final": (1, Decimal(4))},
    )
    shown = fields(usage_embed(report, user_id=5))
    assert shown["Draft → Final, this month"] == "Drafts: 4 for $0.12 · Finals: 1 for $0.04"
    plain = dataclasses.replace(report, by_stage={})
    assert "Draft → Final, this month" not in fields(usage_embed(plain, user_id=5))


def test_a_takes_card_is_written_in_the_servers_language() -> None:
    done = FakeTake(id=11, status="completed", finished_at=CREATED + 9, outputs=(VIDEO_URL,))
    failed = FakeTake(id=12, status="failed", finished_at=CREATED + 9, error="no luck")
    running = FakeTake(id=13)
    parts = takes_card([failed, done, running], sandbox=False, locale="de")
    text = card_text(parts)
    assert "3 Takes · 1 fertig, 1 fehlgeschlagen, 1 laufen" in text
    assert "Take 1 · fehlgeschlagen: no luck" in text and "Take 3 · läuft" in text
    assert parts.select is not None
    assert parts.select.options[0][0] == "Schaltflächen wirken auf Take 1"


def test_the_policy_in_config_show_is_written_in_the_answers_language() -> None:
    tier = Tier(1, 5, "Gold", 50, UNLIMITED, None, ("*",))
    policy = ServerPolicy(tiers=[tier], cooldowns={Kind.VIDEO: 30})
    english = fields(add_policy_fields(discord.Embed(), policy))
    assert english["Role tiers"] == (
        "<@&5>: daily $0.50 · monthly unlimited · videos at once server default · models all"
    )
    assert english["Cooldowns per member"] == "/video: 30 s"
    with using("ja"):
        shown = fields(add_policy_fields(discord.Embed(), policy))
        audit = audit_lines([AuditEntry(1, 7, "confirm above", "off", "$1.00", 0.0)])
    assert shown["ロールのティア"].startswith("<@&5>: 1日 $0.50 · 1か月 無制限")
    assert shown["ブロックされた語句"] == "なし"
    assert audit.startswith("<@7> がボットの設定を変更しました:\n• confirm above: off → $1.00")


def test_a_sync_image_kept_as_a_job_gets_share_under_it() -> None:
    result = ImageResult(task_id="t", outputs=IMAGE_URLS, cost_cents=3, remaining_credits_cents=1)
    kept = image_result(
        result, prompt="p", model="m", requester_id=1, sandbox=False, ref="r5", job_id=9
    )
    ids = [custom_id for _, custom_id in kept.action_buttons]
    assert ids == [
        "gb:again:r5",
        "gb:animate:r5",
        "gb:edit:r5",
        "gb:share:j9",
        "gb:delete:r5",
        "gb:enhance:r5",  # the first row is full: Enhance in a row of its own
    ]
    plain = image_result(result, prompt="p", model="m", requester_id=1, sandbox=False, ref="r5")
    assert "gb:share:j9" not in [custom_id for _, custom_id in plain.action_buttons]
