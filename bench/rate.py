"""Scenario 2: 30 videos pending on one key; the request window, detection delay, /text headroom.

The bot gets the videos through ``/video`` from 30 users; at the same moments a naive client
(:mod:`bench.naive`) submits identical videos with a second key on the same emulator and polls
each every 4 s. Task durations are spread evenly over [shortest, longest] service seconds, in a
fixed shuffled order, and are the same for both. Real time: the 60 s window is not scaled.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import re
import time
from bisect import bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.naive import NaiveClient, NaiveJob
from bench.report import Table, percentile, ratio, secs
from bench.sim import simulate
from bench.world import Bench, answer, new_discord, running_bot
from bot.sandbox import EmulatedTask, GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator import DiscordEmulator
from tests.support.e2e.harness import MEMBER_PERMISSIONS

WINDOW = 60.0
_INDEX = re.compile(r"#(\d+)")


@dataclass(frozen=True)
class RateSize:
    videos: int = 30
    shortest: float = 20.0
    longest: float = 120.0
    spacing: float = 2.5
    """Seconds between two submissions: 24 a minute, under the 30 the key allows."""
    probes: tuple[float, ...] = (5.0, 25.0, 45.0)
    """When to issue a /text, seconds after the last submission."""


@dataclass
class BotVideo:
    index: int
    placeholder_id: int | None = None
    refused: int = 0


@dataclass
class Probe:
    after_last_submit: float
    pending: int
    requests_last_minute: int
    wait: float | None
    """Dispatch of /text to the API receiving its POST; None: refused or never sent."""
    sent_at: float | None = None
    """When the user ran /text (the emulator's clock)."""


def _durations(size: RateSize) -> list[float]:
    step = (size.longest - size.shortest) / max(1, size.videos - 1)
    durations = [size.shortest + i * step for i in range(size.videos)]
    random.Random(6).shuffle(durations)
    return durations


def _prompt(index: int) -> str:
    return f"benchmark video #{index:02d}"


def _video_model() -> dict[str, Any]:
    return next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])


async def _sleep_until(moment: float) -> None:
    await asyncio.sleep(max(0.0, moment - time.monotonic()))


async def _submit_through_bot(
    bench: Bench, channel: int, guild: int, user: int, video: BotVideo, at: float
) -> None:
    model = _video_model()
    prompt = _prompt(video.index)
    await _sleep_until(at)
    options = {"prompt": prompt, "model": model["id"], "duration": model["durations"][0]}
    for _ in range(6):
        handle = await bench.discord.invoke(
            "video",
            options,
            guild_id=guild,
            channel_id=channel,
            user_id=user,
            permissions=MEMBER_PERMISSIONS,
        )
        # Queued is not refused: a member waits up to the queue's bound (300 s).
        if "on its way" in (await answer(bench.discord, handle, 330)).content:
            break
        video.refused += 1
        await asyncio.sleep(10)  # refused ("try again"): as a user would, a little later
    else:
        return
    placeholder = await bench.discord.wait_for_message(
        lambda m: m.channel_id == channel and prompt in f"{m.embeds}{m.components}",
        include_existing=True,
        timeout=30,
    )
    video.placeholder_id = placeholder.id


def _detected_at(discord: DiscordEmulator, video: BotVideo) -> float | None:
    """Emulator time of the placeholder's edit into the result."""
    message = discord.messages.get(video.placeholder_id or 0)
    if message is None:
        return None
    # The edit into the result: a link to the file (content or card) or the file attached.
    return next((v["at"] for v in message.history if v["attachments"] or "/files/" in str(v)), None)


def _tasks_by_index(api: GenApiEmulator, key: str) -> dict[int, EmulatedTask]:
    api.refresh_tasks()
    found = {}
    for task in api.tasks.values():
        match = _INDEX.search(str(task.request.get("prompt", "")))
        if task.key == key and task.kind == "video" and match:
            found[int(match.group(1))] = task
    return found


