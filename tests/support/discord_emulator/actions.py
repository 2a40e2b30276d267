"""User-side actions on the emulator: slash commands, autocomplete, components, modals."""

from __future__ import annotations

import datetime as dt
import re
import secrets
from collections.abc import Callable
from typing import Any

from . import permissions as perms
from .errors import InvocationError
from .gateway import GUILD_MEMBERS_INTENT, GatewayHub
from .interactions import (
    APPLICATION_COMMAND,
    AUTOCOMPLETE,
    MESSAGE_COMPONENT,
    MODAL_SUBMIT,
    InteractionHandle,
    InteractionState,
    OptionBuilder,
    leaf_spec,
    wrap_options,
)
from .messages import MessageService
from .models import Member, Mentions, Message, World
from .monetization import Shop
from .payloads import (
    attachment_payload,
    channel_payload,
    command_permissions_payload,
    member_payload,
    message_payload,
    user_payload,
)
from .waiting import ChangeSignal

ATTACHMENT_SIZE_LIMIT = 10 * 1024 * 1024
GUILD_CONTEXT, BOT_DM_CONTEXT = 0, 1
"""Interaction context types (Discord: Interaction Context Types; 2, a group DM, not modelled)."""


class UserActions:
    """Mixin of what a Discord *user* can do; DiscordEmulator provides the state."""

    world: World
    hub: GatewayHub
    shop: Shop
    msgs: MessageService
    signal: ChangeSignal
    clock: Callable[[], float]
    interactions: dict[int, InteractionState]
    interactions_by_token: dict[str, InteractionState]
    open_modals: dict[str, InteractionState]

    def set_command_permissions(
        self, guild_id: int, command: str | None, permissions: list[tuple[int, int, bool]]
    ) -> None:
        """Set what an admin sets in Server Settings -> Integrations -> the app.

        Replaces the whole list of one command (by name) or, with ``command`` None, of the app
        (all its commands without their own entries), and sends the bot
        ``APPLICATION_COMMAND_PERMISSIONS_UPDATE`` with the new list, as Discord does after
        ``PUT .../commands/{command.id}/permissions`` (Application Commands -> Edit Application
        Command Permissions; Gateway Events). An empty list removes them.

        Args:
            guild_id: the guild.
            command: a registered command's name, or None for the app-level entries.
            permissions: ``(id, type, permission)``: type 1 role (the guild id is @everyone),
                2 user, 3 channel (the guild id - 1 is All Channels); at most 100.
        """
        if len(permissions) > 100:
            raise InvocationError("at most 100 command permission overwrites")
        if command is None:
            target = self.world.application_id
        else:
            found = self.world.find_command(command, guild_id)
            if found is None:
                raise InvocationError(f"no command {command!r} is registered")
            target = int(found["id"])
        entries = [
            {"id": str(i), "type": kind, "permission": bool(allowed)}
            for i, kind, allowed in permissions
        ]
        if any(e["type"] not in (1, 2, 3) for e in entries):
            raise InvocationError("a command permission's type is 1, 2 or 3")
        guild = self.world.command_permissions.setdefault(guild_id, {})
        if entries:
            guild[target] = entries
        else:
            guild.pop(target, None)
        self.hub.dispatch(
            "APPLICATION_COMMAND_PERMISSIONS_UPDATE",
            command_permissions_payload(self.world, guild_id, target, entries),
        )
        self.signal.notify()

    def override_command_permissions(self, guild_id: int, name: str) -> None:
        """Let every member of a guild use ``/name``, as an admin can in Server Settings ->
        Integrations (a command-level @everyone allow), whatever its
        ``default_member_permissions``."""
        found = self.world.find_command(name, guild_id)
        current = [] if found is None else self._entries(guild_id, int(found["id"]))
        kept = [e for e in current if not (e[1] == 1 and e[0] == guild_id)]
        self.set_command_permissions(guild_id, name, [*kept, (guild_id, 1, True)])

    def _entries(self, guild_id: int, target: int) -> list[tuple[int, int, bool]]:
        stored = self.world.command_permissions.get(guild_id, {}).get(target, [])
        return [(int(e["id"]), int(e["type"]), bool(e["permission"])) for e in stored]

    def _check_command_permissions(
        self,
        command: dict[str, Any],
        *,
        guild_id: int,
        channel_id: int,
        user_id: int,
        permissions: int,
    ) -> None:
        channel = self.world.channels.get(channel_id)
        if channel is not None and channel.is_thread and channel.parent_id is not None:
            channel_id = channel.parent_id
        member = self.world.guilds[guild_id].members.get(user_id)
        allowed = perms.command_permitted(
            self.world.command_permissions.get(guild_id, {}),
            application_id=self.world.application_id,
            command=command,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            role_ids=list(member.role_ids) if member is not None else [],
            permissions=permissions,
        )
        if not allowed:
            # Discord's client does not offer a command the member may not use here.
            raise InvocationError(f"/{command['name']} is not available to this member here")

    def _refuse_barred_member(self, member: Member, permissions: int) -> None:
        """Discord's client offers no command to a timed-out member, nor where the member lacks
        Use Application Commands (administrators aside).

        Raises:
            InvocationError: the member is timed out, or lacks the permission there.
        """
        if permissions & perms.ADMINISTRATOR:
            return
        until = member.communication_disabled_until
        if until is not None and dt.datetime.fromisoformat(until) > dt.datetime.now(dt.UTC):
            raise InvocationError("a timed-out member cannot use application commands")
        if not permissions & perms.USE_APPLICATION_COMMANDS:
            raise InvocationError("this member may not use application commands here")

    def member_message(
        self,
        channel_id: int,
        user_id: int,
        content: str,
        *,
        reply_to: int | None = None,
        ping_reply: bool = True,
    ) -> Message:
        """A member posts ``content`` in a channel or thread (MESSAGE_CREATE to the bot).

        ``<@id>`` in ``content`` mentions that user; ``reply_to`` makes it a reply to that
        message, which mentions its author unless ``ping_reply`` is off (the client's "@ ON").
        The bot gets the content only when it is mentioned, unless it has the Message Content
        intent (:meth:`MessageService.emit_member_message`). A message in an archived thread
        unarchives it first (THREAD_UPDATE), as Discord does for a thread that is not locked.
        """
        if user_id not in self.world.users:
            raise InvocationError(f"unknown user {user_id}; use add_user()")
        channel = self.world.channels[channel_id]
        self.add_member(channel.guild_id, user_id)
        if channel.is_thread and channel.archived:
            channel.archived = False
            self.hub.dispatch("THREAD_UPDATE", channel_payload(channel), intent=1)
        users = {
            int(found)
            for found in re.findall(r"<@!?(\d+)>", content)
            if int(found) in self.world.users
        }
        reference = None
        if reply_to is not None:
            target = self.world.messages[reply_to]
            reference = {
                "type": 0,
                "message_id": str(target.id),
                "channel_id": str(target.channel_id),
                "guild_id": str(target.guild_id),
            }
            if ping_reply and target.author_id != user_id:
                users.add(target.author_id)
        message = Message(
            id=self.world.snowflake(),
            channel_id=channel_id,
            guild_id=channel.guild_id,
            author_id=user_id,
            content=content,
            type=19 if reference else 0,
            message_reference=reference,
            created_at=self.clock(),
            mentions=Mentions(users=frozenset(users)),
        )
        message.history.append(message.snapshot())
        self.world.messages[message.id] = message
        channel.last_message_id = message.id
        self.msgs.emit_member_message(message)
        return message

    def archive_thread(self, thread_id: int) -> None:
        """A moderator (or inactivity) archives a thread (THREAD_UPDATE, archived)."""
        thread = self.world.channels[thread_id]
        thread.archived = True
        self.hub.dispatch("THREAD_UPDATE", channel_payload(thread), intent=1)
        self.signal.notify()

    def delete_thread(self, thread_id: int) -> None:
        """A moderator deletes a thread (THREAD_DELETE: id, guild_id, parent_id, type)."""
        thread = self.world.channels.pop(thread_id)
        self.world.guilds[thread.guild_id].channels.pop(thread_id, None)
        payload = {
            "id": str(thread.id),
            "guild_id": str(thread.guild_id),
            "parent_id": str(thread.parent_id),
            "type": thread.type,
        }
        self.hub.dispatch("THREAD_DELETE", payload, intent=1)
        self.signal.notify()

    def add_member(self, guild_id: int, user_id: int) -> Member:
        """Make a user a guild member (GUILD_MEMBER_ADD if the bot has that intent)."""
        member, joined = self.world.ensure_member(guild_id, user_id)
        if joined:
            added = {**member_payload(self.world, member), "guild_id": str(guild_id)}
            self.hub.dispatch("GUILD_MEMBER_ADD", added, intent=GUILD_MEMBERS_INTENT)
        return member

    def _authorisation(
        self,
        kind: int,
        data: dict[str, Any],
        guild_id: int | None,
        user_id: int,
        message: Message | None = None,
    ) -> tuple[dict[str, str], int]:
        """Return the interaction's ``authorizing_integration_owners`` and ``context``.

        Discord (Interaction Object; Application Commands, "Installation Context"): a guild
        install authorises commands in that guild (key ``"0"``: the guild id) and, in the bot's
        DM, shows ``"0": "0"``; the user's own install adds ``"1"``: the user id. A command
        is offered only where its ``integration_types`` and ``contexts`` allow it.

        Raises:
            InvocationError: no install of the app authorises it there, or the command's
                installs or contexts exclude it.
        """
        context = GUILD_CONTEXT if guild_id else BOT_DM_CONTEXT
        meta = message.interaction_metadata if message is not None else None
        if kind == MESSAGE_COMPONENT and meta and meta.get("authorizing_integration_owners"):
            # A component of an interaction's response is authorised by that interaction's
            # installs, whoever clicks.
            return dict(meta["authorizing_integration_owners"]), context
        owners: dict[str, str] = {}
        if guild_id and (
            self.world.bot_in_guild(guild_id) or guild_id in self.world.command_installs
        ):
            owners["0"] = str(guild_id)
        elif not guild_id and user_id not in self.world.user_installs:
            owners["0"] = "0"
        if user_id in self.world.user_installs:
            owners["1"] = str(user_id)
        if not owners:
            raise InvocationError("the app is not installed here (neither the guild nor the user)")
        if kind == APPLICATION_COMMAND:
            command = self.world.find_command(str(data.get("name")), guild_id or None)
            if command is not None:
                types = {int(t) for t in command.get("integration_types") or [0]}
                contexts = command.get("contexts")
                if not types & {int(k) for k in owners}:
                    raise InvocationError(f"/{data.get('name')} is not installed that way")
                if contexts is not None and context not in contexts:
                    raise InvocationError(
                        f"/{data.get('name')} is not offered in context {context}"
                    )
        return owners, context

    def _dispatch_interaction(
        self,
        kind: int,
        data: dict[str, Any],
        *,
        guild_id: int | None,
        channel_id: int,
        user_id: int,
        permissions: int,
        message: Message | None = None,
    ) -> InteractionState:
        """Send INTERACTION_CREATE as Discord does; ``guild_id`` None (or 0): the bot's DM."""
        if self.hub.session is None:
            raise InvocationError("the bot has not identified on the gateway yet")
        if user_id not in self.world.users:
            raise InvocationError(f"unknown user {user_id}; use add_user()")
        owners, context = self._authorisation(kind, data, guild_id, user_id, message)
        interaction_id = self.world.snowflake()
        token = "aW50ZXJhY3Rpb246" + secrets.token_urlsafe(48)
        payload: dict[str, Any] = {
            "id": str(interaction_id),
            "application_id": str(self.world.application_id),
            "type": kind,
            "data": data,
            "channel_id": str(channel_id),
            "token": token,
            "version": 1,
            "locale": self.world.users[user_id].locale,
            "entitlements": [
                self.shop.payload(e, self.world.application_id) for e in self.shop.live_for(user_id)
            ],
            "entitlement_sku_ids": [],
            "authorizing_integration_owners": owners,
            "context": context,
            "attachment_size_limit": self.world.attachment_size_limits.get(
                user_id, ATTACHMENT_SIZE_LIMIT
            ),
        }
        if guild_id:
            guild = self.world.guilds[guild_id]
            channel = guild.channels[channel_id]
            member = self.add_member(guild_id, user_id)
            # The member's permissions in the channel, overwrites included (a thread: its
            # parent's), as Discord computes ``member.permissions``.
            where = self.world.channels.get(channel.parent_id or 0) if channel.is_thread else None
            permissions = perms.with_overwrites(
                permissions, guild, where or channel, list(member.role_ids), user_id
            )
            if kind == APPLICATION_COMMAND:
                self._refuse_barred_member(member, permissions)
            if self.world.bot_in_guild(guild_id):
                app_permissions = self.world.bot_permissions(channel_id)
            else:
                # A user install where the bot is not a member (Interaction Object,
                # app_permissions): only what a webhook-like response can use.
                app_permissions = perms.USER_INSTALL_APP_PERMISSIONS
            payload.update(
                guild={"id": str(guild_id), "locale": guild.preferred_locale, "features": []},
                guild_id=str(guild_id),
                channel=channel_payload(channel, permissions),
                member=member_payload(self.world, member, permissions=permissions),
                guild_locale=guild.preferred_locale,
            )
        else:
            channel = self.world.channels[channel_id]
            if self.world.dm_recipients.get(channel_id) != user_id:
                raise InvocationError(f"channel {channel_id} is not the bot's DM with {user_id}")
            app_permissions = perms.DM_PERMISSIONS
            user = user_payload(self.world.users[user_id])
            payload.update(
                channel={"id": str(channel_id), "type": channel.type, "recipients": [user]},
                user=user,
            )
        payload["app_permissions"] = str(app_permissions)
        if message is not None:
            payload["message"] = message_payload(self.world, message)
        state = InteractionState(
            id=interaction_id,
            token=token,
            type=kind,
            guild_id=guild_id or 0,
            channel_id=channel_id,
            user_id=user_id,
            dispatched_at=self.clock(),
            payload=payload,
            message_id=message.id if message is not None else None,
            app_permissions=app_permissions,
        )
        self.interactions[interaction_id] = state
        self.interactions_by_token[token] = state
        self.hub.dispatch("INTERACTION_CREATE", payload)
        self.signal.notify()
        return state

    def response_fields(self, state: InteractionState, *, followup: bool) -> dict[str, Any]:
        """Message fields of an interaction response/followup (author, metadata, type)."""
        meta: dict[str, Any] = {
            "id": str(state.id),
            "type": state.type,
            "user": user_payload(self.world.users[state.user_id]),
            "authorizing_integration_owners": state.payload["authorizing_integration_owners"],
        }
        if state.type == APPLICATION_COMMAND:
            meta["name"] = _full_name(state.payload["data"])
            meta["command_type"] = state.payload["data"].get("type", 1)
        if state.type == MESSAGE_COMPONENT and state.message_id is not None:
            meta["interacted_message_id"] = str(state.message_id)
        if followup and state.original_id is not None:
            meta["original_response_message_id"] = str(state.original_id)
        return {
            "type": 20 if state.type == APPLICATION_COMMAND else 0,
            "webhook_id": self.world.application_id,
            "application_id": self.world.application_id,
            "interaction_id": state.id,
            "interaction_metadata": meta,
        }

    def _command_data(
        self,
        name: str,
        options: dict[str, Any] | None,
        *,
        guild_id: int | None,
        channel_id: int,
        user_id: int,
        permissions: int,
        subcommand: str | None,
        group: str | None,
        focused: str | None = None,
        attachments: dict[str, dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        command = self.world.find_command(name, guild_id or None)
        # A server's command permissions apply to its own install only (the bot's DM and a
        # user install in a server without the bot have none).
        if command is not None and guild_id and self.world.bot_in_guild(guild_id):
            self._check_command_permissions(
                command,
                guild_id=guild_id,
                channel_id=channel_id,
                user_id=user_id,
                permissions=permissions,
            )
        builder = OptionBuilder(self.world, guild_id or 0, permissions, self.add_member)
        leaf = builder.build(
            leaf_spec(command, subcommand, group),
            options or {},
            focused=focused,
            attachments=attachments,
        )
        data: dict[str, Any] = {
            "id": command["id"] if command else str(self.world.snowflake()),
            "name": name,
            "type": 1,
        }
        wrapped = wrap_options(leaf, subcommand, group)
        if wrapped:
            data["options"] = wrapped
        if command is not None and command.get("guild_id"):
            data["guild_id"] = command["guild_id"]
        if builder.resolved:
            data["resolved"] = builder.resolved
        return data

    async def invoke(
        self,
        name: str,
        options: dict[str, Any] | None = None,
        *,
        guild_id: int | None,
        channel_id: int,
        user_id: int,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
        subcommand: str | None = None,
        group: str | None = None,
        attachments: dict[str, tuple[str, bytes, str]] | None = None,
    ) -> InteractionHandle:
        """Run a slash command as a user.

        Args:
            name: Top-level command name.
            options: Option values by name (types inferred from the registered command;
                users/channels/roles may be given as ids or emulator objects).
            guild_id: Guild to run it in; None in the bot's DM (``channel_id`` its DM channel).
            channel_id: Channel to run it in.
            user_id: Invoking user (made a guild member if needed).
            permissions: The member's permissions in the channel.
            subcommand: Subcommand name.
            group: Subcommand group name.
            attachments: Attachment options: ``{option: (filename, bytes, content_type)}``.

        Returns:
            A handle to await the bot's responses.
        """
        stored = {
            option: attachment_payload(
                self.msgs.store_attachment(channel_id, filename, data, ctype, ephemeral=True),
                self.world.url_signer,
            )
            for option, (filename, data, ctype) in (attachments or {}).items()
        }
        data = self._command_data(
            name,
            options,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            permissions=permissions,
            subcommand=subcommand,
            group=group,
            attachments=stored,
        )
        state = self._dispatch_interaction(
            APPLICATION_COMMAND,
            data,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            permissions=permissions,
        )
        return InteractionHandle(self, state)

    async def autocomplete(
        self,
        name: str,
        options: dict[str, Any],
        focused: str,
        *,
        guild_id: int,
        channel_id: int,
        user_id: int,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
        subcommand: str | None = None,
        group: str | None = None,
        timeout: float = 5,
    ) -> list[dict[str, Any]]:
        """Type into option ``focused`` and return the bot's autocomplete choices."""
        if focused not in options:
            raise InvocationError(f"focused option {focused!r} must be in options")
        data = self._command_data(
            name,
            options,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            permissions=permissions,
            subcommand=subcommand,
            group=group,
            focused=focused,
        )
        state = self._dispatch_interaction(
            AUTOCOMPLETE,
            data,
            guild_id=guild_id,
            channel_id=channel_id,
            user_id=user_id,
            permissions=permissions,
        )
        record = await InteractionHandle(self, state).wait_callback(timeout)
        if not record.accepted or record.type != 8:
            raise InvocationError(f"autocomplete answered {record.type} / {record.error}")
        return list(state.choices or [])

    def _find_component(self, message: Message, custom_id: str) -> dict[str, Any]:
        stack = list(message.components)
        while stack:
            item = stack.pop()
            if item.get("custom_id") == custom_id:
                return item
            for key in ("components", "accessory", "component"):
                nested = item.get(key)
                if isinstance(nested, list):
                    stack.extend(nested)
                elif isinstance(nested, dict):
                    stack.append(nested)
        raise InvocationError(f"message {message.id} has no component {custom_id!r}")

    async def press_button(
        self,
        message_id: int,
        custom_id: str,
        *,
        user_id: int,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
    ) -> InteractionHandle:
        """Click a button on a bot message."""
        return await self._use_component(message_id, custom_id, None, user_id, permissions)

    async def select(
        self,
        message_id: int,
        custom_id: str,
        values: list[str],
        *,
        user_id: int,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
    ) -> InteractionHandle:
        """Choose ``values`` in a select menu on a bot message."""
        return await self._use_component(message_id, custom_id, values, user_id, permissions)

    async def _use_component(
        self,
        message_id: int,
        custom_id: str,
        values: list[str] | None,
        user_id: int,
        permissions: int,
    ) -> InteractionHandle:
        message = self.world.messages.get(message_id)
        if message is None or message.deleted:
            raise InvocationError(f"message {message_id} does not exist")
        component = self._find_component(message, custom_id)
        if component.get("disabled"):
            raise InvocationError(f"component {custom_id!r} is disabled")
        kind = component.get("type")
        data: dict[str, Any] = {"custom_id": custom_id, "component_type": kind}
        if values is None:
            if kind != 2:
                raise InvocationError(f"component {custom_id!r} is not a button")
        else:
            if kind == 2:
                raise InvocationError(f"component {custom_id!r} is a button")
            if kind == 3:
                allowed = {o["value"] for o in component.get("options", [])}
                if not set(values) <= allowed:
                    raise InvocationError(f"{values} not among the options {sorted(allowed)}")
            data["values"] = values
        if "id" in component:
            data["id"] = component["id"]
        state = self._dispatch_interaction(
            MESSAGE_COMPONENT,
            data,
            guild_id=message.guild_id or 0,
            channel_id=message.channel_id,
            user_id=user_id,
            permissions=permissions,
            message=message,
        )
        return InteractionHandle(self, state)

    def post_user_message(
        self,
        channel_id: int,
        user_id: int,
        content: str = "",
        *,
        attachment: tuple[str, bytes, str] | None = None,
        embed_image_url: str | None = None,
    ) -> Message:
        """A member posts a message (an attachment ``(filename, bytes, content_type)`` and/or
        an embed with an image, as a link preview gives), e.g. as a context menu's target."""
        channel = self.world.channels[channel_id]
        self.add_member(channel.guild_id, user_id)
        message = Message(
            id=self.world.snowflake(),
            channel_id=channel_id,
            guild_id=channel.guild_id or None,
            author_id=user_id,
            content=content,
            embeds=[{"image": {"url": embed_image_url}}] if embed_image_url else [],
            created_at=self.clock(),
        )
        if attachment is not None:
            filename, data, ctype = attachment
            message.attachments = [self.msgs.store_attachment(channel_id, filename, data, ctype)]
        message.history.append(message.snapshot())
        self.world.messages[message.id] = message
        channel.last_message_id = message.id
        self.signal.notify()
        return message

    async def invoke_message_command(
        self,
        name: str,
        message_id: int,
        *,
        user_id: int,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
    ) -> InteractionHandle:
        """Use the message context menu ``name`` (command type 3) on a message.

        The interaction carries ``target_id`` and the message in ``resolved.messages``, as
        Discord sends them (application commands docs, "Message Commands").
        """
        message = self.world.messages.get(message_id)
        if message is None or message.deleted:
            raise InvocationError(f"message {message_id} does not exist")
        guild_id = message.guild_id or 0
        command = next(
            (
                c
                for scope in (guild_id, None)
                for c in self.world.commands.get(scope, [])
                if c["name"] == name and c.get("type") == 3
            ),
            None,
        )
        if command is None:
            raise InvocationError(f"no message command {name!r} is registered")
        self._check_command_permissions(
            command,
            guild_id=guild_id,
            channel_id=message.channel_id,
            user_id=user_id,
            permissions=permissions,
        )
        data = {
            "id": command["id"],
            "name": name,
            "type": 3,
            "target_id": str(message_id),
            "resolved": {"messages": {str(message_id): message_payload(self.world, message)}},
        }
        state = self._dispatch_interaction(
            APPLICATION_COMMAND,
            data,
            guild_id=guild_id,
            channel_id=message.channel_id,
            user_id=user_id,
            permissions=permissions,
        )
        return InteractionHandle(self, state)

    async def submit_modal(
        self,
        custom_id: str,
        values: dict[str, Any],
        *,
        guild_id: int | None = None,
        channel_id: int | None = None,
        user_id: int | None = None,
        permissions: int = perms.DEFAULT_MEMBER_PERMISSIONS,
    ) -> InteractionHandle:
        """Fill in and submit the modal the bot showed with ``custom_id``.

        The submission mirrors the modal's layout (action rows or labels); location and
        user default to those of the interaction that opened it.

        Args:
            custom_id: the modal's custom id.
            values: by input custom id: a text input's string, a select's chosen values, or a
                file upload's files ``[(filename, bytes, content_type), ...]``. A file upload
                submits the ids of the stored (ephemeral) attachments in ``values`` and the
                attachments in ``data.resolved.attachments`` (Discord components reference,
                "File Upload").
            guild_id: where, if not where the modal was opened.
            channel_id: where, if not where the modal was opened.
            user_id: who, if not who opened the modal.
            permissions: the member's permissions in the channel.

        Raises:
            InvocationError: no such modal, an unknown input, or an input left invalid (a
                required text empty, too few or too many files).
        """
        opener = self.open_modals.pop(custom_id, None)
        if opener is None or opener.modal is None:
            raise InvocationError(f"no open modal with custom_id {custom_id!r}")
        where = channel_id if channel_id is not None else opener.channel_id
        resolved: dict[str, dict[str, Any]] = {}

        def upload(filename: str, data: bytes, content_type: str) -> str:
            stored = self.msgs.store_attachment(where, filename, data, content_type, ephemeral=True)
            resolved[str(stored.id)] = attachment_payload(stored, self.world.url_signer)
            return str(stored.id)

        unused = set(values)
        components = []
        for row in opener.modal.get("components", []):
            if row.get("type") == 1:
                children = [
                    _submitted(c, values, unused, upload) for c in row.get("components", [])
                ]
                components.append({"type": 1, "components": children})
            elif row.get("type") == 18:
                child = _submitted(row["component"], values, unused, upload)
                components.append({"type": 18, "id": row.get("id"), "component": child})
        if unused:
            raise InvocationError(f"modal has no inputs {sorted(unused)}")
        data: dict[str, Any] = {"custom_id": custom_id, "components": components}
        if resolved:
            data["resolved"] = {"attachments": resolved}
        source = self.world.messages.get(opener.message_id or 0)
        state = self._dispatch_interaction(
            MODAL_SUBMIT,
            data,
            guild_id=guild_id if guild_id is not None else opener.guild_id,
            channel_id=where,
            user_id=user_id if user_id is not None else opener.user_id,
            permissions=permissions,
            message=source,
        )
        state.opener = opener
        return InteractionHandle(self, state)


FILE_UPLOAD = 19
"""A modal's File Upload component (Discord components reference)."""


def _submitted(
    component: dict[str, Any],
    values: dict[str, Any],
    unused: set[str],
    upload: Callable[[str, bytes, str], str],
) -> dict[str, Any]:
    custom_id = component.get("custom_id", "")
    unused.discard(custom_id)
    if component.get("type") == 4:
        value = values.get(custom_id, component.get("value") or "")
        if component.get("required", True) and not value:
            raise InvocationError(f"modal input {custom_id!r} is required")
        low, high = component.get("min_length") or 0, component.get("max_length") or 4000
        if value and not low <= len(value) <= high:
            raise InvocationError(f"modal input {custom_id!r} must be {low}..{high} characters")
        result = {"type": 4, "custom_id": custom_id, "value": value}
    elif component.get("type") == FILE_UPLOAD:
        files = list(values.get(custom_id, []))
        # Discord's defaults (null when unset): required, at least one file and at most one.
        low = component.get("min_values")
        high = component.get("max_values")
        low, high = 1 if low is None else low, 1 if high is None else high
        if not files and component.get("required", True):
            raise InvocationError(f"modal upload {custom_id!r} is required")
        if files and not max(low, 1) <= len(files) <= high:
            raise InvocationError(f"modal upload {custom_id!r} takes {low}..{high} files")
        ids = [upload(filename, data, ctype) for filename, data, ctype in files]
        result = {"type": FILE_UPLOAD, "custom_id": custom_id, "values": ids}
    else:
        # An untouched select submits its default options, as Discord's client does.
        defaults = [o["value"] for o in component.get("options", []) if o.get("default")]
        chosen = values.get(custom_id, defaults)
        result = {"type": component.get("type"), "custom_id": custom_id, "values": list(chosen)}
    if "id" in component:
        result["id"] = component["id"]
    return result


def _full_name(data: dict[str, Any]) -> str:
    parts = [data["name"]]
    options = data.get("options") or []
    while options and options[0].get("type") in (1, 2):
        parts.append(options[0]["name"])
        options = options[0].get("options") or []
    return " ".join(parts)
