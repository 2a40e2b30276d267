"""Sequences of continued clips are stored in order, branch where a clip is continued twice,
and each server's bound is kept (SQLite here; the schema is held to both engines by the drift
test)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from bot.clock import ManualClock
from bot.errors import ValidationFailed
from bot.services.sequences import DEFAULT_MAX_CLIPS, SequenceService
from bot.storage.database import Database

GUILD, ALICE, BOB = 1, 10, 20


async def test_clips_continued_in_a_row_form_one_sequence_in_order(tmp_path: Path) -> None:
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        service = SequenceService(db, ManualClock())
        assert await service.clips_upto(7) == (7,)
        first = await service.add_clip(
            previous_job_id=7, job_id=8, guild_id=GUILD, starter_id=ALICE
        )
        second = await service.add_clip(previous_job_id=8, job_id=9, guild_id=GUILD, starter_id=BOB)
        assert first.id == second.id and second.job_ids == (7, 8, 9)
        assert second.user_id == ALICE  # who started it
        assert await service.clips_upto(9) == (7, 8, 9)
        assert await service.clips_upto(8) == (7, 8)
        # Continued again from the middle: a branch of its own, the original untouched.
        branch = await service.add_clip(
            previous_job_id=8, job_id=10, guild_id=GUILD, starter_id=BOB
        )
        assert branch.id != first.id and branch.job_ids == (7, 8, 10)
        assert await service.clips_upto(9) == (7, 8, 9)
        assert (await db.sequences.get(first.id)) is not None
    finally:
        await db.close()


async def test_a_server_bounds_its_sequences(tmp_path: Path) -> None:
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        service = SequenceService(db, ManualClock())
        assert await service.max_clips(GUILD) == DEFAULT_MAX_CLIPS
        await service.set_max_clips(GUILD, 2)
        assert await service.check_room(GUILD, 1) == 2
        await service.add_clip(previous_job_id=1, job_id=2, guild_id=GUILD, starter_id=ALICE)
        with pytest.raises(ValidationFailed, match="limit of 2 clips"):
            await service.check_room(GUILD, 2)
        await service.set_max_clips(GUILD, None)
        assert await service.max_clips(GUILD) == DEFAULT_MAX_CLIPS
    finally:
        await db.close()


async def test_takes_are_grouped_in_order_and_a_member_keeps_a_default(tmp_path: Path) -> None:
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        service = SequenceService(db, ManualClock())
        await service.record_takes([5, 6, 7])
        assert await service.takes_of(6) == (5, 6, 7)
        assert await service.takes_of(8) == ()
        assert await service.default_takes(ALICE) == 1
        await service.set_default_takes(ALICE, 3)
        assert await service.default_takes(ALICE) == 3
        with pytest.raises(ValidationFailed):
            await service.set_default_takes(ALICE, 5)
        await service.set_default_takes(ALICE, None)
        assert await service.default_takes(ALICE) == 1
    finally:
        await db.close()


async def test_one_take_claims_the_final_delivery_of_its_request(tmp_path: Path) -> None:
    db = await Database.open_sqlite(tmp_path / "bot.db", clock=ManualClock())
    try:
        service = SequenceService(db, ManualClock())
        await service.record_takes([5, 6, 7])
        claims = await asyncio.gather(
            service.claim_final_delivery(5, 6), service.claim_final_delivery(5, 7)
        )
        assert sorted(claims) == [False, True]  # two workers together: one final delivery
        winner = 6 if claims[0] else 7
        assert await service.claim_final_delivery(5, winner)  # its own delivery tried again
        await service.release_final_delivery(5, winner)  # it failed: the other may make it
        assert await service.claim_final_delivery(5, 13 - winner)
    finally:
        await db.close()
