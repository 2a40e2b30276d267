"""A task belongs to the key that submitted it: key changes never lose a pending job.

The poller against the emulator (as in ``test_poller``), with guild keys stored encrypted.
"""

from __future__ import annotations

import asyncio
import logging

import pytest
from cryptography.fernet import Fernet
from pydantic import SecretStr

from bot.discord.render.admin import missing_key_notice, old_key_note
from bot.domain import Actor, Job, JobStatus, Kind
from bot.genapi.catalogue import CatalogueCache
from bot.genapi.wire import VideoRequest
from bot.services.generation import Requester, VideoOptions
from bot.services.guild_config import GuildConfigService
from bot.services.keys import KeyResolver, KeyVault, fingerprint
from tests.support.poller import RecordingAnnouncer, make_poller, run_until, submit
from tests.support.stack import ADMIN_ACTOR, Stack, on_keys

SECRET = SecretStr(Fernet.generate_key().decode())
ADMIN, OTHER_ADMIN = 900, 901
"""Two admins: one member's key checks share a cooldown (GuildConfigService.set_api_key)."""


def resolver(stack: Stack, secret: SecretStr | None = SECRET) -> KeyResolver:
    return KeyResolver(stack.db, KeyVault(secret), SecretStr(stack.key), clock=stack.clock)


def config_service(stack: Stack) -> GuildConfigService:
    return GuildConfigService(
        db=stack.db,
        keys=stack.keys,
        vault=KeyVault(SECRET),
        billing=stack.billing,
        client=stack.client,
        default_key_set=True,
        catalogue=stack.catalogue,
    )


def polls_with(stack: Stack, key: str, task_id: str) -> int:
    return sum(
        1 for r in stack.api.requests if r.method == "GET" and task_id in r.path and r.key == key
    )


@pytest.mark.parametrize("change", ["replace", "remove"])
async def test_a_pending_video_survives_a_key_change(
    stack: Stack, who: Requester, change: str
) -> None:
    on_keys(stack, resolver(stack))
    old_key = stack.api.create_key(balance_cents=10_000)
    config = config_service(stack)
    await config.set_api_key(who.guild_id, old_key, actor=Actor(ADMIN))
    (job,) = await submit(stack, who)
    assert job.key_fingerprint == fingerprint(old_key)

    if change == "replace":
        result = await config.set_api_key(
            who.guild_id, stack.api.create_key(), actor=Actor(OTHER_ADMIN)
        )
    else:
        result = await config.remove_api_key(who.guild_id, actor=ADMIN_ACTOR)
    # The admin is told, with the count.
    note = old_key_note(result)
    assert "1 video is still being made with the old key" in note, note

    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED, finished.error
    assert announcer.notified == [job.id]
    assert polls_with(stack, old_key, job.task_id) >= 1
    # Its last job ended: the old key is deleted.
    assert await stack.db.guilds.retired_keys(who.guild_id) == []


async def test_the_admin_is_told_how_many_jobs_keep_the_old_key(
    stack: Stack, who: Requester
) -> None:
    on_keys(stack, resolver(stack))
    old_key = stack.api.create_key(balance_cents=10_000)
    config = config_service(stack)
    first = await config.set_api_key(who.guild_id, old_key, actor=Actor(ADMIN))
    assert old_key_note(first) == ""  # the server had no key of its own
    await stack.db.guilds.update_limits(who.guild_id, max_pending_videos_per_user=5)
    await submit(stack, who, count=3)
    change = await config.set_api_key(
        who.guild_id, stack.api.create_key(), actor=Actor(OTHER_ADMIN)
    )
    assert (
        old_key_note(change)
        == " 3 videos are still being made with the old key; it is kept until they finish."
    )
    # The next key replaced has no job: it is not kept.
    again = await config.remove_api_key(who.guild_id, actor=ADMIN_ACTOR)
    assert "No job was using the old key" in old_key_note(again)
    retired = await stack.db.guilds.retired_keys(who.guild_id)
    assert [r.fingerprint for r in retired] == [fingerprint(old_key)]
    assert old_key.encode() not in retired[0].ciphertext


