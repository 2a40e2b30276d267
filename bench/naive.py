"""The baseline: a client that submits a video and polls it every 4 s, as the service advises.

The advice is "every 3 to 5 seconds" (docs/genapi.md §3.2).

It ignores the rate limit (a 429 is counted and the next poll comes 4 s later, as usual); a
refused submission is retried after its ``Retry-After``, since it was not charged.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Any

import httpx2 as httpx

POLL_INTERVAL = 4.0


@dataclass
class NaiveJob:
    """What the baseline saw of one video."""

    index: int
    task_id: str | None = None
    observed_done_at: float | None = None
    """``time.monotonic()`` when a poll first answered completed/failed."""
    polls: int = 0
    rejected: int = 0


class NaiveClient:
    """Submits and polls over plain httpx with one API key.

    Args:
        base_url: the API's ``.../api/v1``.
        key: the API key (a different one from the bot's, on the same emulator).
    """

    def __init__(self, base_url: str, key: str) -> None:
        self._base = base_url
        self._origin = base_url.removesuffix("/api/v1")
        self._http = httpx.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            timeout=15,
            limits=httpx.Limits(max_connections=50),
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self, index: int, body: dict[str, Any], deadline: float) -> NaiveJob:
        """Submit one video, then poll it every 4 s until it is finished or ``deadline``."""
        job = NaiveJob(index)
        poll_url = await self._submit(job, body, deadline)
        while poll_url is not None and time.monotonic() < deadline:
            await asyncio.sleep(POLL_INTERVAL)
            response = await self._http.get(self._origin + poll_url)
            job.polls += 1
            if response.status_code == 429:
                job.rejected += 1
                continue
            response.raise_for_status()
            if response.json()["status"] in ("completed", "failed"):
                job.observed_done_at = time.monotonic()
                break
        return job

    async def _submit(self, job: NaiveJob, body: dict[str, Any], deadline: float) -> str | None:
        while time.monotonic() < deadline:
            response = await self._http.post(self._base + "/video/generate", json=body)
            if response.status_code == 429:
                job.rejected += 1
                await asyncio.sleep(float(response.headers.get("Retry-After", "1")))
                continue
            response.raise_for_status()
            data = response.json()
            job.task_id = data["task_id"]
            return str(data["poll_url"])
        return None
