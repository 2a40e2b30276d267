"""Discord's command permissions, as the rule buttons are held to.

Every case follows the flowchart of Discord's change log ("Permissions v2") and the
Application Commands → Permissions section: channel first, then user, roles, @everyone;
command-level entries before the app's; ``default_member_permissions`` last; admins always.
"""

import asyncio
from types import SimpleNamespace
from typing import Any

import discord
import pytest

from bot.discord.command_access import (
    CHANNEL,
    ROLE,
    USER,
    CommandAccess,
    Invoker,
    Override,
    may_use_command,
    parse_overrides,
)
from bot.errors import ValidationFailed

APP = 1000
VIDEO = 2000
GUILD = 500
ALL_CHANNELS = GUILD - 1
HERE = 600
ELSEWHERE = 601
PATRON = 700
MUTED = 701
ANA = 800
MANAGE_GUILD = 1 << 5
ADMINISTRATOR = 1 << 3
USE_APP_COMMANDS = 1 << 31


def member(*roles: int, permissions: int = USE_APP_COMMANDS, channel: int = HERE) -> Invoker:
    return Invoker(GUILD, channel, ANA, frozenset(roles), permissions)


def allowed(
    invoker: Invoker,
    *,
    command: list[Override] | None = None,
    app: list[Override] | None = None,
    default: int | None = None,
) -> bool:
    overrides = {}
    if command is not None:
        overrides[VIDEO] = tuple(command)
    if app is not None:
        overrides[APP] = tuple(app)
    return may_use_command(
        application_id=APP,
        command_id=VIDEO,
        default_member_permissions=default,
        overrides=overrides,
        invoker=invoker,
    )


def everyone(permission: bool) -> Override:
    return Override(GUILD, ROLE, permission)


def role(role_id: int, permission: bool) -> Override:
    return Override(role_id, ROLE, permission)


def user(permission: bool) -> Override:
    return Override(ANA, USER, permission)


def channel(channel_id: int, permission: bool) -> Override:
    return Override(channel_id, CHANNEL, permission)


def test_nothing_configured_lets_everyone_use_a_command_without_defaults() -> None:
    assert allowed(member())


def test_limiting_video_to_a_role_bars_the_others() -> None:
    patrons_only = [everyone(False), role(PATRON, True)]
    assert allowed(member(PATRON), command=patrons_only)
    assert not allowed(member(), command=patrons_only)
    assert not allowed(member(MUTED), command=patrons_only)


def test_the_user_entry_beats_the_roles_and_everyone() -> None:
    assert allowed(member(), command=[everyone(False), user(True)])
    assert not allowed(member(PATRON), command=[role(PATRON, True), user(False)])


def test_one_allowing_role_is_enough() -> None:
    assert allowed(member(PATRON, MUTED), command=[role(PATRON, True), role(MUTED, False)])
    assert not allowed(member(MUTED), command=[role(PATRON, True), role(MUTED, False)])


def test_a_role_entry_beats_everyone() -> None:
    assert not allowed(member(MUTED), command=[everyone(True), role(MUTED, False)])


def test_channel_entries_refuse_first_and_the_channel_beats_all_channels() -> None:
    only_here = [channel(ALL_CHANNELS, False), channel(HERE, True)]
    assert allowed(member(), command=only_here)
    assert not allowed(member(channel=ELSEWHERE), command=only_here)
    # A channel denied refuses even a user allowed by name.
    assert not allowed(member(), command=[channel(HERE, False), user(True)])


def test_command_entries_beat_the_apps() -> None:
    # The app is barred for everyone, the command allowed: the command's entry decides.
    assert allowed(member(), command=[everyone(True)], app=[everyone(False)])
    # The command's channel entry beats the app's channel entry.
    assert allowed(member(), command=[channel(HERE, True)], app=[channel(HERE, False)])
    assert not allowed(member(), command=[channel(HERE, False)], app=[channel(HERE, True)])


def test_app_level_entries_apply_to_commands_without_their_own() -> None:
    assert not allowed(member(), app=[everyone(False), role(PATRON, True)])
    assert allowed(member(PATRON), app=[everyone(False), role(PATRON, True)])
    assert not allowed(member(channel=ELSEWHERE), app=[channel(ALL_CHANNELS, False)])


def test_default_member_permissions_still_bind_after_an_app_level_allow() -> None:
    # Permissions v2: an app-level grant does not lift the command's defaults ...
    assert not allowed(member(PATRON), app=[role(PATRON, True)], default=MANAGE_GUILD)
    # ... a command-level grant does.
    assert allowed(member(PATRON), command=[role(PATRON, True)], default=MANAGE_GUILD)
    assert allowed(
        member(permissions=USE_APP_COMMANDS | MANAGE_GUILD), app=[everyone(True)], default=32
    )


@pytest.mark.parametrize(
    ("default", "permissions", "expected"),
    [
        (None, 0, True),
        (0, USE_APP_COMMANDS | MANAGE_GUILD, False),  # "0": admins (and overrides) only
        (MANAGE_GUILD, USE_APP_COMMANDS, False),
        (MANAGE_GUILD, USE_APP_COMMANDS | MANAGE_GUILD, True),
        (MANAGE_GUILD | 1, MANAGE_GUILD, False),  # every bit is needed
    ],
)
def test_default_member_permissions(default: int | None, permissions: int, expected: bool) -> None:
    assert allowed(member(permissions=permissions), default=default) is expected


def test_administrators_use_every_command() -> None:
    admin = member(permissions=ADMINISTRATOR)
    assert allowed(admin, command=[everyone(False), channel(HERE, False), user(False)], default=0)


