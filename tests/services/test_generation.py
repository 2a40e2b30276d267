"""The generation service: checks before any call, charges in the ledger before any answer."""

import asyncio
import ipaddress
import socket
from typing import Any

import pytest

from bot.domain import JobStatus, Kind
from bot.errors import BudgetExceeded, CooldownActive, ValidationFailed, user_message
from bot.genapi import errors as api_errors
from bot.genapi.client import key_fingerprint
from bot.genapi.outputs import is_public_address
from bot.genapi.ratelimit import QUEUE_SEAT, KeyLimiter, Priority, QueueSeat
from bot.services.billing import video_cost_cents
from bot.services.generation import (
    ImageOptions,
    Requester,
    TextOptions,
    VideoOptions,
    check_attachment,
)
from tests.support.clocks import TimerClock
from tests.support.stack import Stack, services_on_emulator


async def video_model(stack: Stack, **wanted: object):
    catalogue = await stack.generation.catalogue(guild_id=1)
    return next(
        m
        for m in catalogue.video
        if all(getattr(m, name) == value for name, value in wanted.items())
    )


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"duration": 7.5}, "makes videos of"),
        ({"generate_audio": True}, "cannot generate audio"),
        ({"lock_camera": True}, "cannot lock the camera"),
        ({"prompt": "   "}, "prompt is empty"),
        ({"model": "no/such-model"}, "not a video model"),
        ({"aspect_ratio": "5:4"}, "Aspect ratio"),
        ({"image_url": "ftp://x/y.png"}, "https://"),
        ({"image_url": "http://example.com/y.png"}, "must start with https://"),
        ({"image_url": "https://example.com/" + "a" * 2000}, "URL is too long"),
        ({"duration": -5.0}, "between 1 and 60 seconds"),
        ({"duration": 0.0}, "between 1 and 60 seconds"),
        ({"duration": 3600.0}, "between 1 and 60 seconds"),
        ({"prompt": "\u200b \u200c\u200d\u2060\ufeff\n"}, "prompt is empty"),
    ],
)
async def test_a_bad_video_request_is_refused_before_any_call(
    stack: Stack, who: Requester, change: dict[str, object], sentence: str
) -> None:
    model = await video_model(
        stack, supports_audio=False, supports_lock_camera=False, needs_image=False
    )
    options = {"prompt": "a fox", "model": model.id, **change}
    with pytest.raises(ValidationFailed, match=sentence):
        await stack.generation.video(who, VideoOptions(**options))  # type: ignore[arg-type]
    assert stack.posts() == 0
    assert await stack.db.ledger.total(who.guild_id) == 0


async def test_an_image_to_video_model_needs_an_image(stack: Stack, who: Requester) -> None:
    model = await video_model(stack, needs_image=True)
    with pytest.raises(ValidationFailed, match="attach one"):
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    assert stack.posts() == 0


async def test_an_accepted_video_is_charged_and_stored_as_a_job(
    stack: Stack, who: Requester
) -> None:
    model = await video_model(stack, needs_image=False)
    duration = max(model.durations)
    job = await stack.generation.video(who, VideoOptions("a fox", model.id, duration=duration))
    assert job.status is JobStatus.PENDING
    assert job.cost_cents == video_cost_cents(model.cost_cents_per_5s, duration)
    assert job.details["duration"] == duration
    assert job.next_poll_at >= job.created_at + 3
    assert await stack.db.ledger.total(who.guild_id) == job.cost_cents
    assert stack.api.balance(stack.key) == 100_000 - job.cost_cents


async def test_a_spent_budget_refuses_with_no_upstream_call(stack: Stack, who: Requester) -> None:
    await stack.db.guilds.update_limits(who.guild_id, monthly_budget_cents=10)
    model = await video_model(stack, needs_image=False)
    posts = stack.posts()
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    assert refused.value.scope == "guild"
    assert stack.posts() == posts


async def test_text_is_charged_once_and_the_daily_user_budget_holds(
    stack: Stack, who: Requester
) -> None:
    result = await stack.generation.text(who, TextOptions("hello"))
    assert await stack.db.ledger.total(who.guild_id) == result.cost_cents
    report = await stack.billing.report(who.guild_id)
    assert [model for model, _, _ in report.by_model] == [result.model]  # the default it used
    # A short answer's hold (its tokens at the rates learned) fits in 5 c, a long one does not.
    await stack.db.guilds.update_limits(
        who.guild_id, user_daily_budget_cents=int(result.cost_cents) + 5
    )
    with pytest.raises(BudgetExceeded) as refused:
        await stack.generation.text(who, TextOptions("again"))
    assert refused.value.scope == "user"
    other = Requester(who.guild_id, who.channel_id, user_id=999)
    # One short call bounds the prompt rate loosely (1 c for 2 prompt tokens): a prompt no
    # longer than the one seen holds little.
    await stack.generation.text(other, TextOptions("hi", max_tokens=1))


