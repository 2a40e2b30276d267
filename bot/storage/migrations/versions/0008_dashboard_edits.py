"""The audit log says where a change was made (``/config`` or the web dashboard); the showcase.

``config_audit.via``: ``"discord"`` or ``"web"``; every existing entry was made through
``/config`` (``"discord"``). Batch mode, so that SQLite (which cannot alter a column in place)
and PostgreSQL run the same revision.

The showcase: ``showcase_entries`` (results shared by the members who asked for them, one per
job and server; ``removed_at`` once an admin removed one), ``showcase_votes`` (one per member
and entry) and ``showcase_settings`` (the showcase channel; whether the page is public, off by
default).

Revision ID: 0008_dashboard_edits
Revises: 0007_locale
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008_dashboard_edits"
down_revision = "0007_locale"
branch_labels = None
depends_on = None

# SQLite makes a rowid alias (an id it assigns) only of a column declared exactly INTEGER.
_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Add ``config_audit.via`` (``"discord"`` for the entries already kept); the showcase."""
    with op.batch_alter_table("config_audit") as batch:
        batch.add_column(sa.Column("via", sa.Text, nullable=False, server_default="discord"))
    op.create_table(
        "showcase_entries",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("job_id", sa.BigInteger, nullable=False),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("shared_at", sa.Double, nullable=False),
        sa.Column("removed_at", sa.Double),
        sa.Column("removed_by", sa.BigInteger),
        sa.Column("channel_id", sa.BigInteger),
        sa.Column("message_id", sa.BigInteger),
        sa.UniqueConstraint("guild_id", "job_id", name="showcase_entries_job"),
    )
    op.create_index("showcase_entries_guild", "showcase_entries", ["guild_id", "shared_at"])
    op.create_table(
        "showcase_votes",
        sa.Column("entry_id", sa.BigInteger, primary_key=True),
        sa.Column("user_id", sa.BigInteger, primary_key=True),
        sa.Column("at", sa.Double, nullable=False),
    )
    op.create_table(
        "showcase_settings",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("channel_id", sa.BigInteger),
        sa.Column("public", sa.Integer, nullable=False, server_default="0"),
    )


def downgrade() -> None:
    """Drop the showcase and ``config_audit.via`` (web changes then read as any other)."""
    op.drop_table("showcase_settings")
    op.drop_table("showcase_votes")
    op.drop_index("showcase_entries_guild", table_name="showcase_entries")
    op.drop_table("showcase_entries")
    with op.batch_alter_table("config_audit") as batch:
        batch.drop_column("via")
