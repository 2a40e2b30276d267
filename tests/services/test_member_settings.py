"""Members' own defaults (``/settings``): stored on both engines, and applied where the
member gave no option, with the server's policy winning (a forbidden default is left out with a
note)."""

import asyncio
from collections.abc import Awaitable, Callable
from types import SimpleNamespace
from typing import Any

import pytest

from bot.clock import ManualClock
from bot.domain import MemberSettings, ModelLists
from bot.errors import ValidationFailed
from bot.services.generation import ImageOptions, Requester, TextOptions, VideoOptions
from bot.services.member_settings import CHOOSE_VIDEO_MODEL, MemberSettingsService
from bot.storage import Database
from tests.support.stack import Stack

USER = 100
CHEAP = "aurora-lite/text-to-video"  # 5 or 10 s
DEAR = "zenith-ultra/text-to-video"  # 6 or 10 s


async def test_a_member_without_settings_gets_the_defaults(store: Database) -> None:
    assert await store.members.get(USER) == MemberSettings.default(USER)


async def test_settings_are_kept_across_a_reopen_and_replaced_whole(
    store: Database, open_db: Callable[[ManualClock], Awaitable[Database]]
) -> None:
    mine = MemberSettings(
        USER,
        text_model="openai/gpt-4o-mini",
        image_model="stability/sdxl",
        video_model=CHEAP,
        aspect_ratio="9:16",
        video_duration=10.0,
        prompt_suffix="cinematic, 35 mm",
        private=True,
        remix=True,
        notify_dm=True,
    )
    await store.members.save(mine, at=1000.0)
    await store.members.save(MemberSettings(USER + 1, private=True), at=1000.0)
    await store.close()
    store = await open_db(ManualClock())
    try:
        assert await store.members.get(USER) == mine
        cleared = MemberSettings(USER, video_model=DEAR)
        await store.members.save(cleared, at=1001.0)
        assert await store.members.get(USER) == cleared
        assert await store.members.get(USER + 1) == MemberSettings(USER + 1, private=True)
    finally:
        await store.close()


async def test_update_checks_values_and_changes_only_what_is_given(stack: Stack) -> None:
    members = stack.services.members
    await stack.generation.catalogue(1)  # cached, as after the bot's first fetch
    await members.update(USER, {"video_model": CHEAP, "video_duration": 10})
    mine = await members.update(USER, {"prompt_suffix": "  in   watercolour ", "private": True})
    assert (mine.video_model, mine.video_duration) == (CHEAP, 10.0)
    assert (mine.prompt_suffix, mine.private) == ("in watercolour", True)
    for bad, sentence in (
        ({"video_model": "openai/gpt-4o-mini"}, "is not a video model"),
        ({"aspect_ratio": "4:3"}, "Aspect ratio must be one of"),
        ({"video_duration": 61}, "between 1 and 60 seconds"),
        ({"prompt_suffix": "x" * 201}, "too long"),
    ):
        with pytest.raises(ValidationFailed, match=sentence):
            await members.update(USER, bad)
    assert await members.get(USER) == mine  # a refused change changed nothing
    assert (await members.update(USER, {"video_model": None})).video_model is None


async def test_defaults_fill_only_what_the_member_left_out(stack: Stack, who: Requester) -> None:
    members = stack.services.members
    await stack.generation.catalogue(who.guild_id)
    await members.update(
        who.user_id,
        {
            "text_model": "meta/llama-3.1-70b",
            "image_model": "stability/sdxl",
            "video_model": CHEAP,
            "video_duration": 10,
            "aspect_ratio": "9:16",
            "prompt_suffix": "in watercolour",
        },
    )
    video = await members.apply_member_defaults(who, VideoOptions("a fox", ""))
    assert (
        video.options == VideoOptions("a fox in watercolour", CHEAP, 10.0, "9:16")
        and video.note is None
    )
    typed = await members.apply_member_defaults(who, VideoOptions("a fox", DEAR, 6, "1:1"))
    assert (typed.options.model, typed.options.duration, typed.options.aspect_ratio) == (
        DEAR,
        6,
        "1:1",
    )
    image = await members.apply_member_defaults(who, ImageOptions("a cat"))
    assert image.options == ImageOptions("a cat in watercolour", "stability/sdxl", "9:16")
    text = await members.apply_member_defaults(who, TextOptions("hello"))
    assert text.options == TextOptions("hello", "meta/llama-3.1-70b")  # no suffix on text


