"""``python -m bench dashboard-abuse``: the dashboard flooded while members use the bot.

The unmodified ``python -m bot`` with its dashboard on, against both emulators. One member
signs in; a video of theirs is posted in a channel the bot then loses access to (its card is
unreadable: Discord answers 403). For 60 s (``--quick``: 5 s), from one address:

- 200 requests a second to ``/auth/login`` (signed out);
- 100 a second to that member's ``/media/<job>/0`` (signed in);
- 50 a second to ``/servers/<random id>`` (signed in);

while five members run ``/text`` every second. The flood is sent by a child process (the
bench's own process serves both emulators and must not be the bottleneck), and the key's
rate window is 5 s (30 requests each: docs/genapi.md §8's 30 a minute, scaled) so that the
key's limit does not queue the 300 ``/text`` of a minute: what is measured is the bot beside
the flood. Printed: the ``/text`` answers' latency (each
one settles a charge before it answers: p50, p99), the Discord REST calls the dashboard
caused in the window (every REST call but the interactions' answers), the bot's resident
memory at the start and end, the dashboard tables' rows at the start and end, and how the
flood was answered (status counts).

Goals (issue 35, ``docs/dashboard.md``): settlements' p99 within 1 s, at most 5 REST calls
caused by the dashboard in the minute, memory flat, the dashboard tables not growing.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import socket
import sqlite3
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import aiohttp
import psutil

from bench.report import Table, ms, percentile
from bench.world import answer, new_discord, running_bot
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import catalogue_json
from tests.support.discord_emulator import DiscordEmulator
from tests.support.e2e.harness import MEMBER_PERMISSIONS

SECRET = "bench-client-secret"
TABLES = ("dashboard_logins", "dashboard_sessions", "dashboard_roles")
STREAMS = (("login", 200.0), ("media", 100.0), ("servers", 50.0))
"""The flood: what is asked for, requests a second."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _rows(database: Path) -> dict[str, int]:
    with sqlite3.connect(database) as db:
        return {t: int(db.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in TABLES}


def _rss_mib(pid: int) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20


async def _sign_in(base: str, discord_base: str, http: aiohttp.ClientSession) -> None:
    begun = await http.get(f"{base}/auth/login", allow_redirects=False)
    form = dict(parse_qsl(urlsplit(begun.headers["Location"]).query), action="authorize")
    consent = await http.post(f"{discord_base}/oauth2/authorize", data=form, allow_redirects=False)
    signed = await http.get(consent.headers["Location"], allow_redirects=False)
    assert signed.headers.get("Location") == "/servers", signed.status


async def _flood(
    url: str, rate: float, seconds: float, http: aiohttp.ClientSession, statuses: Counter[str]
) -> int:
    """Ask for ``url`` (``{random}``: a random id) ``rate`` times a second; return how many."""
    pending: set[asyncio.Task[None]] = set()

    async def one() -> None:
        target = url.replace("{random}", str(random.randrange(10**17, 10**18)))
        try:
            async with http.get(target, allow_redirects=False) as response:
                await response.read()
                statuses[str(response.status)] += 1
        except (aiohttp.ClientError, TimeoutError) as exc:
            statuses[type(exc).__name__] += 1

    start = time.monotonic()
    sent = 0
    while (now := time.monotonic()) < start + seconds:
        due = int((now - start) * rate) + 1
        while sent < due:
            task = asyncio.create_task(one())
            pending.add(task)
            task.add_done_callback(pending.discard)
            sent += 1
        await asyncio.sleep(0.005)
    if pending:
        await asyncio.wait(pending, timeout=30)
    return sent


async def _floods(base: str, cookie: str, paths: dict[str, str], seconds: float) -> str:
    """The three floods at once (in the child process); return JSON of what was sent."""
    statuses: dict[str, Counter[str]] = {n: Counter() for n, _ in STREAMS}
    async with (
        aiohttp.ClientSession(
            cookies={"genbot_session": cookie},
            cookie_jar=aiohttp.CookieJar(unsafe=True),
            connector=aiohttp.TCPConnector(limit=200),
        ) as signed,
        aiohttp.ClientSession(cookie_jar=aiohttp.DummyCookieJar()) as anonymous,
    ):
        started = time.monotonic()
        counts = await asyncio.gather(
            *(
                _flood(
                    f"{base}{paths[n]}",
                    rate,
                    seconds,
                    anonymous if n == "login" else signed,
                    statuses[n],
                )
                for n, rate in STREAMS
            )
        )
        window = time.monotonic() - started
    sent = {n: [c / window, dict(statuses[n])] for (n, _), c in zip(STREAMS, counts, strict=True)}
    return json.dumps(sent)


async def _flood_elsewhere(
    base: str, cookie: str, paths: dict[str, str], seconds: float
) -> dict[str, tuple[float, dict[str, int]]]:
    asked = json.dumps({"base": base, "cookie": cookie, "paths": paths, "seconds": seconds})
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.dashboard_abuse", asked, stdout=asyncio.subprocess.PIPE
    )
    out, _ = await child.communicate()
    return {n: (float(v[0]), dict(v[1])) for n, v in json.loads(out.decode()).items()}


