"""``python -m bench thumbs``: results' thumbnails, made and shown.

- Making: the time of one thumbnail of a 1024 px picture (a photo-like JPEG) and of a 10 s
  720p clip's poster frame, on one core (the media thread), and the thumbnails' average size.
- Showing: a Gallery page of 60 results, with their thumbnails, over one server of 200,000
  finished jobs (``--quick``: 20,000) on SQLite, and on PostgreSQL when its binaries are
  there, served in-process as ``python -m bot`` serves it (the database seeded as
  ``bench dashboard`` seeds it); p50 and p95 of the page, and of its 60 thumbnails fetched
  together, and the questions to Discord meanwhile (the directory counts them).

Goals (issue 39, ``docs/dashboard.md``): the page at most 150 ms p95 at 200,000 jobs, no
question to Discord; a thumbnail within 40 ms per 1024 px image and 150 ms per 10 s clip;
30 KB on average at most.
"""

from __future__ import annotations

import asyncio
import io
import random
import re
import sqlite3
import time
from pathlib import Path
from typing import Any

import aiohttp
import asyncpg
import httpx2 as httpx
from PIL import Image
from pydantic import SecretStr

from bench.ledger import GUILD, NOW, Seeded, seed_each_engine
from bench.report import Table, ms, percentile
from bot.clock import ManualClock
from bot.config import Settings
from bot.dashboard.app import Dashboard
from bot.dashboard.editing import add_all_pages
from bot.dashboard.limits import ADDRESS_BUDGET, SESSION_BUDGET, THUMB_BUDGET, RequestBuckets
from bot.domain import GuildRef, MemberAccess, MemberProfile
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import RateLimiter
from bot.media.thumbnails import image_thumbnail, video_thumbnail
from bot.sandbox.clips import make_clip
from bot.wiring import assemble_services, open_database

ADMIN = 222_222_222_222_222_222
REQUESTS = 30
THUMBNAILS = 200
"""The newest jobs given a thumbnail (a gallery page shows 60)."""


class CountingDirectory:
    """Discord replaced: the member is the server's admin; every question is counted."""

    def __init__(self) -> None:
        self.asked = 0

    async def member_access(self, guild_id: int, user_id: int) -> MemberAccess | None:
        self.asked += 1
        return MemberAccess("Big Server", 1 << 5, frozenset())

    async def member_profile(self, guild_id: int, user_id: int) -> MemberProfile | None:
        self.asked += 1
        return None

    async def attachment_urls(self, channel_id: int, message_id: int) -> list[str]:
        self.asked += 1
        return []


def photo(seed: int, side: int = 1024) -> bytes:
    """A photo-like JPEG: gradients, noise and a tint (it compresses as a real one does)."""
    rng = random.Random(seed)
    image = Image.linear_gradient("L").resize((side, side)).convert("RGB")
    image = Image.blend(image, Image.effect_noise((side, side), 40).convert("RGB"), 0.3)
    tint = Image.new("RGB", (side, side), tuple(rng.randrange(256) for _ in range(3)))
    image = Image.blend(image, tint, 0.4).rotate(rng.randrange(360))
    out = io.BytesIO()
    image.save(out, "JPEG", quality=90)
    return out.getvalue()


def _making(table: Table, quick: bool) -> bytes:
    photos = [photo(seed) for seed in range(5 if quick else 20)]
    times, sizes = [], []
    made = b""
    for data in photos * 2:
        began = time.perf_counter()
        made = image_thumbnail(data).data
        times.append(time.perf_counter() - began)
        sizes.append(len(made))
    table.add(
        "thumbnail of a 1024 px image",
        f"p50 {ms(percentile(times, 50))}, p95 {ms(percentile(times, 95))}",
        "<= 40 ms",
    )
    clip = make_clip(3, width=1280, height=720, seconds=10.0)
    clip_times = []
    for _ in range(3 if quick else 10):
        began = time.perf_counter()
        video_thumbnail(clip)
        clip_times.append(time.perf_counter() - began)
    table.add(
        "thumbnail of a 10 s 720p clip",
        f"p50 {ms(percentile(clip_times, 50))}, p95 {ms(percentile(clip_times, 95))}",
        "<= 150 ms",
    )
    table.add("thumbnail size, average", f"{sum(sizes) / len(sizes) / 1000:.1f} KB", "<= 30 KB")
    return made


def _thumb_rows(jobs: list[int], data: bytes) -> list[tuple[Any, ...]]:
    return [(job, 0, data, f"{job:032x}", "image/webp", 320, 320, None, NOW) for job in jobs]


_COLUMNS = "job_id, file_index, data, digest, mime, width, height, duration, made_at"


