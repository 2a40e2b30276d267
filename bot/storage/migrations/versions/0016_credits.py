"""Members' credit balances: packs bought in Discord, refunds, spends, holds, billing mode.

``credit_balances`` (a member's balance, micro-cents), ``credit_entries`` (the credit ledger;
a purchase keyed by its entitlement id, a refund by ``<id>:refund``, both UNIQUE),
``credit_holds`` (what requests in flight hold of a balance) and ``guild_billing`` (who pays a
server's commands). New tables: nothing to fill.

Revision ID: 0016_credits
Revises: 0015_creative (re-chained by the lead after 0015_creative)
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016_credits"
down_revision = "0015_creative"
branch_labels = None
depends_on = None

# The ids SQLite assigns itself: its INTEGER PRIMARY KEY (a BIGINT one gets no rowid alias).
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the four tables and their indexes."""
    op.create_table(
        "credit_balances",
        sa.Column("user_id", sa.BigInteger, primary_key=True),
        sa.Column("balance_micro", sa.BigInteger, nullable=False),
        sa.Column("updated_at", sa.Double, nullable=False),
    )
    op.create_table(
        "credit_entries",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("entry_key", sa.Text, unique=True),
        sa.Column("entitlement_id", sa.BigInteger),
        sa.Column("sku_id", sa.BigInteger),
        sa.Column("amount_micro", sa.BigInteger, nullable=False),
        sa.Column("cost_micro", sa.BigInteger),
        sa.Column("guild_id", sa.BigInteger),
        sa.Column("model", sa.Text),
        sa.Column("task_id", sa.Text),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("consumed_at", sa.Double),
    )
    op.create_index("credit_entries_user_at", "credit_entries", ["user_id", "at"])
    op.create_table(
        "credit_holds",
        sa.Column("reservation_id", sa.BigInteger, primary_key=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("amount_micro", sa.BigInteger, nullable=False),
        sa.Column("expires_at", sa.Double, nullable=False),
    )
    op.create_index("credit_holds_user_expires", "credit_holds", ["user_id", "expires_at"])
    op.create_table(
        "guild_billing",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("mode", sa.Text, nullable=False),
    )


def downgrade() -> None:
    """Drop them again."""
    op.drop_table("guild_billing")
    op.drop_index("credit_holds_user_expires", table_name="credit_holds")
    op.drop_table("credit_holds")
    op.drop_index("credit_entries_user_at", table_name="credit_entries")
    op.drop_table("credit_entries")
    op.drop_table("credit_balances")
