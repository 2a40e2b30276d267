"""Reference images read from the messages that hold them: a fresh URL each time, or gone."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import discord

from bot.discord.creative_commands import MessageReferences
from bot.domain import ImageRef


class Channel(discord.abc.Messageable):
    """A channel whose messages' attachment URLs are re-signed on every fetch, as Discord's."""

    def __init__(self, messages: dict[int, list[str]]) -> None:
        self.messages = messages
        self.fetches = 0

    async def _get_channel(self) -> Any:
        return self

    async def fetch_message(self, id: int, /) -> Any:
        self.fetches += 1
        if id not in self.messages:
            response = SimpleNamespace(status=404, reason="Not Found")
            raise discord.NotFound(response, {"code": 10008, "message": "Unknown Message"})
        return SimpleNamespace(
            attachments=[
                SimpleNamespace(url=f"https://cdn.discordapp.com/{name}?ex={self.fetches}")
                for name in self.messages[id]
            ]
        )


class Client:
    def __init__(self, channel: Channel) -> None:
        self.channel = channel

    def get_channel(self, channel_id: int) -> Channel | None:
        return self.channel if channel_id == 1 else None

    async def fetch_channel(self, channel_id: int) -> Channel:
        response = SimpleNamespace(status=404, reason="Not Found")
        raise discord.NotFound(response, {"code": 10003, "message": "Unknown Channel"})


async def test_a_reference_is_asked_for_a_fresh_url_and_gone_when_its_message_is() -> None:
    channel = Channel({10: ["a.png", "b.png"]})
    references = MessageReferences(Client(channel))  # type: ignore[arg-type]

    first = await references.url(ImageRef(1, 10, 1))
    again = await references.url(ImageRef(1, 10, 1))

    assert first == "https://cdn.discordapp.com/b.png?ex=1"
    assert again == "https://cdn.discordapp.com/b.png?ex=2"  # never the stored one
    assert await references.url(ImageRef(1, 10, 2)) is None  # no such attachment
    assert await references.url(ImageRef(1, 11, 0)) is None  # the message was deleted
    assert await references.url(ImageRef(2, 10, 0)) is None  # the channel is gone
