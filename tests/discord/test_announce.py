"""The Discord side of delivery, without Discord: file names, downloads, failure classes."""

from __future__ import annotations

import asyncio
import dataclasses
import tracemalloc
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import aiohttp
import discord
import httpx2 as httpx
import pytest

from bot.clock import ManualClock
from bot.discord.bot import build_announcer
from bot.discord.delivery import (
    NONCE_ROUTES,
    DiscordAnnouncer,
    TooLarge,
    classify,
    context,
    delivery_nonce,
    download,
    file_name,
    reach,
)
from bot.discord.delivery.context import RepliedJobs
from bot.discord.delivery.reach import Reach
from bot.domain import DeliveryRoute, JobStatus, SafetyRecord, Visibility
from bot.genapi.outputs import output_client
from bot.jobs.byte_budget import ByteBudget
from bot.media.safety import SafetyScorer, load_model
from bot.sandbox import GenApiEmulator
from bot.services.generation import Requester, VideoOptions
from bot.services.private_cards import CardPlace, PrivateCard, PrivateCards
from tests.support.discord_emulator import DiscordEmulator
from tests.support.discord_emulator.models import Message
from tests.support.e2e.harness import action_buttons
from tests.support.jobs import SAMPLE_JOB
from tests.support.poller import make_poller, run_until, submit
from tests.support.safety_model import write_classifier
from tests.support.stack import Stack


