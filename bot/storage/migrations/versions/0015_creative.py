"""Creative control: Enhance and Draft settings, styles and their references, characters.

``creative_settings`` (one row per server that set ``/config enhance`` or ``/config draft``),
``styles`` and ``style_references`` (a server's styles: a prompt suffix and up to four
reference images, each the Discord message holding it), ``characters`` (a member's reference
image, private unless shared). New tables only: nothing to fill. docs/creative.md.

Revision ID: 0015_creative
Revises: 0014_drop_guard_key_credits
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0015_creative"
down_revision = "0014_drop_guard_key_credits"
branch_labels = None
depends_on = None

_ID = sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    """Create the four tables."""
    op.create_table(
        "creative_settings",
        sa.Column("guild_id", sa.BigInteger, primary_key=True),
        sa.Column("enhance_model", sa.Text),
        sa.Column("image_system", sa.Text),
        sa.Column("video_system", sa.Text),
        sa.Column("draft_image_model", sa.Text),
        sa.Column("draft_video_model", sa.Text),
    )
    op.create_table(
        "styles",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("suffix", sa.Text, nullable=False),
        sa.Column("created_by", sa.BigInteger, nullable=False),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.UniqueConstraint("guild_id", "name", name="styles_guild_name"),
    )
    op.create_table(
        "style_references",
        sa.Column("style_id", sa.BigInteger, primary_key=True),
        sa.Column("position", sa.Integer, primary_key=True),
        sa.Column("channel_id", sa.BigInteger, nullable=False),
        sa.Column("message_id", sa.BigInteger, nullable=False),
        sa.Column("attachment", sa.Integer, nullable=False, server_default="0"),
    )
    op.create_table(
        "characters",
        sa.Column("id", _ID, primary_key=True, autoincrement=True),
        sa.Column("user_id", sa.BigInteger, nullable=False),
        sa.Column("guild_id", sa.BigInteger, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("channel_id", sa.BigInteger, nullable=False),
        sa.Column("message_id", sa.BigInteger, nullable=False),
        sa.Column("attachment", sa.Integer, nullable=False, server_default="0"),
        sa.Column("shared", sa.Integer, nullable=False, server_default="0"),
        sa.Column("created_at", sa.Double, nullable=False),
        sa.UniqueConstraint("user_id", "name", name="characters_user_name"),
    )
    op.create_index("characters_guild", "characters", ["guild_id"])


def downgrade() -> None:
    """Drop them again."""
    op.drop_index("characters_guild", table_name="characters")
    op.drop_table("characters")
    op.drop_table("style_references")
    op.drop_table("styles")
    op.drop_table("creative_settings")
