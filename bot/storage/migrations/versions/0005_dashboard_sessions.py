"""The web dashboard's sign-ins, sessions and access roles.

``dashboard_logins``: one row per sign-in under way (the OAuth2 ``state``, bound to the
pre-login cookie, and the PKCE verifier), deleted when the callback uses it. ``dashboard_sessions``:
one row per signed-in browser, so that a member can be signed out everywhere.
``dashboard_roles``: roles an admin lets open a server's pages without Manage Server. Only
hashes of the state, the pre-login cookie and the session cookie are stored. ``jobs_user_listing``:
and ``ledger_user_at``: a member's results and spend in every server (My results) without a
scan of every job or charge.

Revision ID: 0005_dashboard_sessions
Revises: 0004_task_identity
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005_dashboard_sessions"
down_revision = "0004_task_identity"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Create the three tables and the index of a member's sessions."""
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


def downgrade() -> None:
    """Drop them (every member is signed out)."""
    op.drop_index("ledger_user_at", table_name="ledger")
    op.drop_index("jobs_user_listing", table_name="jobs")
    op.drop_index("dashboard_sessions_user", table_name="dashboard_sessions")
    op.drop_table("dashboard_sessions")
    op.drop_table("dashboard_roles")
    op.drop_table("dashboard_logins")
