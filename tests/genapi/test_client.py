"""The Generation API client against the sandbox emulator, over real HTTP on loopback.

The emulator and the client share one manual clock, so rate windows, Retry-After and task
completion times pass without sleeping.
"""

import asyncio
from collections.abc import AsyncIterator

import httpx2 as httpx
import pytest
from pydantic import SecretStr

from bot.clock import ManualClock
from bot.errors import user_message
from bot.genapi import errors
from bot.genapi.client import (
    MAX_RETRY_AFTER,
    GenAPIClient,
    error_from_response,
    parse_retry_after,
)
from bot.genapi.ratelimit import Priority, RateLimiter
from bot.genapi.slots import SlotRules
from bot.genapi.transport import ApiTransport
from bot.genapi.wire import ImageRequest, ImageResult, PendingTask, TextRequest, VideoRequest
from bot.sandbox import GenApiEmulator
from bot.sandbox.catalogue import VIDEO_MODELS
from bot.services.billing import video_cost_cents
from bot.services.generation import may_have_charged


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
async def api(clock: ManualClock) -> AsyncIterator[GenApiEmulator]:
    async with GenApiEmulator(clock=clock.monotonic) as emulator:
        yield emulator


@pytest.fixture(params=["httpcore", "aiohttp"])
async def http(request: pytest.FixtureRequest) -> AsyncIterator[httpx.AsyncClient]:
    """Each client test runs over httpx's own transport and over the bot's (``ApiTransport``)."""
    transport = ApiTransport() if request.param == "aiohttp" else None
    async with httpx.AsyncClient(transport=transport) as client:
        yield client


def make_client(base_url: str, http: httpx.AsyncClient, clock: ManualClock, **kw) -> GenAPIClient:
    return GenAPIClient(base_url, http=http, limiter=RateLimiter(clock), clock=clock, **kw)


@pytest.fixture
def client(api: GenApiEmulator, http: httpx.AsyncClient, clock: ManualClock) -> GenAPIClient:
    return make_client(api.base_url, http, clock)


@pytest.fixture
def key(api: GenApiEmulator) -> SecretStr:
    return SecretStr(api.create_key(balance_cents=10_000))


def first_video_model(catalogue, *, needs_image: bool = False):
    return next(m for m in catalogue.video if m.needs_image == needs_image)


async def test_catalogue_has_every_video_field(client: GenAPIClient, key: SecretStr) -> None:
    catalogue = await client.list_models(key)
    assert catalogue.text
    assert catalogue.image
    assert len(catalogue.video) >= 3
    for model in catalogue.video:
        assert model.durations
        assert model.cost_cents_per_5s > 0
        assert model.provider
        assert model.mode
        assert model.tier
        assert isinstance(model.supports_audio, bool)
    assert {len(m.durations) for m in catalogue.video} != {1}


async def test_video_is_submitted_and_polled_to_completion(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr, clock: ManualClock
) -> None:
    catalogue = await client.list_models(key)
    model = first_video_model(catalogue)
    duration = model.durations[0]
    task = await client.generate_video(
        key, VideoRequest(model=model.id, prompt="a cat surfing", duration=duration)
    )
    assert task.status == "processing"
    assert task.cost_cents == video_cost_cents(model.cost_cents_per_5s, duration)
    assert task.remaining_credits_cents == 10_000 - task.cost_cents
    assert task.poll_url.startswith("/api/v1/")
    assert f"provider={task.provider}" in task.poll_url

    state = await client.poll(key, task.poll_url)
    assert state.status == "processing"
    assert state.outputs == ()

    clock.advance(api.tasks[task.task_id].completes_at - clock.monotonic() + 1)
    state = await client.poll(key, task.poll_url)
    assert state.status == "completed"
    assert state.outputs
    assert state.outputs[0].startswith("http://127.0.0.1")
    by_id = await client.video_status(key, task.task_id, task.provider)
    assert by_id.outputs == state.outputs
    async with httpx.AsyncClient() as plain:
        assert (await plain.get(state.outputs[0])).status_code == 200