async def test_an_async_image_becomes_a_job_and_a_sync_one_a_result(
    stack: Stack, who: Requester
) -> None:
    catalogue = await stack.generation.catalogue(who.guild_id)
    outcomes = [
        await stack.generation.image(who, ImageOptions("a fox", model.id))
        for model in catalogue.image
    ]
    assert any(o.result is not None and o.result.outputs for o in outcomes)
    jobs = [o.job for o in outcomes if o.job is not None]
    assert jobs
    assert jobs[0].kind is Kind.IMAGE
    report = await stack.billing.report(who.guild_id)
    assert report.month_cents == sum(
        (o.result.cost_cents if o.result else o.job.cost_cents)  # type: ignore[union-attr]
        for o in outcomes
    )


async def test_an_edit_mode_without_a_source_image_is_refused(stack: Stack, who: Requester) -> None:
    with pytest.raises(ValidationFailed, match="edits an image"):
        await stack.generation.image(who, ImageOptions("fix the sign", mode="i2i"))
    assert stack.posts() == 0


@pytest.mark.parametrize(
    ("change", "sentence"),
    [
        ({"image_url": "http://example.com/y.png"}, "must start with https://"),
        ({"image_url": "https://example.com/" + "a" * 2000}, "URL is too long"),
        ({"prompt": "\u200b\u2060\ufeff"}, "prompt is empty"),
        ({"prompt": "\u3164 \u2800"}, "prompt is empty"),
        ({"image_urls": ("https://a.test/1.png", "http://a.test/2.png")}, "https://"),
        ({"image_urls": tuple(f"https://a.test/{n}.png" for n in range(5))}, "At most 4"),
    ],
)
async def test_a_bad_image_request_is_refused_before_any_call(
    stack: Stack, who: Requester, change: dict[str, object], sentence: str
) -> None:
    options = {"prompt": "a fox", **change}
    with pytest.raises(ValidationFailed, match=sentence):
        await stack.generation.image(who, ImageOptions(**options))  # type: ignore[arg-type]
    assert stack.posts() == 0
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0


@pytest.mark.parametrize(
    ("url", "sentence"),
    [
        ("https://user:secret@cdn.example/fox.png", "user name or password"),
        ("https://token@cdn.example/fox.png", "user name or password"),
        ("https://localhost/fox.png", "public address"),
        ("https://LOCALHOST./fox.png", "public address"),
        ("https://admin.localhost:8080/fox.png", "public address"),
        ("https://127.0.0.1/fox.png", "public address"),
        ("https://127.1/fox.png", "public address"),
        ("https://[::1]/fox.png", "public address"),
        ("https://[::ffff:10.0.0.1]/fox.png", "public address"),
        ("https://10.0.0.5/fox.png", "public address"),
        ("https://192.168.1.20:8443/fox.png", "public address"),
        ("https://169.254.169.254/latest/meta-data/", "public address"),
        ("https://[fe80::1]/fox.png", "public address"),
        ("https://240.0.0.1/fox.png", "public address"),
        ("https://0.0.0.0/fox.png", "public address"),
        ("https://cdn.example:notaport/fox.png", "not a valid web address"),
        # Typed as resolvers read them (UTS #46), and addresses that carry an IPv4 one.
        ("https://ⓛⓞⓒⓐⓛⓗⓞⓢⓣ/fox.png", "public address"),
        ("https://１２７。０。０。１/fox.png", "public address"),
        ("https://１０．０．０．５:8443/fox.png", "public address"),
        ("https://ａｄｍｉｎ．ｌｏｃａｌｈｏｓｔ/fox.png", "public address"),
        ("https://[::127.0.0.1]/fox.png", "public address"),
        ("https://[64:ff9b::7f00:1]/fox.png", "public address"),
        ("https://[64:ff9b:1::a00:1]/fox.png", "public address"),
        ("https://bad\ufffdname.example/fox.png", "no valid host name"),
    ],
)
async def test_a_typed_image_url_to_a_private_place_is_refused(
    stack: Stack, who: Requester, url: str, sentence: str
) -> None:
    # The service would fetch it from inside its network, or log the password.
    for options in (
        ImageOptions("a fox", mode="i2i", image_url=url),
        ImageOptions("a fox", mode="i2i", image_urls=("https://cdn.example/a.png", url)),
    ):
        with pytest.raises(ValidationFailed, match=sentence):
            await stack.generation.image(who, options)
    model = await video_model(stack, needs_image=True)
    with pytest.raises(ValidationFailed, match=sentence):
        await stack.generation.video(who, VideoOptions("a fox", model.id, image_url=url))
    assert stack.posts() == 0
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0