async def _probe(
    bench: Bench,
    where: tuple[int, int, int],
    last_submit: float,
    offset: float,
    videos: list[BotVideo],
) -> Probe:
    guild, channel, user = where
    await _sleep_until(last_submit + offset)
    now = time.monotonic()
    pending = sum(1 for v in videos if _detected_at(bench.discord, v) is None)
    recent = sum(
        1 for r in bench.api.requests if r.key == bench.key and r.counted and r.time > now - WINDOW
    )
    handle = await bench.discord.invoke(
        "text",
        {"prompt": "are you still there?"},
        guild_id=guild,
        channel_id=channel,
        user_id=user,
        permissions=MEMBER_PERMISSIONS,
    )
    with contextlib.suppress(TimeoutError):
        await answer(bench.discord, handle, 30)
    sent = next(
        (
            r.time
            for r in bench.api.requests
            if r.key == bench.key and r.path.endswith("/text/generate") and r.time >= now
        ),
        None,
    )
    wait = None if sent is None else sent - handle.dispatched_at
    return Probe(offset, pending, recent, wait, handle.dispatched_at)


def _max_in_window(times: list[float]) -> int:
    times = sorted(times)
    return max(
        (bisect_right(times, t + WINDOW - 1e-9, lo=i) - i for i, t in enumerate(times)), default=0
    )


async def _wait_all_detected(
    bench: Bench, videos: list[BotVideo], naive: list[asyncio.Task[NaiveJob]], deadline: float
) -> None:
    while time.monotonic() < deadline:
        bot_done = all(_detected_at(bench.discord, v) is not None for v in videos)
        if bot_done and all(t.done() for t in naive):
            return
        await asyncio.sleep(0.5)


def duration_by_prompt(
    durations: Sequence[float], default: float
) -> Callable[[str, dict[str, Any]], float]:
    """The emulator's task duration: ``durations[n]`` for the prompt ``#n``, else ``default``."""

    def duration(model: str, body: dict[str, Any]) -> float:
        match = _INDEX.search(str(body.get("prompt", "")))
        return durations[int(match.group(1))] if match else default

    return duration


async def run(workdir: Path, *, quick: bool) -> Table:
    size = RateSize(videos=12, shortest=20, longest=40, probes=(5.0, 15.0)) if quick else RateSize()
    api = GenApiEmulator()
    await api.start()
    ours = api.create_key(balance_cents=100_000_000)
    theirs = api.create_key(balance_cents=100_000_000)
    api.set_task_duration(duration_by_prompt(_durations(size), 30.0))
    naive = NaiveClient(api.base_url, theirs)
    env = {"DEFAULT_MAX_PENDING_VIDEOS_PER_GUILD": "100"}
    try:
        async with new_discord() as discord:
            guild = discord.add_guild("Rate")
            channel = discord.add_channel(guild.id, "videos").id
            users = [discord.add_user(f"user{i}").id for i in range(size.videos + 1)]
            async with running_bot(workdir, discord, api, ours, env) as bench:
                table = await _measure(
                    bench, naive, theirs, (guild.id, channel, users), size, workdir
                )
    finally:
        await naive.aclose()
        await api.stop()
    return table


