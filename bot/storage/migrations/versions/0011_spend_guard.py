"""The spend guard: its settings per server, the alerts it fired, keys' balances, hourly spend.

``guard_settings`` (NULL = the default in code), ``guard_alerts`` (unique per server, kind,
period and threshold: an alert's ``INSERT`` wins once, across restarts and processes),
``guard_key_credits`` (the latest ``remaining_credits_cents`` per key fingerprint) and
``guard_hourly`` (spend per UTC hour of a server or a key: the anomaly's median and the key's
burn rate). New tables only; nothing to fill (the hourly sums start with the next charge).
docs/guard.md.

Revision ID: 0011_spend_guard
Revises: 0010_takes_final_delivery
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011_spend_guard"
down_revision = "0010_takes_final_delivery"
branch_labels = None
depends_on = None

# SQLite makes a rowid alias (an id it assigns) only of a column declared exactly INTEGER.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the guard's four tables."""
    op.create_table(
        "guard_settings",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("thresholds", sa.Text),
        sa.Column("member_notes", sa.Integer),
        sa.Column("destination", sa.Text),
        sa.Column("runway_days", sa.Integer),
        sa.Column("credits_floor_cents", sa.BigInteger),
        sa.Column("anomaly_factor", sa.Double),
        sa.Column("anomaly_floor_cents", sa.BigInteger),
        sa.Column("member_10min_cents", sa.BigInteger),
        sa.Column("pause_on_anomaly", sa.Integer),
        sa.Column("paused_at", sa.Double),
        sa.Column("paused_by", sa.BigInteger),
        sa.Column("pause_reason", sa.Text),
    )
    op.create_table(
        "guard_alerts",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("kind", sa.Text, nullable=False),
        sa.Column("period", sa.Text, nullable=False),
        sa.Column("threshold", sa.Text, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
        sa.Column("amount_micro", sa.BigInteger, nullable=False),
        sa.Column("limit_micro", sa.BigInteger),
        sa.Column("measured", sa.Text, nullable=False),
        sa.UniqueConstraint("guild_id", "kind", "period", "threshold", name="guard_alerts_once"),
    )
    op.create_index("guard_alerts_guild_at", "guard_alerts", ["guild_id", "at"])
    op.create_table(
        "guard_key_credits",
        sa.Column("key_fingerprint", sa.Text, primary_key=True),
        sa.Column("remaining_micro", sa.BigInteger, nullable=False),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_table(
        "guard_hourly",
        sa.Column("scope", sa.Text, primary_key=True),
        sa.Column("hour", sa.BigInteger, primary_key=True),
        sa.Column("micro", sa.BigInteger, nullable=False),
    )


def downgrade() -> None:
    """Drop the guard's tables (a server's guard settings, alerts and pause are lost)."""
    op.drop_table("guard_hourly")
    op.drop_table("guard_key_credits")
    op.drop_index("guard_alerts_guild_at", table_name="guard_alerts")
    op.drop_table("guard_alerts")
    op.drop_table("guard_settings")
