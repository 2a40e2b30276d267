"""The REST API (aiohttp): routes, auth, recording, injected rate limits."""

from __future__ import annotations

import json
import time
from typing import Any
from urllib.parse import parse_qsl, unquote

from aiohttp import BodyPartReader, hdrs, web

from . import errors as err
from . import permissions as perms
from .errors import DiscordAPIError, FormErrors
from .interaction_routes import InteractionRoutes
from .limits import validate_commands
from .models import EPHEMERAL, PUBLIC_THREAD, Message
from .monetization import MonetizationRoutes
from .oauth import OAuthRoutes
from .payloads import (
    channel_payload,
    command_permissions_payload,
    guild_payload,
    me_payload,
    member_payload,
    message_payload,
    role_payload,
    user_payload,
)
from .recorder import RecordedFile, RecordedRequest
from .routing import API_PREFIX, FILES, PAYLOAD, RESPONSE, ROUTE, _flag, _int


class RestApi(InteractionRoutes, MonetizationRoutes):
    """Builds the aiohttp application serving REST, attachments and the gateway."""

    def build_app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 * 1024 * 1024)
        add = app.router.add_route
        routes: list[tuple[str, str, Any]] = [
            ("GET", "/users/@me", self.get_me),
            ("GET", "/users/@me/guilds", self.get_my_guilds),
            ("POST", "/users/@me/channels", self.create_dm),
            ("GET", "/gateway", self.get_gateway),
            ("GET", "/gateway/bot", self.get_gateway_bot),
            ("GET", "/oauth2/applications/@me", self.get_application),
            ("GET", "/applications/@me", self.get_application),
            ("GET", "/applications/{app_id}/commands", self.get_commands),
            ("PUT", "/applications/{app_id}/commands", self.put_commands),
            ("GET", "/applications/{app_id}/guilds/{guild_id}/commands", self.get_commands),
            ("PUT", "/applications/{app_id}/guilds/{guild_id}/commands", self.put_commands),
            (
                "GET",
                "/applications/{app_id}/guilds/{guild_id}/commands/permissions",
                self.get_guild_command_permissions,
            ),
            (
                "GET",
                "/applications/{app_id}/guilds/{guild_id}/commands/{command_id}/permissions",
                self.get_command_permissions,
            ),
            ("GET", "/applications/{app_id}/skus", self.list_skus),
            ("GET", "/applications/{app_id}/entitlements", self.list_entitlements),
            (
                "POST",
                "/applications/{app_id}/entitlements/{entitlement_id}/consume",
                self.consume_entitlement,
            ),
            ("POST", "/interactions/{interaction_id}/{token}/callback", self.callback),
            ("GET", "/webhooks/{app_id}/{token}/messages/@original", self.get_webhook_message),
            ("PATCH", "/webhooks/{app_id}/{token}/messages/@original", self.edit_webhook_message),
            (
                "DELETE",
                "/webhooks/{app_id}/{token}/messages/@original",
                self.delete_webhook_message,
            ),
            ("GET", "/webhooks/{app_id}/{token}/messages/{message_id}", self.get_webhook_message),
            (
                "PATCH",
                "/webhooks/{app_id}/{token}/messages/{message_id}",
                self.edit_webhook_message,
            ),
            (
                "DELETE",
                "/webhooks/{app_id}/{token}/messages/{message_id}",
                self.delete_webhook_message,
            ),
            ("POST", "/webhooks/{app_id}/{token}", self.post_followup),
            ("GET", "/channels/{channel_id}", self.get_channel),
            ("GET", "/channels/{channel_id}/messages", self.get_messages),
            ("POST", "/channels/{channel_id}/messages", self.post_message),
            ("POST", "/channels/{channel_id}/typing", self.typing),
            (
                "POST",
                "/channels/{channel_id}/messages/{message_id}/threads",
                self.start_thread_from_message,
            ),
            ("POST", "/channels/{channel_id}/threads", self.start_thread),
            ("GET", "/channels/{channel_id}/messages/{message_id}", self.get_message),
            ("PATCH", "/channels/{channel_id}/messages/{message_id}", self.edit_message),
            ("DELETE", "/channels/{channel_id}/messages/{message_id}", self.delete_message),
            (
                "PUT",
                "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
                self.react,
            ),
            (
                "DELETE",
                "/channels/{channel_id}/messages/{message_id}/reactions/{emoji}/@me",
                self.unreact,
            ),
            ("GET", "/guilds/{guild_id}", self.get_guild),
            ("GET", "/guilds/{guild_id}/channels", self.get_guild_channels),
            ("GET", "/guilds/{guild_id}/roles", self.get_roles),
            ("GET", "/guilds/{guild_id}/members/{user_id}", self.get_member),
        ]
        self._oauth = OAuthRoutes(self.emu)
        self._oauth.add_to(app)
        for method, path, handler in routes:
            add(method, API_PREFIX + path, handler)
        add("*", "/api/{tail:.*}", self.unhandled)
        add("GET", "/attachments/{channel_id}/{attachment_id}/{filename}", self.get_attachment)
        add("GET", "/gateway", self.emu.hub.handle)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        if not request.path.startswith("/api/"):
            return await handler(request)
        resource = request.match_info.route.resource
        canonical = resource.canonical if resource is not None else request.path
        route = canonical.removeprefix(API_PREFIX)
        request[ROUTE] = route
        record = RecordedRequest(
            at=self.emu.clock(),
            method=request.method,
            path=request.path.removeprefix(API_PREFIX),
            query=dict(request.query),
            route=route,
        )
        self.emu.requests.append(record)
        try:
            record.json, record.files = await self._read_body(request)
            request[PAYLOAD] = record.json
            request[FILES] = record.files
            limited = self.emu.take_rate_limit(record.path)
            injected = self.emu.take_error(request.method, record.path)
            if injected is not None:
                raise injected
            if limited is not None:
                response: web.StreamResponse = self._rate_limited(request, limited)
            else:
                self._check_auth(request, route)
                response = await handler(request)
                late = self.emu.take_error(request.method, record.path, late=True)
                if late is not None:
                    raise late  # done, but the answer is an error (a proxy's 5xx, a time-out)
        except DiscordAPIError as exc:
            response = self._json(request, exc.body(), exc.status)
        except Exception as exc:  # an emulator bug: surface it to the test
            self.emu.server_errors.append(exc)
            response = self._json(
                request, {"message": "500: Internal Server Error", "code": 0}, 500
            )
        record.status = response.status
        record.response = request.get(RESPONSE)
        self.emu.signal.notify()
        return response

    def _rate_limited(self, request: web.Request, retry_after: float) -> web.Response:
        body = {
            "message": "You are being rate limited.",
            "retry_after": retry_after,
            "global": False,
        }
        headers = {
            **self._headers(request[ROUTE]),
            "X-RateLimit-Remaining": "0",
            "X-RateLimit-Reset-After": f"{retry_after:.3f}",
            "X-RateLimit-Reset": f"{time.time() + retry_after:.3f}",
            "X-RateLimit-Scope": "user",
            "Retry-After": str(max(1, round(retry_after))),
            "Content-Type": "application/json",
        }
        request[RESPONSE] = body
        return web.Response(body=json.dumps(body).encode(), status=429, headers=headers)

    def _check_auth(self, request: web.Request, route: str) -> None:
        if (
            route.startswith(("/webhooks/", "/interactions/", "/oauth2/token"))
            or route == "/gateway"
        ):
            return
        if route.startswith("/users/@me") and request.headers.get(
            hdrs.AUTHORIZATION, ""
        ).startswith("Bearer "):
            return  # a member's OAuth2 token: checked by the route
        if request.headers.get(hdrs.AUTHORIZATION) != f"Bot {self.emu.bot_token}":
            raise err.unauthorized()

    @staticmethod
    async def _read_body(request: web.Request) -> tuple[Any, list[RecordedFile]]:
        if request.content_type == "multipart/form-data":
            payload: Any = None
            files: list[RecordedFile] = []
            reader = await request.multipart()
            async for part in reader:
                if not isinstance(part, BodyPartReader):
                    continue
                raw = await part.read()
                if part.name == "payload_json":
                    try:
                        payload = json.loads(raw)
                    except ValueError:
                        raise err.invalid_json() from None
                elif part.filename is not None:
                    ctype = part.headers.get(hdrs.CONTENT_TYPE)
                    files.append(RecordedFile(part.name or "", part.filename, bytes(raw), ctype))
            return payload, files
        raw = await request.read() if request.can_read_body else b""
        if not raw:
            return None, []
        if request.content_type == "application/x-www-form-urlencoded":
            return dict(parse_qsl(raw.decode())), []
        try:
            return json.loads(raw), []
        except ValueError:
            raise err.invalid_json() from None

    async def unhandled(self, request: web.Request) -> web.Response:
        self.emu.unhandled.append(self.emu.requests[-1])
        raise err.not_found()

    async def get_attachment(self, request: web.Request) -> web.Response:
        attachment = self.world.attachments.get(int(request.match_info["attachment_id"]))
        if attachment is None or not self.world.url_signer.valid(attachment.id, request.query):
            # Discord's CDN: an expired or forged signature is a plain 404.
            raise web.HTTPNotFound(text="This content is no longer available.")
        ctype = attachment.content_type or "application/octet-stream"
        return web.Response(body=attachment.data, headers={"Content-Type": ctype})

    # -- identity / gateway / application -------------------------------------------------

    async def get_me(self, request: web.Request) -> web.Response:
        if request.headers.get(hdrs.AUTHORIZATION, "").startswith("Bearer "):
            return self._oauth.me(request)
        return self._json(request, me_payload(self.world.bot_user))

    async def get_my_guilds(self, request: web.Request) -> web.Response:
        if not request.headers.get(hdrs.AUTHORIZATION, "").startswith("Bearer "):
            raise err.unauthorized()  # the bot's own guild list is not emulated
        return self._oauth.my_guilds(request)

    async def create_dm(self, request: web.Request) -> web.Response:
        payload = request[PAYLOAD] or {}
        user_id = _int(str(payload.get("recipient_id", "")), err.unknown_user())
        user = self.world.users.get(user_id)
        if user is None:
            raise err.unknown_user()
        channel = self.world.open_dm(user_id)
        data = {
            "id": str(channel.id),
            "type": channel.type,
            "last_message_id": None,
            "recipients": [user_payload(user)],
            "flags": 0,
        }
        return self._json(request, data)

    async def get_gateway(self, request: web.Request) -> web.Response:
        return self._json(request, {"url": self.emu.gateway_url})

    async def get_gateway_bot(self, request: web.Request) -> web.Response:
        limit = {"total": 1000, "remaining": 999, "reset_after": 14_400_000, "max_concurrency": 1}
        return self._json(
            request,
            {
                "url": self.emu.gateway_url,
                "shards": self.emu.hub.shard_count,
                "session_start_limit": limit,
            },
        )

    async def get_application(self, request: web.Request) -> web.Response:
        return self._json(request, self.emu.application_payload())

    def _command_scope(self, request: web.Request) -> int | None:
        if _int(request.match_info["app_id"], err.not_found()) != self.world.application_id:
            raise DiscordAPIError(
                403, 20012, "You are not authorized to perform this action on this application"
            )
        raw = request.match_info.get("guild_id")
        if raw is None:
            return None
        guild_id = _int(raw, err.unknown_guild())
        if guild_id not in self.world.guilds:
            raise err.missing_access()
        return guild_id

    async def get_commands(self, request: web.Request) -> web.Response:
        scope = self._command_scope(request)
        return self._json(request, self.world.commands.get(scope, []))

    async def put_commands(self, request: web.Request) -> web.Response:
        scope = self._command_scope(request)
        body = request[PAYLOAD]
        if not isinstance(body, list):
            form = FormErrors()
            form.add((), "BASE_TYPE_ARRAY", "Must be an array")
            form.raise_if_any()
        form = FormErrors()
        validate_commands(body, form)
        form.raise_if_any()
        previous = {(c["name"], c["type"]): c["id"] for c in self.world.commands.get(scope, [])}
        stored = []
        for command in body:
            kind = command.get("type", 1)
            item = {
                "id": previous.get((command["name"], kind)) or str(self.world.snowflake()),
                "application_id": str(self.world.application_id),
                "version": str(self.world.snowflake()),
                "type": kind,
                "name": command["name"],
                "name_localizations": command.get("name_localizations"),
                "description": command.get("description", "") if kind == 1 else "",
                "description_localizations": command.get("description_localizations"),
                "default_member_permissions": command.get("default_member_permissions"),
                "contexts": command.get("contexts"),
                "integration_types": command.get("integration_types", [0]),
                "nsfw": command.get("nsfw", False),
            }
            if command.get("options"):
                item["options"] = command["options"]
            if scope is None:
                item["dm_permission"] = command.get("dm_permission", True) is not False
            else:
                item["guild_id"] = str(scope)
            stored.append(item)
        self.world.commands[scope] = stored
        # "Deleting or renaming a command will permanently delete all permissions for the
        # command" (Application Commands -> Edit Application Command Permissions).
        live = {int(c["id"]) for cs in self.world.commands.values() for c in cs}
        live.add(self.world.application_id)
        for targets in self.world.command_permissions.values():
            for target in [t for t in targets if t not in live]:
                del targets[target]
        self.emu.command_syncs += 1
        return self._json(request, stored)

    async def get_guild_command_permissions(self, request: web.Request) -> web.Response:
        """Every command's (and the app's) permissions in a guild: only targets that have any
        (Application Commands -> Get Guild Application Command Permissions)."""
        guild_id = self._command_scope(request)
        assert guild_id is not None
        targets = self.world.command_permissions.get(guild_id, {})
        return self._json(
            request,
            [
                command_permissions_payload(self.world, guild_id, target, entries)
                for target, entries in targets.items()
            ],
        )

    async def get_command_permissions(self, request: web.Request) -> web.Response:
        """One command's (or, by the application id, the app's) permissions in a guild; 404
        10066 when it has none (Get Application Command Permissions)."""
        guild_id = self._command_scope(request)
        assert guild_id is not None
        target = _int(request.match_info["command_id"], err.not_found())
        entries = self.world.command_permissions.get(guild_id, {}).get(target)
        if not entries:
            raise DiscordAPIError(404, 10066, "Unknown application command permissions")
        return self._json(
            request, command_permissions_payload(self.world, guild_id, target, entries)
        )

    # -- channels ----------------------------------------------------------------------

    def _channel_id(self, request: web.Request) -> int:
        return _int(request.match_info["channel_id"], err.unknown_channel())

    def _message(self, request: web.Request) -> Message:
        message_id = _int(request.match_info["message_id"], err.unknown_message())
        return self.emu.msgs.channel_message(self._channel_id(request), message_id)

    def _require(self, channel_id: int, needed: int) -> int:
        have = self.world.bot_permissions(channel_id)
        if needed & ~have:
            raise err.missing_permissions()
        return have

    async def get_channel(self, request: web.Request) -> web.Response:
        channel_id = self._channel_id(request)
        channel = self.world.channels.get(channel_id)
        if channel is None:
            raise err.unknown_channel()
        if not self.world.bot_permissions(channel_id) & perms.VIEW_CHANNEL:
            raise err.missing_access()
        return self._json(request, channel_payload(channel))

    async def post_message(self, request: web.Request) -> web.Response:
        channel_id = self._channel_id(request)
        payload = request[PAYLOAD] or {}
        if self.world.dm_recipients.get(channel_id) in self.world.closed_dms:
            raise err.cannot_dm()
        have = self.emu.msgs.check_send(channel_id, payload, request[FILES])
        existing = self.emu.msgs.nonce_match(payload)
        if existing is not None:
            # Discord (Create Message, enforce_nonce): the same author's message with this
            # nonce from the last few minutes is returned, and no new message is created.
            return self._json(request, message_payload(self.world, existing))
        extra: dict[str, Any] = {}
        ref = payload.get("message_reference")
        if ref:
            target = self.world.messages.get(int(ref.get("message_id") or 0))
            if target is None or target.deleted or target.ephemeral:
                if ref.get("fail_if_not_exists", True):
                    form = FormErrors()
                    form.add(
                        ("message_reference",),
                        "MESSAGE_REFERENCE_UNKNOWN_MESSAGE",
                        "Unknown message",
                    )
                    form.raise_if_any()
            else:
                extra["type"] = 19
                extra["message_reference"] = {
                    "type": 0,
                    "message_id": str(target.id),
                    "channel_id": str(target.channel_id),
                }
                if target.guild_id:
                    # Discord (Message Reference): guild_id only for a message in a guild; a
                    # reply in a DM has none.
                    extra["message_reference"]["guild_id"] = str(target.guild_id)
        message = self.emu.msgs.create(
            channel_id,
            payload,
            request[FILES],
            can_mention_everyone=bool(have & perms.MENTION_EVERYONE),
            **extra,
        )
        return self._json(request, message_payload(self.world, message))

    async def get_messages(self, request: web.Request) -> web.Response:
        channel_id = self._channel_id(request)
        if channel_id not in self.world.channels:
            raise err.unknown_channel()
        if not self.world.bot_permissions(channel_id) & perms.VIEW_CHANNEL:
            raise err.missing_access()
        self._require(channel_id, perms.READ_MESSAGE_HISTORY)
        limit = min(max(int(request.query.get("limit", 50)), 1), 100)
        before = int(request.query.get("before", 1 << 63))
        after = int(request.query.get("after", 0))
        found = [
            m
            for m in self.emu.channel_messages(channel_id)
            if not m.ephemeral and after < m.id < before
        ]
        found = sorted(found, key=lambda m: m.id, reverse=True)[:limit]
        return self._json(request, [message_payload(self.world, m) for m in found])

    def _new_thread(self, parent_id: int, payload: dict[str, Any], thread_id: int | None) -> Any:
        """Create a public thread of ``parent_id`` (Channel docs, "Start Thread ...")."""
        parent = self.world.channels.get(parent_id)
        if parent is None:
            raise err.unknown_channel()
        if not self.world.bot_permissions(parent_id) & perms.VIEW_CHANNEL:
            raise err.missing_access()
        if parent.is_thread or parent.type != 0:
            # Threads start in text channels (a forum's posts are made otherwise).
            raise DiscordAPIError(400, 50024, "Cannot execute action on this channel type")
        self._require(parent_id, perms.CREATE_PUBLIC_THREADS)
        name = str(payload.get("name") or "")
        if not 1 <= len(name) <= 100:
            form = FormErrors()
            form.add(("name",), "BASE_TYPE_BAD_LENGTH", "Must be between 1 and 100 in length.")
            form.raise_if_any()
        thread = self.world.add_channel(
            parent.guild_id, name, type=PUBLIC_THREAD, parent_id=parent_id, channel_id=thread_id
        )
        self.emu.hub.dispatch(
            "THREAD_CREATE", {**channel_payload(thread), "newly_created": True}, intent=1
        )
        self.emu.signal.notify()
        return thread

    async def start_thread_from_message(self, request: web.Request) -> web.Response:
        """A public thread started from a message; its id is the message's (Discord docs)."""
        message = self._message(request)
        if message.id in self.world.channels:
            raise DiscordAPIError(400, 160004, "A thread has already been created for this message")
        thread = self._new_thread(message.channel_id, request[PAYLOAD] or {}, message.id)
        return self._json(request, channel_payload(thread), status=201)

    async def start_thread(self, request: web.Request) -> web.Response:
        """A public thread started without a message."""
        thread = self._new_thread(self._channel_id(request), request[PAYLOAD] or {}, None)
        return self._json(request, channel_payload(thread), status=201)

    async def typing(self, request: web.Request) -> web.Response:
        channel_id = self._channel_id(request)
        self.emu.msgs.check_send(channel_id, {}, [])
        return self._empty(request)

    async def get_message(self, request: web.Request) -> web.Response:
        message = self._message(request)
        self._require(message.channel_id, perms.READ_MESSAGE_HISTORY)
        return self._json(request, message_payload(self.world, message))

    async def edit_message(self, request: web.Request) -> web.Response:
        message = self._message(request)
        if message.author_id != self.world.bot_user.id:
            raise err.cannot_edit_others()
        payload = request[PAYLOAD] or {}
        if payload.get("flags") is not None and payload["flags"] & EPHEMERAL:
            payload = {**payload, "flags": payload["flags"] & ~EPHEMERAL}
        have = self.world.bot_permissions(message.channel_id)
        self.emu.msgs.edit(
            message,
            payload,
            request[FILES],
            can_mention_everyone=bool(have & perms.MENTION_EVERYONE),
        )
        return self._json(request, message_payload(self.world, message))

    async def delete_message(self, request: web.Request) -> web.Response:
        message = self._message(request)
        if message.author_id != self.world.bot_user.id:
            self._require(message.channel_id, perms.MANAGE_MESSAGES)
        self.emu.msgs.delete(message)
        return self._empty(request)

    async def react(self, request: web.Request) -> web.Response:
        message = self._message(request)
        self._require(message.channel_id, perms.ADD_REACTIONS | perms.READ_MESSAGE_HISTORY)
        emoji = unquote(request.match_info["emoji"])
        if emoji not in message.reactions:
            message.reactions.append(emoji)
        return self._empty(request)

    async def unreact(self, request: web.Request) -> web.Response:
        message = self._message(request)
        emoji = unquote(request.match_info["emoji"])
        if emoji in message.reactions:
            message.reactions.remove(emoji)
        return self._empty(request)

    # -- guilds ----------------------------------------------------------------------------

    def _guild(self, request: web.Request) -> Any:
        guild = self.world.guilds.get(_int(request.match_info["guild_id"], err.unknown_guild()))
        if guild is None:
            raise err.unknown_guild()
        return guild

    async def get_guild(self, request: web.Request) -> web.Response:
        guild = self._guild(request)
        if not self.world.bot_in_guild(guild.id):
            raise err.missing_access()  # what Discord answers for a server the bot left
        data = guild_payload(self.world, guild)
        if _flag(request.query, "with_counts"):
            data["approximate_member_count"] = len(guild.members)
            data["approximate_presence_count"] = 0
        return self._json(request, data)

    async def get_guild_channels(self, request: web.Request) -> web.Response:
        guild = self._guild(request)
        return self._json(request, [channel_payload(c) for c in guild.channels.values()])

    async def get_roles(self, request: web.Request) -> web.Response:
        guild = self._guild(request)
        return self._json(request, [role_payload(r) for r in guild.roles.values()])

    async def get_member(self, request: web.Request) -> web.Response:
        guild = self._guild(request)
        member = guild.members.get(_int(request.match_info["user_id"], err.unknown_member()))
        if member is None:
            raise err.unknown_member()
        return self._json(request, member_payload(self.world, member))
