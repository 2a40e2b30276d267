"""Event-driven waiting on emulator state (no polling)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class ChangeSignal:
    """Wakes every waiter whenever emulator state changes."""

    def __init__(self) -> None:
        self._event = asyncio.Event()

    def notify(self) -> None:
        """Signal that something changed."""
        self._event.set()
        self._event = asyncio.Event()

    async def wait_for(self, check: Callable[[], T | None], timeout: float, what: str) -> T:
        """Wait until ``check()`` returns something other than ``None``.

        Args:
            check: Evaluated now and after every change.
            timeout: Seconds to wait.
            what: Description used in the timeout error.

        Returns:
            The first non-``None`` result of ``check``.

        Raises:
            TimeoutError: If nothing matched in time.
        """
        try:
            async with asyncio.timeout(timeout):
                while True:
                    event = self._event
                    result = check()
                    if result is not None:
                        return result
                    await event.wait()
        except TimeoutError:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}") from None
