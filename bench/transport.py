"""CPU per status poll of the API client per HTTP transport (docs/benchmarks.md, "Cheaper polls").

``python -m bench.transport [--requests 2000] [--concurrency 1,8,50] [--repeats 2] [--quick]``
(``--quick``: 50 polls, 1 and 8 in flight, one run each; a smoke run of about a second)

The emulator runs in a child process (no rate limit, 50 video tasks that run for ten hours), so
the CPU measured (``time.process_time`` of this process) is the client's alone: the bot's
``GenAPIClient.poll`` (limiter left out, retries, parsing and redaction included) over httpx's
own transport (httpcore) and over ``bot.genapi.transport.ApiTransport`` (httpx-aiohttp), with
``concurrency`` polls in flight, after a warm-up round of the same size.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from typing import Any

import httpx2 as httpx
from pydantic import SecretStr

from bench.report import Table
from bot.clock import SystemClock
from bot.genapi.client import GenAPIClient
from bot.genapi.ratelimit import KeyGate, Kind, Priority
from bot.genapi.transport import ApiTransport
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json

LIMITS = httpx.Limits(max_connections=200, max_keepalive_connections=50)
"""As ``bot.wiring`` builds the shared client."""


class _Open:
    """A limiter that never waits: only the client's own CPU is measured."""

    async def acquire(
        self, priority: Priority, *, max_wait: float | None = None, kind: Kind = Kind.ANSWER
    ) -> None:
        return None

    def block_for(self, seconds: float) -> None:
        return None

    def for_key(self, fingerprint: str) -> KeyGate:
        return self

    async def forget(self, fingerprint: str) -> None:
        return None


async def _serve() -> None:
    api = GenApiEmulator(rate_limit=10**9)
    key = api.create_key(balance_cents=10**9)
    await api.start()
    model = next(m for m in catalogue_json()["models"]["video"] if "image" not in m["mode"])
    tasks = [api.seed_video_task(key, str(model["id"]), 36_000) for _ in range(50)]
    polls = [f"/api/v1/video/{t.task_id}?provider={t.provider}" for t in tasks]
    print(json.dumps({"base": api.base_url, "key": key, "polls": polls}), flush=True)
    while True:
        await asyncio.sleep(5)
        api.requests.clear()  # the emulator's own log would grow for ever


async def _measure(
    transport: str, info: dict[str, Any], requests: int, concurrency: int
) -> tuple[float, float]:
    chosen = ApiTransport(limits=LIMITS) if transport == "httpx-aiohttp" else None
    async with httpx.AsyncClient(limits=LIMITS, transport=chosen) as http:
        client = GenAPIClient(info["base"], http=http, limiter=_Open(), clock=SystemClock())
        key, polls = SecretStr(info["key"]), info["polls"]

        async def worker(offset: int) -> None:
            for n in range(requests // concurrency):
                await client.poll(key, polls[(offset + n) % len(polls)])

        await asyncio.gather(*(worker(i) for i in range(concurrency)))  # warm-up
        cpu, wall = time.process_time(), time.monotonic()
        await asyncio.gather(*(worker(i) for i in range(concurrency)))
        cpu, wall = time.process_time() - cpu, time.monotonic() - wall
    done = requests // concurrency * concurrency
    return cpu / done * 1000, done / wall


async def _main(requests: int, concurrency: list[int], repeats: int) -> None:
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.transport", "--serve"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None
        info = json.loads(child.stdout.readline())
        table = Table(
            f"API client: CPU per status poll, {requests} polls per run",
            header=("transport", "in flight", "CPU per poll (runs)", "polls a second"),
        )
        for width in concurrency:
            for transport in ("httpx (httpcore)", "httpx-aiohttp"):
                runs = [await _measure(transport, info, requests, width) for _ in range(repeats)]
                table.add(
                    transport,
                    width,
                    ", ".join(f"{ms:.2f} ms" for ms, _ in runs),
                    f"{sum(rate for _, rate in runs) / len(runs):,.0f}",
                )
        print(table.render(), flush=True)
    finally:
        child.terminate()
        child.wait()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.transport", description=__doc__)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", default="1,8,50")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="50 polls, 1 and 8 in flight, once")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve:
        asyncio.run(_serve())
        return 0
    if args.quick:
        args.requests, args.concurrency, args.repeats = 50, "1,8", 1
    widths = [int(part) for part in args.concurrency.split(",") if part.strip()]
    asyncio.run(_main(args.requests, widths, args.repeats))
    return 0


if __name__ == "__main__":
    sys.exit(main())
