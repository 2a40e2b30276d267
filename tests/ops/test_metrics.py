"""Metrics an operator scrapes: one registry per bot, counted where things happen."""

from decimal import Decimal

import pytest

from bot.clock import ManualClock
from bot.genapi.errors import RateLimitWaitTooLong
from bot.genapi.ratelimit import Priority, RateLimiter
from bot.genapi.slots import SlotRules
from bot.ops.metrics import Metrics


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_two_bots_in_one_process_do_not_share_counters() -> None:
    first, second = Metrics(), Metrics()
    first.commands.labels("text", "ok").inc()
    assert sample(first, "genbot_commands_total", command="text", outcome="ok") == 1
    assert sample(second, "genbot_commands_total", command="text", outcome="ok") == 0


async def test_the_limiter_counts_its_waits_and_refusals_by_priority() -> None:
    clock, metrics = ManualClock(), Metrics()
    limiter = RateLimiter(clock, SlotRules(limit=2, window=10.0), metrics=metrics)
    clock.advance(10)  # past the window assumed used at start-up
    keyed = limiter.for_key("k")
    await keyed.acquire(Priority.INTERACTIVE)
    await keyed.acquire(Priority.INTERACTIVE)
    with pytest.raises(RateLimitWaitTooLong):
        await keyed.acquire(Priority.INTERACTIVE, max_wait=1)
    await keyed.acquire(Priority.INTERACTIVE)  # waits for the window (the manual clock jumps)
    name = "genbot_limiter_wait_seconds"
    assert sample(metrics, f"{name}_count", priority="interactive") == 3
    assert sample(metrics, f"{name}_sum", priority="interactive") == pytest.approx(10)
    assert sample(metrics, "genbot_limiter_refusals_total", priority="interactive") == 1


def test_credits_are_counted_in_cents_by_kind() -> None:
    metrics = Metrics()
    metrics.credits("charged", "video", Decimal("0.35"))
    metrics.credits("charged", "video", Decimal("2"))
    assert sample(metrics, "genbot_credits_charged_cents_total", kind="video") == pytest.approx(
        2.35
    )


def test_each_process_says_its_role() -> None:
    worker = Metrics(role="worker")
    assert sample(worker, "genbot_process_info", role="worker") == 1
    assert sample(worker, "genbot_process_info", role="gateway") == 0
    with pytest.raises(ValueError, match="role"):
        Metrics(role="poller")