async def test_a_failed_video_carries_the_services_reason(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr, clock: ManualClock
) -> None:
    model = first_video_model(await client.list_models(key))
    api.fail_next_tasks(1, "content policy")
    task = await client.generate_video(key, VideoRequest(model=model.id, prompt="x"))
    clock.advance(api.tasks[task.task_id].completes_at - clock.monotonic() + 1)
    state = await client.poll(key, task.poll_url)
    assert state.status == "failed"
    assert state.error is not None
    assert "content policy" in state.error


def test_poll_url_is_joined_to_the_host_without_repeating_the_prefix() -> None:
    client = GenAPIClient(
        "https://gen.example/api/v1",
        http=httpx.AsyncClient(),
        limiter=RateLimiter(ManualClock()),
        clock=ManualClock(),
    )
    target = client.poll_target("/api/v1/video/t1?provider=beta&pollUrl=https%3A%2F%2Fx%2Fy")
    assert (
        str(target)
        == "https://gen.example/api/v1/video/t1?provider=beta&pollUrl=https%3A%2F%2Fx%2Fy"
    )
    with pytest.raises(errors.MalformedResponseError):
        client.poll_target("https://elsewhere.example/api/v1/video/t1")


async def test_images_sync_and_async(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr, clock: ManualClock
) -> None:
    catalogue = await client.list_models(key)
    results = [
        await client.generate_image(key, ImageRequest(model=m.id, prompt="a red fox"))
        for m in catalogue.image
    ]
    sync = [r for r in results if isinstance(r, ImageResult)]
    pending = [r for r in results if isinstance(r, PendingTask)]
    assert sync
    assert pending
    assert all(r.outputs and r.cost_cents > 0 for r in sync)
    task = pending[0]
    clock.advance(api.tasks[task.task_id].completes_at - clock.monotonic() + 1)
    state = await client.poll(key, task.poll_url)
    assert state.status == "completed"
    assert state.outputs
    by_id = await client.image_status(key, task.task_id, task.provider)
    assert by_id.outputs == state.outputs


