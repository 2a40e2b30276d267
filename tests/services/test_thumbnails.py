"""Results' thumbnails kept in the bot's own database, on both engines, and swept with their job.

Also the prompt a text charge keeps for the dashboard's Ledger (a job's charge reads its job's).
"""

from __future__ import annotations

import io
from decimal import Decimal

from PIL import Image

from bot.clock import ManualClock
from bot.domain import Charge, Kind, LedgerFilter, NewJob
from bot.sandbox.clips import make_clip
from bot.services.dashboard import DashboardService
from bot.services.generation import Requester, TextOptions
from bot.services.retention import DAY, Retention, RetentionPeriods
from bot.services.thumbnails import ThumbnailService
from bot.storage import Database
from bot.storage.schema import jobs
from tests.support.stack import Stack


def png(rgb: tuple[int, int, int], size: tuple[int, int] = (1024, 768)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, rgb).save(out, "PNG")
    return out.getvalue()


_TASKS = iter(range(1, 10**6))


async def add_job(db: Database, clock: ManualClock, kind: Kind = Kind.IMAGE) -> int:
    job = await db.jobs.insert(
        NewJob(
            task_id=f"t{next(_TASKS)}",
            provider="sandbox",
            poll_url="",
            kind=kind,
            model="m",
            guild_id=1,
            channel_id=10,
            message_id=None,
            user_id=100,
            prompt_summary="a red kite",
            details={},
            cost_cents=Decimal(1),
            key_fingerprint="fp",
            created_at=clock.time(),
            next_poll_at=clock.time() + 10,
        )
    )
    return job.id


async def test_a_results_thumbnails_are_kept_once_and_read_back(
    store: Database, clock: ManualClock
) -> None:
    thumbnails = ThumbnailService(store, clock)
    image_job = await add_job(store, clock)
    assert await thumbnails.keep(image_job, "image", [png((220, 20, 20)), png((20, 20, 220))]) == 2
    # A re-show downloads the files again: nothing is made twice.
    assert await thumbnails.keep(image_job, "image", [png((0, 0, 0))]) == 0
    first = await thumbnails.thumbnail(image_job, 0)
    assert first is not None and first.mime == "image/webp"
    assert (first.width, first.height) == (320, 240) and first.duration is None
    shown = Image.open(io.BytesIO(first.data)).convert("RGB")
    assert shown.getpixel((160, 120))[0] > 180  # the red one, not the black re-show
    video_job = await add_job(store, clock, Kind.VIDEO)
    clip = make_clip(5, width=640, height=360, seconds=2.0, colour=(30, 200, 60))
    assert await thumbnails.keep(video_job, "video", [clip]) == 1
    described = await thumbnails.described([(image_job, 0), (image_job, 1), (video_job, 0)])
    assert set(described) == {(image_job, 0), (image_job, 1), (video_job, 0)}
    assert described[(video_job, 0)].duration is not None
    assert abs(described[(video_job, 0)].duration - 2.0) < 0.1  # type: ignore[operator]
    assert described[(image_job, 0)].data == b""  # a gallery reads no bytes
    assert described[(image_job, 0)].digest == first.digest


async def test_a_file_that_is_no_picture_gets_no_thumbnail_and_nothing_fails(
    store: Database, clock: ManualClock
) -> None:
    thumbnails = ThumbnailService(store, clock)
    job = await add_job(store, clock)
    assert await thumbnails.keep(job, "image", [b"garbage", png((1, 2, 3))]) == 1
    assert await thumbnails.thumbnail(job, 0) is None
    assert await thumbnails.thumbnail(job, 1) is not None
    await store.close()  # a database that cannot answer: logged, never raised
    assert await thumbnails.keep(job + 1, "image", [png((1, 2, 3))]) == 0


async def test_thumbnails_are_swept_with_their_job_and_after_their_period(
    store: Database, clock: ManualClock
) -> None:
    thumbnails = ThumbnailService(store, clock)
    old = await add_job(store, clock)
    await thumbnails.keep(old, "image", [png((9, 9, 9))])
    clock.advance(40 * DAY)
    kept = await add_job(store, clock)
    gone = await add_job(store, clock)
    await thumbnails.keep(kept, "image", [png((9, 9, 9))])
    await thumbnails.keep(gone, "image", [png((9, 9, 9))])
    await store.engines.sql.run(jobs.delete().where(jobs.c.id == gone))
    swept = await Retention(store, clock, RetentionPeriods()).sweep()
    assert swept["thumbnails"] == 1  # the job's that is gone; the rest as long as their job
    assert await thumbnails.thumbnail(gone, 0) is None
    assert await thumbnails.thumbnail(old, 0) is not None
    swept = await Retention(store, clock, RetentionPeriods(thumbnails_days=30)).sweep()
    assert swept["thumbnails"] == 1
    assert await thumbnails.thumbnail(old, 0) is None
    assert await thumbnails.thumbnail(kept, 0) is not None


async def test_a_text_charge_keeps_its_prompt_for_the_ledger(stack: Stack) -> None:
    who = Requester(guild_id=1, channel_id=10, user_id=100)
    await stack.services.generation.text(who, TextOptions(prompt="a   haiku about\nkites"))
    dashboard = stack.services.dashboard
    lines, _ = await dashboard.ledger(1, LedgerFilter(kind="text"), None, 10)
    assert [line.prompt for line in lines] == ["a haiku about kites"]
    # Hidden from a viewer who is not an admin, when the member keeps results private.
    await stack.services.members.update(100, {"private": True})
    hidden, _ = await dashboard.ledger(1, LedgerFilter(), None, 10, private_hidden_from=555)
    assert [(line.prompt, line.private) for line in hidden] == [("", True)]


async def test_a_charge_without_a_prompt_reads_as_before(
    store: Database, clock: ManualClock
) -> None:
    await store.ledger.insert_charge(
        Charge(1, 10, 100, Kind.TEXT, "m", None, Decimal(1), None, "fp", clock.time())
    )
    lines, _ = await DashboardService(store, clock).ledger(1, LedgerFilter(), None, 10)
    assert [line.prompt for line in lines] == [""]
