"""The Discord side of delivery, without Discord: file names, downloads, failure classes."""

import aiohttp
import discord
import httpx2 as httpx
import pytest

from bot.announce import TooLarge, classify, download, file_name
from bot.clock import ManualClock
from bot.sandbox import GenApiEmulator


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
