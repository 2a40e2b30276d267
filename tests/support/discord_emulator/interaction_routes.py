"""Interaction routes: callbacks and the interaction-token webhook endpoints."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from aiohttp import web

from . import errors as err
from . import permissions as perms
from .errors import DiscordAPIError, FormErrors
from .interactions import MESSAGE_COMPONENT, MODAL_SUBMIT, CallbackRecord, InteractionState
from .limits import validate_autocomplete, validate_modal
from .models import Message
from .payloads import message_payload
from .recorder import RecordedFile
from .routing import FILES, PAYLOAD, RouteBase, _flag, _int

#: Callback types Discord accepts per interaction type.
CALLBACK_TYPES = {2: {4, 5, 9}, 3: {4, 5, 6, 7, 9}, 4: {8}, 5: {4, 5, 6, 7}}

HOLD_SECONDS = 10.0
"""Seconds an answer is held at most for the bot to answer an interaction on what it showed
(``act_before_answer``)."""


async def _hold(answered: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(answered.wait(), HOLD_SECONDS)


def _custom_ids(components: list[dict[str, Any]]) -> list[str]:
    """The custom ids of the interactive components in ``components``, nested ones too."""
    found: list[str] = []
    for component in components:
        if component.get("custom_id"):
            found.append(str(component["custom_id"]))
        found += _custom_ids(component.get("components") or [])
        if isinstance(component.get("accessory"), dict):
            found += _custom_ids([component["accessory"]])
    return found


USER_INSTALL_MAX_FOLLOWUPS = 5
"""Discord (Receiving and Responding, "Followup Messages"): an interaction of a user-installed
app not installed in the server (its authorising owners only the user install) may send at
most 5 followup messages; the sixth answers 400 / 40094."""


class InteractionRoutes(RouteBase):
    """POST /interactions/{id}/{token}/callback and /webhooks/{app}/{token}/..."""

    async def callback(self, request: web.Request) -> web.Response:
        state = self.emu.interactions.get(
            _int(request.match_info["interaction_id"], err.unknown_interaction())
        )
        if state is None or state.token != request.match_info["token"]:
            raise err.unknown_interaction()
        payload = request[PAYLOAD] or {}
        kind = payload.get("type")
        data = payload.get("data") or {}
        now = self.emu.clock()
        record = CallbackRecord(kind, data, now, now - state.dispatched_at)
        state.callbacks.append(record)
        if state.opener is not None:
            state.opener.submission_answered.set()
        if state.type == MESSAGE_COMPONENT and state.message_id is not None:
            self.emu.answered_on(state.message_id).set()
        try:
            message = self._apply_callback(state, kind, data, request[FILES], now)
        except DiscordAPIError as exc:
            record.status, record.error = exc.status, exc.body()
            raise
        if kind == 9 and self.emu.act_before_answer:
            self.emu.signal.notify()  # the form is open: the test may submit it now
            await _hold(state.submission_answered)
        if not _flag(request.query, "with_response"):
            return self._empty(request)
        info: dict[str, Any] = {"id": str(state.id), "type": state.type}
        resource: dict[str, Any] = {"type": kind}
        if message is not None:
            info["response_message_id"] = str(message.id)
            info["response_message_loading"] = message.loading
            info["response_message_ephemeral"] = message.ephemeral
            resource["message"] = message_payload(self.world, message)
        return self._json(request, {"interaction": info, "resource": resource})

    def _apply_callback(
        self,
        state: InteractionState,
        kind: Any,
        data: dict[str, Any],
        files: list[RecordedFile],
        now: float,
    ) -> Message | None:
        if state.acked:
            raise err.already_acknowledged()
        latency = now - state.dispatched_at
        if latency > self.emu.ack_deadline + self.emu.late_ack_grace:
            raise err.unknown_interaction()
        if latency > self.emu.ack_deadline:
            self.emu.late_acks.append((state.id, latency))
        allowed = CALLBACK_TYPES[state.type]
        if kind in (6, 7) and state.message_id is None:
            allowed = allowed - {6, 7}
        if kind not in allowed:
            form = FormErrors()
            form.add(("type",), "BASE_TYPE_CHOICES", f"Value must be one of {sorted(allowed)}.")
            form.raise_if_any()
        everyone = bool(state.app_permissions & perms.MENTION_EVERYONE)
        message: Message | None = None
        if kind in (4, 5):
            body = data if kind == 4 else {"flags": data.get("flags")}
            message = self.emu.msgs.create(
                state.channel_id,
                body,
                files if kind == 4 else [],
                error_prefix=("data",),
                can_mention_everyone=everyone,
                loading=kind == 5,
                **self.emu.response_fields(state, followup=False),
            )
            state.original_id = message.id
        elif kind in (6, 7):
            message = self.emu.messages[state.message_id or 0]
            if kind == 7:
                self.emu.msgs.edit(
                    message, data, files, error_prefix=("data",), can_mention_everyone=everyone
                )
            state.original_id = message.id
        elif kind == 8:
            form = FormErrors()
            validate_autocomplete(data, form)
            form.raise_if_any()
            state.choices = list(data.get("choices") or [])
        elif kind == 9:
            if state.type == MODAL_SUBMIT:
                raise err.DiscordAPIError(400, 50035, "Invalid Form Body")
            form = FormErrors()
            validate_modal(data, form)
            form.raise_if_any()
            state.modal = data
            self.emu.open_modals[data["custom_id"]] = state
        state.acked = True
        return message

    def _token_state(self, request: web.Request) -> InteractionState:
        state = self.emu.interactions_by_token.get(request.match_info["token"])
        if state is None:
            raise err.invalid_webhook_token()
        if _int(request.match_info["app_id"], err.unknown_webhook()) != self.world.application_id:
            raise err.unknown_webhook()
        if self.emu.clock() - state.dispatched_at > self.emu.token_lifetime:
            raise err.invalid_webhook_token()
        return state

    def _webhook_message(self, request: web.Request, state: InteractionState) -> Message:
        raw = request.match_info.get("message_id")
        if raw is None:
            message_id = state.original_id
        else:
            message_id = _int(raw, err.unknown_message())
            if message_id not in (state.original_id, *state.followup_ids):
                raise err.unknown_message()
        message = self.emu.messages.get(message_id or 0)
        if message is None or message.deleted:
            raise err.unknown_message()
        return message

    async def get_webhook_message(self, request: web.Request) -> web.Response:
        state = self._token_state(request)
        return self._json(
            request, message_payload(self.world, self._webhook_message(request, state))
        )

    def _check_upload(self, request: web.Request, state: InteractionState) -> None:
        """Files beyond the interaction's ``attachment_size_limit``: 413, code 40005."""
        limit = state.payload.get("attachment_size_limit")
        if limit is not None and sum(len(f.data) for f in request[FILES]) > int(limit):
            raise err.DiscordAPIError(413, 40005, "Request entity too large")

    async def edit_webhook_message(self, request: web.Request) -> web.Response:
        state = self._token_state(request)
        self._check_upload(request, state)
        message = self._webhook_message(request, state)
        payload = request[PAYLOAD] or {}
        self.emu.msgs.edit(
            message,
            payload,
            request[FILES],
            can_mention_everyone=bool(state.app_permissions & perms.MENTION_EVERYONE),
        )
        if self.emu.act_before_answer and _custom_ids(payload.get("components") or []):
            self.emu.signal.notify()  # the buttons are shown: the test may press one now
            await _hold(self.emu.answered_on(message.id))
        return self._json(request, message_payload(self.world, message))

    async def delete_webhook_message(self, request: web.Request) -> web.Response:
        state = self._token_state(request)
        self.emu.msgs.delete(self._webhook_message(request, state))
        return self._empty(request)

    async def post_followup(self, request: web.Request) -> web.Response:
        state = self._token_state(request)
        self._check_upload(request, state)
        if not state.acked:
            raise err.unknown_webhook()
        payload = request[PAYLOAD] or {}
        everyone = bool(state.app_permissions & perms.MENTION_EVERYONE)
        original = self.emu.messages.get(state.original_id or 0)
        if original is not None and original.loading and not original.deleted:
            # Discord: the first followup after a "thinking" defer replaces the placeholder.
            message = self.emu.msgs.edit(
                original, payload, request[FILES], can_mention_everyone=everyone
            )
        else:
            created = [m for m in state.followup_ids if m != state.original_id]
            user_only = set(state.payload.get("authorizing_integration_owners", {})) == {"1"}
            if user_only and len(created) >= USER_INSTALL_MAX_FOLLOWUPS:
                raise err.max_followups()
            message = self.emu.msgs.create(
                state.channel_id,
                payload,
                request[FILES],
                can_mention_everyone=everyone,
                **self.emu.response_fields(state, followup=True),
            )
        if message.id not in state.followup_ids:
            state.followup_ids.append(message.id)
        self.emu.signal.notify()
        if _flag(request.query, "wait"):
            return self._json(request, message_payload(self.world, message))
        return self._empty(request)
