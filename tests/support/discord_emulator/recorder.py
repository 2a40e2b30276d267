"""Records of everything the bot asked for and everything sent to it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class RecordedFile:
    """A file part of a multipart request."""

    field: str
    filename: str
    data: bytes
    content_type: str | None


@dataclass
class RecordedRequest:
    """One REST request made by the bot.

    Attributes:
        at: Emulator clock time of arrival.
        method: HTTP method.
        path: Path below the API base, e.g. ``/channels/1/messages``.
        query: Query parameters.
        status: Response status.
        json: Parsed JSON body (or ``payload_json``), if any.
        files: Uploaded files.
        route: Templated route, e.g. ``/channels/{channel_id}/messages``.
        response: Response body (parsed), if any.
    """

    at: float
    method: str
    path: str
    query: dict[str, str]
    status: int = 0
    json: Any = None
    files: list[RecordedFile] = field(default_factory=list)
    route: str = ""
    response: Any = None


@dataclass
class RecordedEvent:
    """One gateway payload, sent by the emulator or received from the bot."""

    at: float
    op: int
    t: str | None
    data: Any
    s: int | None = None
