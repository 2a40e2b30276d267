"""Drop ``guard_key_credits``: a key's last balance is read from the ledger's own rows.

Revision 0011 kept the latest ``remaining_credits_cents`` per key fingerprint in its own
table; the guard now reads it from the charge's ``ledger.remaining_credits_micro`` (through
``ledger_key_at``), so the table is neither written nor read. Its rows are only a copy of the
ledger's: nothing is lost. The downgrade recreates it empty (the code of 0011 to 0013 does not
read it either). docs/guard.md.

Revision ID: 0014_drop_guard_key_credits
Revises: 0013_thumbnails
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0014_drop_guard_key_credits"
down_revision = "0013_thumbnails"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Drop ``guard_key_credits``."""
    op.drop_table("guard_key_credits")


def downgrade() -> None:
    """Recreate ``guard_key_credits`` as revision 0011 made it (empty)."""
    op.create_table(
        "guard_key_credits",
        sa.Column("key_fingerprint", sa.Text, primary_key=True),
        sa.Column("remaining_micro", sa.BigInteger, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
