"""The Generation API emulator's own knobs: time, rate limit, keys, credits, faults, CLI."""

from __future__ import annotations

import io
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import av
import httpx2 as httpx
import pytest
from PIL import Image

from bot.sandbox import GenApiEmulator
from bot.sandbox.clips import SEED_CYCLE, identify, seed_of

ROOT = Path(__file__).resolve().parents[2]


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
async def api(clock: FakeClock) -> AsyncIterator[GenApiEmulator]:
    async with GenApiEmulator(time_scale=10.0, clock=clock) as emulator:
        yield emulator


@pytest.fixture
def key(api: GenApiEmulator) -> str:
    return api.create_key(1000)


@pytest.fixture
async def http(api: GenApiEmulator, key: str) -> AsyncIterator[httpx.AsyncClient]:
    headers = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=api.base_url, headers=headers) as client:
        yield client


VIDEO = {"model": "aurora-lite/text-to-video", "prompt": "a red fox"}  # 20 c, 30 service s


async def test_video_completes_after_scaled_time(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    submitted = (await http.post("/video/generate", json=VIDEO)).json()
    assert submitted["status"] == "processing"
    assert (submitted["cost_cents"], submitted["remaining_credits_cents"]) == (20, 980)
    assert api.balance(key) == 980
    poll_url = api.origin + submitted["poll_url"]
    assert "provider=alpha&pollUrl=https%3A%2F%2F" in poll_url

    clock.now += 2.9  # 29 service seconds at time_scale 10
    early = (await http.get(poll_url)).json()
    assert (early["status"], early["outputs"]) == ("processing", [])

    clock.now += 0.1
    done = (await http.get(poll_url)).json()
    assert done["status"] == "completed"
    assert done["outputs"] == [f"{api.origin}/files/{submitted['task_id']}.mp4"]
    assert api.tasks[submitted["task_id"]].completed_at == pytest.approx(1003.0)
    async with httpx.AsyncClient() as anonymous:  # files need no key
        file = await anonymous.get(done["outputs"][0])
    assert file.status_code == 200
    assert file.headers["content-type"] == "video/mp4"
    # A real, playable clip whose every frame names its task.
    with av.open(io.BytesIO(file.content)) as clip:
        colours = [bytes(f.reformat(format="rgb24").planes[0])[:3] for f in clip.decode(video=0)]
    seed = seed_of(submitted["task_id"]) % SEED_CYCLE
    assert [identify((c[0], c[1], c[2])) for c in colours] == [(seed, i) for i in range(24)]


async def test_forced_failure_reports_error_object(
    api: GenApiEmulator, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    api.fail_next_tasks(1, "boom")
    submitted = (await http.post("/video/generate", json=VIDEO)).json()
    api.complete_task_now(submitted["task_id"])
    status = (await http.get(api.origin + submitted["poll_url"])).json()
    assert status["status"] == "failed"
    assert status["outputs"] == []
    assert status["error"] == {"code": "GENERATION_FAILED", "message": "boom"}


async def test_a_restarted_task_counter_reuses_ids_and_each_key_keeps_its_own_task(
    api: GenApiEmulator, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    other = api.create_key(1000)
    api.restart_task_counter()
    first = (await http.post("/video/generate", json=VIDEO)).json()
    second = (await http.post("/video/generate", json=VIDEO)).json()
    assert (first["task_id"], second["task_id"]) == ("task-1", "task-2")

    api.restart_task_counter()
    async with httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {other}"}
    ) as other_http:
        reused = (await other_http.post("/video/generate", json=VIDEO)).json()
        assert reused["task_id"] == "task-1"
        api.fail_task("task-1", "the newer task-1 fails")
        clock.now += 3.0
        theirs = (await other_http.get(api.origin + reused["poll_url"])).json()
    # The same id, two tasks: each key reaches its own, and the earlier one's file is served.
    mine = (await http.get(api.origin + first["poll_url"])).json()
    assert (mine["status"], theirs["status"]) == ("completed", "failed")
    async with httpx.AsyncClient() as anonymous:
        assert (await anonymous.get(mine["outputs"][0])).status_code == 200
    # The same key given an id again reaches the newer task only.
    api.restart_task_counter()
    again = (await http.post("/video/generate", json=VIDEO)).json()
    assert again["task_id"] == "task-1"
    assert (await http.get(api.origin + again["poll_url"])).json()["status"] == "processing"


async def test_rate_limit_rejects_31st_and_does_not_count_it(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    for _ in range(30):
        assert (await http.get("/models")).status_code == 200
    clock.now += 10
    limited = await http.get("/models")
    assert limited.status_code == 429
    assert limited.json()["error"]["code"] == "RATE_LIMITED"
    assert limited.headers["Retry-After"] == "50"  # integer seconds until the oldest slot frees
    clock.now += 20
    assert (await http.get("/models")).headers["Retry-After"] == "30"

    clock.now += 30  # the first 30 leave the window; the two 429s were never in it
    for _ in range(30):
        assert (await http.get("/models")).status_code == 200
    assert (await http.get("/models")).status_code == 429
    assert api.rate_limited_count(key) == 3
    assert api.max_requests_in_window(key) == 30
    assert sum(r.counted for r in api.requests) == 60


@pytest.mark.parametrize("kind", ["revoked", "unknown", "no_prefix", "missing"])
async def test_bad_keys_get_401_without_echo(api: GenApiEmulator, kind: str) -> None:
    key = api.create_key()
    if kind == "revoked":
        api.revoke_key(key)
    sent = {"revoked": key, "unknown": "sk-gen-" + "0" * 32, "no_prefix": "abc123"}.get(kind)
    headers = {} if sent is None else {"Authorization": f"Bearer {sent}"}
    async with httpx.AsyncClient(base_url=api.base_url, headers=headers) as client:
        response = await client.get("/models")
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "UNAUTHORIZED"
    assert sent is None or sent not in response.text


async def test_low_balance_gets_402_and_nothing_charged(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient
) -> None:
    api.set_balance(key, 179)
    body = {"model": "zenith-ultra/text-to-video", "prompt": "x"}  # 6 s default: 180 cents
    response = await http.post("/video/generate", json=body)
    assert response.status_code == 402
    assert response.json()["error"]["code"] == "INSUFFICIENT_CREDITS"
    assert api.balance(key) == 179
    assert api.tasks == {}
    api.set_balance(key, 180)
    ok = (await http.post("/video/generate", json=body)).json()
    assert (ok["cost_cents"], ok["remaining_credits_cents"]) == (180, 0)


async def test_faults_answer_without_processing(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient
) -> None:
    api.inject_fault("500")
    api.inject_fault("html_502")
    api.inject_fault("malformed_json")
    api.inject_fault("drop")

    internal = await http.post("/video/generate", json=VIDEO)
    assert internal.status_code == 500
    assert internal.json()["error"]["code"] == "INTERNAL"
    bad_gateway = await http.post("/video/generate", json=VIDEO)
    assert bad_gateway.status_code == 502
    assert bad_gateway.headers["content-type"].startswith("text/html")
    garbled = await http.post("/video/generate", json=VIDEO)
    assert garbled.status_code == 200
    with pytest.raises(ValueError, match="Expecting"):
        garbled.json()
    with pytest.raises((httpx.RemoteProtocolError, httpx.ReadError)):
        await http.post("/video/generate", json=VIDEO)

    assert api.balance(key) == 1000
    assert api.tasks == {}
    assert [r.status for r in api.requests] == [500, 502, 200, 0]
    assert not any(r.counted for r in api.requests)
    # The queue is spent: the next request is served normally.
    assert (await http.post("/video/generate", json=VIDEO)).status_code == 200
    assert api.balance(key) == 980


async def test_slow_fault_delays_but_processes(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient
) -> None:
    api.inject_fault("slow", delay=0.2)
    started = time.perf_counter()
    response = await http.post("/video/generate", json=VIDEO)
    assert time.perf_counter() - started >= 0.2
    assert response.status_code == 200
    assert api.balance(key) == 980
    started = time.perf_counter()
    await http.get("/models")
    assert time.perf_counter() - started < 0.2


async def test_hidden_models_leave_one_accounts_catalogue_only(
    api: GenApiEmulator, http: httpx.AsyncClient, key: str
) -> None:
    other = api.create_key(1000)
    api.hide_models(key, VIDEO["model"])
    mine = (await http.get("/models")).json()["models"]
    async with httpx.AsyncClient(
        base_url=api.base_url, headers={"Authorization": f"Bearer {other}"}
    ) as other_http:
        theirs = (await other_http.get("/models")).json()["models"]
    assert VIDEO["model"] not in [m["id"] for m in mine["video"]]
    assert VIDEO["model"] in [m["id"] for m in theirs["video"]]
    assert mine["text"] == theirs["text"]
    api.hide_models(key)
    assert (await http.get("/models")).json()["models"] == theirs


async def test_poll_needs_matching_provider(api: GenApiEmulator, http: httpx.AsyncClient) -> None:
    body = {"model": "flash-clip/text-to-video", "prompt": "x"}  # a provider "beta" model
    submitted = (await http.post("/video/generate", json=body)).json()
    assert submitted["poll_url"].endswith(f"/video/{submitted['task_id']}?provider=beta")
    task_url = f"/video/{submitted['task_id']}"
    for params in ({"provider": "alpha"}, {}):  # alpha is the default provider
        mismatch = await http.get(task_url, params=params)
        assert mismatch.status_code == 404
        assert mismatch.json()["error"]["code"] == "NOT_FOUND"
    assert (await http.get(task_url, params={"provider": "beta"})).status_code == 200
    assert (await http.get("/video/no-such-task")).status_code == 404


async def test_text_reply_and_next_text(api: GenApiEmulator, http: httpx.AsyncClient) -> None:
    api.set_next_text("scripted")
    first = (await http.post("/text/generate", json={"prompt": "hi"})).json()
    second = (await http.post("/text/generate", json={"prompt": "hi"})).json()
    assert (first["content"], first["model"]) == ("scripted", "openai/gpt-4o-mini")
    assert second["content"] == "Sandbox reply to: hi"
    assert first["usage"]["total_tokens"] == 3  # ceil(2/4) + ceil(8/4)
    assert first["cost_cents"] == 1  # the minimum charge


def test_command_line_help() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "bot.sandbox", "--help"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0
    assert "--time-scale" in result.stdout


async def test_keys_and_tasks_survive_a_restart_through_the_state_file(
    api: GenApiEmulator, key: str, http: httpx.AsyncClient, tmp_path: Path
) -> None:
    state = tmp_path / "bot.sandbox.json"
    api.persist_to(state)
    submitted = (await http.post("/video/generate", json=VIDEO)).json()  # due in 3 clock s
    assert state.stat().st_mode & 0o777 == 0o600  # it holds the keys

    later = FakeClock()
    later.now = 5000.0  # a new process: another monotonic origin
    async with GenApiEmulator(time_scale=10.0, clock=later) as restarted:
        assert restarted.load(state) == [key]
        assert restarted.balance(key) == 980
        poll = restarted.origin + submitted["poll_url"]
        headers = {"Authorization": f"Bearer {key}"}
        async with httpx.AsyncClient(headers=headers) as client:
            assert (await client.get(poll)).json()["status"] == "processing"
            later.now += 3.5
            done = (await client.get(poll)).json()
            assert done["status"] == "completed"
            assert done["outputs"][0].startswith(restarted.origin + "/files/")
            assert (await client.get(done["outputs"][0])).status_code == 200


def test_a_missing_state_file_is_a_fresh_start(tmp_path: Path) -> None:
    assert GenApiEmulator().load(tmp_path / "none.json") == []


def test_a_damaged_state_file_is_refused(tmp_path: Path) -> None:
    (tmp_path / "bad.json").write_text('{"accounts": 3}')
    with pytest.raises(ValueError, match="not a saved sandbox state"):
        GenApiEmulator().load(tmp_path / "bad.json")


async def test_a_prompts_colour_word_colours_its_pictures_and_clips(
    api: GenApiEmulator, http: httpx.AsyncClient, clock: FakeClock
) -> None:
    image = {"model": "stability/sdxl", "prompt": "a fox, color:red"}
    outputs = (await http.post("/image/generate", json=image)).json()["outputs"]
    assert len(outputs) == 2
    async with httpx.AsyncClient() as anonymous:
        for url in outputs:
            picture = Image.open(io.BytesIO((await anonymous.get(url)).content)).convert("RGB")
            assert picture.size == (32, 32)
            assert picture.getcolors() == [(32 * 32, (255, 0, 0))]
        video = {**VIDEO, "prompt": "a fox colour:#0000ff at dusk"}
        submitted = (await http.post("/video/generate", json=video)).json()
        api.complete_task_now(submitted["task_id"])
        done = (await http.get(api.origin + submitted["poll_url"])).json()
        clip = (await anonymous.get(done["outputs"][0])).content
        # Without a colour word, the usual files: a picture of one pixel.
        plain = {"model": "black-forest-labs/flux-schnell", "prompt": "color:nosuchcolour"}
        (url,) = (await http.post("/image/generate", json=plain)).json()["outputs"]
        assert Image.open(io.BytesIO((await anonymous.get(url)).content)).size == (1, 1)
    with av.open(io.BytesIO(clip)) as container:
        for frame in container.decode(video=0):
            red, green, blue = frame.to_ndarray(format="rgb24").reshape(-1, 3).mean(axis=0)
            assert red < 8 and green < 8 and blue > 247
