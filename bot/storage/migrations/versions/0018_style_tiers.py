"""Styles limited to tiers, and their references' thumbnails.

``styles.roles`` (the role ids of the tiers that may use a style, space-separated; NULL: every
member, as before) and ``style_thumbnails`` (a reference's small picture, made when the style
is added, served by the dashboard's Styles page). A new column and a new table: nothing to
fill. docs/creative.md.

Revision ID: 0018_style_tiers
Revises: 0017_draft
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0018_style_tiers"
down_revision = "0017_draft"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``styles.roles`` and create ``style_thumbnails``."""
    with op.batch_alter_table("styles") as batch:
        batch.add_column(sa.Column("roles", sa.Text))
    op.create_table(
        "style_thumbnails",
        sa.Column("style_id", sa.BigInteger, primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("data", sa.LargeBinary, nullable=False),
        sa.Column("digest", sa.Text, nullable=False),
        sa.Column("mime", sa.Text, nullable=False),
        sa.Column("width", sa.Integer, nullable=False),
        sa.Column("height", sa.Integer, nullable=False),
        sa.Column("made_at", sa.Double, nullable=False),
    )


def downgrade() -> None:
    """Drop ``style_thumbnails`` and ``styles.roles``."""
    op.drop_table("style_thumbnails")
    with op.batch_alter_table("styles") as batch:
        batch.drop_column("roles")
