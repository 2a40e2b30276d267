"""A local Discord emulator (REST v10 + gateway v10) for end-to-end bot tests."""

from .emulator import DiscordEmulator
from .errors import DiscordAPIError, InvocationError
from .interactions import CallbackRecord, InteractionHandle
from .models import Attachment, Channel, Guild, Message, User
from .permissions import DEFAULT_BOT_PERMISSIONS, DEFAULT_MEMBER_PERMISSIONS
from .recorder import RecordedEvent, RecordedFile, RecordedRequest

__all__ = [
    "DEFAULT_BOT_PERMISSIONS",
    "DEFAULT_MEMBER_PERMISSIONS",
    "Attachment",
    "CallbackRecord",
    "Channel",
    "DiscordAPIError",
    "DiscordEmulator",
    "Guild",
    "InteractionHandle",
    "InvocationError",
    "Message",
    "RecordedEvent",
    "RecordedFile",
    "RecordedRequest",
    "User",
]
