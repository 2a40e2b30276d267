"""The web dashboard's sign-ins, sessions and access roles, and the ledger's daily sums.

- ``dashboard_logins``: one row per sign-in under way (the OAuth2 ``state``, bound to the
  pre-login cookie, and the PKCE verifier), deleted when the callback uses it.
- ``dashboard_sessions``: one row per signed-in browser, so that a member can be signed out
  everywhere. Only hashes of the state, the pre-login cookie and the session cookie are kept.
- ``dashboard_roles``: roles an admin lets open a server's pages without Manage Server.
- ``ledger_daily``: the ledger summed per server, UTC day and dimension (total, model, kind,
  tier, member), written with each charge in its transaction and filled here from the ledger
  so far: the dashboard's periods read it instead of every charge.
- Indexes: ``jobs_user_listing`` and ``ledger_user_at`` (a member's results and spend in every
  server, for My results); ``ledger_guild_model_at`` (the ledger filtered by model and kind,
  pages and totals from the index alone).

Revision ID: 0006_dashboard_sessions
Revises: 0005_sequences
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006_dashboard_sessions"
down_revision = "0005_sequences"
branch_labels = None
depends_on = None


_DAY = {
    "sqlite": "CAST(at / 86400 AS INTEGER) * 86400",
    "postgresql": "CAST(floor(at / 86400) AS BIGINT) * 86400",
}
_BUCKETS = (
    ("total", "''"),
    ("model", "model"),
    ("kind", "kind"),
    ("tier", "COALESCE(CAST(tier_role_id AS TEXT), '')"),
    ("member", "CAST(user_id AS TEXT)"),
)


def _backfill_daily() -> None:
    """Sum the ledger already kept into ``ledger_daily`` (later charges add themselves)."""
    day = _DAY[op.get_bind().dialect.name]
    for dimension, bucket in _BUCKETS:
        grouped = f"guild_id, {day}" + ("" if dimension == "total" else f", {bucket}")
        op.execute(
            "INSERT INTO ledger_daily (guild_id, day, dimension, bucket, charges, micro) "
            f"SELECT guild_id, {day}, '{dimension}', {bucket}, COUNT(*), SUM(cost_micro) "
            f"FROM ledger GROUP BY {grouped}"
        )


def upgrade() -> None:
    """Create the tables, the indexes, and the ledger's daily sums so far."""
    op.create_table(
        "dashboard_logins",
        sa.Column("state_hash", sa.Text, primary_key=True),
        sa.Column("binding_hash", sa.Text, nullable=False),
        sa.Column("code_verifier", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
    )
    op.create_table(
        "dashboard_roles",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("role_id", sa.BigInteger, primary_key=True),
        sa.Column("access", sa.Text, nullable=False, server_default="view"),
    )
    op.create_table(
        "dashboard_sessions",
        sa.Column("id_hash", sa.Text, primary_key=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("user_name", sa.Text, nullable=False),
        sa.Column("guilds", sa.Text, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.Column("last_seen_at", sa.Double, nullable=False),
    )
    op.create_index("dashboard_sessions_user", "dashboard_sessions", ["user_id"])
    op.create_index("jobs_user_listing", "jobs", ["user_id", "created_at"])
    op.create_index("ledger_user_at", "ledger", ["user_id", "at"])
    op.create_index(
        "ledger_guild_model_at", "ledger", ["guild_id", "model", "at", "kind", "cost_micro"]
    )
    op.create_table(
        "ledger_daily",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("day", sa.BigInteger, primary_key=True),
        sa.Column("dimension", sa.Text, primary_key=True),
        sa.Column("bucket", sa.Text, primary_key=True),
        sa.Column("charges", sa.BigInteger, nullable=False),
        sa.Column("micro", sa.BigInteger, nullable=False),
    )
    _backfill_daily()


def downgrade() -> None:
    """Drop them (every member is signed out)."""
    op.drop_table("ledger_daily")
    op.drop_index("ledger_guild_model_at", table_name="ledger")
    op.drop_index("ledger_user_at", table_name="ledger")
    op.drop_index("jobs_user_listing", table_name="jobs")
    op.drop_index("dashboard_sessions_user", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
    op.drop_table("dashboard_roles")
    op.drop_table("dashboard_logins")