class FakeResponse:
    """Just what discord.HTTPException reads from an aiohttp response."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.reason = "reason"


def http_error(status: int, code: int) -> discord.HTTPException:
    return discord.HTTPException(FakeResponse(status), {"code": code, "message": "m"})  # type: ignore[arg-type]


def test_files_are_named_after_the_task_and_the_urls_extension() -> None:
    assert file_name("task_1", "https://cdn.example/files/task_1.mp4?sig=abc", 0, "video") == (
        "task_1.mp4"
    )
    assert file_name("t9", "https://cdn.example/o/t9-1.PNG", 0, "image") == "t9.png"
    assert file_name("t9", "https://cdn.example/o/t9-2.png", 1, "image") == "t9-2.png"
    assert file_name("t/../x", "https://cdn.example/download", 0, "video") == "t_.._x.mp4"


@pytest.mark.parametrize(
    ("status", "code", "permanent"),
    [
        (500, 0, False),
        (503, 0, False),
        (429, 0, False),
        (404, 10008, True),  # unknown message
        (404, 10003, True),  # unknown channel
        (403, 50001, True),  # missing access
        (403, 50013, True),  # missing permissions
        (400, 50083, True),  # archived thread
        (403, 50007, True),  # DMs closed
    ],
)
def test_discord_failures_are_transient_or_permanent(
    status: int, code: int, permanent: bool
) -> None:
    outcome = classify(http_error(status, code))
    assert outcome is not None
    assert not outcome.shown
    assert outcome.permanent is permanent


def test_network_failures_are_transient_and_bugs_are_not_classified() -> None:
    for exc in (aiohttp.ClientConnectionError(), TimeoutError(), ConnectionResetError()):
        outcome = classify(exc)
        assert outcome is not None and not outcome.permanent
    assert classify(ValueError("a bug")) is None


async def test_a_download_never_holds_more_than_the_limit() -> None:
    clock = ManualClock()
    async with GenApiEmulator(clock=clock.monotonic) as api, httpx.AsyncClient() as http:
        key = api.create_key()
        response = await http.post(
            f"{api.base_url}/image/generate",
            headers={"Authorization": f"Bearer {key}"},
            json={"model": "black-forest-labs/flux-schnell", "prompt": "a kite"},
        )
        url = response.json()["outputs"][0]
        assert len(await download(http, url, 10_000)) < 10_000
        api.set_file_size(50_000)
        with pytest.raises(TooLarge):
            await download(http, url, 10_000)


# -- against the Discord emulator, as a worker (REST only, no gateway cache) -----------------

TOKEN = "worker.bot.token"


@pytest.fixture
async def rest_bot(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[RestBot]:
    """The Discord emulator and a bot logged in for REST only, as ``python -m bot worker``."""
    async with DiscordEmulator(bot_token=TOKEN) as emulator:
        monkeypatch.setattr(discord.http.Route, "BASE", emulator.api_base_url)
        client = discord.Client(
            intents=discord.Intents(guilds=True), allowed_mentions=discord.AllowedMentions.none()
        )
        await client.login(TOKEN)
        member = emulator.add_user("member")
        guild = emulator.add_guild("Somewhere")
        channel = emulator.add_channel(guild.id, "generate")
        emulator.world.ensure_member(guild.id, member.id)
        try:
            yield RestBot(emulator, client, Requester(guild.id, channel.id, member.id))
        finally:
            await client.close()


@dataclass
class RestBot:
    emulator: DiscordEmulator
    client: discord.Client
    who: Requester

    def failures_in(self, guild_id: int) -> list[str]:
        """The requests about the guild or its channels that Discord refused."""
        guild = self.emulator.guilds[guild_id]
        ids = (str(guild_id), *(str(c) for c in guild.channels))
        return [
            f"{r.method} {r.path} {r.status}"
            for r in self.emulator.requests
            if r.status >= 400 and any(i in r.path for i in ids)
        ]

    def dms(self) -> list[Message]:
        recipients = self.emulator.world.dm_recipients
        return [m for m in self.emulator.messages.values() if m.channel_id in recipients]


def actions(message: Message) -> list[str]:
    """The actions of the result buttons under ``message`` (``gb:<action>:<ref>``), in order."""
    return [str(b["custom_id"]).split(":")[1] for b in action_buttons(message)]


async def test_a_worker_asks_a_server_that_removed_the_bot_once_and_sends_by_dm(
    stack: Stack, rest_bot: RestBot
) -> None:
    """Today: 5 refused requests per job, 3 of them the same ``GET /guilds/{id}``."""
    jobs = await submit(stack, rest_bot.who, count=2, placeholder=False)
    channel = rest_bot.client.get_partial_messageable(rest_bot.who.channel_id)
    for job in jobs:
        placeholder = await channel.send("queued")
        await stack.generation.attach_message(job, placeholder.id)
    rest_bot.emulator.remove_bot(rest_bot.who.guild_id)  # nobody tells a worker
    async with output_client(stack.api.base_url) as http:
        announcer = DiscordAnnouncer(rest_bot.client, clock=stack.clock, sandbox=False, http=http)
        await run_until(make_poller(stack, announcer), lambda: len(rest_bot.dms()) == 2)
    assert all(dm.attachments for dm in rest_bot.dms())
    assert {dm.pinged_user_ids().pop() for dm in rest_bot.dms()} == {rest_bot.who.user_id}
    # Again and the like act in the server, which the bot left: only Delete is offered.
    for dm in rest_bot.dms():
        assert actions(dm) == ["delete"]
    assert len(rest_bot.failures_in(rest_bot.who.guild_id)) <= 1, rest_bot.failures_in(
        rest_bot.who.guild_id
    )
    for job in jobs:
        shown = await stack.db.jobs.get(job.id)
        assert shown is not None and shown.delivery_route is DeliveryRoute.DM


async def test_a_result_sent_by_dm_from_a_channel_the_bot_cannot_see_keeps_only_delete(
    stack: Stack, rest_bot: RestBot
) -> None:
    """Again from that DM would post its new card in the channel the bot lost (50001)."""
    (job,) = await submit(stack, rest_bot.who, count=1, placeholder=False)
    channel = rest_bot.client.get_partial_messageable(rest_bot.who.channel_id)
    placeholder = await channel.send("queued")
    await stack.generation.attach_message(job, placeholder.id)
    rest_bot.emulator.revoke_channel_access(rest_bot.who.channel_id)
    async with output_client(stack.api.base_url) as http:
        announcer = DiscordAnnouncer(rest_bot.client, clock=stack.clock, sandbox=False, http=http)
        await run_until(make_poller(stack, announcer), lambda: len(rest_bot.dms()) == 1)
    (sent,) = rest_bot.dms()
    assert sent.attachments
    assert actions(sent) == ["delete"]


async def test_a_private_job_whose_dm_card_was_never_recorded_goes_by_dm_not_the_channel(
    stack: Stack, rest_bot: RestBot
) -> None:
    """Private results: a crash between the DM card and its record (the job falls
    due after its grace without a card) must not show the result where everyone sees it."""
    (job,) = await submit(stack, rest_bot.who, count=1, placeholder=False)
    dm = rest_bot.emulator.dm_channel(rest_bot.who.user_id)
    cards = PrivateCards(stack.db)
    assert await cards.keep(job.id, PrivateCard(CardPlace.DM, dm.id))
    async with output_client(stack.api.base_url) as http:
        announcer = DiscordAnnouncer(
            rest_bot.client, clock=stack.clock, sandbox=False, http=http, cards=cards
        )
        await run_until(make_poller(stack, announcer), lambda: len(rest_bot.dms()) == 1)
    (sent,) = rest_bot.dms()
    assert sent.attachments
    # The same buttons as on the DM card: they act in the server it came from.
    assert actions(sent) == [
        "again",
        "continue",
        "remix",
        "share",
        "delete",
        "enhance",
    ]  # its owner may share it
    shown = await stack.db.jobs.get(job.id)
    assert shown is not None and shown.delivery_route is DeliveryRoute.DM
    channel = rest_bot.emulator.channel_messages(rest_bot.who.channel_id)
    assert channel == []


async def test_a_private_result_reaches_a_member_who_closed_dms_since_in_the_channel(
    stack: Stack, rest_bot: RestBot
) -> None:
    """The DM card's job skips the channel route; when the DM is then refused (50007: the
    member closed DMs after the card went there), the result is posted in the channel anyway,
    saying why, never lost to ``/jobs``."""
    (job,) = await submit(stack, rest_bot.who, count=1, placeholder=False)
    dm = rest_bot.emulator.dm_channel(rest_bot.who.user_id)
    rest_bot.emulator.world.closed_dms.add(rest_bot.who.user_id)
    cards = PrivateCards(stack.db)
    assert await cards.keep(job.id, PrivateCard(CardPlace.DM, dm.id))

    def posted() -> list[Message]:
        return rest_bot.emulator.channel_messages(rest_bot.who.channel_id)

    async with output_client(stack.api.base_url) as http:
        announcer = DiscordAnnouncer(
            rest_bot.client, clock=stack.clock, sandbox=False, http=http, cards=cards
        )
        await run_until(make_poller(stack, announcer), lambda: len(posted()) == 1)
    (sent,) = posted()
    assert "could not be shown to you privately" in sent.text
    assert sent.pinged_user_ids() == {rest_bot.who.user_id}
    assert rest_bot.dms() == []


async def test_deliveries_hold_no_more_bytes_at_once_than_the_bound(
    stack: Stack, rest_bot: RestBot
) -> None:
    """Six deliveries to a server with a 10 MiB upload limit, within 25 MiB: two at a time."""
    await stack.db.guilds.update_limits(rest_bot.who.guild_id, max_pending_videos_per_user=6)
    jobs = await submit(stack, rest_bot.who, count=6, placeholder=False)
    for job in jobs:
        url = f"https://cdn.example/{job.task_id}.png"
        await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, (url,), None, stack.clock.time())
    downloading = 0
    most = 0

    async def cdn(request: httpx.Request) -> httpx.Response:
        nonlocal downloading, most
        downloading += 1
        most = max(most, downloading)
        for _ in range(20):  # slow enough for the others to start, if they may
            await asyncio.sleep(0)
        downloading -= 1
        return httpx.Response(200, content=b"\x89PNG" + bytes(100_000))

    async with httpx.AsyncClient(transport=httpx.MockTransport(cdn)) as http:
        announcer = DiscordAnnouncer(
            rest_bot.client, clock=stack.clock, sandbox=False, http=http, memory=25 * 1024 * 1024
        )
        finished = [await stack.db.jobs.get(job.id) for job in jobs]
        outcomes = await asyncio.gather(
            *(announcer.deliver(job, DeliveryRoute.CHANNEL) for job in finished if job)
        )
    assert all(outcome.shown for outcome in outcomes)
    posted = rest_bot.emulator.channel_messages(rest_bot.who.channel_id)
    assert sum(1 for m in posted if m.attachments) == 6
    assert most == 2
    assert announcer.memory.held == 0


async def test_a_reservation_waits_its_turn_and_renews_its_lease_meanwhile() -> None:
    clock = ManualClock()
    budget = ByteBudget(100, clock)
    renewals = 0

    async def renew() -> None:
        nonlocal renewals
        renewals += 1

    async with budget.hold(500) as whole:  # more than the total: cut to it, never stuck
        assert whole.size == 100
        second = budget.hold(30, renew)  # referenced: a collected one would release
        waiting = asyncio.create_task(second.__aenter__())
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and renewals >= 1
        whole.shrink(60)  # what the downloads really took: the rest goes back at once
        held = await asyncio.wait_for(waiting, 1)
        assert held.size == 30 and budget.held == 90
    await second.__aexit__(None, None, None)
    assert budget.held == 0


def test_nonces_fit_discords_25_characters() -> None:
    job = dataclasses.replace(SAMPLE_JOB, id=2**63 - 1)
    nonces = {delivery_nonce(job, route) for route in NONCE_ROUTES}
    assert len(nonces) == 3
    assert all(len(nonce) <= 25 for nonce in nonces)


async def test_a_download_holds_the_file_once() -> None:
    """Not twice (a bytearray copied into bytes): 20 deliveries x 100 MiB doubled was 4 GB."""
    size = 8 * 1024 * 1024
    chunk = 64 * 1024

    async def stream() -> AsyncIterator[bytes]:
        for _ in range(size // chunk):
            yield b"x" * chunk

    def cdn(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=stream())

    async with httpx.AsyncClient(transport=httpx.MockTransport(cdn)) as http:
        tracemalloc.start()
        try:
            data = await download(http, "https://cdn.example/big.mp4", size)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert len(data) == size
    assert peak < 1.5 * size


async def test_two_workers_finishing_the_last_takes_together_make_one_final_delivery(
    stack: Stack, rest_bot: RestBot
) -> None:
    catalogue = await stack.generation.catalogue(rest_bot.who.guild_id)
    model = next(m for m in catalogue.video if not m.needs_image)
    made = await stack.generation.video_takes(rest_bot.who, VideoOptions("two gulls", model.id), 2)
    await stack.services.sequences.record_takes([job.id for job in made.jobs])
    channel = rest_bot.client.get_partial_messageable(rest_bot.who.channel_id)
    card = await channel.send("two takes")
    for job in made.jobs:
        await stack.generation.attach_message(job, card.id)
        await stack.db.jobs.finish(job.id, JobStatus.FAILED, [], "no luck", stack.clock.time())
    finished = [await stack.db.jobs.get(job.id) for job in made.jobs]
    # Two worker processes: each its own announcer (and its own in-process lock).
    workers = [build_announcer(rest_bot.client, stack.services)[0] for _ in range(2)]
    attempts = await asyncio.gather(
        *(
            worker.deliver(job, DeliveryRoute.PLACEHOLDER)
            for worker, job in zip(workers, finished, strict=True)
            if job is not None
        )
    )
    assert all(attempt.shown for attempt in attempts)
    pings = [
        m
        for m in rest_bot.emulator.messages.values()
        if rest_bot.who.user_id in m.pinged_user_ids()
    ]
    assert len(pings) == 1  # one "your takes are ready", not one per worker


def test_channels_out_of_reach_are_remembered_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A channel that answered 403 50001 (or 404 10003) was remembered until a delivery
    # looked it up again: the marks of channels never tried again stayed for good.
    monkeypatch.setattr(reach, "GONE_CHANNELS_REMEMBERED", 50, raising=False)
    clock = ManualClock()
    seen = Reach(None, clock)  # type: ignore[arg-type]  # no request is made here
    jobs = [dataclasses.replace(SAMPLE_JOB, channel_id=c) for c in range(1000, 1200)]
    for job in jobs:
        seen.note_failure(job, http_error(403, 50001))
    assert seen.held == (0, 50)
    assert seen.unreachable(jobs[-1]) is not None  # the newest still skipped
    assert seen.unreachable(jobs[0]) is None  # the oldest forgotten: tried once more
    clock.advance(reach.UNREACHABLE_TTL + 1)
    seen.note_failure(dataclasses.replace(SAMPLE_JOB, channel_id=5), http_error(404, 10003))
    assert seen.held == (0, 1)  # expired marks go though nobody looked them up


def test_replies_sent_with_a_delivery_are_remembered_within_a_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A delivery whose reply carried the files keeps the job until notify; a notify that
    # never ran (a crash between the two, a lost lease) left the id for good.
    monkeypatch.setattr(context, "REPLIED_REMEMBERED", 50, raising=False)
    replied = RepliedJobs()
    for job_id in range(200):
        replied.add(job_id)
    assert len(replied) == 50
    assert replied.take(199)  # the newest: notify pings nobody a second time
    assert not replied.take(0)  # the oldest forgotten
    assert len(replied) == 49


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
async def test_a_held_take_on_a_shared_card_shows_neither_its_file_nor_its_link(
    stack: Stack, rest_bot: RestBot, tmp_path: Path
) -> None:
    scorer = SafetyScorer(load_model(str(write_classifier(tmp_path / "model")), ["nsfw"]))
    services = dataclasses.replace(stack.services, safety=scorer)  # SAFETY_MODEL set
    catalogue = await stack.generation.catalogue(rest_bot.who.guild_id)
    model = next(m for m in catalogue.video if not m.needs_image)
    options = VideoOptions("two gulls color:blue", model.id)  # scored low: shown
    made = await stack.generation.video_takes(rest_bot.who, options, 2)
    await services.sequences.record_takes([job.id for job in made.jobs])
    channel = rest_bot.client.get_partial_messageable(rest_bot.who.channel_id)
    card = await channel.send("two takes")
    first, second = made.jobs
    for job in made.jobs:
        await stack.generation.attach_message(job, card.id)
    shown_url, held_url = (f"{stack.api.origin}/files/{job.task_id}.mp4" for job in made.jobs)
    # The second take was held for the moderators when it was screened.
    held = SafetyRecord(
        f"j{second.id}",
        rest_bot.who.guild_id,
        rest_bot.who.channel_id,
        rest_bot.who.user_id,
        "video",
        "two gulls",
        0.7,
        Visibility.HELD,
        "score",
        0.0,
    )
    assert await services.db.safety.add(held)
    try:
        async with output_client(stack.api.base_url) as http:
            announcer = build_announcer(
                rest_bot.client, dataclasses.replace(services, downloads=http)
            )[0]
            for job, url in ((second, held_url), (first, shown_url)):
                stack.api.complete_task_now(job.task_id)  # its file is served
                now = stack.clock.time()
                await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, [url], None, now)
                finished = await stack.db.jobs.get(job.id)
                assert finished is not None
                attempt = await announcer.deliver(finished, DeliveryRoute.PLACEHOLDER)
                assert attempt.shown, attempt
                # Neither while the other take runs, nor once both are done.
                assert held_url not in rest_bot.emulator.messages[card.id].text
            shared = rest_bot.emulator.messages[card.id]
            assert shown_url in shared.text
            assert len(shared.attachments) == 1  # the shown take's file only
            assert "waiting for the server's moderators" in shared.text
            for message in rest_bot.emulator.messages.values():
                assert held_url not in message.text
            # Approved: delivered again to the shared card, as an ordinary completion.
            await services.moderation.approve(
                f"j{second.id}", guild_id=rest_bot.who.guild_id, user_id=1, via="discord"
            )
            again = await stack.db.jobs.get(second.id)
            assert again is not None
            assert (await announcer.deliver(again, DeliveryRoute.PLACEHOLDER)).shown
    finally:
        scorer.close()
    shared = rest_bot.emulator.messages[card.id]
    assert held_url in shared.text and len(shared.attachments) == 2
    assert "waiting for the server's moderators" not in shared.text
    pings = [m for m in rest_bot.emulator.messages.values() if m.pinged_user_ids()]
    assert len(pings) == 2  # the takes' ping, and the approved take's


@pytest.mark.parametrize("engine_settings", ["sqlite"], indirect=True)
@pytest.mark.parametrize("state", [Visibility.HELD, Visibility.WITHHELD])
async def test_the_late_dm_of_a_held_or_withheld_personal_result_carries_no_link(
    stack: Stack, rest_bot: RestBot, tmp_path: Path, state: Visibility
) -> None:
    """A personal result whose card's token died is announced in the member's DM: its link
    only when members may see the result."""
    scorer = SafetyScorer(load_model(str(write_classifier(tmp_path / "model")), ["nsfw"]))
    services = dataclasses.replace(stack.services, safety=scorer)  # SAFETY_MODEL set
    user_id = rest_bot.who.user_id
    dm = rest_bot.emulator.dm_channel(user_id)
    url = "https://cdn.example/personal.mp4"
    job = dataclasses.replace(
        SAMPLE_JOB, id=41, guild_id=-user_id, channel_id=dm.id, user_id=user_id, outputs=(url,)
    )
    record = SafetyRecord(
        "j41", -user_id, dm.id, user_id, "video", "a fox", 0.9, state, "score", 0.0
    )
    assert await services.db.safety.add(record)
    try:
        announcer = build_announcer(rest_bot.client, services)[0]
        attempt = await announcer.deliver(job, DeliveryRoute.DM)
    finally:
        scorer.close()
    assert attempt.shown
    (sent,) = rest_bot.dms()
    assert url not in sent.text
    if state is Visibility.HELD:
        assert "waiting for the server's moderators" in sent.text
    else:
        assert "withheld" in sent.text
