"""Both engines hold the schema ``bot/storage/schema.py`` describes, to the index.

The legacy SQL gave PostgreSQL a three-column ``jobs_claim`` where SQLite's also holds
``status`` and ``unwatched_at`` (SQLite counts an index as covering only when it names every
column the claim reads). One definition now serves both: on PostgreSQL the two extra columns
are constant within the partial index, so it grows by a few bytes a pending job.

Revision ID: 0002_schema_parity
Revises: 0001_baseline
"""

from __future__ import annotations

from alembic import op
from sqlalchemy import text

revision = "0002_schema_parity"
down_revision = "0001_baseline"
branch_labels = None
depends_on = None

_CLAIM_WHERE = "status = 'pending' AND unwatched_at IS NULL"


def upgrade() -> None:
    """Rebuild PostgreSQL's ``jobs_claim`` as SQLite's (SQLite has it already)."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("jobs_claim", table_name="jobs")
    op.create_index(
        "jobs_claim",
        "jobs",
        ["next_poll_at", "key_fingerprint", "guild_id", "status", "unwatched_at"],
        postgresql_where=text(_CLAIM_WHERE),
    )


def downgrade() -> None:
    """Give PostgreSQL its three-column ``jobs_claim`` back."""
    if op.get_bind().dialect.name != "postgresql":
        return
    op.drop_index("jobs_claim", table_name="jobs")
    op.create_index(
        "jobs_claim",
        "jobs",
        ["next_poll_at", "key_fingerprint", "guild_id"],
        postgresql_where=text(_CLAIM_WHERE),
    )
