"""Draft → Final's services on the emulator: the draft models, a Final's request, the spend split.

:class:`bot.services.drafts.DraftService` with the submissions as the commands use them: what a
draft sends and charges, what a Final sends (the chosen take as the reference, the draft clip's
first frame as ``image_url``) on which model, and drafts' and Finals' charges told apart in
``/usage``'s report and the dashboard's Spend.
"""

import contextlib
import dataclasses
from collections.abc import AsyncIterator
from decimal import Decimal

import pytest

from bot.domain import Actor, Job, JobStatus
from bot.errors import ValidationFailed
from bot.genapi.wire import Catalogue
from bot.services.drafts import DraftService, final_video_model
from bot.services.generation import ImageOptions, Requester, VideoOptions
from bot.services.submissions import ImagesMade, VideosSubmitted
from tests.support.stack import Stack

SYNC_IMAGE = "black-forest-labs/flux-schnell"  # 3 cents a request: the cheapest
SDXL = "stability/sdxl"  # 4 cents a request
CHEAPEST_VIDEO = "aurora-lite/text-to-video"  # 20 cents per 5 s, 5 or 10 s
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


def drafts(stack: Stack) -> DraftService:
    return stack.services.drafts


def posted(stack: Stack, path: str) -> list[dict[str, object]]:
    return [r.json or {} for r in stack.api.requests if r.method == "POST" and path in r.path]


async def test_drafts_use_the_cheapest_models_until_config_draft_names_others(
    stack: Stack, who: Requester
) -> None:
    models = await drafts(stack).models(who.guild_id)
    assert (models.image, models.video) == (SYNC_IMAGE, CHEAPEST_VIDEO)

    await drafts(stack).set_models(
        who.guild_id, actor=ADMIN, image_model=SDXL, video_model="flash-clip/text-to-video"
    )
    chosen = await drafts(stack).models(who.guild_id)
    assert (chosen.image, chosen.video) == (SDXL, "flash-clip/text-to-video")
    audit = await stack.services.guild_config.audit(who.guild_id, 50)
    assert {entry.what for entry in audit} >= {"draft image model", "draft video model"}
    # A video draft is made from the prompt alone: an image-to-video model is refused.
    with pytest.raises(ValidationFailed, match="not a text-to-video model"):
        await drafts(stack).set_models(
            who.guild_id, actor=ADMIN, video_model="aurora-lite/image-to-video"
        )
    await drafts(stack).set_models(who.guild_id, actor=ADMIN, reset=True)
    assert (await drafts(stack).models(who.guild_id)).image == SYNC_IMAGE


async def test_a_draft_refuses_a_model_of_the_members_own(stack: Stack, who: Requester) -> None:
    with pytest.raises(ValidationFailed, match="draft model"):
        await drafts(stack).image_draft(who, ImageOptions("a fox", SDXL))
    with pytest.raises(ValidationFailed, match="draft model"):
        await drafts(stack).video_draft(who, VideoOptions("a fox", CHEAPEST_VIDEO))
    assert posted(stack, "/image") == posted(stack, "/video") == []


async def make_image_draft(stack: Stack, who: Requester) -> ImagesMade:
    options = await drafts(stack).image_draft(who, ImageOptions("a fox", aspect_ratio="1:1"))
    return await stack.services.submissions.image(
        who, options, desk=RecordingDesk(), public=True, takes=drafts(stack).takes(who)
    )


async def test_an_image_draft_is_four_takes_on_the_draft_model_charged_as_drafts(
    stack: Stack, who: Requester
) -> None:
    made = await make_image_draft(stack, who)

    assert made.made == 4 and len(made.answers) == 4
    sent = posted(stack, "/image")
    assert [body["model"] for body in sent] == [SYNC_IMAGE] * 4
    by_stage = await stack.db.ledger.spent_by_stage(who.guild_id, 0)
    assert by_stage == {"draft": (4, Decimal(12))}


async def test_final_sends_the_chosen_take_as_the_reference_on_the_members_model(
    stack: Stack, who: Requester
) -> None:
    await stack.services.members.update(who.user_id, {"image_model": SDXL})
    made = await make_image_draft(stack, who)
    take = made.answers[2]  # the member picks the third
    assert take.ref is not None
    request = await stack.generation.result_request(take.ref)
    assert request is not None

    options = await drafts(stack).final_image(who, request)
    final = await stack.services.submissions.image(who, options, desk=RecordingDesk(), public=True)

    assert final.made == 1
    body = posted(stack, "/image")[-1]
    assert body["model"] == SDXL and body["prompt"] == "a fox"
    assert body["image_urls"] == [take.result.outputs[0]]
    assert body["aspect_ratio"] == "1:1"
    by_stage = await stack.db.ledger.spent_by_stage(who.guild_id, 0)
    assert by_stage == {"draft": (4, Decimal(12)), "final": (1, Decimal(4))}
    # A Final is not a draft: its own result has no Final.
    (answer,) = final.answers
    assert answer.ref is not None
    again = await stack.generation.result_request(answer.ref)
    assert again is not None
    with pytest.raises(ValidationFailed, match="draft"):
        await drafts(stack).final_image(who, again)


