"""Alembic's environment: run by ``bot.storage.migrate`` on the connection it hands over.

Never run from a command line with an ``alembic.ini``: the bot migrates its database itself at
start-up, inside its own write transaction (SQLite ``BEGIN IMMEDIATE``, PostgreSQL under an
advisory lock), and passes that connection in ``config.attributes["connection"]``.
"""

from __future__ import annotations

from alembic import context

from bot.storage.migrations import compare_type, include_name
from bot.storage.schema import metadata

connection = context.config.attributes["connection"]
context.configure(
    connection=connection,
    target_metadata=metadata,
    # The same comparison as schema_drift, should a revision ever be drafted by autogenerate.
    compare_type=compare_type,
    include_name=include_name,
    # The whole upgrade is one transaction: the caller's (DDL is transactional on both).
    transaction_per_migration=False,
)
with context.begin_transaction():
    context.run_migrations()