class FakeHttp:
    """Discord's answers to ``GET .../commands/permissions``; each read waits for ``gate``."""

    def __init__(self) -> None:
        self.data: list[dict[str, Any]] = []
        self.reads = 0
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail: Exception | None = None

    async def get_guild_application_command_permissions(
        self, application_id: int, guild_id: int
    ) -> list[dict[str, Any]]:
        self.reads += 1
        answer = [dict(item) for item in self.data]
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return answer


class FakeTree:
    async def fetch_commands(self, *, guild: Any = None) -> list[Any]:
        dmp = None
        return [
            SimpleNamespace(
                name="video",
                id=VIDEO,
                default_member_permissions=dmp,
                type=discord.AppCommandType.chat_input,
            )
        ]


def fake_bot(http: FakeHttp) -> Any:
    settings = SimpleNamespace(dev_guild_id=None)
    return SimpleNamespace(
        http=http, tree=FakeTree(), application_id=APP, services=SimpleNamespace(settings=settings)
    )


def patrons_only() -> dict[str, Any]:
    entries = [
        {"id": str(GUILD), "type": 1, "permission": False},
        {"id": str(PATRON), "type": 1, "permission": True},
    ]
    return {
        "id": str(VIDEO),
        "application_id": str(APP),
        "guild_id": str(GUILD),
        "permissions": entries,
    }


async def test_overrides_are_read_once_then_follow_the_gateway_updates() -> None:
    http = FakeHttp()
    http.data = [patrons_only()]
    access = CommandAccess(fake_bot(http))
    assert not await access.allows("video", member())
    assert await access.allows("video", member(PATRON))
    assert http.reads == 1  # cached
    access.updated(GUILD, VIDEO, [])  # the admin removed them: everyone may again
    assert await access.allows("video", member())
    access.updated(GUILD, APP, [everyone(False)])  # the app barred for everyone
    assert not await access.allows("video", member())
    assert http.reads == 1
    access.forget()  # a new gateway session: read again
    http.data = []
    assert await access.allows("video", member())
    assert http.reads == 2


async def test_a_read_that_predates_an_update_is_not_kept() -> None:
    http = FakeHttp()
    http.gate.clear()
    access = CommandAccess(fake_bot(http))
    pending = asyncio.create_task(access.allows("video", member()))
    while http.reads == 0:
        await asyncio.sleep(0)
    http.data = [patrons_only()]  # what Discord has now ...
    access.updated(GUILD, VIDEO, parse_overrides(patrons_only()["permissions"]))  # ... announced
    http.gate.set()
    assert await pending  # the click answered by what was read when it came
    assert not await access.allows("video", member())  # but the stale read was not kept
    assert http.reads == 2


async def test_a_guild_whose_overrides_cannot_be_read_refuses() -> None:
    class Failing(FakeHttp):
        async def get_guild_application_command_permissions(
            self, application_id: int, guild_id: int
        ) -> list[dict[str, Any]]:
            raise discord.HTTPException(SimpleNamespace(status=503, reason="down"), "down")

    access = CommandAccess(fake_bot(Failing()))
    with pytest.raises(ValidationFailed, match="could not check"):
        await access.allows("video", member())
    unregistered = CommandAccess(fake_bot(FakeHttp()))
    with pytest.raises(ValidationFailed, match="could not check"):
        await unregistered.allows("nothing-registered", member())


async def test_warming_reads_ahead_so_that_a_click_reads_nothing() -> None:
    http = FakeHttp()
    http.data = [patrons_only()]
    access = CommandAccess(fake_bot(http))
    assert access.cached("video", member()) is None  # nothing known: a form checks on submit
    access.warm(GUILD)
    access.warm(GUILD)  # GUILD_CREATE and READY's re-read together: one read
    while access.cached("video", member()) is None:
        await asyncio.sleep(0)
    assert http.reads == 1
    assert access.cached("video", member()) is False
    assert access.cached("video", member(PATRON)) is True
    assert not await access.allows("video", member())
    assert http.reads == 1


async def test_a_read_ahead_cut_short_by_the_bot_closing_ends_quietly() -> None:
    """A read ahead still running when the bot closes (its HTTP session with it) is no error:
    no "Task exception was never retrieved" traceback in the log at shutdown."""
    http = FakeHttp()
    http.gate.clear()
    bot = fake_bot(http)
    bot.is_closed = lambda: http.fail is not None
    access = CommandAccess(bot)
    access.warm(GUILD)
    [task] = access._warming
    while http.reads == 0:
        await asyncio.sleep(0)
    http.fail = RuntimeError("Session is closed")  # aiohttp's, once the bot closed
    http.gate.set()
    await asyncio.wait([task])
    assert task.exception() is None
    assert access.cached("video", member()) is None  # nothing was learnt


async def test_an_update_for_a_guild_not_known_yet_reads_it_and_an_overtaken_read_is_redone() -> (
    None
):
    http = FakeHttp()
    http.gate.clear()
    access = CommandAccess(fake_bot(http))
    access.updated(GUILD, VIDEO, [])  # a guild not read yet: read it now
    while http.reads == 0:
        await asyncio.sleep(0)
    http.data = [patrons_only()]
    access.updated(GUILD, VIDEO, parse_overrides(patrons_only()["permissions"]))
    http.gate.set()
    while access.cached("video", member()) is None:
        await asyncio.sleep(0)
    assert http.reads == 2  # the read the update overtook was not kept, and was redone
    assert access.cached("video", member()) is False
