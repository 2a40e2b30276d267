"""Gateway v10 over websockets: HELLO/IDENTIFY/READY/RESUME, heartbeats, dispatches."""

from __future__ import annotations

import asyncio
import contextlib
import json
import secrets
import zlib
from collections.abc import Callable
from typing import Any

from aiohttp import WSMsgType, web

from .recorder import RecordedEvent

ACK_ROUND_TRIP = 0.05
"""Seconds between a heartbeat and its ACK, as over a network."""

DISPATCH, HEARTBEAT, IDENTIFY, PRESENCE, VOICE, RESUME = 0, 1, 2, 3, 4, 6
RECONNECT, REQUEST_MEMBERS, INVALID_SESSION, HELLO, HEARTBEAT_ACK = 7, 8, 9, 10, 11
GUILDS_INTENT = 1 << 0
GUILD_MEMBERS_INTENT = 1 << 1
GUILD_MESSAGES_INTENT = 1 << 9
DIRECT_MESSAGES_INTENT = 1 << 12
MESSAGE_CONTENT_INTENT = 1 << 15
"""Privileged: without it a guild message's content, embeds, attachments and components
reach the bot empty unless the message mentions it (Gateway docs, "Message Content Intent")."""


class _Compressor:
    """Transport compression as negotiated by ``?compress=`` (zlib-stream or zstd-stream)."""

    def __init__(self, kind: str | None) -> None:
        self.kind = kind
        self._zlib: Any = zlib.compressobj() if kind == "zlib-stream" else None
        self._zstd: Any = None
        if kind == "zstd-stream":
            try:
                import zstandard  # type: ignore[import-not-found]

                self._zstd = zstandard.ZstdCompressor().compressobj()
                self._flush = zstandard.COMPRESSOBJ_FLUSH_BLOCK
            except ImportError:
                self.kind = None

    def encode(self, text: str) -> bytes | str:
        if self._zlib is not None:
            return self._zlib.compress(text.encode()) + self._zlib.flush(zlib.Z_SYNC_FLUSH)
        if self._zstd is not None:
            return self._zstd.compress(text.encode()) + self._zstd.flush(self._flush)
        return text


class GatewayConnection:
    """One websocket; sends are serialised through a queue (compression is stateful)."""

    def __init__(self, ws: web.WebSocketResponse, request: web.Request, compress: str | None):
        self.ws = ws
        self.request = request
        self.compressor = _Compressor(compress)
        self.queue: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self.session: GatewaySession | None = None
        self.writer: asyncio.Task[None] | None = None

    def send(self, payload: dict[str, Any]) -> None:
        self.queue.put_nowait(payload)

    def abort(self) -> None:
        """Drop the TCP connection without a close frame (like a network failure)."""
        transport = self.request.transport
        if transport is not None:
            transport.abort()


class GatewaySession:
    """A gateway session that survives reconnects; keeps its dispatch log for RESUME."""

    def __init__(self, session_id: str, intents: int, shard: int = 0) -> None:
        self.id = session_id
        self.intents = intents
        self.shard = shard
        self.seq = 0
        self.log: list[dict[str, Any]] = []
        self.connection: GatewayConnection | None = None
        self.ready_seq = 0
        self.sent_seq = 0


