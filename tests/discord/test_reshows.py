"""Re-shows of a finished result (Show result, ``/jobs show``): a download reused for a while,
a slot of their own that deliveries never wait behind, a bounded memory of kept files.

The end-to-end debounce and reuse are in ``tests/e2e/test_action_access_e2e.py``.
"""

from __future__ import annotations

import asyncio
import dataclasses
from types import SimpleNamespace
from typing import Any

import httpx2 as httpx

from bot.clock import ManualClock
from bot.discord.delivery import DiscordAnnouncer
from bot.discord.render.parts import MessageParts
from tests.support.jobs import SAMPLE_JOB

PNG = b"\x89PNG" + bytes(100_000)


def finished(job_id: int = 1) -> Any:
    url = f"https://cdn.example/{job_id}.png"
    return dataclasses.replace(SAMPLE_JOB, id=job_id, outputs=(url,))


class Cdn:
    """The service's file host: counts downloads."""

    def __init__(self) -> None:
        self.downloads = 0

    async def __call__(self, request: httpx.Request) -> httpx.Response:
        self.downloads += 1
        return httpx.Response(200, content=PNG)


def announcer(http: httpx.AsyncClient, clock: ManualClock, memory: int) -> DiscordAnnouncer:
    client: Any = SimpleNamespace()  # a finished job's re-show asks Discord nothing
    return DiscordAnnouncer(client, clock=clock, sandbox=False, http=http, memory=memory)


async def test_a_flood_of_re_shows_never_makes_a_delivery_wait() -> None:
    clock = ManualClock()
    cdn = Cdn()
    release = asyncio.Event()
    sent: list[MessageParts] = []

    async def slow_send(parts: MessageParts) -> None:  # Discord taking its time to answer
        sent.append(parts)
        await release.wait()

    async with httpx.AsyncClient(transport=httpx.MockTransport(cdn)) as http:
        shows = announcer(http, clock, memory=len(PNG) * 2)
        flood = [
            asyncio.create_task(shows.show_card(finished(job_id), 10 * len(PNG), slow_send))
            for job_id in range(1, 6)
        ]
        async with asyncio.timeout(2):
            while len(sent) < 3:  # re-shows under way, each holding its files
                await asyncio.sleep(0)
        # The deliveries' whole budget is still theirs, at once.
        assert shows.memory.held == 0
        async with asyncio.timeout(1):
            async with shows.memory.hold(shows.memory.total) as held:
                assert held.size == shows.memory.total
        release.set()
        await asyncio.gather(*flood)
    assert len(sent) == 5
    assert all(parts.files for parts in sent)
    assert shows.show_memory.held == 0


async def test_a_file_fetched_for_one_re_show_is_reused_for_a_while() -> None:
    from bot.discord.shown_files import SHOWN_FILES_SECONDS

    clock = ManualClock()
    cdn = Cdn()
    sent: list[MessageParts] = []

    async def send(parts: MessageParts) -> None:
        sent.append(parts)

    async with httpx.AsyncClient(transport=httpx.MockTransport(cdn)) as http:
        shows = announcer(http, clock, memory=10 * len(PNG))
        job = finished()
        await shows.show_card(job, 10 * len(PNG), send)
        await shows.show_card(job, 10 * len(PNG), send)
        assert cdn.downloads == 1
        assert sent[0].files == sent[1].files and sent[1].files
        clock.advance(SHOWN_FILES_SECONDS + 1)
        await shows.show_card(job, 10 * len(PNG), send)
        assert cdn.downloads == 2
        await shows.show_card(job, 20 * len(PNG), send)  # another upload limit: its own fetch
        assert cdn.downloads == 3


def test_kept_files_stay_within_their_bound_dropping_the_oldest() -> None:
    from bot.discord.shown_files import ShownFiles

    clock = ManualClock()
    kept = ShownFiles(clock, seconds=60, max_bytes=250)
    kept.keep(1, 10, (("a.png", bytes(100)),), None)
    kept.keep(2, 10, (("b.png", bytes(100)),), None)
    kept.keep(3, 10, (("c.png", bytes(100)),), None)
    assert kept.size == 200
    assert kept.get(1, 10) is None and kept.get(3, 10) is not None
    kept.keep(4, 10, (("d.png", bytes(300)),), None)  # larger than the bound: not kept
    assert kept.get(4, 10) is None and kept.size == 200
    clock.advance(61)
    assert kept.get(2, 10) is None and kept.size == 0


def test_kept_files_keep_the_safety_decision_their_card_is_rendered_by() -> None:
    from bot.discord.shown_files import ShownFiles
    from bot.domain import Visibility

    kept = ShownFiles(ManualClock())
    kept.keep(1, 10, (("SPOILER_a.png", bytes(10)),), "note", Visibility.SPOILER)
    kept.keep(3, 10, (("c.png", bytes(10)),), "note")  # not checked
    assert kept.get(1, 10) == ((("SPOILER_a.png", bytes(10)),), "note", Visibility.SPOILER)
    assert kept.get(3, 10) == ((("c.png", bytes(10)),), "note", None)
