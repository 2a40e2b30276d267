"""What an operator sees of the real bot process: /readyz, /metrics and JSON logs.

The bot runs with ``METRICS_PORT=0`` (it logs the port it picked), ``LOG_FORMAT=json`` and
``LOG_LEVEL=DEBUG``. Its gateway IDENTIFY is held until the test has seen ``/readyz`` refuse,
so the 503 before READY is observed every time, not by luck of timing.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2 as httpx
import pytest
import pytest_asyncio
from prometheus_client.parser import text_string_to_metric_families

from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator.gateway import GatewayHub
from tests.support.e2e.harness import BOT_TOKEN, World, close_world, open_world
from tests.support.e2e.keys import set_key
from tests.support.e2e.videos import video_for

pytestmark = pytest.mark.asyncio(loop_scope="module")

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


@dataclass
class Operated:
    """The world, the bot's health URL and what ``/readyz`` said while it started."""

    world: World
    url: str
    before_ready: httpx.Response
    livez_before_ready: httpx.Response
    after_ready: httpx.Response


def log_lines(world: World) -> list[dict[str, Any]]:
    return [json.loads(line) for line in world.bot.log().splitlines() if line.strip()]


async def health_url(log_path: Path) -> str:
    """The URL the bot logged for /metrics (``METRICS_PORT=0`` picks a free port)."""
    for _ in range(600):
        if log_path.exists():
            for line in log_path.read_text(errors="replace").splitlines():
                if "metrics and health checks at" in line:
                    message = json.loads(line)["message"]
                    return str(message.split(" at ", 1)[1].split(" ", 1)[0])
        await asyncio.sleep(0.1)
    raise AssertionError(f"the bot never logged its metrics URL:\n{log_path.read_text()}")


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def operated(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Operated]:
    world_dir = Path(tmp_path_factory.mktemp("ops"))
    gate = asyncio.Event()
    identify = GatewayHub._identify

    async def held_identify(self: GatewayHub, conn: Any, data: dict[str, Any]) -> bool:
        await gate.wait()
        return await identify(self, conn, data)

    GatewayHub._identify = held_identify  # type: ignore[method-assign]
    overrides = {"METRICS_PORT": "0", "LOG_FORMAT": "json", "LOG_LEVEL": "DEBUG"}
    opening = asyncio.create_task(open_world(world_dir, overrides=overrides))
    try:
        url = await health_url(world_dir / "bot.log")
        async with httpx.AsyncClient(base_url=url, timeout=10) as http:
            before = await http.get("/readyz")
            livez = await http.get("/livez")
            gate.set()
            world = await opening
            after = await http.get("/readyz")
            for _ in range(300):  # the poller's first pass follows READY closely
                if after.status_code == 200:
                    break
                await asyncio.sleep(0.1)
                after = await http.get("/readyz")
    finally:
        GatewayHub._identify = identify  # type: ignore[method-assign]
        gate.set()
    yield Operated(world, url, before, livez, after)
    await close_world(world)
    assert world.discord.unhandled == []
    assert "Traceback" not in world.bot.log()


