"""The audit log says where a change was made: ``/config`` in Discord, or the web dashboard.

``config_audit.via``: ``"discord"`` or ``"web"``; every existing entry was made through
``/config`` (``"discord"``). Batch mode, so that SQLite (which cannot alter a column in place)
and PostgreSQL run the same revision.

Revision ID: 0007_dashboard_edits
Revises: 0006_dashboard_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_dashboard_edits"
down_revision = "0006_dashboard_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``config_audit.via``, ``"discord"`` for the entries already kept."""
    with op.batch_alter_table("config_audit") as batch:
        batch.add_column(sa.Column("via", sa.Text, nullable=False, server_default="discord"))


def downgrade() -> None:
    """Drop ``config_audit.via`` (web changes then read as any other)."""
    with op.batch_alter_table("config_audit") as batch:
        batch.drop_column("via")
