"""A member action is one service call: its checks, its charge, and the bookkeeping after it.

The outcomes :class:`bot.services.submissions.SubmissionService` returns for the Discord
adapter to render, and the one rule after a charge: a failure of the bookkeeping is logged,
never raised over the paid result.
"""

import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from decimal import Decimal
from typing import Any

import pytest

from bot.domain import ImageRef, Job, JobStatus, StorageError
from bot.errors import ValidationFailed
from bot.genapi import errors as api_errors
from bot.services.creative import Enhanced
from bot.services.generation import ImageOptions, Requester, TextOptions, VideoOptions
from bot.services.submissions import (
    ConfirmFirst,
    ImageRequest,
    ImagesAsked,
    ImagesMade,
    Rewritten,
    SubmissionService,
    TextAnswered,
    Upload,
    VideoAsked,
    VideoRequest,
    VideosSubmitted,
    check_uploads,
)
from tests.support.stack import ADMIN_ACTOR, Stack

TEXT_TO_VIDEO = "aurora-lite/text-to-video"  # 20 cents per 5 s
IMAGE_TO_VIDEO = "aurora-lite/image-to-video"
SYNC_IMAGE = "black-forest-labs/flux-schnell"
ASYNC_IMAGE = "ideogram/ideogram-v2"


class RecordingDesk:
    """The adapter's side of a request, as the tests see it: what the service asked of it."""

    def __init__(self) -> None:
        self.events: list[str] = []

    @contextlib.asynccontextmanager
    async def waiting(self) -> AsyncIterator[None]:
        self.events.append("waiting")
        yield
        self.events.append("sent")

    def charged(self) -> None:
        self.events.append("charged")


def submissions(stack: Stack) -> SubmissionService:
    return stack.services.submissions