async def test_text_result_has_usage_and_tolerates_unknown_fields(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    api.set_next_text("Hello there")
    result = await client.generate_text(key, TextRequest(prompt="hi", temperature=0.2))
    assert result.content == "Hello there"
    assert result.usage.total_tokens > 0
    assert result.cost_cents >= 1
    assert result.model_extra  # the sandbox adds a field the spec does not list


async def test_every_error_code_of_the_emulator(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    model = first_video_model(await client.list_models(key))
    with pytest.raises(errors.InvalidParamsError) as bad:
        await client.generate_video(key, VideoRequest(model=model.id, prompt="x", duration=999))
    assert bad.value.status == 400
    assert bad.value.code == "INVALID_PARAMS"
    with pytest.raises(errors.InvalidModelError):
        await client.generate_video(key, VideoRequest(model="nope/none", prompt="x"))

    api.set_balance(key.get_secret_value(), 0)
    with pytest.raises(errors.InsufficientCreditsError) as broke:
        await client.generate_video(key, VideoRequest(model=model.id, prompt="x"))
    assert broke.value.status == 402

    api.revoke_key(key.get_secret_value())
    with pytest.raises(errors.UnauthorizedError) as denied:
        await client.list_models(key)
    assert key.get_secret_value() not in str(denied.value)
    with pytest.raises(errors.TaskNotFoundError):
        await client.video_status(SecretStr(api.create_key()), "no-such-task")


@pytest.mark.parametrize(
    ("status", "code", "exception"),
    [
        (400, "INVALID_PARAMS", errors.InvalidParamsError),
        (400, "INVALID_MODEL", errors.InvalidModelError),
        (401, "UNAUTHORIZED", errors.UnauthorizedError),
        (402, "INSUFFICIENT_CREDITS", errors.InsufficientCreditsError),
        (429, "RATE_LIMITED", errors.RateLimitedError),
        (500, "GENERATION_FAILED", errors.GenerationFailedError),
        (503, "SOMETHING_NEW", errors.ServerError),
        (409, "SOMETHING_NEW", errors.APIStatusError),
    ],
)
def test_error_codes_map_to_one_class_each(status: int, code: str, exception: type) -> None:
    response = httpx.Response(
        status, json={"error": {"code": code, "message": "m"}}, headers={"Retry-After": "7"}
    )
    error = error_from_response(response)
    assert type(error) is exception
    assert (error.status, error.code) == (status, code)
    if isinstance(error, errors.RateLimitedError):
        assert error.retry_after == 7


def test_retry_after_forms() -> None:
    assert parse_retry_after("12") == 12
    assert parse_retry_after("1.5") == 1.5
    assert parse_retry_after(None) > 0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT") == 0  # a past date: go now


async def test_retry_after_is_honoured_then_the_request_succeeds(
    http: httpx.AsyncClient, clock: ManualClock
) -> None:
    async with GenApiEmulator(clock=clock.monotonic, rate_limit=2, rate_window=10) as api:
        key = SecretStr(api.create_key())
        client = make_client(api.base_url, http, clock)
        for _ in range(2):
            await client.list_models(key, priority=Priority.BACKGROUND)
        await client.list_models(key, priority=Priority.BACKGROUND)
        assert api.rate_limited_count(key.get_secret_value()) == 1
        # The retry waited out Retry-After: the first request leaves the window at 10 s.
        assert clock.monotonic() >= 10


async def test_interactive_request_is_told_when_to_come_back(
    http: httpx.AsyncClient, clock: ManualClock
) -> None:
    async with GenApiEmulator(clock=clock.monotonic, rate_limit=1, rate_window=60) as api:
        key = SecretStr(api.create_key())
        # A Retry-After beyond the queue's bound (QUEUE_MAX_WAIT_SECONDS) is not waited out.
        client = make_client(api.base_url, http, clock, interactive_max_wait=8.0)
        await client.list_models(key)
        with pytest.raises(errors.RateLimitedError) as limited:
            await client.generate_text(key, TextRequest(prompt="hi"))
        assert 50 <= limited.value.retry_after <= 60
        posts = [r for r in api.requests if r.method == "POST"]
        assert len(posts) == 1  # refused by the service once; not sent again


async def test_the_client_never_sends_a_31st_request_in_a_minute(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    for _ in range(45):
        await client.list_models(key, priority=Priority.BACKGROUND)
    assert api.rate_limited_count(key.get_secret_value()) == 0
    assert api.max_requests_in_window(key.get_secret_value()) <= 30


async def test_a_timed_out_generation_is_not_sent_again(
    api: GenApiEmulator, http: httpx.AsyncClient, clock: ManualClock, key: SecretStr
) -> None:
    client = make_client(api.base_url, http, clock, generation_timeout=httpx.Timeout(5.0, read=0.2))
    model = first_video_model(await client.list_models(key))
    api.inject_fault("slow", 1, delay=0.6)
    with pytest.raises(errors.APITimeoutError):
        await client.generate_video(key, VideoRequest(model=model.id, prompt="x"))
    posts = [r for r in api.requests if r.method == "POST"]
    assert len(posts) == 1


async def test_a_dropped_connection_on_a_generation_is_not_retried(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    model = first_video_model(await client.list_models(key))
    api.inject_fault("drop", 1)
    with pytest.raises(errors.APIConnectionError) as dropped:
        await client.generate_video(key, VideoRequest(model=model.id, prompt="x"))
    assert dropped.value.request_sent
    assert len([r for r in api.requests if r.method == "POST"]) == 1
    assert api.balance(key.get_secret_value()) == 10_000


async def test_status_gets_retry_through_bad_gateways_and_bad_bodies(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    api.inject_fault("html_502", 1)
    api.inject_fault("malformed_json", 1)
    catalogue = await client.list_models(key)
    assert catalogue.video
    assert len([r for r in api.requests if r.path.endswith("/models")]) == 3


async def test_a_bad_gateway_page_on_a_generation_is_a_clear_error(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    api.inject_fault("html_502", 1)
    with pytest.raises(errors.MalformedResponseError) as bad:
        await client.generate_text(key, TextRequest(prompt="hi"))
    assert bad.value.status == 502
    assert "text/html" in str(bad.value)


async def test_a_gateways_json_502_on_a_generation_may_have_charged(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    # A gateway answered 502 in the spec's error shape after the service had
    # processed and charged the request; only GENERATION_FAILED proves nothing was charged.
    api.inject_fault("gateway_502", 1)
    with pytest.raises(errors.APIStatusError) as bad:
        await client.generate_text(key, TextRequest(prompt="hi"))
    assert bad.value.status == 502
    assert api.balance(key.get_secret_value()) < 10_000  # the service did charge
    assert len([r for r in api.requests if r.method == "POST"]) == 1  # never sent again
    assert may_have_charged(bad.value)
    assert "may still have been charged" in user_message(bad.value)
    assert "try again later" not in user_message(bad.value)


async def test_a_json_5xx_on_a_get_charged_nothing(
    client: GenAPIClient, api: GenApiEmulator, key: SecretStr
) -> None:
    api.inject_fault("500", 3)  # every attempt of the catalogue's GET
    with pytest.raises(errors.APIStatusError) as bad:
        await client.list_models(key)
    assert not may_have_charged(bad.value)
    assert user_message(bad.value) == "The generation service had a problem; try again later."


async def test_a_connect_error_is_retried_because_nothing_was_sent(clock: ManualClock) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls < 3:
            raise httpx.ConnectError("refused", request=request)
        return httpx.Response(
            200,
            json={"content": "ok", "model": "m", "cost_cents": 1, "remaining_credits_cents": 9},
        )

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = make_client("http://gen.test/api/v1", http, clock)
        result = await client.generate_text(SecretStr("sk-gen-x"), TextRequest(prompt="hi"))
    assert result.content == "ok"
    assert calls == 3


async def test_a_missing_required_field_is_a_clear_error(clock: ManualClock) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200, json={"content": "no cost"}))
    async with httpx.AsyncClient(transport=transport) as http:
        client = make_client("http://gen.test/api/v1", http, clock)
        with pytest.raises(errors.MalformedResponseError) as bad:
            await client.generate_text(SecretStr("sk-gen-x"), TextRequest(prompt="hi"))
    assert "cost_cents" in str(bad.value)


def test_whole_second_durations_are_sent_as_integers() -> None:
    assert VideoRequest(model="m", prompt="p", duration=5.0).body()["duration"] == 5
    assert isinstance(VideoRequest(model="m", prompt="p", duration=5.0).body()["duration"], int)
    assert VideoRequest(model="m", prompt="p", duration=7.5).body()["duration"] == 7.5


async def test_a_429_with_a_non_json_body_still_honours_retry_after(clock: ManualClock) -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        if calls == 1:  # a proxy's own page, not the spec's JSON error object
            return httpx.Response(
                429, text="<html>Too Many Requests</html>", headers={"Retry-After": "20"}
            )
        return httpx.Response(200, json={"models": {"video": [], "image": [], "text": []}})

    async with httpx.AsyncClient(transport=httpx.MockTransport(handler)) as http:
        client = make_client("http://gen.test/api/v1", http, clock)
        await client.list_models(SecretStr("sk-gen-x"), priority=Priority.BACKGROUND)
    assert calls == 2
    assert clock.monotonic() >= 20  # the second try waited out Retry-After


def test_a_429_with_a_non_json_body_is_a_rate_limit_error() -> None:
    response = httpx.Response(429, text="slow down", headers={"Retry-After": "12"})
    error = error_from_response(response)
    assert isinstance(error, errors.RateLimitedError)
    assert error.retry_after == 12


@pytest.mark.parametrize(
    "value",
    [
        "-5",
        "nan",
        "NaN",
        "inf",
        "-inf",
        "1e400",
        "99999999999",
        "garbage",
        "",
        "Fri, 31 Dec 9999 23:59:59 GMT",
        "Wed, 21 Oct 2015 07:28:00 -0000",  # parses to a naive datetime
        "Wed, 32 Foo 2015 99:99:99 GMT",
        "\x00\xff",
    ],
)
def test_a_nonsensical_retry_after_gives_a_bounded_wait(value: str) -> None:
    seconds = parse_retry_after(value)
    assert 0 <= seconds <= MAX_RETRY_AFTER
    response = httpx.Response(429, text="x", headers={"Retry-After": value.encode("latin-1")})
    error = error_from_response(response)
    assert isinstance(error, errors.RateLimitedError)
    assert 0 <= error.retry_after <= MAX_RETRY_AFTER


def test_a_huge_retry_after_is_capped() -> None:
    assert parse_retry_after("86400") == MAX_RETRY_AFTER
    assert parse_retry_after("inf") == MAX_RETRY_AFTER


async def test_an_unreachable_service_is_logged_with_its_address_not_the_key(
    clock: ManualClock, http: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    client = make_client("http://127.0.0.1:9/api/v1", http, clock)  # the discard port: refused
    with pytest.raises(errors.APIConnectionError):
        await client.generate_text(SecretStr("sk-gen-never-logged"), TextRequest(prompt="hi"))
    assert "http://127.0.0.1:9/api/v1" in caplog.text
    assert "sk-gen-never-logged" not in caplog.text


async def test_over_aiohttp_only_a_connection_never_opened_counts_as_not_sent(
    clock: ManualClock,
) -> None:
    # httpx-aiohttp alone reports any dropped connection as a connect timeout ("never sent"),
    # which would let a generation be sent twice; ApiTransport maps by what happened.
    async with (
        GenApiEmulator(clock=clock.monotonic) as api,
        httpx.AsyncClient(transport=ApiTransport()) as http,
    ):
        key = SecretStr(api.create_key(balance_cents=10_000))
        client = make_client(api.base_url, http, clock)
        api.inject_fault("drop", 1)
        with pytest.raises(errors.APIConnectionError) as dropped:
            await client.generate_text(key, TextRequest(prompt="hi"))
        assert dropped.value.request_sent
        assert len([r for r in api.requests if r.method == "POST"]) == 1

        refused = make_client("http://127.0.0.1:9/api/v1", http, clock, attempts=1)
        with pytest.raises(errors.APIConnectionError) as never:
            await refused.generate_text(key, TextRequest(prompt="hi"))
        assert not never.value.request_sent


async def test_texts_pass_video_submissions_that_find_the_key_nearly_full(
    api: GenApiEmulator, http: httpx.AsyncClient, clock: ManualClock, key: SecretStr
) -> None:
    # A /video submission leaves the answers' slots (6) to /text, whose
    # member waits for the reply itself; here the key allows 8 requests a window.
    limiter = RateLimiter(clock, SlotRules(limit=8))
    client = GenAPIClient(api.base_url, http=http, limiter=limiter, clock=clock)
    model = next(m for m in VIDEO_MODELS if m.mode == "text-to-video")
    videos = [
        client.generate_video(key, VideoRequest(model=model.id, prompt=f"video {i}"))
        for i in range(3)
    ]
    texts = [client.generate_text(key, TextRequest(prompt=f"text {i}")) for i in range(3)]
    await asyncio.gather(*videos, *texts)
    posts = [str((r.json or {}).get("prompt")) for r in api.requests if r.method == "POST"]
    assert posts[:2] == ["video 0", "video 1"]  # two go at once, as the answers' slots allow
    assert set(posts[2:5]) == {"text 0", "text 1", "text 2"}  # the texts pass the third
    assert posts[5] == "video 2"
