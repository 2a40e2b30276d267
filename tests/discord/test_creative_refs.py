"""Reference images read from the messages that hold them: a fresh URL each time, or gone;
the autocompletes of ``style:`` (the member's tiers) and ``from-results:``."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

import discord
import pytest

from bot.discord import creative_commands as commands
from bot.discord.creative_commands import MessageReferences
from bot.domain import Actor, ImageRef, JobStatus, Kind, SafetyRecord, Visibility
from bot.services.generation import Requester
from tests.support.jobs import new_job
from tests.support.stack import Stack


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


def typing_in(stack: Stack, guild_id: int = 1) -> Any:
    """An autocomplete interaction of the server, as the autocompletes read it."""
    return SimpleNamespace(guild_id=guild_id, client=SimpleNamespace(services=stack.services))


async def test_styles_autocomplete_lists_only_the_styles_of_the_members_tiers(
    stack: Stack, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = Actor(7)
    await stack.services.guild_config.set_tier(1, 500, "Gold", actor=admin)
    creative = stack.services.creative
    await creative.add_style(1, "noir", "film noir", [], actor=admin)
    await creative.add_style(1, "open", "bright", [], actor=admin)
    await creative.set_style_tiers(1, "noir", [500], actor=admin)
    seen: dict[str, list[str]] = {}
    for who, member in (
        ("member", Requester(1, 10, 100)),
        ("patron", Requester(1, 10, 101, role_ids=frozenset({500}))),
        ("admin", Requester(1, 10, 102, manage_guild=True)),
    ):
        monkeypatch.setattr(commands, "requester", lambda _i, member=member: member)
        choices = await commands.style_autocomplete(typing_in(stack), "")
        seen[who] = [c.value for c in choices]

    assert seen == {"member": ["open"], "patron": ["noir", "open"], "admin": ["noir", "open"]}


async def test_results_autocomplete_offers_recent_images_by_prompt_held_ones_left_out(
    stack: Stack,
) -> None:
    jobs = []
    for index, prompt in enumerate(("a red kite", "a blue kite", "a held kite")):
        job = await stack.db.jobs.insert(
            dataclasses.replace(
                new_job(f"k{index}", kind=Kind.IMAGE, guild=1, created_at=1000.0 + index),
                prompt_summary=prompt,
            )
        )
        await stack.db.jobs.finish(job.id, JobStatus.COMPLETED, ("https://x/k.png",), None, 2.0)
        jobs.append(job.id)
    held = SafetyRecord(f"j{jobs[2]}", 1, 7, 1, "image", "p", 0.7, Visibility.HELD, "s", 0.0)
    assert await stack.db.safety.add(held)

    kites = await commands.result_autocomplete(typing_in(stack), "kite")
    more = await commands.result_autocomplete(typing_in(stack), f"j{jobs[1]} red")

    assert [c.value for c in kites] == [f"j{jobs[1]}", f"j{jobs[0]}"]  # newest first
    assert kites[0].name == f"j{jobs[1]} · a blue kite"
    assert [c.value for c in more] == [f"j{jobs[1]} j{jobs[0]}"]  # one more after those typed
