"""Video sequences and takes: clips continued from one another, several takes of a request.

``sequences`` (who started one, where), ``sequence_clips`` (its jobs by position, found by
job too) and ``sequence_settings`` (``/config sequence-length``; no row: the default);
``takes`` (the jobs of one request's takes, by group: the first take's job id) and
``member_takes`` (a member's default number of takes, ``/settings defaults takes``).

Revision ID: 0005_sequences
Revises: 0004_task_identity
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_sequences"
down_revision = "0004_task_identity"
branch_labels = None
depends_on = None

# SQLite makes a rowid alias (an id it assigns) only of a column declared exactly INTEGER.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the tables and their indexes."""
    op.create_table(
        "sequence_settings",
        sa.Column("guild_id", sa.BigInteger(), primary_key=True),
        sa.Column("max_clips", sa.Integer(), nullable=False),
    )
    op.create_table(
        "sequences",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("guild_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
    )
    op.create_table(
        "sequence_clips",
        sa.Column(
            "sequence_id",
            sa.BigInteger(),
            sa.ForeignKey("sequences.id", ondelete="CASCADE"),
            primary_key=True,
        ),
        sa.Column("position", sa.Integer(), primary_key=True),
        sa.Column("job_id", sa.BigInteger(), nullable=False),
    )
    op.create_index("sequence_clips_job", "sequence_clips", ["job_id"])
    op.create_table(
        "takes",
        sa.Column("job_id", sa.BigInteger(), primary_key=True),
        sa.Column("group_id", sa.BigInteger(), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
    )
    op.create_index("takes_group", "takes", ["group_id"])
    op.create_table(
        "member_takes",
        sa.Column("user_id", sa.BigInteger(), primary_key=True),
        sa.Column("takes", sa.Integer(), nullable=False),
    )


def downgrade() -> None:
    """Drop them again."""
    op.drop_table("member_takes")
    op.drop_index("takes_group", table_name="takes")
    op.drop_table("takes")
    op.drop_index("sequence_clips_job", table_name="sequence_clips")
    op.drop_table("sequence_clips")
    op.drop_table("sequences")
    op.drop_table("sequence_settings")