async def test_a_start_without_key_encryption_key_delays_jobs_and_never_fails_them(
    stack: Stack, who: Requester, caplog: pytest.LogCaptureFixture
) -> None:
    on_keys(stack, resolver(stack))
    guild_key = stack.api.create_key(balance_cents=10_000)
    await config_service(stack).set_api_key(who.guild_id, guild_key, actor=Actor(ADMIN))
    (job,) = await submit(stack, who)

    # Restarted once without KEY_ENCRYPTION_KEY: the job is due, its key cannot be read.
    on_keys(stack, resolver(stack, None))
    stack.clock.advance(120)
    slip = RecordingAnnouncer()
    broken = make_poller(stack, slip)
    with caplog.at_level(logging.WARNING, logger="bot.jobs.poller"):
        assert await broken.poll_due() == 1
        while broken.in_flight:
            await asyncio.sleep(0.01)
    waiting = await stack.db.jobs.get(job.id)
    assert waiting is not None
    assert waiting.status is JobStatus.PENDING
    assert waiting.next_poll_at >= stack.clock.time() + 60  # not a tight retry loop
    assert slip.results == []
    assert "waits for its API key" in caplog.text
    assert guild_key not in caplog.text

    # Restarted with it: the job completes.
    on_keys(stack, resolver(stack))
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    assert finished.status is JobStatus.COMPLETED, finished.error


async def test_a_key_unreadable_with_the_configured_keys_is_retried_not_failed(
    stack: Stack, who: Requester
) -> None:
    on_keys(stack, resolver(stack))
    await config_service(stack).set_api_key(
        who.guild_id, stack.api.create_key(), actor=Actor(ADMIN)
    )
    (job,) = await submit(stack, who)
    # KEY_ENCRYPTION_KEY replaced by a new key without the old one after it.
    on_keys(stack, resolver(stack, SecretStr(Fernet.generate_key().decode())))
    slip = RecordingAnnouncer()
    broken = make_poller(stack, slip)
    assert await broken.poll_due() + 1  # whether or not it is due yet
    stack.clock.advance(120)
    await broken.poll_due()
    while broken.in_flight:
        await asyncio.sleep(0.01)
    still = await stack.db.jobs.get(job.id)
    assert still is not None and still.status is JobStatus.PENDING
    assert slip.results == []


async def test_removing_a_key_stops_the_catalogue_refresh_using_it(
    stack: Stack, who: Requester
) -> None:
    on_keys(stack, resolver(stack))
    guild_key = stack.api.create_key()
    config = config_service(stack)
    await config.set_api_key(who.guild_id, guild_key, actor=Actor(ADMIN))
    # The catalogue was first fetched for this guild, with its key.
    cache = CatalogueCache(stack.client, stack.clock, ttl=10.0)
    config = GuildConfigService(
        db=stack.db,
        keys=stack.keys,
        vault=KeyVault(SECRET),
        billing=stack.billing,
        client=stack.client,
        default_key_set=True,
        catalogue=cache,
    )
    await cache.get((await stack.keys.resolve(who.guild_id)).key)
    await config.remove_api_key(who.guild_id, actor=ADMIN_ACTOR)
    stack.api.revoke_key(guild_key)

    refresher = asyncio.create_task(cache.run())
    before = len(stack.api.requests)
    try:
        while not [r for r in stack.api.requests[before:] if r.path.endswith("/models")]:
            await asyncio.sleep(0.01)
    finally:
        refresher.cancel()
        await asyncio.gather(refresher, return_exceptions=True)
    refreshes = [r for r in stack.api.requests[before:] if r.path.endswith("/models")]
    assert {r.key for r in refreshes} == {stack.key}  # the bot's default key


async def polled_to_the_end(stack: Stack, job: Job) -> Job:
    """Run the poller until ``job`` is announced; return it as stored then."""
    announcer = RecordingAnnouncer()
    await run_until(make_poller(stack, announcer), lambda: bool(announcer.notified))
    finished = await stack.db.jobs.get(job.id)
    assert finished is not None
    return finished


