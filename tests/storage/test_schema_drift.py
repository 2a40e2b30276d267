"""The schema module is the whole schema: autogenerate finds nothing to add, drop or change.

A database migrated to head, fresh or upgraded from the oldest legacy schema, is compared with
``bot/storage/schema.py`` by Alembic's autogenerate (``migrations.schema_drift``) on both
engines: a table, column, type, nullability, index, unique constraint or foreign key that one
has and the other lacks fails here, so a revision and the schema module cannot drift apart.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import create_engine
from sqlalchemy.ext.asyncio import create_async_engine

from bot.clock import ManualClock
from bot.storage.database import Database
from bot.storage.migrations import schema_drift
from tests.support.legacy_db import build_postgres_at, build_sqlite_at


async def _drift(url: str) -> list[Any]:
    if url.startswith("sqlite"):
        engine = create_engine(url)
        try:
            with engine.connect() as conn:
                return schema_drift(conn)
        finally:
            engine.dispose()
    # A plain asyncpg engine: the bot's own decodes json as text, which reflection cannot read.
    async_engine = create_async_engine(url.replace("postgresql://", "postgresql+asyncpg://", 1))
    try:
        async with async_engine.connect() as conn:
            return await conn.run_sync(schema_drift)
    finally:
        await async_engine.dispose()


@pytest.mark.parametrize("engine", ["sqlite", "postgresql"])
@pytest.mark.parametrize("start", ["empty", "oldest legacy"])
async def test_a_database_at_head_is_what_the_schema_module_describes(
    engine: str, start: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if engine == "sqlite":
        path = tmp_path / "bot.db"
        if start != "empty":
            build_sqlite_at(path, 1)
        db = await Database.open_sqlite(path, clock=ManualClock())
        url = f"sqlite:///{path}"
    else:
        url = request.getfixturevalue("pg_url")
        if start != "empty":
            await build_postgres_at(url, 1)
        db = await Database.open_postgresql(url, clock=ManualClock())
    await db.close()
    assert await _drift(url) == []
