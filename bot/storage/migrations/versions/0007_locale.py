"""A server's language for its public messages: ``guild_settings.locale``.

The Discord locale code an admin chose with ``/config language`` (``de``, ``ja``...); NULL for
every existing server, which keeps Discord's preferred locale. Batch mode, so that SQLite
(which cannot alter a table in place) and PostgreSQL run the same revision.

Revision ID: 0007_locale
Revises: 0006_dashboard_sessions
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007_locale"
down_revision = "0006_dashboard_sessions"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``guild_settings.locale``, NULL (Discord's preferred locale) for every server."""
    with op.batch_alter_table("guild_settings") as batch:
        batch.add_column(sa.Column("locale", sa.Text, nullable=True))


def downgrade() -> None:
    """Drop ``guild_settings.locale`` (servers read in Discord's preferred locale again)."""
    with op.batch_alter_table("guild_settings") as batch:
        batch.drop_column("locale")