async def scrape(url: str) -> Samples:
    async with httpx.AsyncClient(timeout=10) as http:
        response = await http.get(f"{url}/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    samples: Samples = {}
    for family in text_string_to_metric_families(response.text):
        for sample in family.samples:
            samples[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return samples


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


async def test_readyz_refuses_until_the_gateway_is_ready_then_accepts(
    operated: Operated,
) -> None:
    assert operated.livez_before_ready.status_code == 200
    assert operated.before_ready.status_code == 503
    reasons = operated.before_ready.json()["reasons"]
    assert "gateway" in reasons
    assert operated.after_ready.status_code == 200
    assert operated.after_ready.json() == {"status": "ready"}


async def test_metrics_count_a_text_an_image_and_a_video(operated: Operated) -> None:
    world = operated.world
    before = await scrape(operated.url)

    world.api.inject_fault("429", 1, delay=1.0)  # the text's first POST is refused once
    text = await world.answer(await world.command("text", {"prompt": "count me in"}))
    assert not text.ephemeral
    sync_image = next(m for m in catalogue_json()["models"]["image"] if not m.get("async"))
    image = await world.command("image", {"prompt": "a counted fox", "model": sync_image["id"]})
    assert (await world.answer(image)).media_urls
    await video_for(world, "a fox on a dashboard")
    await asyncio.sleep(0.5)  # the delivery is counted just after the edit Discord saw

    after = await scrape(operated.url)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    upstream = "genbot_upstream_requests_total"
    assert moved(upstream, operation="generate_text", outcome="rate_limited") == 1
    assert moved("genbot_upstream_rate_limited_total", operation="generate_text") == 1
    for operation in ("generate_text", "generate_image", "generate_video"):
        assert moved(upstream, operation=operation, outcome="ok") == 1, operation
        assert moved("genbot_upstream_request_seconds_count", operation=operation) >= 1
    assert moved(upstream, operation="status", outcome="ok") >= 1
    for command in ("text", "image", "video"):
        assert moved("genbot_commands_total", command=command, outcome="ok") == 1, command
        assert moved("genbot_interaction_ack_seconds_count", command=command) == 1, command
    for kind in ("text", "image", "video"):
        assert moved("genbot_credits_charged_cents_total", kind=kind) > 0, kind
    assert moved("genbot_credits_reserved_cents_total", kind="video") > 0
    assert moved("genbot_limiter_wait_seconds_count", priority="interactive") >= 4
    assert moved("genbot_limiter_wait_seconds_count", priority="background") >= 1
    assert moved("genbot_poll_lag_seconds_count") >= 1
    assert moved("genbot_detection_delay_seconds_count", kind="video") == 1
    assert moved("genbot_deliveries_total", route="placeholder") == 1
    assert moved("genbot_jobs_finished_total", status="completed", kind="video") == 1
    assert value(after, "genbot_jobs", state="undelivered", kind="video") == 0
    assert value(after, "genbot_jobs", state="pending", kind="video") == 0
    assert value(after, "genbot_ready") == 1
    assert ("genbot_gateway_latency_seconds", frozenset({("shard", "0")})) in after
    assert value(after, "genbot_poller_last_pass_timestamp_seconds") > 0


async def test_metrics_carry_no_secret_or_prompt(operated: Operated) -> None:
    async with httpx.AsyncClient(timeout=10) as http:
        text = (await http.get(f"{operated.url}/metrics")).text
    for secret in (operated.world.key, BOT_TOKEN, "count me in", "a fox on a dashboard"):
        assert secret not in text


async def test_a_json_log_at_debug_holds_context_and_no_secret(operated: Operated) -> None:
    world = operated.world
    guild_key = world.api.create_key(balance_cents=50_000)
    assert "saved" in (await set_key(world, guild_key)).lower()
    answer = await world.answer(await world.command("text", {"prompt": "on the guild key"}))
    assert not answer.ephemeral

    lines = log_lines(world)  # every line parses: one JSON object per line
    assert all({"time", "level", "logger", "message"} <= line.keys() for line in lines)
    assert any(line["level"] == "DEBUG" for line in lines)
    assert any("interaction_id" in line and "user_id" in line for line in lines)
    assert any("job_id" in line and "task_id" in line for line in lines)
    raw = world.bot.log()
    secrets = [
        BOT_TOKEN,
        world.key,
        guild_key,
        world.bot.env["KEY_ENCRYPTION_KEY"],
        *(handle.token for handle in world.handles),
    ]
    for secret in secrets:
        assert secret not in raw


async def test_the_retention_sweep_ran_at_start_up_and_is_counted(operated: Operated) -> None:
    samples = await scrape(operated.url)
    for table in ("result_requests", "config_audit", "rate_requests", "rate_blocks", "meta"):
        assert ("genbot_retention_swept_rows_total", frozenset({("table", table)})) in samples
    swept_at = value(samples, "genbot_retention_last_sweep_timestamp_seconds")
    assert 0 < time.time() - swept_at < 600
