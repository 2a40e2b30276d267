"""The baseline: the schema of the last release before Alembic, on either engine.

A database made by any earlier release (SQLite ``user_version`` 1-13, PostgreSQL
``schema_migrations`` 1-8) or an empty one gets the legacy SQL files of its engine it still
lacks (``bot/storage/migrations/legacy``); from here on both engines share one sequence.

Revision ID: 0001_baseline
Revises: (none)
"""

from __future__ import annotations

from alembic import context, op

from bot.storage.migrations import legacy

revision = "0001_baseline"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Apply the missing legacy migrations of the database's engine."""
    legacy.upgrade(op.get_bind(), float(context.config.attributes["now"]))


def downgrade() -> None:
    """The legacy schemas are not undone (restore a backup instead)."""
    raise NotImplementedError("the baseline cannot be downgraded")