async def test_a_typed_image_url_on_a_public_host_is_sent(stack: Stack, who: Requester) -> None:
    for url in ("https://cdn.example/fox.png", "https://93.184.215.14:8443/fox.png"):
        await stack.generation.image(who, ImageOptions("a fox", mode="i2i", image_url=url))
        assert stack.api.requests[-1].json["image_url"] == url


async def test_a_typed_name_that_resolves_to_a_private_address_is_refused(
    stack: Stack, who: Requester
) -> None:
    # This machine's own name resolves to loopback or its private address (/etc/hosts).
    name = socket.gethostname()
    found = {info[4][0] for info in socket.getaddrinfo(name, 443)}
    if all(is_public_address(ipaddress.ip_address(a.split("%")[0])) for a in found):
        pytest.skip(f"{name} resolves to public addresses here: {sorted(found)}")
    url = f"https://{name}/fox.png"
    with pytest.raises(ValidationFailed, match="public address"):
        await stack.generation.image(who, ImageOptions("a fox", mode="i2i", image_url=url))
    model = await video_model(stack, needs_image=True)
    with pytest.raises(ValidationFailed, match="public address"):
        await stack.generation.video(who, VideoOptions("a fox", model.id, image_url=url))
    assert stack.posts() == 0
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0


async def test_a_typed_host_is_sent_as_it_was_checked(stack: Stack, who: Requester) -> None:
    # The service resolves the A-label form the bot checked, not its own reading of Unicode.
    typed = "https://ｂüｃｈｅｒ。example:8443/fox.png?x=1"
    await stack.generation.image(who, ImageOptions("a fox", mode="i2i", image_url=typed))
    assert stack.api.requests[-1].json["image_url"] == (
        "https://xn--bcher-kva.example:8443/fox.png?x=1"
    )


async def test_several_reference_images_go_as_image_urls(stack: Stack, who: Requester) -> None:
    options = ImageOptions(
        "the two of them together",
        mode="i2i",
        image_urls=("https://a.test/1.png",),
        uploaded_image_urls=("https://cdn.discordapp.test/2.png",),
    )
    await stack.generation.image(who, options)
    body = stack.api.requests[-1].json
    assert body["image_urls"] == ["https://a.test/1.png", "https://cdn.discordapp.test/2.png"]
    assert "image_url" not in body


async def test_an_invisible_text_prompt_is_refused(stack: Stack, who: Requester) -> None:
    with pytest.raises(ValidationFailed, match="prompt is empty"):
        await stack.generation.text(who, TextOptions("\u200b\u200b \ufeff"))
    assert stack.posts() == 0


@pytest.mark.parametrize(
    ("content_type", "size", "sentence"),
    [
        ("text/plain", 10, "not an image"),
        (None, 10, "not an image"),
        ("application/pdf", 10, "not an image"),
        ("image/png", 20 * 1024 * 1024 + 1, "at most 20 MiB"),
        ("image/png", 0, "empty"),  # else sent upstream, and charged for
    ],
)
def test_an_attachment_must_be_a_small_enough_image(
    content_type: str | None, size: int, sentence: str
) -> None:
    with pytest.raises(ValidationFailed, match=sentence):
        check_attachment(content_type, size)


def test_an_image_attachment_within_the_bound_is_accepted() -> None:
    check_attachment("image/png", 20 * 1024 * 1024)
    check_attachment("image/jpeg; charset=binary", 1)


async def test_commands_can_be_limited_to_channels(stack: Stack, who: Requester) -> None:
    await stack.db.guilds.set_allowed_channels(who.guild_id, [55])
    with pytest.raises(ValidationFailed, match="<#55>"):
        await stack.generation.text(who, TextOptions("hello"))
    assert stack.posts() == 0


