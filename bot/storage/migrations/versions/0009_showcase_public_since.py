"""The showcase page publishes only what was shared after it became public.

``showcase_settings.public_since``: when the server's showcase page last became public (UTC
epoch seconds; NULL while it is not public). The public page lists only entries shared at or
after it: a member who shared a result to their server did not agree to publish it on the web.
A page public already before this revision counts as public from the upgrade on (what was
shared before stays visible in the server only). Batch mode, as ``0008_dashboard_edits``.

Revision ID: 0009_showcase_public_since
Revises: 0008_dashboard_edits
"""

from __future__ import annotations

import time

import sqlalchemy as sa
from alembic import op

revision = "0009_showcase_public_since"
down_revision = "0008_dashboard_edits"
branch_labels = None
depends_on = None


def upgrade() -> None:
    """Add ``showcase_settings.public_since``; a page public already is public from now on."""
    with op.batch_alter_table("showcase_settings") as batch:
        batch.add_column(sa.Column("public_since", sa.Double))
    settings = sa.table(
        "showcase_settings", sa.column("public", sa.Integer), sa.column("public_since", sa.Double)
    )
    op.execute(
        settings.update().where(settings.c.public == 1).values(public_since=float(time.time()))
    )


def downgrade() -> None:
    """Drop ``showcase_settings.public_since`` (a public page then lists every entry again)."""
    with op.batch_alter_table("showcase_settings") as batch:
        batch.drop_column("public_since")