class GatewayHub:
    """Accepts bot connections and dispatches events to the current session.

    Args:
        bot_token: The only token IDENTIFY/RESUME accept.
        heartbeat_interval_ms: Sent in HELLO.
        privileged_intents: Privileged intents enabled "in the developer portal".
        ready_builder: Builds the READY body for a session.
        guild_creates: Builds the GUILD_CREATE bodies sent after READY.
        clock: Emulator clock for records.
        on_change: Called after anything observable happens.
    """

    def __init__(
        self,
        *,
        bot_token: str,
        heartbeat_interval_ms: int,
        privileged_intents: int,
        ready_builder: Callable[[GatewaySession, list[int] | None], dict[str, Any]],
        guild_creates: Callable[[], list[dict[str, Any]]],
        member_chunk: Callable[[dict[str, Any]], dict[str, Any] | None],
        clock: Callable[[], float],
        on_change: Callable[[], None],
    ) -> None:
        self.bot_token = bot_token
        self.heartbeat_interval_ms = heartbeat_interval_ms
        self.privileged_intents = privileged_intents
        self._ready_builder = ready_builder
        self._guild_creates = guild_creates
        self._member_chunk = member_chunk
        self._clock = clock
        self._on_change = on_change
        self.session: GatewaySession | None = None
        self.sessions: dict[str, GatewaySession] = {}
        # Sharding (Discord docs, "Sharding"): a guild's events go to the session of shard
        # (guild_id >> 22) % shard_count; events of no guild go to the latest session.
        self.shard_count = 1
        self.shard_sessions: dict[int, GatewaySession] = {}
        self.connections: list[GatewayConnection] = []
        self.sent: list[RecordedEvent] = []
        self.received: list[RecordedEvent] = []
        self.ready_count = 0
        self.resumed_count = 0
        self.identify_count = 0

    # -- dispatching -------------------------------------------------------------------

    @property
    def connected(self) -> bool:
        """Whether an identified session currently has a live socket."""
        return self.session is not None and self.session.connection is not None

    def shard_of(self, guild_id: int) -> int:
        """The shard a guild's events go to (Discord docs: ``(guild_id >> 22) % num_shards``)."""
        return (guild_id >> 22) % self.shard_count

    def session_for(self, event: str, data: Any) -> GatewaySession | None:
        """The session an event would go to (its guild's shard), or None."""
        return self._session_for(event, data)

    def _session_for(self, event: str, data: Any) -> GatewaySession | None:
        if self.shard_count == 1 or not isinstance(data, dict):
            return self.session
        guild_id = data.get("id") if event == "GUILD_CREATE" else data.get("guild_id")
        if guild_id is None:
            return self.session
        return self.shard_sessions.get(self.shard_of(int(guild_id)))

    def dispatch(
        self,
        event: str,
        data: Any,
        *,
        intent: int | None = None,
        to: GatewaySession | None = None,
    ) -> bool:
        """Dispatch an event to the session of its guild's shard (buffered while disconnected).

        Returns:
            False when there is no such session or it lacks ``intent``.
        """
        session = to or self._session_for(event, data)
        if session is None or (intent is not None and not session.intents & intent):
            return False
        session.seq += 1
        payload = {"op": DISPATCH, "t": event, "s": session.seq, "d": data}
        session.log.append(payload)
        if session.connection is not None:
            session.connection.send(payload)
        return True

    def request_heartbeat(self) -> None:
        """Send op 1, asking the bot to heartbeat immediately."""
        if self.session and self.session.connection:
            self.session.connection.send({"op": HEARTBEAT, "d": None})

    def send_reconnect(self) -> None:
        """Send op 7 RECONNECT (the bot should reconnect and RESUME)."""
        if self.session and self.session.connection:
            self.session.connection.send({"op": RECONNECT, "d": None})

    async def drop(self, code: int | None = None) -> None:
        """Drop the current connection: abort TCP (``code=None``) or send a close frame."""
        session = self.session
        if session is None or session.connection is None:
            return
        conn = session.connection
        session.connection = None
        if code is None:
            conn.abort()
        else:
            conn.send({"__close__": code})

    async def close_all(self) -> None:
        for conn in list(self.connections):
            with contextlib.suppress(Exception):
                await conn.ws.close(code=1001)

    # -- websocket handling ------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        """aiohttp handler for the gateway URL."""
        ws = web.WebSocketResponse(max_msg_size=0)
        await ws.prepare(request)
        conn = GatewayConnection(ws, request, request.query.get("compress"))
        self.connections.append(conn)
        conn.writer = asyncio.create_task(self._write_loop(conn))
        conn.send(
            {
                "op": HELLO,
                "s": None,
                "t": None,
                "d": {"heartbeat_interval": self.heartbeat_interval_ms, "_trace": ["emulator"]},
            }
        )
        try:
            async for msg in ws:
                if msg.type is not WSMsgType.TEXT:
                    if msg.type is WSMsgType.BINARY:
                        await self._close(conn, 4002, "Error while decoding payload.")
                    break
                try:
                    payload = json.loads(msg.data)
                except ValueError:
                    await self._close(conn, 4002, "Error while decoding payload.")
                    break
                self.received.append(
                    RecordedEvent(self._clock(), payload.get("op", -1), None, payload.get("d"))
                )
                if not await self._on_payload(conn, payload):
                    break
        finally:
            if conn.session is not None and conn.session.connection is conn:
                conn.session.connection = None
            conn.queue.put_nowait(None)
            self.connections.remove(conn)
            self._on_change()
        return ws

    async def _on_payload(self, conn: GatewayConnection, payload: dict[str, Any]) -> bool:
        op, data = payload.get("op"), payload.get("d")
        if op == HEARTBEAT:
            # Real ACKs come a network round trip later. An instant one on loopback beats
            # discord.py's heartbeat thread to recording its send time, and it then logs
            # "Can't keep up, websocket is 41.3s behind" for a latency of zero.
            ack = {"op": HEARTBEAT_ACK, "s": None, "t": None, "d": None}
            asyncio.get_running_loop().call_later(ACK_ROUND_TRIP, conn.send, ack)
            return True
        if op == IDENTIFY:
            return await self._identify(conn, data or {})
        if op == RESUME:
            return await self._resume(conn, data or {})
        if conn.session is None:
            await self._close(conn, 4003, "Not authenticated.")
            return False
        if op == REQUEST_MEMBERS:
            chunk = self._member_chunk(data or {})
            if chunk is not None:
                self.dispatch("GUILD_MEMBERS_CHUNK", chunk)
            return True
        if op in (PRESENCE, VOICE):
            return True
        await self._close(conn, 4001, "Unknown opcode.")
        return False

    def _token_ok(self, token: Any) -> bool:
        return isinstance(token, str) and token.removeprefix("Bot ") == self.bot_token

    async def _identify(self, conn: GatewayConnection, data: dict[str, Any]) -> bool:
        if conn.session is not None:
            await self._close(conn, 4005, "Already authenticated.")
            return False
        if not self._token_ok(data.get("token")):
            await self._close(conn, 4004, "Authentication failed.")
            return False
        intents = data.get("intents")
        if not isinstance(intents, int) or intents < 0:
            await self._close(conn, 4013, "Invalid intent(s).")
            return False
        privileged = (1 << 1) | (1 << 8) | (1 << 15)
        if intents & privileged & ~self.privileged_intents:
            await self._close(conn, 4014, "Disallowed intent(s).")
            return False
        shard = data.get("shard")
        shard_id = shard[0] if isinstance(shard, list) and shard else 0
        previous = self.shard_sessions.get(shard_id)
        if previous is not None and previous.connection is not None:
            previous.connection.abort()
        session = GatewaySession(secrets.token_hex(16), intents, shard_id)
        self.sessions[session.id] = session
        self.session = session
        self.shard_sessions[shard_id] = session
        session.connection = conn
        conn.session = session
        self.identify_count += 1
        ready = self._ready_builder(session, shard)
        ready["guilds"] = [g for g in ready["guilds"] if self.shard_of(int(g["id"])) == shard_id]
        self.dispatch("READY", ready, to=session)
        if intents & GUILDS_INTENT:
            for guild in self._guild_creates():
                if self.shard_of(int(guild["id"])) == shard_id:
                    self.dispatch("GUILD_CREATE", guild)
        session.ready_seq = session.seq
        self.ready_count += 1
        self._on_change()
        return True

    async def _resume(self, conn: GatewayConnection, data: dict[str, Any]) -> bool:
        if not self._token_ok(data.get("token")):
            await self._close(conn, 4004, "Authentication failed.")
            return False
        session = self.sessions.get(str(data.get("session_id")))
        seq = data.get("seq")
        current = session is not None and self.shard_sessions.get(session.shard) is session
        if session is None or not current or not isinstance(seq, int):
            conn.send({"op": INVALID_SESSION, "s": None, "t": None, "d": False})
            return True
        if seq > session.seq:
            await self._close(conn, 4007, "Invalid seq.")
            return False
        if session.connection is not None and session.connection is not conn:
            session.connection.abort()
        session.connection = conn
        conn.session = session
        for payload in session.log:
            if payload["s"] > seq:
                conn.send(payload)
        self.dispatch("RESUMED", {"_trace": ["emulator"]}, to=session)
        self.resumed_count += 1
        self._on_change()
        return True

    async def _close(self, conn: GatewayConnection, code: int, reason: str) -> None:
        conn.send({"__close__": code, "reason": reason})
        if conn.writer is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(asyncio.shield(conn.writer), 5)

    async def _write_loop(self, conn: GatewayConnection) -> None:
        while True:
            payload = await conn.queue.get()
            if payload is None or conn.ws.closed:
                return
            if "__close__" in payload:
                with contextlib.suppress(Exception):
                    await conn.ws.close(
                        code=payload["__close__"], message=payload.get("reason", "").encode()
                    )
                return
            frame = conn.compressor.encode(json.dumps(payload, separators=(",", ":")))
            try:
                if isinstance(frame, bytes):
                    await conn.ws.send_bytes(frame)
                else:
                    await conn.ws.send_str(frame)
            except (ConnectionError, RuntimeError):
                return
            seq = payload.get("s")
            self.sent.append(
                RecordedEvent(self._clock(), payload["op"], payload.get("t"), payload.get("d"), seq)
            )
            if conn.session is not None and seq is not None:
                conn.session.sent_seq = max(conn.session.sent_seq, seq)
            self._on_change()