async def test_a_timed_out_generation_keeps_its_budget_held(stack: Stack, who: Requester) -> None:
    model = await video_model(stack, needs_image=False)
    stack.api.inject_fault("slow", 1, delay=1.5)
    with pytest.raises(api_errors.APITimeoutError):
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    report = await stack.billing.report(who.guild_id)
    assert report.reserved_cents == video_cost_cents(model.cost_cents_per_5s, 5)


async def test_an_unreadable_answer_keeps_its_budget_held(stack: Stack, who: Requester) -> None:
    model = await video_model(stack, needs_image=False)
    stack.api.inject_fault("malformed_json", 1)
    with pytest.raises(api_errors.MalformedResponseError):
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    report = await stack.billing.report(who.guild_id)
    assert report.reserved_cents == video_cost_cents(model.cost_cents_per_5s, 5)


async def test_a_gateways_502_after_sending_keeps_its_budget_held(
    stack: Stack, who: Requester
) -> None:
    # The gateway's JSON 502 may hide a processed, charged request.
    model = await video_model(stack, needs_image=False)
    stack.api.inject_fault("gateway_502", 1)
    with pytest.raises(api_errors.APIStatusError) as bad:
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    report = await stack.billing.report(who.guild_id)
    assert report.reserved_cents == video_cost_cents(model.cost_cents_per_5s, 5)
    assert "may still have been charged" in user_message(bad.value)


async def test_a_refused_generation_releases_its_budget(stack: Stack, who: Requester) -> None:
    model = await video_model(stack, needs_image=False)
    stack.api.set_balance(stack.key, 0)
    with pytest.raises(api_errors.InsufficientCreditsError):
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    report = await stack.billing.report(who.guild_id)
    assert report.reserved_cents == 0
    assert report.month_cents == 0


async def test_admins_hear_of_a_rejected_key_once(stack: Stack, who: Requester) -> None:
    await stack.db.guilds.set_admin_channel(who.guild_id, 77)
    stack.api.revoke_key(stack.key)
    for _ in range(3):
        with pytest.raises(api_errors.UnauthorizedError):
            await stack.generation.text(who, TextOptions("hello"))
    assert stack.notices == [(who.guild_id, 77, "unauthorized")]
    report = await stack.billing.report(who.guild_id)
    assert report.reserved_cents == 0