async def _measure(
    bench: Bench,
    naive: NaiveClient,
    naive_key: str,
    where: tuple[int, int, list[int]],
    size: RateSize,
    workdir: Path,
) -> Table:
    guild, channel, users = where
    model = _video_model()
    start = time.monotonic() + 1.0
    last_submit = start + (size.videos - 1) * size.spacing
    hard_deadline = last_submit + size.longest + 120
    videos = [BotVideo(i) for i in range(size.videos)]
    body = {"model": model["id"], "duration": model["durations"][0]}
    naive_jobs = [
        asyncio.create_task(
            _naive_at(
                naive, i, body | {"prompt": _prompt(i)}, start + i * size.spacing, hard_deadline
            )
        )
        for i in range(size.videos)
    ]
    submissions = [
        _submit_through_bot(
            bench, channel, guild, users[v.index], v, start + v.index * size.spacing
        )
        for v in videos
    ]
    probes = [
        _probe(bench, (guild, channel, users[-1]), last_submit, offset, videos)
        for offset in size.probes
    ]
    results = await asyncio.gather(*submissions, *probes)
    tasks = _tasks_by_index(bench.api, bench.key)
    deadline = max(t.completes_at for t in tasks.values()) + 90 if tasks else hard_deadline
    await _wait_all_detected(bench, videos, naive_jobs, min(deadline, hard_deadline))
    for job in naive_jobs:
        job.cancel()
    done = [j.result() for j in naive_jobs if j.done() and not j.cancelled()]
    probed = [p for p in results if isinstance(p, Probe)]
    _dump_timeline(bench, naive_key, videos, workdir / "timeline.tsv")
    return _report(bench, naive_key, size, videos, probed, done)


async def _naive_at(
    naive: NaiveClient, index: int, body: dict[str, Any], at: float, deadline: float
) -> NaiveJob:
    await _sleep_until(at)
    return await naive.run(index, body, deadline)


def _polls(api: GenApiEmulator, key: str, task_id: str) -> int:
    return sum(1 for r in api.requests if r.key == key and r.method == "GET" and task_id in r.path)


def _report(
    bench: Bench,
    naive_key: str,
    size: RateSize,
    videos: list[BotVideo],
    probes: list[Probe],
    naive_jobs: list[NaiveJob],
) -> Table:
    api, ours = bench.api, bench.key
    tasks = _tasks_by_index(api, ours)
    their_tasks = _tasks_by_index(api, naive_key)
    delays = [
        detected - tasks[v.index].completes_at
        for v in videos
        if v.index in tasks and (detected := _detected_at(bench.discord, v)) is not None
    ]
    naive_delays = [
        j.observed_done_at - their_tasks[j.index].completes_at
        for j in naive_jobs
        if j.observed_done_at is not None and j.index in their_tasks
    ]
    ours_sent = [r for r in api.requests if r.key == ours]
    their_sent = [r for r in api.requests if r.key == naive_key]
    submits = [r.time for r in ours_sent if r.method == "POST" and "/video/" in r.path]
    boundary = max(submits, default=0.0)
    polling_phase = [r.time for r in ours_sent if r.counted and r.time > boundary]
    our_polls = [_polls(api, ours, t.task_id) for t in tasks.values() if t.status != "processing"]
    their_polls = [j.polls for j in naive_jobs if j.observed_done_at is not None]
    p50, p95 = percentile(delays, 50), percentile(delays, 95)
    n50, n95 = percentile(naive_delays, 50), percentile(naive_delays, 95)
    mean_ours = sum(our_polls) / len(our_polls) if our_polls else float("nan")
    mean_theirs = sum(their_polls) / len(their_polls) if their_polls else float("nan")

    table = Table(
        f"request window: {size.videos} videos on one key, tasks of {size.shortest:g}-"
        f"{size.longest:g} s, submitted every {size.spacing:g} s",
        header=("metric", "genbot", "naive (poll every 4 s)", "genbot / naive", "goal"),
    )
    table.add(
        "videos submitted", f"{len(tasks)} / {size.videos}", f"{len(their_tasks)} / {size.videos}"
    )
    table.add(
        "videos announced / observed",
        f"{len(delays)} / {size.videos}",
        f"{len(naive_delays)} / {size.videos}",
    )
    table.add(
        "most requests in any rolling 60 s",
        api.max_requests_in_window(ours, WINDOW),
        api.max_requests_in_window(naive_key, WINDOW),
        "",
        "<= 30",
    )
    table.add(
        "  same, polling phase only (after last submit)",
        _max_in_window(polling_phase),
        "",
        "",
        "<= 30",
    )
    rejected = api.rate_limited_count(ours), api.rate_limited_count(naive_key)
    table.add("429s received", *rejected, ratio(*rejected), "0")
    table.add(
        "requests sent (429s included)",
        len(ours_sent),
        len(their_sent),
        ratio(len(ours_sent), len(their_sent)),
    )
    table.add(
        "polls per completed job",
        f"{mean_ours:.1f}",
        f"{mean_theirs:.1f}",
        ratio(mean_ours, mean_theirs),
    )
    table.add("detection delay p50", secs(p50), secs(n50), ratio(p50, n50), "<= 28 s")
    table.add("detection delay p95", secs(p95), secs(n95), ratio(p95, n95), "<= 70 s")
    _reference_rows(table, list(tasks.values()), probes, (p50, p95))
    table.add(
        "detection delay max",
        secs(max(delays, default=float("nan"))),
        secs(max(naive_delays, default=float("nan"))),
    )
    table.add(
        "/video refused ('try again'; retried 10 s later, up to 6 tries)",
        sum(v.refused for v in videos),
        "",
        "",
        "0",
    )
    for probe in probes:
        wait = "refused" if probe.wait is None else secs(probe.wait)
        table.add(
            f"/text wait, {probe.after_last_submit:g} s after last submit",
            f"{wait} ({probe.pending} pending, {probe.requests_last_minute} req in last 60 s)",
        )
    table.notes.append(
        "detection delay: the service's completion time to the placeholder's edit (genbot), "
        "or to the first poll seeing it finished (naive)"
    )
    return table