async def test_a_default_the_tiers_forbid_is_left_out_with_a_note(
    stack: Stack, who: Requester
) -> None:
    members = stack.services.members
    await stack.generation.catalogue(who.guild_id)
    await stack.db.policy.set_model_lists(who.guild_id, ModelLists(allowed=("aurora-lite/",)))
    await members.update(
        who.user_id, {"text_model": "meta/llama-3.1-70b", "video_model": DEAR, "video_duration": 6}
    )
    text = await members.apply_member_defaults(who, TextOptions("hello"))
    assert text.options.model is None  # the usual default: the first model the tiers allow
    assert text.note is not None and "`meta/llama-3.1-70b` is not available to you here" in (
        text.note
    )
    with pytest.raises(ValidationFailed) as refused:
        await members.apply_member_defaults(who, VideoOptions("a fox", ""))
    assert f"`{DEAR}` is not available to you here" in str(refused.value)
    assert CHOOSE_VIDEO_MODEL in str(refused.value)
    # A duration the chosen model does not make: its own default, said once.
    chosen = await members.apply_member_defaults(who, VideoOptions("a fox", CHEAP))
    assert chosen.options.duration is None
    assert chosen.note == (
        "Aurora Lite does not make 6 s videos (your default); its default length was used."
    )
    assert stack.posts() == 0


async def test_a_video_without_model_nor_default_is_refused_before_any_call(
    stack: Stack, who: Requester
) -> None:
    with pytest.raises(ValidationFailed, match="Choose a video model"):
        await stack.services.members.apply_member_defaults(who, VideoOptions("a fox", ""))
    assert stack.posts() == 0


class _GatedMembers:
    """``db.members`` counting its reads; a read may be held after it read the row."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.reads = 0
        self.gate: asyncio.Event | None = None

    async def get(self, user_id: int) -> MemberSettings:
        self.reads += 1
        gate = self.gate
        found = await self.real.get(user_id)
        if gate is not None:
            await gate.wait()
        return found

    async def save(self, settings: MemberSettings, at: float) -> None:
        await self.real.save(settings, at)


def _kept(store: Database) -> tuple[MemberSettingsService, _GatedMembers]:
    members = _GatedMembers(store.members)
    db = SimpleNamespace(members=members)
    service = MemberSettingsService(
        db=db,  # type: ignore[arg-type]
        billing=None,  # type: ignore[arg-type]
        catalogue=SimpleNamespace(current=None),  # type: ignore[arg-type]
        clock=ManualClock(),
        cache=True,
    )
    return service, members


async def test_a_process_alone_reads_a_members_settings_once_and_follows_their_changes(
    store: Database,
) -> None:
    # Read before a command's acknowledgement (is the answer private?), a database read waited
    # behind a burst's other work: the one process that changes them keeps them.
    service, members = _kept(store)
    assert (await service.get(USER)).private is False
    assert (await service.get(USER)).private is False
    assert members.reads == 1
    await service.update(USER, {"private": True})
    assert (await service.get(USER)).private is True
    assert await store.members.get(USER) == await service.get(USER)


async def test_a_read_that_overlapped_a_change_is_not_kept(store: Database) -> None:
    service, members = _kept(store)
    held = asyncio.Event()
    members.gate = held
    early = asyncio.create_task(service.get(USER))  # reads "public", then is held
    async with asyncio.timeout(10):  # a read that never starts fails, never hangs the run
        while members.reads == 0:
            await asyncio.sleep(0)
    members.gate = None
    await service.update(USER, {"private": True})
    held.set()
    assert (await early).private is False  # begun before the change: what it read
    assert (await service.get(USER)).private is True  # never the overlapping read's copy