async def test_nothing_between_the_services_answer_and_the_ledger_can_lose_the_charge(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Clearing a guild's key problem (a database write) ran between the paid
    # answer and the settlement; when it failed, the charge never reached the ledger and the
    # member was told the request failed.
    model = await video_model(stack)  # the catalogue is fetched (and cached) before
    await stack.db.guilds.set_notified_problem(who.guild_id, "insufficient_credits")

    async def broken(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("the database refused the write")

    monkeypatch.setattr(stack.db.guilds, "set_notified_problem", broken)
    result = await stack.generation.text(who, TextOptions("hello"))
    job = await stack.generation.video(who, VideoOptions("a fox", model.id))

    assert await stack.db.ledger.total(who.guild_id) == result.cost_cents + job.cost_cents
    assert stack.posts() == 2


async def test_a_request_cancelled_in_the_queue_costs_nothing(stack: Stack, who: Requester) -> None:
    # The member's Cancel takes the request out of the key's queue: nothing is sent
    # and the video's reservation is released at once.
    model = await video_model(stack, needs_image=False)
    seat = QueueSeat(guild_id=who.guild_id)
    seat.cancelled.set()
    QUEUE_SEAT.set(seat)
    with pytest.raises(api_errors.QueueCancelled):
        await stack.generation.video(who, VideoOptions("a fox", model.id))
    assert stack.posts() == 0
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0


# -- a request queued for its key's window ------------------------------------------------------


async def test_a_queued_text_refused_on_a_later_wake_releases_its_hold_and_sends_nothing(
    engine_settings: dict[str, Any],
) -> None:
    clock = TimerClock()
    async with services_on_emulator(clock, **engine_settings) as (services, api, key):
        who = Requester(guild_id=1, channel_id=10, user_id=100)
        await services.generation.catalogue(who.guild_id)  # fetched before the window fills
        limiter = services.client.limiter.for_key(key_fingerprint(key))
        assert isinstance(limiter, KeyLimiter)
        while limiter.sent_in_window < 30:  # a full window: the next request waits about 61 s
            await limiter.acquire(Priority.INTERACTIVE)
        posts = sum(1 for r in api.requests if r.method == "POST")
        QUEUE_SEAT.set(QueueSeat(guild_id=who.guild_id))
        asked = asyncio.ensure_future(services.generation.text(who, TextOptions("hi")))
        for _ in range(2000):  # the reservation is written by the database's own thread
            if limiter.waiting:
                break
            await asyncio.sleep(0.005)
        assert limiter.waiting == 1
        held = await services.db.ledger.reserved_cents(who.guild_id, clock.time())
        assert held > 0
        limiter.block_for(1000.0)  # a 429 elsewhere: past QUEUE_MAX_WAIT_SECONDS (300)
        with pytest.raises(api_errors.RateLimitWaitTooLong) as refused:
            await clock.drive(asked)
        assert clock.monotonic() < 300.0
        assert await services.db.ledger.reserved_cents(who.guild_id, clock.time()) == 0
        assert sum(1 for r in api.requests if r.method == "POST") == posts
        assert "try again" in user_message(refused.value)


async def test_a_video_check_refuses_budget_and_cooldown_and_holds_nothing(
    stack: Stack, who: Requester
) -> None:
    """Continue asks this before it downloads a clip: a refused request costs no work."""
    model = await video_model(stack, needs_image=False)
    options = VideoOptions("a fox", model.id)
    await stack.generation.check_video(who, options)  # room: nothing said, nothing held
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0
    await stack.db.policy.set_cooldown(who.guild_id, Kind.VIDEO, 600)
    await stack.generation.video(who, options)
    with pytest.raises(CooldownActive):
        await stack.generation.check_video(who, options)
    await stack.db.policy.set_cooldown(who.guild_id, Kind.VIDEO, 0)
    await stack.db.guilds.update_limits(who.guild_id, monthly_budget_cents=1)
    with pytest.raises(BudgetExceeded):
        await stack.generation.check_video(who, options)
    assert await stack.db.ledger.reserved_cents(who.guild_id, stack.clock.time()) == 0


@pytest.mark.parametrize("kind", ["image", "video"])
async def test_takes_keep_what_was_charged_when_releasing_the_unsent_holds_fails(
    stack: Stack, who: Requester, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    settle = stack.billing.settle

    async def settle_then_fail_the_next_post(*args: Any, **kw: Any) -> Any:
        settled = await settle(*args, **kw)
        stack.api.inject_fault("500", 1)  # take 2 is refused, for free
        return settled

    async def database_down(reservation: Any) -> None:
        raise ConnectionError("the database went away")

    monkeypatch.setattr(stack.billing, "settle", settle_then_fail_the_next_post)
    monkeypatch.setattr(stack.billing, "release", database_down)
    if kind == "image":
        options = ImageOptions("a kite", "black-forest-labs/flux-schnell")  # synchronous
        outcomes, error = await stack.generation.image_takes(who, options, 3)
        made = [o.result for o in outcomes if o.result is not None]
    else:
        video = await video_model(stack, needs_image=False)
        taken = await stack.generation.video_takes(who, VideoOptions("a kite", video.id), 3)
        made, error = list(taken.jobs), taken.error
    assert len(made) == 1 and error is not None  # take 1 is kept; takes 2 and 3 not made
    assert await stack.db.ledger.total(who.guild_id) > 0


async def test_a_sync_image_is_kept_as_a_finished_job_charged_once(
    stack: Stack, who: Requester
) -> None:
    from bot.services.showcase import ShowcaseService

    catalogue = await stack.generation.catalogue(who.guild_id)
    model = next(m for m in catalogue.image if m.id == "black-forest-labs/flux-schnell")
    outcome = await stack.generation.image(who, ImageOptions("a kite", model.id))
    assert outcome.result is not None and outcome.job is None
    job = outcome.answered
    assert job is not None
    assert job.status is JobStatus.COMPLETED
    assert list(job.outputs) == list(outcome.result.outputs)
    db = stack.db
    now = stack.clock.time() + 3600
    assert await db.jobs.due(now, 10) == []  # never polled
    assert await db.jobs.due_deliveries(now, 10) == []  # never delivered again
    # The money is the ledger's, once: the month is the one charge.
    report = await stack.billing.report(who.guild_id)
    assert report.month_cents == outcome.result.cost_cents
    # Share goes by job id: the member may share it.
    entry, added = await ShowcaseService(db, stack.clock).share(job.id, who.user_id)
    assert added and entry.result.prompt == "a kite"
