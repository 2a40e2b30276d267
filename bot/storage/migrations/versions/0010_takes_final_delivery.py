"""The takes of one request make one final delivery: ``takes.final_delivered_by``.

The first take's row (``job_id = group_id``) holds the job id of the take whose delivery made
(or is making) the group's final delivery: the card with every result attached and the
requester's ping. Claimed by an atomic conditional ``UPDATE`` (its row count decides), so two
workers finishing the last takes together make one. NULL until then; existing groups, all
delivered long ago or delivered by one process, start unclaimed. Batch mode, so that SQLite
and PostgreSQL run the same revision.

Revision ID: 0010_takes_final_delivery
Revises: 0009_showcase_public_since
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010_takes_final_delivery"
down_revision = "0009_showcase_public_since"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``takes.final_delivered_by`` (NULL: no final delivery claimed)."""
    with op.batch_alter_table("takes") as batch:
        batch.add_column(sa.Column("final_delivered_by", sa.BigInteger))


def downgrade() -> None:
    """Drop ``takes.final_delivered_by`` (every process then delivers as before)."""
    with op.batch_alter_table("takes") as batch:
        batch.drop_column("final_delivered_by")
