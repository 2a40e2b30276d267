"""Interaction state, the test-facing InteractionHandle, and option payload building."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .errors import InvocationError
from .models import Channel, Message, Role, User, World
from .payloads import channel_payload, member_payload, role_payload, user_payload

if TYPE_CHECKING:
    from .actions import UserActions

APPLICATION_COMMAND, MESSAGE_COMPONENT, AUTOCOMPLETE, MODAL_SUBMIT = 2, 3, 4, 5
SUB_COMMAND, SUB_COMMAND_GROUP = 1, 2
STRING, INTEGER, BOOLEAN, USER, CHANNEL = 3, 4, 5, 6, 7
ROLE, MENTIONABLE, NUMBER, ATTACHMENT = 8, 9, 10, 11


@dataclass
class CallbackRecord:
    """One POST to ``/interactions/{id}/{token}/callback``.

    Attributes:
        type: Callback type (4 message, 5 defer, 6 defer update, 7 update, 8 choices, 9 modal).
        data: The callback's ``data``.
        at: Emulator clock at arrival.
        latency: ``at - dispatched_at``.
        status: HTTP status answered (e.g. 404 when past the ack deadline).
        error: Error body when rejected.
    """

    type: int
    data: dict[str, Any] | None
    at: float
    latency: float
    status: int = 200
    error: dict[str, Any] | None = None

    @property
    def accepted(self) -> bool:
        return self.status < 300


@dataclass
class InteractionState:
    """Server-side state of one dispatched interaction."""

    id: int
    token: str
    type: int
    guild_id: int
    channel_id: int
    user_id: int
    dispatched_at: float
    payload: dict[str, Any]
    callbacks: list[CallbackRecord] = field(default_factory=list)
    acked: bool = False
    original_id: int | None = None
    followup_ids: list[int] = field(default_factory=list)
    modal: dict[str, Any] | None = None
    choices: list[dict[str, Any]] | None = None
    message_id: int | None = None
    app_permissions: int = 0
    #: A modal submission's: the interaction that opened the modal.
    opener: InteractionState | None = None
    #: Set once the modal this interaction opened was submitted and the bot answered that.
    submission_answered: asyncio.Event = field(default_factory=asyncio.Event)


class InteractionHandle:
    """What a test holds after invoking something; awaits the bot's responses."""

    def __init__(self, emulator: UserActions, state: InteractionState) -> None:
        self._emu = emulator
        self.state = state

    @property
    def id(self) -> int:
        return self.state.id

    @property
    def token(self) -> str:
        return self.state.token

    @property
    def dispatched_at(self) -> float:
        return self.state.dispatched_at

    @property
    def payload(self) -> dict[str, Any]:
        """The INTERACTION_CREATE body that was dispatched."""
        return self.state.payload

    @property
    def callbacks(self) -> list[CallbackRecord]:
        return self.state.callbacks

    @property
    def modal(self) -> dict[str, Any] | None:
        """The modal ``data`` when the bot answered with type 9."""
        return self.state.modal

    @property
    def choices(self) -> list[dict[str, Any]] | None:
        """Autocomplete choices when the bot answered with type 8."""
        return self.state.choices

    @property
    def followups(self) -> list[Message]:
        return [self._emu.world.messages[i] for i in self.state.followup_ids]

    def original(self) -> Message | None:
        """The @original message (None before a type 4/5 callback, or component's message)."""
        if self.state.original_id is None:
            return None
        return self._emu.world.messages[self.state.original_id]

    async def wait_callback(self, timeout: float = 15) -> CallbackRecord:
        """Wait for the first callback attempt (accepted or not).

        Discord's 3 s deadline is the emulator's to enforce (a late callback is recorded as
        refused); ``timeout`` only bounds the wait on a loaded test machine.
        """
        return await self._emu.signal.wait_for(
            lambda: self.state.callbacks[0] if self.state.callbacks else None,
            timeout,
            f"a callback to interaction {self.id}",
        )

    async def wait_original(
        self,
        predicate: Callable[[Message], bool] = lambda m: True,
        timeout: float = 10,
        *,
        include_loading: bool = False,
    ) -> Message:
        """Wait until @original exists, is no longer "thinking…" and matches ``predicate``."""

        def check() -> Message | None:
            message = self.original()
            if message is None or (message.loading and not include_loading):
                return None
            return message if predicate(message) else None

        return await self._emu.signal.wait_for(check, timeout, f"@original of {self.id}")

    async def wait_followup(
        self, predicate: Callable[[Message], bool] = lambda m: True, timeout: float = 10
    ) -> Message:
        """Wait for a followup message matching ``predicate``."""
        return await self._emu.signal.wait_for(
            lambda: next((m for m in self.followups if predicate(m)), None),
            timeout,
            f"a followup of {self.id}",
        )


def _find_option(options: list[dict[str, Any]], name: str, kind: int) -> dict[str, Any] | None:
    return next((o for o in options if o.get("name") == name and o.get("type") == kind), None)


def leaf_spec(
    command: dict[str, Any] | None, subcommand: str | None, group: str | None
) -> list[dict[str, Any]] | None:
    """Return the registered option specs the user fills in (None if unknown)."""
    if command is None:
        return None
    options = command.get("options") or []
    if group is not None:
        grp = _find_option(options, group, SUB_COMMAND_GROUP)
        if grp is None:
            raise InvocationError(f"/{command['name']} has no subcommand group {group!r}")
        options = grp.get("options") or []
    if subcommand is not None:
        sub = _find_option(options, subcommand, SUB_COMMAND)
        if sub is None:
            raise InvocationError(f"/{command['name']} has no subcommand {subcommand!r}")
        return sub.get("options") or []
    if any(o.get("type") in (SUB_COMMAND, SUB_COMMAND_GROUP) for o in options):
        raise InvocationError(f"/{command['name']} needs a subcommand")
    return options


