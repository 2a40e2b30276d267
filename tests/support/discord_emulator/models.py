"""The emulator's in-memory world: users, guilds, channels, messages, commands."""

from __future__ import annotations

import builtins
import datetime as dt
import hashlib
import hmac
import itertools
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from . import permissions as perms

DISCORD_EPOCH_MS = 1_420_070_400_000
TEXT_CHANNEL = 0
PUBLIC_THREAD = 11
FORUM_CHANNEL = 15
THREAD_TYPES = (10, 11, 12)
DM_CHANNEL = 1
EPHEMERAL = 1 << 6
LOADING = 1 << 7
COMPONENTS_V2 = 1 << 15


def iso_now() -> str:
    """Return the current UTC time in Discord's ISO-8601 format."""
    return dt.datetime.now(dt.UTC).isoformat()


class SnowflakeGenerator:
    """Generates increasing Discord snowflakes from wall-clock time."""

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._last = 0

    def __call__(self) -> int:
        ms = int(time.time() * 1000) - DISCORD_EPOCH_MS
        value = (ms << 22) | (1 << 17) | (next(self._counter) & 0xFFF)
        self._last = max(value, self._last + 1)
        return self._last


@dataclass
class User:
    """A Discord user (global)."""

    id: int
    username: str
    global_name: str | None = None
    bot: bool = False
    locale: str = "en-US"
    """The client language, sent as every interaction's ``locale`` (Discord's Locales)."""
    avatar: str | None = None
    """The account's avatar hash (None: Discord's default avatar)."""

    @property
    def name(self) -> str:
        return self.username


@dataclass
class Role:
    """A guild role."""

    id: int
    name: str
    permissions: int
    position: int = 0
    managed: bool = False
    mentionable: bool = False
    bot_id: int | None = None
    colour: int = 0
    """0xRRGGBB; 0 for none."""


@dataclass
class Overwrite:
    """A channel permission overwrite (type 0 = role, 1 = member)."""

    id: int
    type: int
    allow: int = 0
    deny: int = 0


@dataclass
class Channel:
    """A guild text channel, a forum, or a thread (``parent_id`` set: a channel or a forum)."""

    id: int
    guild_id: int
    name: str
    type: int = TEXT_CHANNEL
    position: int = 0
    topic: str | None = None
    overwrites: dict[int, Overwrite] = field(default_factory=dict)
    last_message_id: int | None = None
    parent_id: int | None = None
    nsfw: bool = False
    """Age-restricted (Discord's ``nsfw`` flag); a thread follows its parent's."""
    archived: bool = False
    """A thread only: archived (Discord: ``thread_metadata.archived``); a member's message
    unarchives it."""

    @property
    def is_thread(self) -> bool:
        """Whether this is a thread (a forum post is a thread in a forum)."""
        return self.type in THREAD_TYPES


@dataclass
class Member:
    """A user's membership in a guild."""

    user_id: int
    role_ids: list[int] = field(default_factory=list)
    joined_at: str = field(default_factory=iso_now)
    nick: str | None = None
    avatar: str | None = None
    """The member's own avatar hash in this guild (None: the account's)."""
    communication_disabled_until: str | None = None
    """While in the future, the member is timed out (ISO-8601, UTC)."""


@dataclass
class Guild:
    """A guild (server)."""

    id: int
    name: str
    owner_id: int
    roles: dict[int, Role] = field(default_factory=dict)
    channels: dict[int, Channel] = field(default_factory=dict)
    members: dict[int, Member] = field(default_factory=dict)
    joined_at: str = field(default_factory=iso_now)
    preferred_locale: str = "en-US"
    """Server Settings → Community's language: the guild's ``preferred_locale`` and every
    interaction's ``guild_locale``."""

    @property
    def everyone_role(self) -> Role:
        return self.roles[self.id]

    def channel(self, name: str) -> Channel:
        """Return the channel called ``name``."""
        return next(c for c in self.channels.values() if c.name == name)


@dataclass
class Attachment:
    """A stored, served attachment (``data`` holds the bytes)."""

    id: int
    filename: str
    data: builtins.bytes
    content_type: str | None
    url: str
    description: str | None = None
    ephemeral: bool = False

    @property
    def size(self) -> int:
        return len(self.data)

    @property
    def bytes(self) -> builtins.bytes:
        """Alias of ``data``."""
        return self.data


