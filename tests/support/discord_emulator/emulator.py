"""DiscordEmulator: the facade tests use to run a fake Discord for a real discord.py bot."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from aiohttp import web

from . import permissions as perms
from .actions import UserActions
from .errors import DiscordAPIError
from .gateway import GatewayHub, GatewaySession
from .interactions import (
    InteractionState,
)
from .messages import MessageService
from .models import (
    FORUM_CHANNEL,
    PUBLIC_THREAD,
    Channel,
    Guild,
    Member,
    Message,
    Overwrite,
    Role,
    SnowflakeGenerator,
    UrlSigner,
    User,
    World,
)
from .monetization import EntitlementRecord, Shop
from .oauth import OAuthState
from .payloads import (
    channel_payload,
    guild_create_payload,
    me_payload,
    member_payload,
    role_payload,
    user_payload,
)
from .recorder import RecordedEvent, RecordedRequest
from .server import API_PREFIX, RestApi
from .waiting import ChangeSignal

#: GATEWAY_GUILD_MEMBERS_LIMITED | GATEWAY_MESSAGE_CONTENT_LIMITED | APPLICATION_COMMAND_BADGE
APPLICATION_FLAGS = (1 << 15) | (1 << 19) | (1 << 23)
ALL_PRIVILEGED_INTENTS = (1 << 1) | (1 << 8) | (1 << 15)


class DiscordEmulator(UserActions):
    """A local, faithful-enough Discord (REST v10 + gateway v10) for end-to-end tests.

    Args:
        bot_token: The token the bot must present.
        token_lifetime: Seconds an interaction token stays valid (Discord: 900).
        ack_deadline: Seconds to acknowledge an interaction (Discord: 3).
        late_ack_grace: Seconds past ``ack_deadline`` in which a callback is still accepted
            and recorded in :attr:`late_acks` instead of refused (10062). 0, the default, is
            Discord's behaviour; the end-to-end harness allows some, so that a CPU-starved
            test machine (several bots and servers on two cores) reports a slow
            acknowledgement instead of failing the scenario that happened to run late.
        clock: Time source for deadlines and records (inject to control expiry).
        wall_clock: UTC epoch seconds of attachment URLs' signatures (``ex``; inject to make
            them expire: :class:`~tests.support.discord_emulator.models.UrlSigner`).
        heartbeat_interval_ms: Sent in HELLO.
        privileged_intents: Privileged intents "enabled in the developer portal"
            (IDENTIFY asking for others is closed with 4014).
        bot_name: The bot user's username.
    """

    def __init__(
        self,
        *,
        bot_token: str,
        token_lifetime: float = 900.0,
        ack_deadline: float = 3.0,
        late_ack_grace: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
        heartbeat_interval_ms: int = 41250,
        privileged_intents: int = ALL_PRIVILEGED_INTENTS,
        bot_name: str = "genbot",
    ) -> None:
        self.bot_token = bot_token
        self.token_lifetime = token_lifetime
        self.ack_deadline = ack_deadline
        self.late_ack_grace = late_ack_grace
        #: (interaction id, seconds from dispatch) of callbacks accepted within the grace.
        self.late_acks: list[tuple[int, float]] = []
        self.clock = clock
        self.signal = ChangeSignal()
        self.shop = Shop()
        snowflake = SnowflakeGenerator()
        bot = User(snowflake(), bot_name, bot=True)
        self.world = World(bot.id, bot, snowflake)
        self.world.url_signer = UrlSigner(wall_clock)
        self.app_owner = self.world.add_user("app-owner")
        self.hub = GatewayHub(
            bot_token=bot_token,
            heartbeat_interval_ms=heartbeat_interval_ms,
            privileged_intents=privileged_intents,
            ready_builder=self._ready_payload,
            guild_creates=lambda: [
                guild_create_payload(self.world, g)
                for g in self.world.guilds.values()
                if self.world.bot_in_guild(g.id)
            ],
            member_chunk=self._member_chunk,
            clock=clock,
            on_change=self.signal.notify,
        )
        self.msgs = MessageService(self.world, self.hub, self.signal, clock, lambda: self.base_url)
        self.requests: list[RecordedRequest] = []
        self.unhandled: list[RecordedRequest] = []
        self.server_errors: list[Exception] = []
        self.interactions: dict[int, InteractionState] = {}
        self.interactions_by_token: dict[str, InteractionState] = {}
        self.open_modals: dict[str, InteractionState] = {}
        #: When set, the answer to a call that shows a modal (callback type 9) or buttons (an
        #: edit of an interaction's message) is held until the bot has answered the form's
        #: submission or a press of one of the buttons (at most ``HOLD_SECONDS``): the member's
        #: act reaches the bot before the HTTP answer, an order a busy event loop can read from
        #: Discord too (gateway and HTTP are two connections, with no order between them).
        self.act_before_answer = False
        self._answered_on: dict[int, asyncio.Event] = {}
        self.command_syncs = 0
        #: "Sign in with Discord" (OAuth2): the client secret, who is logged in, codes, tokens.
        self.oauth = OAuthState()
        self._rate_limits: list[list[Any]] = []
        self._errors: list[list[Any]] = []
        self._runner: web.AppRunner | None = None
        self.port = 0
        self.host = "127.0.0.1"

    def answered_on(self, message_id: int) -> asyncio.Event:
        """Set once the bot answered an interaction on a component of message ``message_id``."""
        return self._answered_on.setdefault(message_id, asyncio.Event())

    # -- lifecycle -----------------------------------------------------------------------

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> None:
        """Start serving on ``host:port`` (0 picks a free port)."""
        self._runner = web.AppRunner(
            RestApi(self).build_app(), handle_signals=False, access_log=None
        )
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        assert server is not None
        self.host = host
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Close gateway connections and stop serving."""
        await self.hub.close_all()
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def __aenter__(self) -> Self:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def api_base_url(self) -> str:
        """Value for ``discord.http.Route.BASE``."""
        return self.base_url + API_PREFIX

    @property
    def gateway_url(self) -> str:
        """Value for ``DiscordWebSocket.DEFAULT_GATEWAY`` (wrap in ``yarl.URL``)."""
        return f"ws://{self.host}:{self.port}/gateway"

    @property
    def application_id(self) -> int:
        return self.world.application_id

    @property
    def bot_user(self) -> User:
        return self.world.bot_user

    @property
    def messages(self) -> dict[int, Message]:
        return self.world.messages

    @property
    def guilds(self) -> dict[int, Guild]:
        return self.world.guilds

    @property
    def events(self) -> list[RecordedEvent]:
        """Every payload sent to the bot on the gateway."""
        return self.hub.sent

    @property
    def gateway_received(self) -> list[RecordedEvent]:
        """Every payload the bot sent on the gateway."""
        return self.hub.received

    # -- monetization (Premium Apps) -------------------------------------------------------

    def add_sku(self, sku_id: int, name: str) -> None:
        """Create a consumable SKU of the application ("made in the developer portal")."""
        self.shop.skus[sku_id] = name

    def purchase(self, user_id: int, sku_id: int, *, dispatch: bool = True) -> int:
        """Play a member buying ``sku_id`` in the client: an entitlement, ENTITLEMENT_CREATE.

        ``dispatch`` False: the event is lost (the bot was stopped, or missed it).

        Returns:
            The entitlement's id.
        """
        if sku_id not in self.shop.skus:
            raise ValueError(f"unknown SKU {sku_id}; use add_sku()")
        record = EntitlementRecord(self.world.snowflake(), sku_id, user_id)
        self.shop.entitlements[record.id] = record
        if dispatch:
            payload = self.shop.payload(record, self.world.application_id)
            self.hub.dispatch("ENTITLEMENT_CREATE", payload)
        return record.id

    def refund(self, entitlement_id: int, *, dispatch: bool = True) -> None:
        """Play Discord refunding a purchase: the entitlement deleted, ENTITLEMENT_DELETE."""
        record = self.shop.entitlements[entitlement_id]
        record.deleted = True
        if dispatch:
            payload = self.shop.payload(record, self.world.application_id)
            self.hub.dispatch("ENTITLEMENT_DELETE", payload)

    def entitlement(self, entitlement_id: int) -> EntitlementRecord:
        """A purchase as Discord keeps it (consumed, refunded, consume calls received)."""
        return self.shop.entitlements[entitlement_id]

    # -- world setup -----------------------------------------------------------------------

    def add_user(self, name: str, *, locale: str = "en-US") -> User:
        """Create a global user (joins guilds implicitly when invoking).

        ``locale``: the member's client language, sent as each interaction's ``locale``.
        """
        return self.world.add_user(name, locale=locale)

    def add_guild(
        self,
        name: str = "Test Guild",
        *,
        owner_id: int | None = None,
        with_bot: bool = True,
        preferred_locale: str = "en-US",
    ) -> Guild:
        """Create a guild with @everyone, a "general" text channel and the bot as member.

        ``with_bot=False``: a server that never added the bot (only its members' user
        installs reach it there): no GUILD_CREATE, and REST about the guild and its channels
        answers 403 50001 Missing Access, as for a bot that was removed.
        """
        owner = owner_id if owner_id is not None else self.add_user(f"{name} owner").id
        guild = self.world.add_guild(name, owner, preferred_locale=preferred_locale)
        if not with_bot:
            del guild.members[self.bot_user.id]
            return guild
        self.hub.dispatch("GUILD_CREATE", guild_create_payload(self.world, guild), intent=1)
        return guild

    def install_for_user(self, user_id: int) -> None:
        """The user installs the app to their account (OAuth2 ``integration_type=1``): its
        user-installable commands then work for them in any server, the bot's DM and group DMs."""
        self.world.user_installs.add(user_id)

    def install_commands_only(self, guild_id: int) -> None:
        """The guild installs the app's commands without adding the bot (OAuth2
        ``integration_type=0`` without the ``bot`` scope): its interactions there carry
        ``"0": guild_id`` while the bot is no member."""
        self.world.command_installs.add(guild_id)

    def uninstall_for_user(self, user_id: int) -> None:
        """The user removes the app from their account (Authorized Apps)."""
        self.world.user_installs.discard(user_id)

    def set_attachment_size_limit(self, user_id: int, limit: int) -> None:
        """Discord's ``attachment_size_limit`` of ``user_id``'s interactions (Interaction
        Object: "attachment size limit in bytes", set by the context: boosts, the user's
        Nitro); a response or followup with more bytes of files answers 413, code 40005."""
        self.world.attachment_size_limits[user_id] = limit

    def dm_channel(self, user_id: int) -> Channel:
        """The bot's DM channel with ``user_id`` (where the user may run commands)."""
        return self.world.open_dm(user_id)

    def remove_bot(self, guild_id: int) -> None:
        """Kick the bot from a guild: GUILD_DELETE without ``unavailable`` (Discord's sign of
        a removal, not an outage); REST about the guild and its channels then answers 403
        50001 Missing Access."""
        del self.world.guilds[guild_id].members[self.bot_user.id]
        self.hub.dispatch("GUILD_DELETE", {"id": str(guild_id)}, intent=1)

    def add_bot(self, guild_id: int, permissions: int = perms.DEFAULT_BOT_PERMISSIONS) -> None:
        """Invite the bot (back) into a guild with ``permissions`` (the invite's ``permissions``).

        As Discord does: the bot's managed role is made anew with the permissions the inviter
        granted (a removal deleted the old one), then GUILD_CREATE, as for a new server.
        """
        guild = self.world.guilds[guild_id]
        bot_id = self.bot_user.id
        for role_id in [r.id for r in guild.roles.values() if r.managed and r.bot_id == bot_id]:
            del guild.roles[role_id]
        role = Role(
            self.world.snowflake(),
            self.bot_user.username,
            permissions,
            position=1,
            managed=True,
            bot_id=bot_id,
        )
        guild.roles[role.id] = role
        guild.members[bot_id] = Member(bot_id, [role.id])
        # A join's GUILD_CREATE has no ``unavailable`` (false means an outage ended), which is
        # how a library tells a new server from one coming back (discord.py: on_guild_join).
        payload = guild_create_payload(self.world, guild)
        payload.pop("unavailable", None)
        self.hub.dispatch("GUILD_CREATE", payload, intent=1)

    def add_channel(self, guild_id: int, name: str, *, nsfw: bool = False) -> Channel:
        """Create a text channel (announced to the bot only where it is a member).

        ``nsfw``: age-restricted (Discord's ``nsfw`` flag).
        """
        channel = self.world.add_channel(guild_id, name)
        channel.nsfw = nsfw
        if self.world.bot_in_guild(guild_id):
            self.hub.dispatch("CHANNEL_CREATE", channel_payload(channel), intent=1)
        return channel

    def add_role(self, guild_id: int, name: str, permissions: int = 0) -> Role:
        """Create a role (GUILD_ROLE_CREATE); give it to members with :meth:`give_role`."""
        guild = self.world.guilds[guild_id]
        role = Role(self.world.snowflake(), name, permissions, position=len(guild.roles))
        guild.roles[role.id] = role
        self.hub.dispatch(
            "GUILD_ROLE_CREATE", {"guild_id": str(guild_id), "role": role_payload(role)}, intent=1
        )
        return role

    def give_role(self, guild_id: int, user_id: int, role_id: int) -> None:
        """Add a role to a user's membership; interactions then carry it in ``member.roles``."""
        member, _ = self.world.ensure_member(guild_id, user_id)
        if role_id not in member.role_ids:
            member.role_ids.append(role_id)

    def add_forum(self, guild_id: int, name: str) -> Channel:
        """Create a forum channel (its posts are threads: :meth:`add_thread`)."""
        channel = self.world.add_channel(guild_id, name, type=FORUM_CHANNEL)
        self.hub.dispatch("CHANNEL_CREATE", channel_payload(channel), intent=1)
        return channel

    def add_thread(self, parent_id: int, name: str) -> Channel:
        """Create a public thread in a text channel, or a post in a forum.

        A thread has its parent's permissions (Discord computes them from the parent), and
        posting in it needs Send Messages in Threads.
        """
        parent = self.world.channels[parent_id]
        channel = self.world.add_channel(
            parent.guild_id, name, type=PUBLIC_THREAD, parent_id=parent_id
        )
        self.hub.dispatch(
            "THREAD_CREATE", {**channel_payload(channel), "newly_created": True}, intent=1
        )
        return channel

    def _bot_overwrite(self, channel_id: int) -> Overwrite:
        channel = self.world.channels[channel_id]
        bot_id = self.bot_user.id
        return channel.overwrites.setdefault(bot_id, Overwrite(bot_id, 1))

    def set_bot_permissions(self, channel_id: int, permissions: int) -> None:
        """Make the bot's computed permissions in a channel exactly ``permissions``."""
        overwrite = self._bot_overwrite(channel_id)
        overwrite.allow = permissions
        overwrite.deny = perms.ALL_PERMISSIONS & ~permissions
        self.hub.dispatch(
            "CHANNEL_UPDATE", channel_payload(self.world.channels[channel_id]), intent=1
        )

    def set_channel_overwrite(
        self, channel_id: int, target_id: int, *, allow: int = 0, deny: int = 0
    ) -> None:
        """Set a channel's overwrite for a role (the guild id: @everyone) or a member.

        The bot hears it (CHANNEL_UPDATE); interactions there carry the member's permissions
        with it applied.
        """
        channel = self.world.channels[channel_id]
        kind = 1 if target_id in self.world.users else 0
        channel.overwrites[target_id] = Overwrite(target_id, kind, allow, deny)
        self.hub.dispatch("CHANNEL_UPDATE", channel_payload(channel), intent=1)

    def time_out(self, guild_id: int, user_id: int, seconds: float | None) -> None:
        """Time a member out for ``seconds`` from now (None: lift it), as a moderator does.

        Sets ``communication_disabled_until`` on the member; the bot reads it from the member
        object of the member's interactions and messages (it has no members intent).
        """
        member = self.add_member(guild_id, user_id)
        until = None
        if seconds is not None:
            until = (dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)).isoformat()
        member.communication_disabled_until = until

    def revoke_channel_access(self, channel_id: int) -> None:
        """Deny the bot View Channel (REST then answers 403 50001 Missing Access)."""
        overwrite = self._bot_overwrite(channel_id)
        overwrite.allow &= ~perms.VIEW_CHANNEL
        overwrite.deny |= perms.VIEW_CHANNEL
        self.hub.dispatch(
            "CHANNEL_UPDATE", channel_payload(self.world.channels[channel_id]), intent=1
        )

    def bot_permissions(self, channel_id: int) -> int:
        """The bot's computed permissions in a channel."""
        return self.world.bot_permissions(channel_id)

    # -- gateway control --------------------------------------------------------------------

    async def wait_ready(self, timeout: float = 30) -> None:
        """Wait until a bot identified and READY + all GUILD_CREATEs were sent to it."""

        def check() -> bool | None:
            session = self.hub.session
            ok = session is not None and session.ready_seq and session.sent_seq >= session.ready_seq
            return True if ok else None

        await self.signal.wait_for(check, timeout, "READY")

    async def wait_resumed(self, count: int = 1, timeout: float = 30) -> None:
        """Wait until the bot has RESUMEd ``count`` times in total."""
        await self.signal.wait_for(
            lambda: True if self.hub.resumed_count >= count else None, timeout, "RESUMED"
        )

    async def wait_commands_synced(self, timeout: float = 30, count: int = 1) -> None:
        """Wait until ``count`` bulk command overwrites (global or guild) happened."""
        await self.signal.wait_for(
            lambda: True if self.command_syncs >= count else None, timeout, "command sync"
        )

    async def drop_gateway(self, code: int | None = None) -> None:
        """Drop the bot's socket: TCP abort (``None``, like 1006) or a close frame ``code``."""
        await self.hub.drop(code)

    def request_heartbeat(self) -> None:
        """Send op 1 to the bot."""
        self.hub.request_heartbeat()

    def send_reconnect(self) -> None:
        """Send op 7 RECONNECT to the bot."""
        self.hub.send_reconnect()

    def _ready_payload(self, session: GatewaySession, shard: list[int] | None) -> dict[str, Any]:
        data: dict[str, Any] = {
            "v": 10,
            "user": me_payload(self.bot_user),
            "guilds": [
                {"id": str(g), "unavailable": True}
                for g in self.world.guilds
                if self.world.bot_in_guild(g)
            ],
            "session_id": session.id,
            "session_type": "normal",
            "resume_gateway_url": self.gateway_url,
            "application": {"id": str(self.application_id), "flags": APPLICATION_FLAGS},
            "private_channels": [],
            "presences": [],
            "relationships": [],
            "guild_join_requests": [],
            "geo_ordered_rtc_regions": ["local"],
            "user_settings": {},
            "auth": {},
            "_trace": ["emulator"],
        }
        if shard is not None:
            data["shard"] = shard
        return data

    def _member_chunk(self, data: dict[str, Any]) -> dict[str, Any] | None:
        guild = self.world.guilds.get(int(data.get("guild_id") or 0))
        if guild is None:
            return None
        wanted = {int(u) for u in data.get("user_ids") or []}
        members = [m for m in guild.members.values() if not wanted or m.user_id in wanted]
        chunk: dict[str, Any] = {
            "guild_id": str(guild.id),
            "members": [member_payload(self.world, m) for m in members],
            "chunk_index": 0,
            "chunk_count": 1,
            "not_found": [str(u) for u in wanted - set(guild.members)],
        }
        if data.get("presences"):
            chunk["presences"] = []
        if data.get("nonce"):
            chunk["nonce"] = data["nonce"]
        return chunk

    def application_payload(self) -> dict[str, Any]:
        """The ``/oauth2/applications/@me`` body."""
        return {
            "id": str(self.application_id),
            "name": self.bot_user.username,
            "icon": None,
            "description": "",
            "summary": "",
            "type": None,
            "hook": True,
            "bot_public": True,
            "bot_require_code_grant": False,
            "verify_key": "0" * 64,
            "owner": user_payload(self.app_owner),
            "team": None,
            "flags": APPLICATION_FLAGS,
            "bot": user_payload(self.bot_user),
            "rpc_origins": [],
            "redirect_uris": [],
            "tags": [],
            "interactions_endpoint_url": None,
            "role_connections_verification_url": None,
            "terms_of_service_url": None,
            "privacy_policy_url": None,
            "custom_install_url": None,
            "approximate_guild_count": len(self.world.guilds),
            "integration_types_config": {"0": {}},
            "is_monetized": False,
        }

    # -- REST helpers ------------------------------------------------------------------------

    def inject_rate_limit(
        self, path_contains: str, count: int = 1, retry_after: float = 0.5
    ) -> None:
        """Answer the next ``count`` requests whose path contains ``path_contains`` with 429."""
        self._rate_limits.append([path_contains, count, retry_after])

    def inject_error(
        self,
        path_contains: str,
        error: DiscordAPIError,
        *,
        method: str | None = None,
        count: int = 1,
        late: bool = False,
    ) -> None:
        """Answer the next ``count`` requests (of ``method``, if given) whose path contains
        ``path_contains`` with ``error`` (e.g. a 500, or 403 / 50001 missing access).

        With ``late`` the request is carried out first and only its answer is the error: a
        message posted although the bot was told 5xx (a gateway's 502/503, a time-out).
        """
        self._errors.append([path_contains, method, count, error, late])

    def refuse_v2_edit_attachments(self, refuse: bool = True) -> None:
        """Refuse (400, 50035) edits that add a new attachment to a Components V2 message."""
        self.msgs.refuse_v2_edit_attachments = refuse

    def take_error(self, method: str, path: str, *, late: bool = False) -> DiscordAPIError | None:
        for entry in self._errors:
            if (
                entry[2] > 0
                and entry[0] in path
                and entry[1] in (None, method)
                and (entry[4] is late)
            ):
                entry[2] -= 1
                error: DiscordAPIError = entry[3]
                return error
        return None

    def take_rate_limit(self, path: str) -> float | None:
        for entry in self._rate_limits:
            if entry[1] > 0 and entry[0] in path:
                entry[1] -= 1
                return float(entry[2])
        return None

    def registered_commands(self, guild_id: int | None = None) -> list[dict[str, Any]]:
        """Commands registered globally (``None``) or for a guild."""
        return list(self.world.commands.get(guild_id, []))

    # -- messages ----------------------------------------------------------------------------

    def channel_messages(self, channel_id: int) -> list[Message]:
        """Non-deleted messages in a channel, oldest first (ephemeral ones included)."""
        return [
            m for m in self.world.messages.values() if m.channel_id == channel_id and not m.deleted
        ]

    async def wait_for_message(
        self,
        predicate: Callable[[Message], bool] = lambda m: True,
        timeout: float = 10,
        *,
        include_existing: bool = False,
    ) -> Message:
        """Wait for a message created by the bot after this call that matches ``predicate``.

        Deferred "thinking" placeholders are skipped until their first real content
        arrives; later edits of new messages are re-checked.
        """
        known = set() if include_existing else set(self.world.messages)

        def check() -> Message | None:
            for message in list(self.world.messages.values()):
                if message.id in known or message.loading or message.deleted:
                    continue
                if message.author_id != self.world.bot_user.id:
                    continue  # a member's message (member_message)
                if predicate(message):
                    return message
            return None

        return await self.signal.wait_for(check, timeout, "a new bot message")

    async def wait_for_edit(
        self,
        message_id: int,
        predicate: Callable[[Message], bool] = lambda m: True,
        timeout: float = 10,
    ) -> Message:
        """Wait until the message has been edited at least once and matches ``predicate``."""

        def check() -> Message | None:
            message = self.world.messages[message_id]
            return message if len(message.history) > 1 and predicate(message) else None

        return await self.signal.wait_for(check, timeout, f"an edit of message {message_id}")

    def delete_message(self, channel_id: int, message_id: int) -> None:
        """Delete a message as a moderator would (dispatches MESSAGE_DELETE)."""
        message = self.world.messages[message_id]
        if message.channel_id != channel_id:
            raise KeyError(message_id)
        self.msgs.delete(message)
