"""Where members see the packs, so a purchase shows in that server's Ledger (docs/credits.md).

``credit_offers``: per member, the server where they were last shown the premium buttons
(a refusal for too little credit, or ``/credits``), and when. A purchase Discord reports with
no server (``ENTITLEMENT_CREATE``, the listing) is recorded in that server
(``credit_entries.guild_id``), its refund with it. ``credit_entries_guild_at``: the
server's purchases and refunds, for its Ledger and CSV. New table and index: nothing to fill
(purchases credited before stay without a server).

Revision ID: 0019_credits_refunds
Revises: 0018_style_tiers
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019_credits_refunds"
down_revision = "0018_style_tiers"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create ``credit_offers`` and the index of entries by server and time."""
    op.create_table(
        "credit_offers",
        sa.Column("user_id", sa.BigInteger, primary_key=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_index("credit_entries_guild_at", "credit_entries", ["guild_id", "at"])


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("credit_entries_guild_at", table_name="credit_entries")
    op.drop_table("credit_offers")