@dataclass(frozen=True)
class Mentions:
    """Who a message (would) notify."""

    users: frozenset[int] = frozenset()
    roles: frozenset[int] = frozenset()
    everyone: bool = False


@dataclass
class Message:
    """A message the bot created (channel message or interaction response).

    ``history`` holds a snapshot of every version (creation first).
    """

    id: int
    channel_id: int
    guild_id: int | None
    author_id: int
    content: str = ""
    embeds: list[dict[str, Any]] = field(default_factory=list)
    components: list[dict[str, Any]] = field(default_factory=list)
    attachments: list[Attachment] = field(default_factory=list)
    flags: int = 0
    type: int = 0
    tts: bool = False
    pinned: bool = False
    allowed_mentions: dict[str, Any] | None = None
    message_reference: dict[str, Any] | None = None
    webhook_id: int | None = None
    application_id: int | None = None
    interaction_id: int | None = None
    interaction_metadata: dict[str, Any] | None = None
    deleted: bool = False
    created_at: float = 0.0
    edited_at: float | None = None
    timestamp: str = field(default_factory=iso_now)
    edited_timestamp: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    mentions: Mentions = field(default_factory=Mentions)
    pings: Mentions | None = None
    reactions: list[str] = field(default_factory=list)
    nonce: str | None = None

    @property
    def ephemeral(self) -> bool:
        return bool(self.flags & EPHEMERAL)

    @property
    def loading(self) -> bool:
        """True while this is a deferred "thinking…" placeholder."""
        return bool(self.flags & LOADING)

    @property
    def is_interaction_response(self) -> bool:
        return self.interaction_id is not None

    @property
    def is_v2(self) -> bool:
        """Sent (or upgraded by an edit) with IS_COMPONENTS_V2 (1 << 15)."""
        return bool(self.flags & COMPONENTS_V2)

    @property
    def all_components(self) -> list[dict[str, Any]]:
        """Every component, nested ones included (rows, buttons, containers, texts...)."""
        return _walk(self.components)

    @property
    def urls(self) -> list[str]:
        """Every http(s) URL the message shows, in order (text, embeds, media)."""
        return re.findall(r"https?://[^\s)>\]]+", self.text)

    @property
    def card_texts(self) -> list[str]:
        """The contents of the text displays, in display order (Components V2)."""
        return [str(c.get("content") or "") for c in _walk(self.components) if c.get("type") == 10]

    @property
    def media_urls(self) -> list[str]:
        """The URLs of media gallery items and thumbnails (``attachment://`` ones included)."""
        urls: list[str] = []
        for c in _walk(self.components):
            if c.get("type") == 12:
                urls += [str((i.get("media") or {}).get("url")) for i in c.get("items") or []]
            elif c.get("type") == 11:
                urls.append(str((c.get("media") or {}).get("url")))
        return urls

    @property
    def accent_colour(self) -> int | None:
        """The accent colour of the first container, if any."""
        for c in _walk(self.components):
            if c.get("type") == 17:
                colour = c.get("accent_color")
                return None if colour is None else int(colour)
        return None

    @property
    def text(self) -> str:
        """Everything the message says, whatever its form: the content, the embeds' texts
        and images, the text displays and the media URLs, one per line."""
        parts = [self.content]
        for embed in self.embeds:
            parts += [str(embed.get(k) or "") for k in ("title", "description", "url")]
            for fld in embed.get("fields") or []:
                parts += [str(fld.get("name") or ""), str(fld.get("value") or "")]
            parts.append(str((embed.get("footer") or {}).get("text") or ""))
            parts.append(str((embed.get("image") or {}).get("url") or ""))
        parts += self.card_texts
        parts += self.media_urls
        return "\n".join(p for p in parts if p)

    def pinged_user_ids(self) -> set[int]:
        """Users notified when the message was sent (edits never ping)."""
        return set(self.pings.users) if self.pings else set()

    def pinged_role_ids(self) -> set[int]:
        """Roles notified when the message was sent."""
        return set(self.pings.roles) if self.pings else set()

    def pings_everyone(self) -> bool:
        """Whether @everyone/@here notified anyone when the message was sent."""
        return bool(self.pings and self.pings.everyone)

    def snapshot(self) -> dict[str, Any]:
        """Return a plain copy of the mutable fields for ``history``."""
        return {
            "content": self.content,
            "embeds": [dict(e) for e in self.embeds],
            "components": list(self.components),
            "attachments": [a.filename for a in self.attachments],
            "flags": self.flags,
            "text": self.text,
            "at": self.edited_at if self.edited_at is not None else self.created_at,
        }