async def _video_of(discord: DiscordEmulator, guild_id: int, channel_id: int, user_id: int) -> None:
    models = catalogue_json()["models"]
    video = next(m for m in models["video"] if "image" not in m["mode"])
    prompt = "a kite nobody may see"
    options = {"prompt": prompt, "model": video["id"], "duration": video["durations"][0]}
    handle = await discord.invoke(
        "video",
        options,
        guild_id=guild_id,
        channel_id=channel_id,
        user_id=user_id,
        permissions=MEMBER_PERMISSIONS,
    )
    await answer(discord, handle, timeout=60)
    card = await discord.wait_for_message(lambda m: prompt in m.text, include_existing=True)
    await discord.wait_for_edit(card.id, lambda m: "/files/" in m.text, 120)


async def run(workdir: Path, *, quick: bool) -> Table:
    seconds = 5.0 if quick else 60.0
    port = _free_port()
    base = f"http://127.0.0.1:{port}"
    api = GenApiEmulator(rate_window=5.0)
    await api.start()
    latencies: list[float] = []
    refused = 0
    try:
        api.set_task_duration(lambda model, body: 3.0)
        key = api.create_key(balance_cents=100_000_000)
        env = {
            "DASHBOARD_PUBLIC_URL": base,
            "DISCORD_CLIENT_SECRET": SECRET,
            "GENAPI_RATE_WINDOW_SECONDS": "5",
        }
        async with new_discord() as discord:
            discord.oauth.client_secret = SECRET
            owner = discord.add_user("owner")
            member = discord.add_user("member")
            texters = [discord.add_user(f"texter{n}") for n in range(5)]
            guild = discord.add_guild("Flooded", owner_id=owner.id)
            channel = discord.add_channel(guild.id, "generate")
            hidden = discord.add_channel(guild.id, "hidden")
            for user in (member, *texters):
                discord.world.ensure_member(guild.id, user.id)
            async with running_bot(workdir, discord, api, key, env) as bench:
                database = workdir / "bot.db"
                text_model = catalogue_json()["models"]["text"][0]["id"]
                await _video_of(discord, guild.id, hidden.id, member.id)
                with sqlite3.connect(database) as db:
                    found = db.execute(
                        "SELECT id FROM jobs WHERE channel_id = ?", (hidden.id,)
                    ).fetchone()
                job_id = int(found[0])
                discord.revoke_channel_access(hidden.id)  # its card: 403 from now on
                discord.oauth.browser_user = member.id
                jar = aiohttp.CookieJar(unsafe=True)
                async with aiohttp.ClientSession(cookie_jar=jar) as http:
                    await _sign_in(base, discord.base_url, http)
                cookie = next(c.value for c in jar if c.key == "genbot_session")
                rows_before = _rows(database)
                rss_before = _rss_mib(bench.pid)
                calls_before = len(discord.requests)
                paths = {
                    "login": "/auth/login",
                    "media": f"/media/{job_id}/0",
                    "servers": "/servers/{random}",
                }
                flood = asyncio.create_task(_flood_elsewhere(base, cookie, paths, seconds))

                async def text(user_id: int) -> None:
                    nonlocal refused
                    began = time.monotonic()
                    handle = await discord.invoke(
                        "text",
                        {"prompt": "a haiku about floods", "model": text_model},
                        guild_id=guild.id,
                        channel_id=channel.id,
                        user_id=user_id,
                        permissions=MEMBER_PERMISSIONS,
                    )
                    shown = await answer(discord, handle, timeout=30)
                    latencies.append(time.monotonic() - began)
                    refused += bool(shown.ephemeral)

                texts: list[asyncio.Task[None]] = []
                start = time.monotonic()
                for second in range(int(seconds)):
                    await asyncio.sleep(max(0.0, start + second - time.monotonic()))
                    texts += [asyncio.create_task(text(u.id)) for u in texters]
                sent = await flood
                await asyncio.gather(*texts, return_exceptions=True)
                caused = [
                    f"{r.method} {r.path} {r.status}"
                    for r in discord.requests[calls_before:]
                    if not r.path.startswith(("/interactions/", "/webhooks/"))
                ]
                rss_after = _rss_mib(bench.pid)
                rows_after = _rows(database)
    finally:
        with contextlib.suppress(Exception):
            await api.stop()
    table = Table(
        f"dashboard-abuse: {seconds:g} s of 200/s /auth/login, 100/s /media (unreadable card), "
        "50/s /servers/<random>, five members' /text every second"
    )
    for name, rate in STREAMS:
        per_second, statuses = sent[name]
        counts = ", ".join(f"{k}: {v}" for k, v in sorted(statuses.items()))
        table.add(f"{name} ({rate:g}/s asked)", f"{per_second:.0f}/s sent; {counts}")
    table.add("/text answered", f"{len(latencies)} of {5 * int(seconds)} ({refused} refused)")
    table.add("/text answer (settled) p50", ms(percentile(latencies, 50)))
    table.add("/text answer (settled) p99", ms(percentile(latencies, 99)), "<= 1 s")
    table.add("Discord REST calls by the dashboard", len(caused), "<= 5 in the minute")
    for call in caused[:5]:
        table.add("  call", call)
    table.add("bot RSS start -> end", f"{rss_before:.0f} MiB -> {rss_after:.0f} MiB", "flat")
    table.add(
        "dashboard rows start -> end",
        ", ".join(f"{t} {rows_before[t]} -> {rows_after[t]}" for t in TABLES),
        "not growing",
    )
    return table


if __name__ == "__main__":  # the flood's child process
    asked = json.loads(sys.argv[1])
    print(asyncio.run(_floods(asked["base"], asked["cookie"], asked["paths"], asked["seconds"])))
