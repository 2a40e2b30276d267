"""Safety checking: each server's policy, results held or withheld, reports, decisions.

``safety_settings`` (a server's ``/config safety``; NULL = the default in code),
``safety_results`` (one row per result that was scored and not simply shown, or reported: its
state, score, where its card and review card are), ``safety_reports`` (one per member and
result: its key) and ``safety_decisions`` (every Approve and Reject). New tables only; nothing
to fill. docs/safety.md.

Revision ID: 0012_safety
Revises: 0011_spend_guard
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0012_safety"
down_revision = "0011_spend_guard"
branch_labels = None
depends_on = None

# SQLite makes a rowid alias (an id it assigns) only of a column declared exactly INTEGER.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the four safety tables."""
    op.create_table(
        "safety_settings",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("mode", sa.Text),
        sa.Column("review_above", sa.Double),
        sa.Column("block_above", sa.Double),
        sa.Column("review_channel_id", sa.BigInteger),
        sa.Column("reports_to_hide", sa.Integer),
        sa.Column("nsfw_channels", sa.Text),
    )
    op.create_table(
        "safety_results",
        sa.Column("ref", sa.Text, primary_key=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("channel_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("prompt", sa.Text, nullable=False),
        sa.Column("score", sa.Double),
        sa.Column("state", sa.Text, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("card_channel_id", sa.BigInteger),
        sa.Column("card_message_id", sa.BigInteger),
        sa.Column("review_channel_id", sa.BigInteger),
        sa.Column("review_message_id", sa.BigInteger),
        sa.Column("decided_by", sa.BigInteger),
        sa.Column("decided_at", sa.Double),
    )
    op.create_index("safety_results_guild_state", "safety_results", ["guild_id", "state", "at"])
    op.create_table(
        "safety_reports",
        sa.Column("ref", sa.Text, primary_key=True),
        sa.Column("user_id", sa.BigInteger, primary_key=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("reason", sa.Text, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_table(
        "safety_decisions",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("ref", sa.Text, nullable=False),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("via", sa.Text, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_index("safety_decisions_ref", "safety_decisions", ["ref"])


def downgrade() -> None:
    """Drop the safety tables (policies, holds, reports and decisions are lost)."""
    op.drop_index("safety_decisions_ref", table_name="safety_decisions")
    op.drop_table("safety_decisions")
    op.drop_table("safety_reports")
    op.drop_index("safety_results_guild_state", table_name="safety_results")
    op.drop_table("safety_results")
    op.drop_table("safety_settings")
