"""Thumbnails of delivered results, and the prompt of a charge without a job.

``thumbnails`` (one row per job and result file: a small WebP picture, its digest, size and a
clip's duration), served by the dashboard itself; ``ledger.prompt_summary``, the prompt's
summary of a ``/text`` or conversation charge (a job's charge keeps it on its job). A new
table and a nullable column: nothing to fill (earlier text charges stay without a prompt).

Revision ID: 0013_thumbnails
Revises: 0012_safety
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013_thumbnails"
down_revision = "0012_safety"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``thumbnails``; add ``ledger.prompt_summary``."""
    op.create_table(
        "thumbnails",
        sa.Column("job_id", sa.BigInteger, primary_key=True),
        sa.Column("file_index", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("mime", sa.Text, nullable=False),
        sa.Column("width", sa.Integer, nullable=False),
        sa.Column("height", sa.Integer, nullable=False),
        sa.Column("duration", sa.Double),
        sa.Column("made_at", sa.Double, nullable=False),
    )
    with op.batch_alter_table("ledger") as batch:
        batch.add_column(sa.Column("prompt_summary", sa.Text))


def downgrade() -> None:
    """Drop them again."""
    with op.batch_alter_table("ledger") as batch:
        batch.drop_column("prompt_summary")
    op.drop_table("thumbnails")