def _reference_rows(
    table: Table, tasks: list[EmulatedTask], probes: list[Probe], measured: tuple[float, float]
) -> None:
    """The exact request window's model (:mod:`bench.sim`) for this run's arrivals and durations."""
    if not tasks:
        return
    t0 = min(t.created_at for t in tasks)
    submits = [t.created_at - t0 for t in tasks]
    durations = [t.completes_at - t.created_at for t in tasks]
    users = [p.sent_at - t0 for p in probes if p.sent_at is not None]
    policy = simulate(submits, durations, users, clairvoyant=False)
    floor = simulate(submits, durations, users, clairvoyant=True)
    for q, value in zip((50, 95), measured, strict=True):
        simulated, best = percentile(policy.delays, q), percentile(floor.delays, q)
        table.add(
            f"  reference p{q}: policy simulated / clairvoyant floor",
            f"{secs(simulated)} / {secs(best)}",
            "",
            f"measured / simulated {ratio(value, simulated)}",
        )


def _dump_timeline(bench: Bench, naive_key: str, videos: list[BotVideo], path: Path) -> None:
    """Write every request and each task's life to ``path`` (kept with ``--keep``)."""
    api = bench.api
    t0 = min((r.time for r in api.requests), default=0.0)
    lines = ["who\ttime\tmethod\tstatus\tpath"]
    for r in api.requests:
        who = "genbot" if r.key == bench.key else "naive" if r.key == naive_key else "other"
        lines.append(f"{who}\t{r.time - t0:.2f}\t{r.method}\t{r.status}\t{r.path[:60]}")
    lines.append("\nwho\tindex\ttask\tcreated\tcompletes\tdetected")
    for who, key in (("genbot", bench.key), ("naive", naive_key)):
        for index, task in sorted(_tasks_by_index(api, key).items()):
            detected = _detected_at(bench.discord, videos[index]) if who == "genbot" else None
            seen = "" if detected is None else f"{detected - t0:.2f}"
            lines.append(
                f"{who}\t{index}\t{task.task_id[:8]}\t{task.created_at - t0:.2f}"
                f"\t{task.completes_at - t0:.2f}\t{seen}"
            )
    path.write_text("\n".join(lines) + "\n")
