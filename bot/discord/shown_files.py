"""Re-shows of a finished result (Show result, ``/jobs show``): bounded, and reusing a download.

A result shown again is downloaded from the service to be attached. Without a bound, members
pressing Show result (or running ``/jobs show``) in a loop would download the same file again
and again and hold the deliveries' memory (:class:`bot.jobs.byte_budget.ByteBudget`), which
deliveries then wait for. So re-shows have a slot of their own, :data:`SHOW_MEMORY_BYTES`,
which deliveries never wait behind, and a file downloaded for one re-show is kept for
:data:`SHOWN_FILES_SECONDS` for the next (:class:`ShownFiles`, at most
:data:`SHOWN_FILES_BYTES` kept at once). Each member's re-shows of a job are also debounced
(:data:`bot.discord.click_debounce.SHOW_DEBOUNCE_SECONDS`).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Final

from bot.clock import Clock
from bot.domain import Visibility

SHOW_MEMORY_BYTES: Final = 32 * 1024 * 1024
"""Bytes the re-shows of one process may hold while downloading at once (32 MiB: three at a
server's 10 MiB upload limit), besides the deliveries' own budget, which they never touch."""

SHOWN_FILES_SECONDS: Final = 60.0
"""How long a file downloaded for a re-show is reused by the next re-show of its job."""

SHOWN_FILES_BYTES: Final = 32 * 1024 * 1024
"""Bytes of downloaded files kept for reuse at once (the oldest are dropped first)."""

Files = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class _Kept:
    limit: int
    files: Files
    note: str | None
    visibility: Visibility | None
    until: float
    size: int


class ShownFiles:
    """The files (note, safety decision) last downloaded to show a job again, kept a short while.

    Keyed by job and the upload limit they were fetched within (an interaction's
    ``attachment_size_limit``): a re-show within another limit downloads afresh.

    Args:
        clock: the time source (monotonic seconds).
        seconds: how long a download is reused.
        max_bytes: the most bytes kept at once.
    """

    def __init__(
        self,
        clock: Clock,
        *,
        seconds: float = SHOWN_FILES_SECONDS,
        max_bytes: int = SHOWN_FILES_BYTES,
    ) -> None:
        self._clock = clock
        self._seconds = seconds
        self._max_bytes = max_bytes
        self._kept: OrderedDict[int, _Kept] = OrderedDict()
        self._bytes = 0

    @property
    def size(self) -> int:
        """Bytes kept now."""
        return self._bytes

    def get(self, job_id: int, limit: int) -> tuple[Files, str | None, Visibility | None] | None:
        """The files, note and safety decision kept for ``job_id`` within ``limit`` bytes, or None.

        In the order of :class:`bot.discord.delivery.present.Shown`'s fields.
        """
        self._expire()
        kept = self._kept.get(job_id)
        if kept is None or kept.limit != limit:
            return None
        return kept.files, kept.note, kept.visibility

    def keep(
        self,
        job_id: int,
        limit: int,
        files: Files,
        note: str | None,
        visibility: Visibility | None = None,
    ) -> None:
        """Keep what was downloaded to show ``job_id`` within ``limit`` bytes.

        ``visibility``: the safety check's decision the files were prepared under
        (:mod:`bot.discord.safety_gate`), so that the card shown from them is rendered by it;
        None: not checked.
        """
        self._drop(job_id)
        size = sum(len(data) for _, data in files)
        if size > self._max_bytes:
            return
        self._expire()
        while self._kept and self._bytes + size > self._max_bytes:
            self._drop(next(iter(self._kept)))
        until = self._clock.monotonic() + self._seconds
        self._kept[job_id] = _Kept(limit, files, note, visibility, until, size)
        self._bytes += size

    def _expire(self) -> None:
        now = self._clock.monotonic()
        while self._kept:
            job_id, kept = next(iter(self._kept.items()))
            if kept.until > now:
                break
            self._drop(job_id)

    def _drop(self, job_id: int) -> None:
        kept = self._kept.pop(job_id, None)
        if kept is not None:
            self._bytes -= kept.size
