"""A video draft's Final starts from its first frame, posted where the service fetches it."""

from __future__ import annotations

import io
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import av
import discord
import pytest

from bot.clock import SystemClock
from bot.discord.draft_flow import post_first_frame
from bot.errors import ValidationFailed
from bot.sandbox.clips import identify, make_clip
from bot.services.joins import JoinService
from bot.services.sequences import JoinLine

FRAME_URL = "https://cdn.discordapp.com/attachments/1/2/first-frame-4.png"


class _Followup:
    def __init__(self, keeps_file: bool) -> None:
        self.keeps_file = keeps_file
        self.sent: list[dict[str, Any]] = []

    async def send(self, content: str, **kwargs: Any) -> Any:
        file: discord.File = kwargs["file"]
        self.sent.append({"content": content, "data": file.fp.read(), **kwargs})
        attachments = [SimpleNamespace(url=FRAME_URL)] if self.keeps_file else []
        return SimpleNamespace(attachments=attachments)


def _interaction(followup: _Followup, edits: list[dict[str, Any]]) -> Any:
    async def download(url: str, path: Path, limit: int) -> int:
        data = make_clip(9, seconds=0.5)
        path.write_bytes(data)
        return len(data)

    async def edit(**kwargs: Any) -> None:
        edits.append(kwargs)

    return SimpleNamespace(
        client=SimpleNamespace(
            services=SimpleNamespace(joins=JoinService(JoinLine(SystemClock()), download))
        ),
        edit_original_response=edit,
        followup=followup,
    )


def _job() -> Any:
    return SimpleNamespace(id=4, outputs=("https://cdn.test/4.mp4",))


async def test_the_first_frame_is_posted_ephemerally_and_its_url_returned() -> None:
    followup, edits = _Followup(keeps_file=True), []
    url = await post_first_frame(_interaction(followup, edits), _job())

    assert url == FRAME_URL
    assert "first frame of draft #4" in edits[0]["content"]
    (sent,) = followup.sent
    assert sent["ephemeral"] is True and sent["wait"] is True
    with av.open(io.BytesIO(sent["data"])) as image:
        (frame,) = image.decode(video=0)
    rgb = frame.reformat(format="rgb24")
    plane = rgb.planes[0]
    at = (rgb.height // 2) * plane.line_size + (rgb.width // 2) * 3
    pixel = bytes(plane)[at : at + 3]
    assert identify((pixel[0], pixel[1], pixel[2])) == (9, 0)  # clip 9's frame 0


async def test_a_frame_discord_did_not_keep_is_refused() -> None:
    with pytest.raises(ValidationFailed, match="did not keep the frame"):
        await post_first_frame(_interaction(_Followup(keeps_file=False), []), _job())
