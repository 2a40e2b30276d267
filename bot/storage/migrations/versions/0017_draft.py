"""Draft → Final: each charge says whether it was a draft's or its Final's.

``ledger.stage`` (``draft``, ``final``; NULL for every other charge), and the daily sums'
``stage`` dimension (``ledger_daily``: bucket ``draft``, ``final`` or ``""``), filled for the
days already summed from their ``total`` rows (no charge before this revision was either).
docs/creative.md, docs/storage.md.

Revision ID: 0017_draft
Revises: 0016_credits
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017_draft"
down_revision = "0016_credits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add the column, and the stage dimension of the days summed so far."""
    with op.batch_alter_table("ledger") as batch:
        batch.add_column(sa.Column("stage", sa.Text))
    op.execute(
        "INSERT INTO ledger_daily (guild_id, day, dimension, bucket, charges, micro) "
        "SELECT guild_id, day, 'stage', '', charges, micro FROM ledger_daily "
        "WHERE dimension = 'total'"
    )


def downgrade() -> None:
    """Drop them again."""
    op.execute("DELETE FROM ledger_daily WHERE dimension = 'stage'")
    with op.batch_alter_table("ledger") as batch:
        batch.drop_column("stage")