def _infer_type(value: Any) -> int:
    if isinstance(value, bool):
        return BOOLEAN
    if isinstance(value, int):
        return INTEGER
    if isinstance(value, float):
        return NUMBER
    if isinstance(value, User):
        return USER
    if isinstance(value, Channel):
        return CHANNEL
    if isinstance(value, Role):
        return ROLE
    return STRING


class OptionBuilder:
    """Turns ``{name: value}`` into Discord's option list plus ``resolved`` data."""

    def __init__(
        self,
        world: World,
        guild_id: int,
        member_permissions: int,
        join: Callable[[int, int], None] | None = None,
    ) -> None:
        self.world = world
        self.join = join
        self.guild_id = guild_id
        self.member_permissions = member_permissions
        self.resolved: dict[str, dict[str, Any]] = {}

    def build(
        self,
        spec: list[dict[str, Any]] | None,
        values: dict[str, Any],
        *,
        focused: str | None = None,
        attachments: dict[str, dict[str, Any]] | None = None,
    ) -> list[dict[str, Any]]:
        """Build leaf options, validating against ``spec`` like the Discord client does."""
        by_name = {o["name"]: o for o in spec or []}
        if spec is not None:
            unknown = set(values) - set(by_name)
            if unknown:
                raise InvocationError(f"unknown option(s) {sorted(unknown)}")
            if focused is None:
                given = {*values, *(attachments or {})}
                missing = [o["name"] for o in spec if o.get("required") and o["name"] not in given]
                if missing:
                    raise InvocationError(f"missing required option(s) {missing}")
        result = []
        for name, value in values.items():
            option_spec = by_name.get(name, {})
            kind = option_spec.get("type") or _infer_type(value)
            if name == focused:
                result.append({"name": name, "type": kind, "value": str(value), "focused": True})
                continue
            result.append(
                {"name": name, "type": kind, "value": self._encode(kind, value, option_spec)}
            )
        for name, attachment in (attachments or {}).items():
            if spec is not None and by_name.get(name, {}).get("type") != ATTACHMENT:
                raise InvocationError(f"{name!r} is not an attachment option")
            self.resolved.setdefault("attachments", {})[attachment["id"]] = attachment
            result.append({"name": name, "type": ATTACHMENT, "value": attachment["id"]})
        return result

    def _encode(self, kind: int, value: Any, spec: dict[str, Any]) -> Any:
        if kind in (USER, CHANNEL, ROLE, MENTIONABLE):
            return self._resolve(kind, int(getattr(value, "id", value)))
        if kind == INTEGER and (isinstance(value, bool) or not isinstance(value, int)):
            raise InvocationError(f"{spec.get('name')}: {value!r} is not an integer")
        encoded: Any = {STRING: str, NUMBER: float, BOOLEAN: bool}.get(kind, lambda v: v)(value)
        choices = spec.get("choices")
        if choices and encoded not in [c["value"] for c in choices]:
            raise InvocationError(f"{spec.get('name')}: {value!r} is not one of the choices")
        if kind in (INTEGER, NUMBER):
            low, high = spec.get("min_value"), spec.get("max_value")
            if (low is not None and encoded < low) or (high is not None and encoded > high):
                raise InvocationError(f"{spec.get('name')}: {value!r} out of range")
        if kind == STRING:
            low, high = spec.get("min_length"), spec.get("max_length")
            if (low is not None and len(encoded) < low) or (
                high is not None and len(encoded) > high
            ):
                raise InvocationError(f"{spec.get('name')}: length of {value!r} out of range")
        return encoded

    def _resolve(self, kind: int, target: int) -> str:
        guild = self.world.guilds[self.guild_id]
        if kind in (USER, MENTIONABLE) and target in self.world.users:
            if self.join is not None:
                self.join(self.guild_id, target)
            self.resolved.setdefault("users", {})[str(target)] = user_payload(
                self.world.users[target]
            )
            member = guild.members.get(target)
            if member is not None:
                data = member_payload(
                    self.world, member, with_user=False, permissions=self.member_permissions
                )
                for key in ("deaf", "mute"):
                    data.pop(key)
                self.resolved.setdefault("members", {})[str(target)] = data
        elif kind in (ROLE, MENTIONABLE) and target in guild.roles:
            self.resolved.setdefault("roles", {})[str(target)] = role_payload(guild.roles[target])
        elif kind == CHANNEL and target in self.world.channels:
            channel = self.world.channels[target]
            self.resolved.setdefault("channels", {})[str(target)] = {
                k: channel_payload(channel, self.member_permissions)[k]
                for k in ("id", "name", "type", "permissions", "parent_id", "guild_id")
            }
        else:
            raise InvocationError(f"unknown user/role/channel id {target}")
        return str(target)


def wrap_options(
    leaf: list[dict[str, Any]], subcommand: str | None, group: str | None
) -> list[dict[str, Any]]:
    """Nest leaf options under subcommand / group options."""
    options = leaf
    if subcommand is not None:
        options = [{"name": subcommand, "type": SUB_COMMAND, "options": options}]
    if group is not None:
        options = [{"name": group, "type": SUB_COMMAND_GROUP, "options": options}]
    return options