def _thumbs_sqlite(path: Path, data: bytes) -> None:
    db = sqlite3.connect(path)
    newest = [r[0] for r in db.execute(f"SELECT id FROM jobs ORDER BY id DESC LIMIT {THUMBNAILS}")]
    db.executemany(
        f"INSERT INTO thumbnails ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?)",
        _thumb_rows(newest, data),
    )
    db.commit()
    db.close()


async def _thumbs_postgresql(url: str, data: bytes) -> None:
    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch(f"SELECT id FROM jobs ORDER BY id DESC LIMIT {THUMBNAILS}")
        await conn.copy_records_to_table(
            "thumbnails",
            records=_thumb_rows([r["id"] for r in rows], data),
            columns=[c.strip() for c in _COLUMNS.split(",")],
        )
        await conn.execute("VACUUM ANALYZE")
    finally:
        await conn.close()


async def _measure(engine: str, settings: Settings, table: Table) -> None:
    clock = ManualClock(NOW + 3600)
    db = await open_database(settings, clock)
    directory = CountingDirectory()
    async with httpx.AsyncClient() as http_client:
        client = GenAPIClient(
            "http://127.0.0.1:9/api/v1", http=http_client, limiter=RateLimiter(clock), clock=clock
        )
        services = assemble_services(settings, clock, db, client, SecretStr("bench-key"))
        dashboard = Dashboard(
            settings, services, directory, application_id=1, clock=clock, pages=add_all_pages
        )
        try:
            await dashboard.start()
            token = await services.dashboard.open_session(
                ADMIN, "admin", [GuildRef(GUILD, "Big Server", 1 << 5)]
            )
            base = f"http://127.0.0.1:{settings.dashboard_listen_port}"
            cookies = {dashboard.session_cookie: token}
            async with aiohttp.ClientSession(cookies=cookies) as http:
                pages, grids = [], []
                asked = 0
                for i in range(REQUESTS + 2):
                    if i == 2:  # the first two warm the caches (rights, names)
                        asked = directory.asked
                    began = time.perf_counter()
                    async with http.get(f"{base}/servers/{GUILD}/gallery") as response:
                        body = await response.text()
                        assert response.status == 200, response.status
                    page = time.perf_counter() - began
                    sources = re.findall(r'src="(/thumbs/[^"]+)"', body)
                    assert len(sources) == 60, len(sources)

                    async def fetch(source: str) -> None:
                        async with http.get(base + source.replace("&amp;", "&")) as answer:
                            await answer.read()
                            assert answer.status == 200, answer.status

                    await asyncio.gather(*(fetch(s) for s in sources))
                    if i >= 2:
                        pages.append(page)
                        grids.append(time.perf_counter() - began)
                    # The bench is one address and one member: their budgets start afresh.
                    dashboard.by_address = RequestBuckets(ADDRESS_BUDGET, clock.monotonic)
                    dashboard.by_member = RequestBuckets(SESSION_BUDGET, clock.monotonic)
                    dashboard.thumbs = RequestBuckets(THUMB_BUDGET, clock.monotonic)
                table.add(
                    f"{engine}: Gallery page of 60 results",
                    f"p50 {ms(percentile(pages, 50))}, p95 {ms(percentile(pages, 95))}",
                    "p95 <= 150 ms",
                )
                table.add(
                    f"{engine}: the page and its 60 thumbnails",
                    f"p50 {ms(percentile(grids, 50))}, p95 {ms(percentile(grids, 95))}",
                    "",
                )
                table.add(
                    f"{engine}: questions to Discord",
                    f"{directory.asked - asked} over {REQUESTS} pages and their thumbnails",
                    "0",
                )
        finally:
            await dashboard.stop()
            await db.close()


async def run(workdir: Path, *, quick: bool = False, **_: Any) -> Table:
    """Time the thumbnails' making, then the Gallery over each engine."""
    jobs = 20_000 if quick else 200_000
    table = Table(f"thumbs: making thumbnails; a Gallery page over {jobs:,} finished jobs")
    made = await asyncio.to_thread(_making, table, quick)

    async def measure(seeded: Seeded) -> None:
        if seeded.path is not None:
            await asyncio.to_thread(_thumbs_sqlite, seeded.path, made)
        else:
            assert seeded.url is not None
            await _thumbs_postgresql(seeded.url, made)
        await _measure(seeded.engine, seeded.settings, table)

    # Each engine's dashboard on a port of its own.
    ports = {"SQLite": {"dashboard_port": 18_091}, "PostgreSQL": {"dashboard_port": 18_092}}
    await seed_each_engine(
        workdir, "thumbs", table, measure, charges=jobs, jobs=jobs, settings=ports
    )
    return table