def _walk(components: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in components:
        out.append(item)
        for key in ("components", "accessory", "component"):
            nested = item.get(key)
            if isinstance(nested, list):
                out += _walk(nested)
            elif isinstance(nested, dict):
                out += _walk([nested])
    return out


ATTACHMENT_URL_SECONDS = 86_400
"""How long a signed attachment URL stays valid (Discord's CDN: 24 hours)."""


class UrlSigner:
    """Signs attachment URLs as Discord's CDN does, and refuses them once expired.

    Every attachment object Discord returns (a message fetched, sent or dispatched; an
    interaction's resolved upload) carries a URL signed anew: ``?ex=<hex expiry>&is=<hex
    issue>&hm=<mac>`` (developer docs, "Attachment Object"; signed CDN links since 2024). The
    CDN answers 404 for one past its ``ex`` or with a wrong ``hm``. A bare URL (the tests' own
    reads of :attr:`Attachment.url`) is served as before.

    Args:
        clock: UTC epoch seconds (inject to make URLs expire: the end-to-end ``OffsetClock``).
        lifetime: seconds a URL is valid.
    """

    def __init__(
        self, clock: Callable[[], float] = time.time, lifetime: int = ATTACHMENT_URL_SECONDS
    ) -> None:
        self.clock = clock
        self.lifetime = lifetime
        self._key = secrets.token_bytes(16)

    def _mac(self, attachment_id: int, ex: str, issued: str) -> str:
        text = f"{attachment_id}|{ex}|{issued}".encode()
        return hmac.new(self._key, text, hashlib.sha256).hexdigest()

    def sign(self, attachment: Attachment) -> str:
        """The attachment's URL, signed now."""
        now = int(self.clock())
        ex, issued = f"{now + self.lifetime:x}", f"{now:x}"
        return f"{attachment.url}?ex={ex}&is={issued}&hm={self._mac(attachment.id, ex, issued)}"

    def valid(self, attachment_id: int, query: Mapping[str, str]) -> bool:
        """Whether a request's query lets the CDN serve the attachment now."""
        if "ex" not in query and "hm" not in query:
            return True
        ex, issued, mac = query.get("ex", ""), query.get("is", ""), query.get("hm", "")
        if not hmac.compare_digest(mac, self._mac(attachment_id, ex, issued)):
            return False
        return int(ex, 16) > self.clock()


def unsigned(url: str) -> str:
    """An attachment URL without its signature (to compare with :attr:`Attachment.url`)."""
    return url.split("?", 1)[0]


class World:
    """All emulated Discord state, shared by the REST server and the gateway."""

    def __init__(
        self, application_id: int, bot_user: User, snowflake: SnowflakeGenerator | None = None
    ) -> None:
        self.snowflake = snowflake or SnowflakeGenerator()
        self.application_id = application_id
        self.bot_user = bot_user
        self.users: dict[int, User] = {bot_user.id: bot_user}
        self.guilds: dict[int, Guild] = {}
        self.channels: dict[int, Channel] = {}
        self.messages: dict[int, Message] = {}
        self.attachments: dict[int, Attachment] = {}
        self.url_signer = UrlSigner()
        """Signs the attachment URLs of payloads (:class:`UrlSigner`)."""
        self.commands: dict[int | None, list[dict[str, Any]]] = {}
        self.command_permissions: dict[int, dict[int, list[dict[str, Any]]]] = {}
        """Guild id -> command id (or the application id, for all its commands) -> the
        application command permissions set in Server Settings -> Integrations."""
        self.dm_recipients: dict[int, int] = {}
        """DM channel id -> the user the bot talks to there."""
        self.closed_dms: set[int] = set()
        """Users whose privacy settings refuse the bot's DMs (50007)."""
        self.user_installs: set[int] = set()
        """Users who installed the app to their account (user install, integration type 1)."""
        self.command_installs: set[int] = set()
        """Guilds that installed the app's commands without adding the bot (a guild install
        without the ``bot`` scope): its commands are offered there, the bot is no member."""
        self.attachment_size_limits: dict[int, int] = {}
        """User id -> the ``attachment_size_limit`` of their interactions, where not 10 MiB."""
        self.nonces: dict[str, int] = {}
        """Nonce of a message sent with ``enforce_nonce`` -> that message's id."""

    def open_dm(self, user_id: int) -> Channel:
        """Return the bot's DM channel with ``user_id``, created on first use."""
        for channel_id, recipient in self.dm_recipients.items():
            if recipient == user_id:
                return self.channels[channel_id]
        channel = Channel(id=self.snowflake(), guild_id=0, name="", type=DM_CHANNEL)
        self.channels[channel.id] = channel
        self.dm_recipients[channel.id] = user_id
        return channel

    def add_user(self, name: str, *, bot: bool = False, locale: str = "en-US") -> User:
        """Create a global user (``locale``: the client language its interactions carry)."""
        user = User(id=self.snowflake(), username=name, global_name=name, bot=bot, locale=locale)
        self.users[user.id] = user
        return user

    def add_guild(self, name: str, owner_id: int, *, preferred_locale: str = "en-US") -> Guild:
        """Create a guild with @everyone, the bot's managed role and a "general" channel."""
        guild = Guild(
            id=self.snowflake(), name=name, owner_id=owner_id, preferred_locale=preferred_locale
        )
        guild.roles[guild.id] = Role(guild.id, "@everyone", perms.DEFAULT_MEMBER_PERMISSIONS)
        bot_role = Role(
            self.snowflake(),
            self.bot_user.username,
            perms.DEFAULT_BOT_PERMISSIONS,
            position=1,
            managed=True,
            bot_id=self.bot_user.id,
        )
        guild.roles[bot_role.id] = bot_role
        guild.members[self.bot_user.id] = Member(self.bot_user.id, [bot_role.id])
        guild.members.setdefault(owner_id, Member(owner_id))
        self.guilds[guild.id] = guild
        self.add_channel(guild.id, "general")
        return guild

    def add_channel(
        self,
        guild_id: int,
        name: str,
        *,
        type: int = TEXT_CHANNEL,
        parent_id: int | None = None,
        channel_id: int | None = None,
    ) -> Channel:
        """Create a channel in a guild: text by default, a forum, or a thread of ``parent_id``.

        ``channel_id``: a thread started from a message has that message's id.
        """
        guild = self.guilds[guild_id]
        channel = Channel(
            self.snowflake() if channel_id is None else channel_id,
            guild_id,
            name,
            type=type,
            position=len(guild.channels),
            parent_id=parent_id,
        )
        guild.channels[channel.id] = channel
        self.channels[channel.id] = channel
        return channel

    def ensure_member(self, guild_id: int, user_id: int) -> tuple[Member, bool]:
        """Return the member, adding the user to the guild if needed (and whether it was new)."""
        guild = self.guilds[guild_id]
        if user_id in guild.members:
            return guild.members[user_id], False
        member = Member(user_id)
        guild.members[user_id] = member
        return member, True

    def bot_permissions(self, channel_id: int) -> int:
        """The bot's computed permissions in a channel (a thread's are its parent's; in a DM,
        what any user has)."""
        channel = self.channels[channel_id]
        if channel.type == DM_CHANNEL:
            return perms.DM_PERMISSIONS
        if channel.is_thread and channel.parent_id is not None:
            channel = self.channels[channel.parent_id]
        if not self.bot_in_guild(channel.guild_id):
            return 0  # removed from the server: every route there answers 403 50001
        return perms.compute_permissions(self.guilds[channel.guild_id], channel, self.bot_user.id)

    def bot_in_guild(self, guild_id: int) -> bool:
        """Whether the bot is (still) a member of the guild."""
        guild = self.guilds.get(guild_id)
        return guild is not None and self.bot_user.id in guild.members

    def find_command(self, name: str, guild_id: int | None) -> dict[str, Any] | None:
        """Find a registered chat-input command, guild scope first."""
        for scope in (guild_id, None):
            for command in self.commands.get(scope, []):
                if command["name"] == name and command.get("type", 1) == 1:
                    return command
        return None
