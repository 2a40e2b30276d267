"""WAIT_SCALE, PLACEHOLDER_GRACE_SECONDS, GUILD_READY_TIMEOUT_SECONDS: the bot's fixed waits as
settings.

The delivery backoff and the poll priors' medians are the bot's choices about the service's
time, not the service's rules: a scale divides them, so the tests' bot process (whose emulated
videos take 4 s) polls a new video after 3 s instead of 24 s. Production keeps 1. The
placeholder's grace waits on Discord, so it has its own setting and no scale; so does the wait
for the last server's GUILD_CREATE before the bot counts itself ready (discord.py's 2 s).
"""

import asyncio
from typing import Any

import pytest

from bot.config import SettingsError, load_settings
from bot.discord.bot import GenBot
from bot.domain import DeliveryRoute
from bot.jobs.poller import DELIVERY_BACKOFF_FIRST, DELIVERY_BACKOFF_MAX, NOT_FOUND_RETRY
from bot.services.generation import PLACEHOLDER_GRACE, Requester
from bot.wiring import build_poller
from tests.support.poller import RecordingAnnouncer, make_poller, submit
from tests.support.stack import Stack

SCALED = pytest.mark.parametrize("stack_overrides", [{"wait_scale": 10.0}])


async def due_ids(stack: Stack) -> list[int]:
    return [job.id for job in await stack.db.jobs.due(stack.clock.time(), 10)]


async def test_by_default_a_new_video_is_first_polled_by_the_prior_at_24_seconds(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    stack.clock.advance(23.0)
    assert await due_ids(stack) == []
    stack.clock.advance(1.0)
    assert await due_ids(stack) == [job.id]


async def test_by_default_a_video_without_its_placeholder_waits_30_seconds(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who, placeholder=False)
    stack.clock.advance(29.0)
    assert await due_ids(stack) == []
    stack.clock.advance(1.0)
    assert await due_ids(stack) == [job.id]


@SCALED
async def test_a_scale_of_10_polls_a_new_video_after_the_specs_3_seconds(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    stack.clock.advance(2.9)
    # never sooner than 3 s after the last poll (docs/genapi.md §3.2)
    assert await due_ids(stack) == []
    stack.clock.advance(0.1)
    assert await due_ids(stack) == [job.id]


@SCALED
async def test_a_scale_leaves_the_placeholders_grace_which_waits_on_discord(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who, placeholder=False)
    stack.clock.advance(29.0)  # a placeholder's post may wait out a Discord 429 meanwhile
    assert await due_ids(stack) == []
    stack.clock.advance(1.0)
    assert await due_ids(stack) == [job.id]


@pytest.mark.parametrize("stack_overrides", [{"placeholder_grace_seconds": 60.0}])
async def test_placeholder_grace_seconds_sets_how_long_a_job_waits_for_its_placeholder(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who, placeholder=False)
    stack.clock.advance(59.0)
    assert await due_ids(stack) == []
    stack.clock.advance(1.0)
    assert await due_ids(stack) == [job.id]


@SCALED
async def test_a_scale_of_10_shortens_the_estimate_shown_of_a_new_video(
    stack: Stack, who: Requester
) -> None:
    (job,) = await submit(stack, who)
    ready = await stack.schedule.estimated_finish(job, now=job.created_at)
    assert ready - job.created_at == pytest.approx(6.0)  # the video prior's median, 60 s / 10


async def test_delivery_retries_follow_the_poller_backoff_it_is_given(
    stack: Stack, who: Requester
) -> None:
    stack.api.set_task_duration(lambda model, body: 0.0)
    (job,) = await submit(stack, who)
    announcer = RecordingAnnouncer(failures=3, clock=stack.clock)
    poller = make_poller(
        stack,
        announcer,
        delivery_backoff_first=DELIVERY_BACKOFF_FIRST / 10,
        delivery_backoff_max=DELIVERY_BACKOFF_MAX / 10,
    )
    await poller.recheck(job.id)  # finished at the service: settled, its delivery due
    waits = []
    for _ in range(3):  # pass by pass, the clock still: each retry is due when the backoff says
        assert await poller.deliver_due() == 1
        while poller.in_flight:
            await asyncio.sleep(0.01)
        failed = await stack.db.jobs.get(job.id)
        assert failed is not None and failed.next_delivery_at is not None
        waits.append(failed.next_delivery_at - stack.clock.time())
        stack.clock.advance(waits[-1])
    assert waits == pytest.approx([3.0, 6.0, 12.0])  # 30, 60, 120 s unscaled
    assert await poller.deliver_due() == 1
    while poller.in_flight:
        await asyncio.sleep(0.01)
    assert announcer.notified == [job.id]
    assert [route for _, route, _ in announcer.attempts] == [DeliveryRoute.PLACEHOLDER] * 4


async def poll_again_after_a_404(stack: Stack, who: Requester) -> float:
    """Seconds from a poll the service answered 404 to the job's next poll (``build_poller``)."""
    (job,) = await submit(stack, who)
    stack.api.inject_fault("404", 1)
    poller = build_poller(stack.services, RecordingAnnouncer())
    await poller.recheck(job.id)
    again = await stack.db.jobs.get(job.id)
    assert again is not None and again.next_poll_at is not None
    assert [r.status for r in stack.api.requests if job.task_id in r.path] == [404]
    return again.next_poll_at - stack.clock.time()


async def test_after_a_404_the_poller_polls_again_in_5_seconds(
    stack: Stack, who: Requester
) -> None:
    assert await poll_again_after_a_404(stack, who) == pytest.approx(NOT_FOUND_RETRY[0]) == 5.0


@SCALED
async def test_a_scale_of_10_polls_again_after_a_404_at_the_specs_3_seconds(
    stack: Stack, who: Requester
) -> None:
    # 5 s / 10, but never sooner than 3 s after the last poll (docs/genapi.md §3.2)
    assert await poll_again_after_a_404(stack, who) == pytest.approx(3.0)


@pytest.mark.parametrize("value", ["0.5", "0", "fast"])
def test_a_wait_scale_below_1_is_refused_with_its_name(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WAIT_SCALE", value)
    with pytest.raises(SettingsError, match=r"^WAIT_SCALE: "):
        load_settings(_env_file=None, discord_token="t")


def test_the_production_waits_are_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("WAIT_SCALE", raising=False)
    monkeypatch.delenv("PLACEHOLDER_GRACE_SECONDS", raising=False)
    settings: Any = load_settings(_env_file=None, discord_token="t")
    assert settings.wait_scale == 1.0
    assert settings.placeholder_grace_seconds == PLACEHOLDER_GRACE == 30.0
    assert (DELIVERY_BACKOFF_FIRST, DELIVERY_BACKOFF_MAX) == (30.0, 900.0)
    assert settings.guild_ready_timeout_seconds == 2.0  # discord.py's own default


@pytest.mark.parametrize("stack_overrides", [{"guild_ready_timeout_seconds": 0.2}])
async def test_the_wait_for_the_last_server_at_start_is_a_setting(stack: Stack) -> None:
    async with GenBot(stack.services) as bot:
        assert bot._connection.guild_ready_timeout == 0.2
