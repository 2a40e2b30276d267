"""Group commit: callers that arrive while a write is under way share the next one.

The limiters write a row (or take a slot) per request to the service, and the poller releases
requests of many keys at once: one transaction each would make the database's round trips the
cost of a poll (docs/benchmarks.md, sections 8 and 11). A :class:`GroupCommit` writes the first
item at once and every item that arrives meanwhile in one batch after it, so a lone request
waits for no timer and a burst costs one transaction per batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Generic, TypeVar

_Item = TypeVar("_Item")
_Result = TypeVar("_Result")


class GroupCommit(Generic[_Item, _Result]):
    """Batches items for ``write``, one write in flight at a time.

    Args:
        write: writes a batch in one transaction and returns one result per item, in order;
            what it raises is raised to every caller of the batch.
        max_batch: most items in one write (the rest go in the next).
    """

    def __init__(
        self,
        write: Callable[[Sequence[_Item]], Awaitable[Sequence[_Result]]],
        *,
        max_batch: int = 200,
    ) -> None:
        self._write = write
        self._max_batch = max_batch
        self._pending: list[tuple[_Item, asyncio.Future[_Result]]] = []
        self._writer: asyncio.Task[None] | None = None

    async def submit(self, item: _Item) -> _Result:
        """Write ``item`` with the next batch and return its result once committed.

        A caller cancelled while waiting leaves its item in the batch (shielded): it is
        written for everyone, so a request may be counted that is then not sent, which only
        costs a slot, never the limit.

        Raises:
            Exception: what the batch's write raised.
        """
        future: asyncio.Future[_Result] = asyncio.get_running_loop().create_future()
        self._pending.append((item, future))
        if self._writer is None:
            self._writer = asyncio.get_running_loop().create_task(self._run())
        return await asyncio.shield(future)

    async def _run(self) -> None:
        batch: list[tuple[_Item, asyncio.Future[_Result]]] = []
        try:
            while self._pending:
                batch = self._pending[: self._max_batch]
                del self._pending[: self._max_batch]
                try:
                    results = await self._write([item for item, _ in batch])
                except Exception as exc:
                    for _, future in batch:
                        if not future.done():
                            future.set_exception(exc)
                    continue
                for (_, future), result in zip(batch, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            # Only when the writer itself is cancelled (the loop shutting down) are futures
            # left: their callers stop with it rather than wait forever.
            for _, future in [*batch, *self._pending]:
                future.cancel()
            self._pending.clear()
            self._writer = None
