"""A local emulator of the Generation Service API v1, for tests, sandbox mode and benchmarks.

Run it alone with ``python -m bot.sandbox``; use it in-process with::

    async with GenApiEmulator() as api:
        key = api.create_key()
        ...  # point a client at api.base_url with key

Wire choices that the spec leaves open are listed in ``docs/genapi-choices.md``.
"""

from bot.sandbox.server import GenApiEmulator
from bot.sandbox.state import EmulatedTask, FaultKind, RecordedRequest

__all__ = ["EmulatedTask", "FaultKind", "GenApiEmulator", "RecordedRequest"]
