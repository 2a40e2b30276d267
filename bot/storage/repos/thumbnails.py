"""Thumbnails of delivered results (``thumbnails``), both engines.

One row per job and result file, written once (a second write of the same file, a re-show's,
changes nothing). A gallery reads the descriptions of a page's thumbnails in one query by the
primary key (``job_id``, ``file_index``), without their bytes; the dashboard's thumbnail route
reads one picture by the same key. Retention deletes a job's thumbnails with it
(:meth:`ThumbnailStore.sweep`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from sqlalchemy import bindparam, delete, select, tuple_

from bot.domain import Thumbnail
from bot.storage.repos.dialect import upsert
from bot.storage.schema import jobs, thumbnails
from bot.storage.sql import Row, Sql

BATCH: Final = 500
"""Rows a sweep reads (and at most deletes) per statement."""

_DESCRIPTION: Final = (
    thumbnails.c.job_id,
    thumbnails.c.file_index,
    thumbnails.c.digest,
    thumbnails.c.mime,
    thumbnails.c.width,
    thumbnails.c.height,
    thumbnails.c.duration,
    thumbnails.c.made_at,
)


def _thumbnail(row: Row, data: bytes = b"") -> Thumbnail:
    return Thumbnail(
        job_id=row["job_id"],
        index=row["file_index"],
        digest=row["digest"],
        mime=row["mime"],
        width=row["width"],
        height=row["height"],
        duration=row["duration"],
        made_at=row["made_at"],
        data=data,
    )


class ThumbnailStore:
    """The thumbnails of results.

    Args:
        sql: the database's executor (or the reports' lane, for a gallery's reads).
    """

    def __init__(self, sql: Sql) -> None:
        self._sql = sql

    async def put(self, thumbnail: Thumbnail) -> bool:
        """Store a thumbnail; return False when the file had one already (kept as it was)."""
        stmt = (
            upsert(self._sql, thumbnails)
            .values(
                job_id=thumbnail.job_id,
                file_index=thumbnail.index,
                data=thumbnail.data,
                digest=thumbnail.digest,
                mime=thumbnail.mime,
                width=thumbnail.width,
                height=thumbnail.height,
                duration=thumbnail.duration,
                made_at=thumbnail.made_at,
            )
            .on_conflict_do_nothing(index_elements=[thumbnails.c.job_id, thumbnails.c.file_index])
        )
        return await self._sql.run(stmt) > 0

    async def kept(self, job_id: int) -> set[int]:
        """Return the file indexes of the job that have a thumbnail."""
        rows = await self._sql.all(
            select(thumbnails.c.file_index).where(thumbnails.c.job_id == job_id)
        )
        return {int(r["file_index"]) for r in rows}

    async def get(self, job_id: int, index: int) -> Thumbnail | None:
        """Return one thumbnail with its bytes, or None."""
        row = await self._sql.one(
            select(*_DESCRIPTION, thumbnails.c.data).where(
                thumbnails.c.job_id == job_id, thumbnails.c.file_index == index
            )
        )
        return None if row is None else _thumbnail(row, bytes(row["data"]))

    async def described(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], Thumbnail]:
        """Return the thumbnails of ``(job id, file index)`` keys, without their bytes."""
        if not keys:
            return {}
        rows = await self._sql.all(
            select(*_DESCRIPTION).where(
                tuple_(thumbnails.c.job_id, thumbnails.c.file_index).in_(sorted(set(keys)))
            )
        )
        return {(int(r["job_id"]), int(r["file_index"])): _thumbnail(r) for r in rows}

    async def sweep(self, made_before: float | None, *, limit: int) -> int:
        """Delete up to ``limit`` thumbnails whose job is gone, or made at or before a cutoff.

        Args:
            made_before: the cutoff, UTC epoch seconds; None: only those whose job is gone.
            limit: the most rows deleted in this call (the next sweep goes on).

        Returns:
            How many rows were deleted.
        """
        gone = ~select(jobs.c.id).where(jobs.c.id == thumbnails.c.job_id).exists()
        due = gone if made_before is None else gone | (thumbnails.c.made_at <= made_before)
        remove = delete(thumbnails).where(
            tuple_(thumbnails.c.job_id, thumbnails.c.file_index).in_(
                bindparam("keys", expanding=True)
            )
        )
        swept = 0
        while swept < limit:
            rows = await self._sql.all(
                select(thumbnails.c.job_id, thumbnails.c.file_index)
                .where(due)
                .limit(min(BATCH, limit - swept))
            )
            if not rows:
                break
            keys = [(int(r["job_id"]), int(r["file_index"])) for r in rows]
            swept += await self._sql.run(remove, [{"keys": keys}])
            if len(rows) < BATCH:
                break
        return swept
