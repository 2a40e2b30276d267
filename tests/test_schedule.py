"""Poll times: late for young jobs, often where the model's jobs usually finish."""

import pytest

from bot.services.schedule import PollSchedule, fraction_done, quantile
from bot.storage import Kind


def schedule(history: list[float]) -> PollSchedule:
    async def durations(model: str) -> list[float]:
        return history

    return PollSchedule(durations)


def test_quantile_and_fraction_done_are_inverse_on_the_samples() -> None:
    durations = [20.0, 40.0, 60.0, 80.0, 100.0]
    assert quantile(durations, 0.5) == 60
    assert quantile(durations, 0.125) == 30  # interpolated
    assert fraction_done(durations, 60) == 0.6
    assert fraction_done(durations, 10) == 0


async def test_without_history_a_video_is_first_polled_after_ten_seconds() -> None:
    plan = schedule([])
    assert await plan.first_poll_at("m", Kind.VIDEO, 1000.0) == 1010.0
    assert await plan.first_poll_at("m", Kind.IMAGE, 1000.0) == 1003.0
    # then 15 % of its age, between 3 s and 30 s
    assert await plan.next_poll_at("m", 1000.0, 1010.0) == 1013.0
    assert await plan.next_poll_at("m", 1000.0, 1100.0) == 1115.0
    assert await plan.next_poll_at("m", 1000.0, 1600.0) == 1630.0


async def test_with_history_polls_gather_where_jobs_finish() -> None:
    plan = schedule([20.0 + 5 * i for i in range(21)])  # 20 s to 120 s, evenly
    assert await plan.first_poll_at("m", Kind.VIDEO, 0.0) == pytest.approx(40.0)
    young = await plan.next_poll_at("m", 0.0, 30.0) - 30.0
    middle = await plan.next_poll_at("m", 0.0, 70.0) - 70.0
    old = await plan.next_poll_at("m", 0.0, 110.0) - 110.0
    assert young > middle > old
    assert old == 3.0


async def test_past_every_known_duration_polls_back_off() -> None:
    plan = schedule([20.0, 25.0, 30.0])
    just_past = await plan.next_poll_at("m", 0.0, 31.0) - 31.0
    long_past = await plan.next_poll_at("m", 0.0, 200.0) - 200.0
    assert just_past == 3.0
    assert long_past == pytest.approx(0.15 * 170)


async def test_forget_relearns_the_history() -> None:
    history: list[float] = []

    async def durations(model: str) -> list[float]:
        return list(history)

    plan = PollSchedule(durations)
    assert await plan.first_poll_at("m", Kind.VIDEO, 0.0) == 10.0
    history.extend([50.0, 60.0, 70.0])
    assert await plan.first_poll_at("m", Kind.VIDEO, 0.0) == 10.0  # cached until told
    plan.forget("m")
    assert await plan.first_poll_at("m", Kind.VIDEO, 0.0) == pytest.approx(54.0)


async def test_a_pending_job_gets_an_estimate_from_its_models_history() -> None:
    plan = schedule([20.0 + 5 * i for i in range(21)])  # 20 s to 120 s, evenly
    # Young: the median of the whole history; later: the median of the jobs still longer.
    assert await plan.estimated_finish("m", 1000.0, now=1005.0) == pytest.approx(1070.0)
    assert await plan.estimated_finish("m", 1000.0, now=1100.0) == pytest.approx(1112.5)
    # Older than every job seen so far, or no history worth the name: no estimate.
    assert await plan.estimated_finish("m", 1000.0, now=1200.0) is None
    assert await schedule([30.0, 40.0]).estimated_finish("m", 1000.0, now=1001.0) is None
