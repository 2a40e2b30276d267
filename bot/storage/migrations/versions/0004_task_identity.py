"""A task is identified by its key, kind and task id (and when it came), not by its id alone.

A task id is unique only within the account (key) that made it, and a service that lost its
id sequence may give an id again even there. The unique task id of ``jobs`` and the unique
``(kind, task_id)`` of ``ledger`` and ``charge_anomalies`` merged such a task into another
server's (or another key's) job and charge: the new one was neither stored, charged nor
delivered. They become unique indexes over the kind, the task id, the key's fingerprint and
the time (``jobs.created_at``, ``ledger.at``, ``charge_anomalies.at``; anomalies also by
reason), so that recording the very same task again is still a no-op, and another task under a
known id gets a place of its own. Kind and task id lead, so that one index serves the lookup of
a key's task and the search for the same id under any key (the clash the admins are told of).
No row changes; the new keys are wider than the old ones, so the rows kept satisfy them.

SQLite cannot drop the inline ``UNIQUE`` of ``jobs.task_id``: the table is rebuilt by SQLite's
own procedure (https://sqlite.org/lang_altertable.html, "Making Other Kinds Of Table Schema
Changes") from its stored ``CREATE TABLE`` with only that word removed, so that ``STRICT``, the
``CHECK`` constraints, defaults, ids, indexes and triggers are kept exactly (Alembic's batch
mode rebuilds from reflection, which omits unnamed ``CHECK`` constraints such as
``json_valid(details)`` and the status checks, with a warning).

Revision ID: 0004_task_identity
Revises: 0003_persona_lock
"""

from __future__ import annotations

import re

import sqlalchemy as sa
from alembic import op
from sqlalchemy import Connection

revision = "0004_task_identity"
down_revision = "0003_persona_lock"
branch_labels = None
depends_on = None

_WITH_TASK = sa.text("task_id IS NOT NULL")
_CREATE_JOBS = re.compile(r"^\s*CREATE\s+TABLE\s+\"?jobs\"?(?=\s*\()", re.IGNORECASE)
_UNIQUE_TASK_ID = re.compile(r"(\btask_id\s+TEXT\s+NOT\s+NULL)\s+UNIQUE\b", re.IGNORECASE)


def upgrade() -> None:
    """Replace the task-id-only unique keys by key-scoped ones, on either engine."""
    conn = op.get_bind()
    if conn.dialect.name == "sqlite":
        _rebuild_sqlite_jobs(conn)
    else:
        for constraint in sa.inspect(conn).get_unique_constraints("jobs"):
            if constraint["column_names"] == ["task_id"] and constraint["name"]:
                op.drop_constraint(constraint["name"], "jobs", type_="unique")
    op.create_index(
        "jobs_task", "jobs", ["kind", "task_id", "key_fingerprint", "created_at"], unique=True
    )
    op.drop_index("ledger_task", table_name="ledger")
    op.create_index(
        "ledger_task",
        "ledger",
        ["kind", "task_id", "key_fingerprint", "at"],
        unique=True,
        sqlite_where=_WITH_TASK,
        postgresql_where=_WITH_TASK,
    )
    op.drop_index("charge_anomalies_task", table_name="charge_anomalies")
    op.create_index(
        "charge_anomalies_task",
        "charge_anomalies",
        ["kind", "task_id", "key_fingerprint", "at", "reason"],
        unique=True,
        sqlite_where=_WITH_TASK,
        postgresql_where=_WITH_TASK,
    )


def downgrade() -> None:
    """Back to ids unique on their own (fails if two tasks now share one: nothing is lost)."""
    op.drop_index("charge_anomalies_task", table_name="charge_anomalies")
    op.create_index(
        "charge_anomalies_task",
        "charge_anomalies",
        ["kind", "task_id"],
        unique=True,
        sqlite_where=_WITH_TASK,
        postgresql_where=_WITH_TASK,
    )
    op.drop_index("ledger_task", table_name="ledger")
    op.create_index(
        "ledger_task",
        "ledger",
        ["kind", "task_id"],
        unique=True,
        sqlite_where=_WITH_TASK,
        postgresql_where=_WITH_TASK,
    )
    op.drop_index("jobs_task", table_name="jobs")
    op.create_index("jobs_task_id", "jobs", ["task_id"], unique=True)


def _rebuild_sqlite_jobs(conn: Connection) -> None:
    """Rebuild ``jobs`` without the ``UNIQUE`` of ``task_id``, keeping everything else.

    No foreign key refers to ``jobs``, so dropping it deletes nothing elsewhere; its indexes
    and triggers go with it and are made again from their stored SQL.
    """
    created = conn.exec_driver_sql(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'jobs'"
    ).scalar_one()
    rebuilt, found = _UNIQUE_TASK_ID.subn(r"\1", created)
    rebuilt, named = _CREATE_JOBS.subn("CREATE TABLE jobs_rebuilt", rebuilt)
    if found != 1 or named != 1:
        raise RuntimeError("jobs is not declared as the baseline declares it")
    dependents = [
        sql
        for (sql,) in conn.exec_driver_sql(
            "SELECT sql FROM sqlite_master WHERE tbl_name = 'jobs'"
            " AND type IN ('index', 'trigger') AND sql IS NOT NULL ORDER BY type, name"
        )
    ]
    conn.exec_driver_sql(rebuilt)
    conn.exec_driver_sql("INSERT INTO jobs_rebuilt SELECT * FROM jobs")
    conn.exec_driver_sql("DROP TABLE jobs")
    conn.exec_driver_sql("ALTER TABLE jobs_rebuilt RENAME TO jobs")
    for sql in dependents:
        conn.exec_driver_sql(sql)
