"""A channel's persona may be locked: a member's ``system`` cannot countermand it.

``personas.locked``: 1 when an admin locked the persona (``/config persona set locked:True``),
0 otherwise; every existing persona stays unlocked. Batch mode, so that SQLite (which cannot
alter a column in place) and PostgreSQL run the same revision.

Revision ID: 0003_persona_lock
Revises: 0002_schema_parity
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003_persona_lock"
down_revision = "0002_schema_parity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``personas.locked``, 0 for the personas already set."""
    with op.batch_alter_table("personas") as batch:
        batch.add_column(sa.Column("locked", sa.Integer, nullable=False, server_default="0"))


def downgrade() -> None:
    """Drop ``personas.locked`` (locked personas become ordinary ones)."""
    with op.batch_alter_table("personas") as batch:
        batch.drop_column("locked")
