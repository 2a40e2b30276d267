"""Thumbnails of delivered results: made once, off the event loop, kept in the database.

When a result's files are downloaded for its delivery (``bot.discord.delivery``, the
synchronous image answer in ``bot.discord.request_flows``), :meth:`ThumbnailService.keep`
makes a 320 px WebP picture of each (:mod:`bot.media.thumbnails`: Pillow for an image in a
worker thread, the media thread's PyAV for a clip's poster frame) and stores it with its
job (``thumbnails``). The dashboard serves them itself, so a gallery asks Discord for nothing,
on either engine, from any process, after Discord's attachment URLs expired.

A thumbnail is a courtesy: :meth:`keep` never raises and never delays a delivery's outcome
(its failures are logged). Retention deletes a job's thumbnails with it
(``bot.services.retention``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence

from bot.clock import Clock
from bot.domain import Thumbnail
from bot.media.thumbnails import Made, image_thumbnail, video_thumbnail
from bot.media.video import in_media_thread
from bot.storage import Database

log = logging.getLogger(__name__)


async def make_thumbnail(kind: str, data: bytes) -> Made:
    """Make the thumbnail of one result file, off the event loop.

    Args:
        kind: ``"video"`` (a clip: its poster frame, in the media thread) or anything else
            (an image, in a worker thread).
        data: the file's bytes.

    Raises:
        bot.media.video.MediaError: the file is no picture or clip that can be read, or past
            the bounds.
    """
    if kind == "video":
        return await in_media_thread(video_thumbnail, data)
    return await asyncio.to_thread(image_thumbnail, data)


class ThumbnailService:
    """Makes, keeps and reads results' thumbnails.

    Args:
        db: the database.
        clock: stamps a thumbnail's making (UTC epoch seconds).
    """

    def __init__(self, db: Database, clock: Clock) -> None:
        self._store = db.thumbnails
        self._reads = db.reports.thumbnails
        self._clock = clock

    async def keep(self, job_id: int, kind: str, files: Sequence[bytes]) -> int:
        """Make and store the thumbnails of a job's files not kept yet; never raises.

        Args:
            job_id: the job.
            kind: ``"video"`` or ``"image"``.
            files: the job's result files, in their outputs' order (as downloaded).

        Returns:
            How many thumbnails were stored now.
        """
        if not files:
            return 0
        stored = 0
        try:
            kept = await self._store.kept(job_id)
            for index, data in enumerate(files):
                if index in kept or not data:
                    continue
                try:
                    made = await make_thumbnail(kind, data)
                except Exception as exc:
                    log.info("job %s: no thumbnail of file %d (%s)", job_id, index, exc)
                    continue
                thumbnail = Thumbnail(
                    job_id=job_id,
                    index=index,
                    digest=made.digest,
                    mime=made.mime,
                    width=made.width,
                    height=made.height,
                    duration=made.duration,
                    made_at=self._clock.time(),
                    data=made.data,
                )
                stored += await self._store.put(thumbnail)
        except Exception as exc:
            log.warning("job %s: thumbnails not kept (%r)", job_id, exc)
        return stored

    async def thumbnail(self, job_id: int, index: int) -> Thumbnail | None:
        """Return one thumbnail with its bytes, or None."""
        return await self._reads.get(job_id, index)

    async def described(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Thumbnail]:
        """Return the thumbnails of ``(job id, file index)`` keys, without their bytes."""
        return await self._reads.described(keys)