async def test_usage_and_the_dashboard_show_drafts_and_finals_apart(
    stack: Stack, who: Requester
) -> None:
    made = await make_image_draft(stack, who)
    assert made.answers[0].ref is not None
    request = await stack.generation.result_request(made.answers[0].ref)
    assert request is not None
    final = await drafts(stack).final_image(who, request)
    await stack.services.submissions.image(who, final, desk=RecordingDesk(), public=True)
    # An ordinary image: neither.
    await stack.services.submissions.image(
        who, ImageOptions("a cat", SDXL), desk=RecordingDesk(), public=True
    )

    report = await stack.services.billing.report(who.guild_id)
    assert report.by_stage == {"draft": (4, Decimal(12)), "final": (1, Decimal(3))}
    assert report.month_cents == Decimal(19)
    spend = await stack.services.dashboard.spend(who.guild_id, 7)
    assert {(b.key, b.count, b.micro) for b, _ in spend.by_stage} == {
        ("draft", 4, 12_000_000),
        ("final", 1, 3_000_000),
    }


def finished(job: Job) -> Job:
    return dataclasses.replace(
        job, status=JobStatus.COMPLETED, outputs=("https://cdn.example/draft.mp4",)
    )


async def test_a_video_draft_is_the_draft_tier_at_its_shortest_and_its_final_starts_from_its_first_frame(  # noqa: E501
    stack: Stack, who: Requester
) -> None:
    await stack.services.members.update(
        who.user_id, {"video_model": "nimbus-pro/text-to-video", "video_duration": 8.0}
    )
    options = await drafts(stack).video_draft(who, VideoOptions("a fox", "", camera="orbit"))
    assert (options.model, options.duration) == (CHEAPEST_VIDEO, 5.0)
    outcome = await stack.services.submissions.video(who, options, desk=RecordingDesk())
    assert isinstance(outcome, VideosSubmitted)
    (draft,) = outcome.jobs
    request = await stack.generation.result_request(f"j{draft.id}")
    assert request is not None
    asked: list[int] = []

    async def frame(job: Job) -> str:
        asked.append(job.id)
        return "https://cdn.discordapp.com/attachments/1/2/first-frame.png"

    with pytest.raises(ValidationFailed, match="has not finished"):
        await stack.services.submissions.final_video(
            who, draft, request, frame=frame, desk=RecordingDesk()
        )
    assert asked == []

    final = await stack.services.submissions.final_video(
        who, finished(draft), request, frame=frame, desk=RecordingDesk()
    )

    assert isinstance(final, VideosSubmitted) and asked == [draft.id]
    first, last = posted(stack, "/video")
    assert (first["model"], first["duration"]) == (CHEAPEST_VIDEO, 5)
    # The member's model animates no image: its image-to-video sibling, at their duration.
    assert (last["model"], last["duration"]) == ("nimbus-pro/image-to-video", 8)
    assert last["image_url"] == "https://cdn.discordapp.com/attachments/1/2/first-frame.png"
    assert "orbit" in str(last["prompt"])  # the draft's camera too
    by_stage = await stack.db.ledger.spent_by_stage(who.guild_id, 0)
    assert by_stage == {"draft": (1, Decimal(20)), "final": (1, Decimal(112))}


async def test_a_final_video_model_is_the_members_else_its_sibling_else_the_cheapest(
    stack: Stack, who: Requester
) -> None:
    catalogue: Catalogue = await stack.generation.catalogue(who.guild_id)

    def pick(preferred: str | None, barred: str = "") -> str | None:
        found = final_video_model(catalogue, lambda model: model != barred, preferred)
        return None if found is None else found.id

    assert pick("nimbus-pro/image-to-video") == "nimbus-pro/image-to-video"
    assert pick("aurora-lite/text-to-video") == "aurora-lite/image-to-video"
    assert pick("zenith-ultra/text-to-video") == "aurora-lite/image-to-video"  # no sibling
    assert pick(None) == "aurora-lite/image-to-video"  # the cheapest per 5 s
    # A sibling the member's tiers do not allow: the cheapest they do.
    assert pick("nimbus-pro/text-to-video", "nimbus-pro/image-to-video") == (
        "aurora-lite/image-to-video"
    )
    assert final_video_model(catalogue, lambda m: False, None) is None
