"""Creating, editing and deleting messages (shared by channel and webhook routes)."""

from __future__ import annotations

import mimetypes
from collections.abc import Callable
from typing import Any

from . import errors as err
from . import permissions as perms
from .gateway import (
    DIRECT_MESSAGES_INTENT,
    GUILD_MESSAGES_INTENT,
    MESSAGE_CONTENT_INTENT,
    GatewayHub,
)
from .limits import MAX_UPLOAD_BYTES, validate_message, walk_components
from .mentions import resolve_mentions
from .models import EPHEMERAL, LOADING, Attachment, Mentions, Message, World, iso_now
from .payloads import gateway_message_payload
from .recorder import RecordedFile
from .waiting import ChangeSignal

SUPPRESS_EMBEDS = 1 << 2
SUPPRESS_NOTIFICATIONS = 1 << 12
COMPONENTS_V2 = 1 << 15
SETTABLE_FLAGS = EPHEMERAL | SUPPRESS_EMBEDS | SUPPRESS_NOTIFICATIONS | COMPONENTS_V2
NONCE_MAX_LENGTH = 25
NONCE_WINDOW = 180.0
"""Seconds a nonce sent with ``enforce_nonce`` stays unique (Discord: "the past few minutes")."""


class MessageService:
    """Message lifecycle with Discord's validation, mentions and gateway events."""

    def __init__(
        self,
        world: World,
        hub: GatewayHub,
        signal: ChangeSignal,
        clock: Callable[[], float],
        base_url: Callable[[], str],
    ) -> None:
        self.world = world
        self.hub = hub
        self.signal = signal
        self.clock = clock
        self.base_url = base_url
        self.refuse_v2_edit_attachments = False
        """Refuse (400, 50035) an edit adding a new attachment to a Components V2 message,
        a limit Discord has been reported to enforce."""

    # -- helpers -----------------------------------------------------------------------

    def store_attachment(
        self,
        channel_id: int,
        filename: str,
        data: bytes,
        content_type: str | None = None,
        **kw: Any,
    ) -> Attachment:
        """Store bytes and serve them under ``/attachments/...``."""
        att_id = self.world.snowflake()
        guessed = content_type or mimetypes.guess_type(filename)[0]
        url = f"{self.base_url()}/attachments/{channel_id}/{att_id}/{filename}"
        attachment = Attachment(att_id, filename, data, guessed, url, **kw)
        self.world.attachments[att_id] = attachment
        return attachment

    def _new_attachments(
        self, channel_id: int, payload: dict[str, Any], files: list[RecordedFile]
    ) -> list[Attachment]:
        if sum(len(f.data) for f in files) > MAX_UPLOAD_BYTES:
            raise err.DiscordAPIError(413, 40005, "Request entity too large")
        meta = {str(a.get("id")): a for a in payload.get("attachments") or []}
        result = []
        for index, file in enumerate(files):
            info = meta.get(str(index), {})
            content_type = file.content_type
            if content_type in (None, "application/octet-stream"):
                content_type = None
            result.append(
                self.store_attachment(
                    channel_id,
                    info.get("filename") or file.filename,
                    file.data,
                    content_type,
                    description=info.get("description"),
                )
            )
        return result

    def _mentions(
        self, message: Message, allowed: dict[str, Any] | None, can_everyone: bool
    ) -> Mentions:
        guild = self.world.guilds.get(message.guild_id or 0)
        roles = (
            {r.id: r.mentionable for r in guild.roles.values() if r.id != guild.id} if guild else {}
        )
        replied = None
        if message.message_reference:
            ref = self.world.messages.get(int(message.message_reference.get("message_id", 0)))
            if ref is not None and ref.author_id != self.world.bot_user.id:
                replied = ref.author_id
        text = message.content
        if message.flags & COMPONENTS_V2:
            # Mentions in text displays ping as content does (allowed mentions permitting).
            shown = walk_components(message.components)
            text = "\n".join(str(c.get("content") or "") for c in shown if c.get("type") == 10)
        return resolve_mentions(
            text,
            allowed,
            known_users=self.world.users.keys(),
            roles=roles,
            can_mention_everyone=can_everyone,
            replied_user_id=replied,
        )

    def _emit(self, event: str, message: Message) -> None:
        if not message.ephemeral:
            self.hub.dispatch(
                event, gateway_message_payload(self.world, message), intent=_intent(message)
            )
        self.signal.notify()

    def emit_member_message(self, message: Message) -> None:
        """Dispatch a member's MESSAGE_CREATE under Discord's content rule.

        Without the Message Content intent, a guild message that does not mention the bot
        reaches it with empty ``content``, ``embeds``, ``attachments`` and ``components``
        (Gateway docs, "Message Content Intent"; a reply with its ping on mentions the bot).
        """
        data = gateway_message_payload(self.world, message)
        session = self.hub.session_for("MESSAGE_CREATE", data)
        mentioned = self.world.bot_user.id in message.mentions.users
        if session is not None and not session.intents & MESSAGE_CONTENT_INTENT and not mentioned:
            data.update(content="", embeds=[], attachments=[], components=[])
        self.hub.dispatch("MESSAGE_CREATE", data, intent=GUILD_MESSAGES_INTENT)
        self.signal.notify()

    @staticmethod
    def _is_empty(message: Message) -> bool:
        return not (message.content or message.embeds or message.attachments or message.components)

    def nonce_match(self, payload: dict[str, Any]) -> Message | None:
        """The bot's recent message with this payload's nonce, when ``enforce_nonce`` is set.

        Discord (Create Message): a nonce is an integer or a string of at most 25
        characters; with ``enforce_nonce`` it is checked for uniqueness over the past few
        minutes, and another message by the same author with the same nonce is returned
        instead of creating a new one.
        """
        nonce = payload.get("nonce")
        if nonce is None:
            return None
        if len(str(nonce)) > NONCE_MAX_LENGTH:
            form = err.FormErrors()
            form.max_length(("nonce",), str(nonce), NONCE_MAX_LENGTH)
            form.raise_if_any()
        if not payload.get("enforce_nonce"):
            return None
        found = self.world.messages.get(self.world.nonces.get(str(nonce), 0))
        if found is None or found.deleted or self.clock() - found.created_at > NONCE_WINDOW:
            return None
        return found

    # -- lifecycle -----------------------------------------------------------------------

    def create(
        self,
        channel_id: int,
        payload: dict[str, Any],
        files: list[RecordedFile],
        *,
        error_prefix: tuple[str, ...] = (),
        can_mention_everyone: bool,
        loading: bool = False,
        **extra: Any,
    ) -> Message:
        """Validate and create a message, dispatching MESSAGE_CREATE.

        Args:
            channel_id: Target channel.
            payload: Message create body.
            files: Uploaded files.
            error_prefix: Where form errors are nested (``("data",)`` in callbacks).
            can_mention_everyone: Author may ping @everyone / unmentionable roles.
            loading: Create a deferred "thinking" placeholder.
            **extra: Extra Message fields (type, webhook_id, interaction_id, ...).

        Returns:
            The stored message.
        """
        form = err.FormErrors()
        validate_message(payload, form, error_prefix)
        form.raise_if_any()
        channel = self.world.channels[channel_id]
        flags = int(payload.get("flags") or 0) & SETTABLE_FLAGS
        if loading:
            flags |= LOADING
        message = Message(
            id=self.world.snowflake(),
            channel_id=channel_id,
            guild_id=channel.guild_id or None,  # 0: a DM channel
            author_id=self.world.bot_user.id,
            content=str(payload.get("content") or ""),
            embeds=list(payload.get("embeds") or []),
            components=list(payload.get("components") or []),
            flags=flags,
            tts=bool(payload.get("tts", False)),
            allowed_mentions=payload.get("allowed_mentions"),
            created_at=self.clock(),
            **extra,
        )
        message.attachments = self._new_attachments(channel_id, payload, files)
        if not loading and self._is_empty(message):
            raise err.empty_message()
        if message.ephemeral:
            for attachment in message.attachments:
                attachment.ephemeral = True
        message.mentions = self._mentions(message, message.allowed_mentions, can_mention_everyone)
        if not loading:
            message.pings = message.mentions
        message.history.append(message.snapshot())
        self.world.messages[message.id] = message
        if payload.get("nonce") is not None:
            message.nonce = str(payload["nonce"])
            if payload.get("enforce_nonce"):
                self.world.nonces[message.nonce] = message.id
        if not message.ephemeral:
            channel.last_message_id = message.id
        self._emit("MESSAGE_CREATE", message)
        return message

    def edit(
        self,
        message: Message,
        payload: dict[str, Any],
        files: list[RecordedFile],
        *,
        error_prefix: tuple[str, ...] = (),
        can_mention_everyone: bool,
    ) -> Message:
        """Apply an edit (PATCH semantics); the first edit of a deferred placeholder sends it."""
        if message.deleted:
            raise err.unknown_message()
        v2 = bool(message.flags & COMPONENTS_V2)
        form = err.FormErrors()
        validate_message(payload, form, error_prefix, v2=v2)
        adds_to_v2 = v2 or bool(int(payload.get("flags") or 0) & COMPONENTS_V2)
        if self.refuse_v2_edit_attachments and files and adds_to_v2:
            form.add(
                (*error_prefix, "attachments"),
                "MESSAGE_COMPONENTS_V2_NEW_ATTACHMENT",
                "New attachments cannot be added to a Components V2 message by an edit",
            )
        form.raise_if_any()
        was_loading = message.loading
        content = str(payload["content"] or "") if "content" in payload else message.content
        embeds = list(payload["embeds"] or []) if "embeds" in payload else message.embeds
        components = (
            list(payload["components"] or []) if "components" in payload else message.components
        )
        attachments = message.attachments
        if payload.get("attachments") is not None:
            keep_ids = {str(a.get("id")) for a in payload["attachments"]}
            attachments = [a for a in attachments if str(a.id) in keep_ids]
        if not (content or embeds or components or attachments or files):
            raise err.empty_message()
        attachments = [*attachments, *self._new_attachments(message.channel_id, payload, files)]
        message.content, message.embeds, message.components = content, embeds, components
        message.attachments = attachments
        if payload.get("flags") is not None:
            keep = message.flags & (EPHEMERAL | COMPONENTS_V2)
            message.flags = keep | (int(payload["flags"]) & (SUPPRESS_EMBEDS | COMPONENTS_V2))
        if "allowed_mentions" in payload:
            message.allowed_mentions = payload["allowed_mentions"]
        message.flags &= ~LOADING
        message.mentions = self._mentions(message, message.allowed_mentions, can_mention_everyone)
        if was_loading:
            message.pings = message.mentions
        else:
            message.edited_at = self.clock()
            message.edited_timestamp = iso_now()
        snapshot = message.snapshot()
        snapshot["at"] = self.clock()
        message.history.append(snapshot)
        self._emit("MESSAGE_UPDATE", message)
        return message

    def delete(self, message: Message) -> None:
        """Delete a message and dispatch MESSAGE_DELETE."""
        if message.deleted:
            raise err.unknown_message()
        message.deleted = True
        if not message.ephemeral:
            data = {"id": str(message.id), "channel_id": str(message.channel_id)}
            if message.guild_id:
                data["guild_id"] = str(message.guild_id)  # Discord: none for a DM
            self.hub.dispatch("MESSAGE_DELETE", data, intent=_intent(message))
        self.signal.notify()

    # -- channel-route permission checks -----------------------------------------------

    def check_send(
        self, channel_id: int, payload: dict[str, Any], files: list[RecordedFile]
    ) -> int:
        """Check the bot may post this in the channel; return its permissions."""
        if channel_id not in self.world.channels:
            raise err.unknown_channel()
        have = self.world.bot_permissions(channel_id)
        if not have & perms.VIEW_CHANNEL:
            raise err.missing_access()
        thread = self.world.channels[channel_id].is_thread
        needed = perms.SEND_MESSAGES_IN_THREADS if thread else perms.SEND_MESSAGES
        if payload.get("embeds"):
            needed |= perms.EMBED_LINKS
        if files:
            needed |= perms.ATTACH_FILES
        if payload.get("message_reference"):
            needed |= perms.READ_MESSAGE_HISTORY
        if payload.get("tts"):
            needed |= perms.SEND_TTS_MESSAGES
        if needed & ~have:
            raise err.missing_permissions()
        return have

    def channel_message(self, channel_id: int, message_id: int) -> Message:
        """Look a message up the way the channel routes can see it."""
        if channel_id not in self.world.channels:
            raise err.unknown_channel()
        if not self.world.bot_permissions(channel_id) & perms.VIEW_CHANNEL:
            raise err.missing_access()
        message = self.world.messages.get(message_id)
        if (
            message is None
            or message.channel_id != channel_id
            or message.deleted
            or message.ephemeral
        ):
            raise err.unknown_message()
        return message


def _intent(message: Message) -> int:
    """The intent a message's events need (Gateway Intents): guild messages, or direct ones."""
    return GUILD_MESSAGES_INTENT if message.guild_id else DIRECT_MESSAGES_INTENT