async def test_a_key_replaced_while_its_video_is_submitted_still_brings_the_video(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The POST is in flight when the admin replaces the key."""
    on_keys(stack, resolver(stack))
    old_key = stack.api.create_key(balance_cents=10_000)
    config = config_service(stack)
    await config.set_api_key(who.guild_id, old_key, actor=Actor(ADMIN))
    answered, go_on = asyncio.Event(), asyncio.Event()
    real = stack.client.generate_video

    async def answer_held_back(key: SecretStr, request: VideoRequest) -> object:
        task = await real(key, request)  # the service has accepted and charged it
        answered.set()
        await go_on.wait()  # ...and its answer has not reached the bot yet
        return task

    monkeypatch.setattr(stack.client, "generate_video", answer_held_back)
    catalogue = await stack.generation.catalogue(who.guild_id)
    model = next(m for m in catalogue.video if not m.needs_image)
    submitting = asyncio.create_task(stack.generation.video(who, VideoOptions("a fox", model.id)))
    await answered.wait()
    change = await config.set_api_key(
        who.guild_id, stack.api.create_key(), actor=Actor(OTHER_ADMIN)
    )
    # The admin is told the key stays for the request in flight, not that nothing used it.
    assert old_key_note(change) == (
        " A request made with the old key is still in flight; the key is kept until it ends."
    )
    go_on.set()
    job = await submitting
    await stack.generation.attach_message(job, 1000 + job.id)
    assert job.key_fingerprint == fingerprint(old_key)

    finished = await polled_to_the_end(stack, job)
    assert finished.status is JobStatus.COMPLETED, finished.error
    assert polls_with(stack, old_key, job.task_id) >= 1
    assert await stack.db.guilds.retired_keys(who.guild_id) == []  # released after its job


async def test_a_key_replaced_before_the_reservation_is_chosen_again_before_sending(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key is chosen, then replaced before its reservation: the request uses the new one."""
    on_keys(stack, resolver(stack))
    old_key, new_key = stack.api.create_key(balance_cents=10_000), stack.api.create_key()
    config = config_service(stack)
    await config.set_api_key(who.guild_id, old_key, actor=Actor(ADMIN))
    real = stack.billing.reserve
    changes = []

    async def reserve_after_a_change(**kwargs: object) -> object:
        if not changes:
            changes.append(
                await config.set_api_key(who.guild_id, new_key, actor=Actor(OTHER_ADMIN))
            )
        return await real(**kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(stack.billing, "reserve", reserve_after_a_change)
    # A cooldown is counted once: choosing the key again is not a second use.
    await stack.db.policy.set_cooldown(who.guild_id, Kind.VIDEO, 600)
    assert not who.manage_guild
    (job,) = await submit(stack, who)
    assert job.key_fingerprint == fingerprint(new_key)
    assert not [r for r in stack.api.requests if r.method == "POST" and r.key == old_key]
    finished = await polled_to_the_end(stack, job)
    assert finished.status is JobStatus.COMPLETED, finished.error


async def test_a_pending_video_survives_a_change_of_the_default_key(
    stack: Stack, who: Requester
) -> None:
    """GENAPI_API_KEY replaced (a restart) while a video is pending on it."""
    first = resolver(stack)
    assert await first.keep_default() == []
    on_keys(stack, first)
    (job,) = await submit(stack, who)  # the guild has no key: the default one
    assert job.key_fingerprint == fingerprint(stack.key)

    after_the_leak = stack.api.create_key(balance_cents=10_000)
    restarted = KeyResolver(
        stack.db, KeyVault(SECRET), SecretStr(after_the_leak), clock=stack.clock
    )
    assert await restarted.keep_default() == [fingerprint(stack.key)]
    on_keys(stack, restarted)
    finished = await polled_to_the_end(stack, job)
    assert finished.status is JobStatus.COMPLETED, finished.error
    assert polls_with(stack, stack.key, job.task_id) >= 1
    # Its last job ended: the previous default key is no longer kept.
    assert await stack.db.guilds.default_key(fingerprint(stack.key)) is None


async def test_a_job_whose_key_is_known_nowhere_waits_with_a_warning_and_never_fails(
    stack: Stack, who: Requester, caplog: pytest.LogCaptureFixture
) -> None:
    """GENAPI_API_KEY changed without KEY_ENCRYPTION_KEY: the old key was not kept anywhere."""
    on_keys(stack, resolver(stack, None))
    (job,) = await submit(stack, who)
    new_default = stack.api.create_key()
    restarted_keys = KeyResolver(
        stack.db, KeyVault(None), SecretStr(new_default), clock=stack.clock
    )
    notices: list[str] = []

    async def tell_admins(guild_id: int, key_fingerprint: str) -> None:
        assert guild_id == who.guild_id
        notices.append(missing_key_notice(key_fingerprint))

    restarted_keys.set_missing_key_notice(tell_admins)
    on_keys(stack, restarted_keys)
    slip = RecordingAnnouncer()
    restarted = make_poller(stack, slip)
    with caplog.at_level(logging.WARNING, logger="bot.jobs.poller"):
        for _ in range(2):  # two passes: the admins are told once
            stack.clock.advance(400)
            assert await restarted.poll_due() == 1
            while restarted.in_flight:
                await asyncio.sleep(0.01)
    assert len(notices) == 1
    assert fingerprint(stack.key) in notices[0] and "/config api-key set" in notices[0]
    assert stack.key not in notices[0]
    waiting = await stack.db.jobs.get(job.id)
    assert waiting is not None
    assert waiting.status is JobStatus.PENDING, waiting.error
    assert waiting.next_poll_at >= stack.clock.time() + 60  # not a tight retry loop
    assert slip.results == []
    assert "known nowhere" in caplog.text and "KEY_ENCRYPTION_KEY" in caplog.text
    assert stack.key not in caplog.text and new_default not in caplog.text