async def test_a_video_above_the_threshold_asks_first_and_sends_nothing(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_confirm_above(
        who.guild_id, Decimal(10), actor=ADMIN_ACTOR
    )
    desk = RecordingDesk()
    options = VideoOptions("a fox", TEXT_TO_VIDEO, 5)

    outcome = await submissions(stack).video(who, options, desk=desk, takes=2)

    assert outcome == ConfirmFirst(Decimal(40), Decimal(10), 2, options)
    assert desk.events == [] and stack.posts() == 0
    assert await stack.db.ledger.total(who.guild_id) == 0


async def test_a_confirmed_video_is_charged_and_its_request_remembered_for_its_buttons(
    stack: Stack, who: Requester
) -> None:
    await stack.services.guild_config.set_confirm_above(
        who.guild_id, Decimal(10), actor=ADMIN_ACTOR
    )
    desk = RecordingDesk()
    options = VideoOptions("a fox", TEXT_TO_VIDEO, 5)

    outcome = await submissions(stack).video(who, options, desk=desk, confirmed=True)

    assert isinstance(outcome, VideosSubmitted)
    (job,) = outcome.jobs
    assert (outcome.takes, outcome.private, outcome.grouped, outcome.error) == (
        1,
        False,
        False,
        None,
    )
    assert desk.events == ["waiting", "sent", "charged"]
    assert await stack.db.ledger.total(who.guild_id) == Decimal(20)
    request = await stack.generation.result_request(f"j{job.id}")
    assert request is not None and request.kind == "video"
    assert request.options["prompt"] == "a fox"


async def test_takes_out_of_range_are_refused_before_anything_is_sent(
    stack: Stack, who: Requester
) -> None:
    with pytest.raises(ValidationFailed, match="Takes must be 1 to 4"):
        await submissions(stack).video(
            who, VideoOptions("a fox", TEXT_TO_VIDEO), desk=RecordingDesk(), takes=5
        )
    assert stack.posts() == 0


async def test_takes_are_recorded_together_and_a_take_not_made_is_the_outcome_not_an_error(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = stack.client.generate_video
    calls = 0

    async def second_refused(key: Any, request: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise api_errors.InvalidParamsError(400, "INVALID_PARAMS", "no third")
        return await real(key, request)

    monkeypatch.setattr(stack.client, "generate_video", second_refused)
    desk = RecordingDesk()

    outcome = await submissions(stack).video(
        who, VideoOptions("a fox", TEXT_TO_VIDEO, 5), desk=desk, takes=3
    )

    assert isinstance(outcome, VideosSubmitted)
    assert len(outcome.jobs) == 2 and outcome.takes == 3 and outcome.grouped
    assert isinstance(outcome.error, api_errors.InvalidParamsError)
    ids = tuple(job.id for job in outcome.jobs)
    assert await stack.services.sequences.takes_of(ids[0]) == ids
    for job_id in ids:
        assert await stack.generation.result_request(f"j{job_id}") is not None
    assert await stack.db.ledger.total(who.guild_id) == Decimal(40)  # two charges


async def test_a_bookkeeping_failure_after_the_charge_is_logged_never_raised(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> int:
        raise StorageError("the disk is full")

    monkeypatch.setattr(stack.generation, "remember_request", broken)
    desk = RecordingDesk()
    with caplog.at_level(logging.ERROR, logger="bot.services.submissions"):
        outcome = await submissions(stack).text(who, TextOptions("hello"), desk=desk)

    assert isinstance(outcome, TextAnswered) and outcome.result.content
    assert outcome.ref is None  # shown without working buttons
    assert desk.events[-1] == "charged"
    assert await stack.db.ledger.total(who.guild_id) > 0
    assert "request of guild 1 was not stored" in caplog.text


async def test_a_text_is_remembered_with_who_paid(stack: Stack, who: Requester) -> None:
    outcome = await submissions(stack).text(who, TextOptions("hello"), desk=RecordingDesk())

    assert outcome.payer == "this server" and outcome.ref is not None
    request = await stack.generation.result_request(outcome.ref)
    assert request is not None and request.kind == "text"


async def test_synchronous_images_are_answers_asynchronous_ones_jobs_sharing_a_card(
    stack: Stack, who: Requester
) -> None:
    images = submissions(stack).image
    now = await images(who, ImageOptions("a fox", SYNC_IMAGE), desk=RecordingDesk(), public=True)
    assert isinstance(now, ImagesMade) and now.jobs == () and now.made == 1
    (answer,) = now.answers
    assert answer.model == SYNC_IMAGE and answer.ref is not None
    stored = await stack.generation.result_request(answer.ref)
    assert stored is not None and stored.outputs == answer.result.outputs

    later = await images(
        who, ImageOptions("a fox", ASYNC_IMAGE), desk=RecordingDesk(), public=True, takes=2
    )
    assert len(later.jobs) == 2 and later.answers == () and later.grouped

    private = await images(
        who, ImageOptions("a fox", ASYNC_IMAGE), desk=RecordingDesk(), public=False, takes=2
    )
    assert len(private.jobs) == 2 and not private.grouped  # each its own card, by DM
    assert await stack.services.sequences.takes_of(private.jobs[0].id) == ()


def finished(job: Job) -> Job:
    return dataclasses.replace(
        job, status=JobStatus.COMPLETED, outputs=("https://cdn.example/clip.mp4",)
    )


async def test_continue_checks_the_clip_before_its_frame_then_stores_the_new_clip(
    stack: Stack, who: Requester
) -> None:
    service = submissions(stack)
    first = await service.video(who, VideoOptions("a fox", TEXT_TO_VIDEO, 5), desk=RecordingDesk())
    assert isinstance(first, VideosSubmitted)
    (clip,) = first.jobs
    asked: list[tuple[int, int]] = []

    async def frame(job: Job, number: int) -> str:
        asked.append((job.id, number))
        return "https://cdn.discordapp.com/attachments/1/2/last-frame.png"

    continued = {"prompt": "it runs", "model": IMAGE_TO_VIDEO, "duration": 5.0}
    with pytest.raises(ValidationFailed, match="has not finished"):
        await service.continue_video(
            who, clip, **continued, continues_link=None, frame=frame, desk=RecordingDesk()
        )
    assert asked == []

    outcome = await service.continue_video(
        who, finished(clip), **continued, continues_link=None, frame=frame, desk=RecordingDesk()
    )

    assert asked == [(clip.id, 2)]
    assert isinstance(outcome, VideosSubmitted)
    (new,) = outcome.jobs
    assert new.details["continues"] == clip.id and new.details["clip"] == 2
    assert await stack.services.sequences.clips_upto(new.id) == (clip.id, new.id)


async def test_a_chat_turn_is_kept_and_a_turn_that_cannot_be_is_logged(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    conversations = stack.services.conversations
    who = Requester(guild_id=1, channel_id=7000, user_id=100, parent_channel_id=10)
    first = await conversations.ask(who, "ana", "hello")
    await conversations.start(7000, 10, who, "ana", "hello", first)
    conversation = await conversations.get(7000)
    assert conversation is not None
    desk = RecordingDesk()

    reply = await conversations.turn(who, "bob", "and now?", conversation, desk=desk)

    assert desk.events == ["waiting", "sent", "charged"]
    turns = await stack.db.conversations.turns(7000)
    assert [t.answer for t in turns][-1] == reply.answer

    async def broken(*args: Any) -> int:
        raise StorageError("the disk is full")

    monkeypatch.setattr(conversations, "record", broken)
    with caplog.at_level(logging.ERROR):
        again = await conversations.turn(who, "bob", "more?", conversation, desk=RecordingDesk())
    assert again.answer and "could not keep a conversation turn" in caplog.text
    assert len(await stack.db.conversations.turns(7000)) == len(turns)


class FreshReferences:
    """The reference images' port (``bot.services.creative.References``): a fresh URL each."""

    def __init__(self) -> None:
        self.asked = 0

    async def url(self, ref: ImageRef) -> str | None:
        self.asked += 1
        return f"https://cdn.discordapp.com/attachments/{ref.channel_id}/{ref.message_id}/r.png?ex={self.asked}"


def posted(stack: Stack) -> list[dict[str, object]]:
    return [r.json or {} for r in stack.api.requests if r.method == "POST"]


async def test_video_command_applies_the_members_defaults_and_takes_then_submits(
    stack: Stack, who: Requester
) -> None:
    await stack.services.members.update(who.user_id, {"video_model": TEXT_TO_VIDEO})
    await stack.services.sequences.set_default_takes(who.user_id, 2)
    desk = RecordingDesk()

    asked = await submissions(stack).video_command(
        who, VideoRequest("a fox", duration=5), desk=desk, references=FreshReferences()
    )

    assert isinstance(asked, VideoAsked) and asked.note is None
    assert isinstance(asked.outcome, VideosSubmitted)
    assert len(asked.outcome.jobs) == 2 and asked.outcome.takes == 2
    assert [sent["model"] for sent in posted(stack)] == [TEXT_TO_VIDEO, TEXT_TO_VIDEO]
    assert await stack.db.ledger.total(who.guild_id) == Decimal(40)


async def test_video_command_with_enhance_pays_the_rewrite_only_and_returns_the_choice(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_next_text("a red fox running through fresh snow")
    references = FreshReferences()
    refs = [ImageRef(60, 600, 0)]
    await stack.services.creative.add_style(
        who.guild_id, "noir", "film noir", refs, actor=ADMIN_ACTOR
    )
    request = VideoRequest(
        "a fox", model=IMAGE_TO_VIDEO, duration=5, takes=1, enhance=True, style="noir"
    )

    asked = await submissions(stack).video_command(
        who, request, desk=RecordingDesk(), references=references
    )

    rewritten = asked.outcome
    assert isinstance(rewritten, Rewritten) and rewritten.takes == 1
    assert isinstance(rewritten.outcome, Enhanced)
    assert isinstance(rewritten.options, VideoOptions)
    assert rewritten.options.prompt == "a fox, film noir"  # the style applied before the rewrite
    assert rewritten.options.image_url == "https://cdn.discordapp.com/attachments/60/600/r.png?ex=1"
    (sent,) = posted(stack)  # the rewrite only: no video was asked
    assert "video" not in str(sent["model"])
    assert await stack.db.ledger.total(who.guild_id) == rewritten.outcome.rewrite_cents


async def test_image_command_sends_the_uploads_and_the_characters_fresh_reference(
    stack: Stack, who: Requester
) -> None:
    await stack.services.creative.add_character(who, "rex", ImageRef(61, 610, 0), shared=False)
    upload = Upload("https://cdn.discordapp.com/attachments/1/2/mine.png", "image/png", 10)
    request = ImageRequest("a fox", model=SYNC_IMAGE, uploads=(upload, upload), character="rex")

    asked = await submissions(stack).image_command(
        who, request, desk=RecordingDesk(), references=FreshReferences(), public=True
    )

    assert isinstance(asked, ImagesAsked) and isinstance(asked.outcome, ImagesMade)
    assert len(asked.outcome.answers) == 1 and asked.options.model == SYNC_IMAGE
    (sent,) = posted(stack)
    assert sent["image_urls"] == [
        upload.url,
        upload.url,
        "https://cdn.discordapp.com/attachments/61/610/r.png?ex=1",
    ]


def test_an_upload_that_is_no_image_is_refused_before_anything() -> None:
    check_uploads([Upload("https://cdn.discordapp.com/a.png", "image/png", 10)])
    with pytest.raises(ValidationFailed, match="not an image"):
        check_uploads([Upload("https://cdn.discordapp.com/a.txt", "text/plain", 10)])
    with pytest.raises(ValidationFailed, match="empty"):
        check_uploads([Upload("https://cdn.discordapp.com/a.png", "image/png", 0)])


async def test_a_chat_first_turn_is_one_call_and_a_conversation_not_kept_is_logged(
    stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    conversations = stack.services.conversations
    who = Requester(guild_id=1, channel_id=10, user_id=100)
    await stack.services.members.update(who.user_id, {"text_model": "openai/gpt-4o-mini"})
    desk = RecordingDesk()

    first = await conversations.first_turn(who, "ana", "hello", desk=desk)

    assert desk.events == ["waiting", "sent", "charged"] and first.note is None
    assert first.reply.model == "openai/gpt-4o-mini"  # the member's default, as /text
    assert await stack.db.ledger.total(who.guild_id) == first.reply.cost_cents > 0

    async def broken(*args: Any) -> bool:
        raise StorageError("the disk is full")

    monkeypatch.setattr(stack.db.conversations, "start", broken)
    with caplog.at_level(logging.ERROR):
        created = await conversations.start(7001, 10, who, "ana", "hello", first.reply)
    assert created is False and "could not keep a conversation turn" in caplog.text
    assert await conversations.get(7001) is None

    monkeypatch.setattr(stack.db.conversations, "end", broken)
    await conversations.abandon(7001)  # logged, never raised
    assert "could not end a conversation" in caplog.text
