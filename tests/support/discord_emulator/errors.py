"""Discord-shaped API errors and the emulated client's refusals."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class DiscordAPIError(Exception):
    """An error answered to the bot exactly as Discord would shape it.

    Attributes:
        status: HTTP status code.
        code: Discord JSON error code.
        message: Human readable message.
        errors: Nested ``errors`` object for 50035 "Invalid Form Body" responses.
    """

    def __init__(
        self, status: int, code: int, message: str, errors: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status = status
        self.code = code
        self.message = message
        self.errors = errors

    def body(self) -> dict[str, Any]:
        """Return the JSON body Discord would send."""
        body: dict[str, Any] = {"message": self.message, "code": self.code}
        if self.errors is not None:
            body["errors"] = self.errors
        return body


class InvocationError(Exception):
    """The emulated Discord *client* would not let a user do this (bad test input)."""


class FormErrors:
    """Collects field errors and raises them as one 50035 "Invalid Form Body" error."""

    def __init__(self) -> None:
        self.tree: dict[str, Any] = {}

    def add(self, path: Sequence[str | int], code: str, message: str) -> None:
        """Record an error at ``path`` (e.g. ``("embeds", 0, "title")``)."""
        node = self.tree
        for part in path:
            node = node.setdefault(str(part), {})
        node.setdefault("_errors", []).append({"code": code, "message": message})

    def max_length(self, path: Sequence[str | int], value: Any, limit: int) -> None:
        """Add a BASE_TYPE_MAX_LENGTH error if ``len(value) > limit``."""
        if value is not None and len(value) > limit:
            self.add(path, "BASE_TYPE_MAX_LENGTH", f"Must be {limit} or fewer in length.")

    def required(self, path: Sequence[str | int], value: Any) -> None:
        """Add a BASE_TYPE_REQUIRED error if ``value`` is missing or empty."""
        if value is None or value == "":
            self.add(path, "BASE_TYPE_REQUIRED", "This field is required")

    def __bool__(self) -> bool:
        return bool(self.tree)

    def raise_if_any(self) -> None:
        """Raise the collected errors, if any.

        Raises:
            DiscordAPIError: 400 / 50035 with the nested ``errors`` object.
        """
        if self.tree:
            raise DiscordAPIError(400, 50035, "Invalid Form Body", self.tree)


def unknown_message() -> DiscordAPIError:
    return DiscordAPIError(404, 10008, "Unknown Message")


def unknown_channel() -> DiscordAPIError:
    return DiscordAPIError(404, 10003, "Unknown Channel")


def unknown_guild() -> DiscordAPIError:
    return DiscordAPIError(404, 10004, "Unknown Guild")


def unknown_user() -> DiscordAPIError:
    return DiscordAPIError(404, 10013, "Unknown User")


def unknown_member() -> DiscordAPIError:
    return DiscordAPIError(404, 10007, "Unknown Member")


def unknown_webhook() -> DiscordAPIError:
    return DiscordAPIError(404, 10015, "Unknown Webhook")


def unknown_interaction() -> DiscordAPIError:
    return DiscordAPIError(404, 10062, "Unknown interaction")


def already_acknowledged() -> DiscordAPIError:
    return DiscordAPIError(400, 40060, "Interaction has already been acknowledged.")


def max_followups() -> DiscordAPIError:
    return DiscordAPIError(
        400, 40094, "This interaction has hit the maximum number of follow up messages"
    )


def invalid_webhook_token() -> DiscordAPIError:
    return DiscordAPIError(401, 50027, "Invalid Webhook Token")


def missing_access() -> DiscordAPIError:
    return DiscordAPIError(403, 50001, "Missing Access")


def missing_permissions() -> DiscordAPIError:
    return DiscordAPIError(403, 50013, "Missing Permissions")


def cannot_edit_others() -> DiscordAPIError:
    return DiscordAPIError(403, 50005, "Cannot edit a message authored by another user")


def empty_message() -> DiscordAPIError:
    return DiscordAPIError(400, 50006, "Cannot send an empty message")


def unauthorized() -> DiscordAPIError:
    return DiscordAPIError(401, 0, "401: Unauthorized")


def not_found() -> DiscordAPIError:
    return DiscordAPIError(404, 0, "404: Not Found")


def invalid_json() -> DiscordAPIError:
    return DiscordAPIError(400, 50109, "The request body contains invalid JSON.")


def cannot_dm() -> DiscordAPIError:
    return DiscordAPIError(403, 50007, "Cannot send messages to this user")
