"""Rows of either engine into the typed models: one mapping per table, shared by both.

``sqlite3.Row`` and ``asyncpg.Record`` both read a column by name, which is all this needs;
what differs between the engines (placeholders, locking) stays in their repositories.
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from bot.domain import (
    ChargeAnomaly,
    Conversation,
    ConversationTurn,
    DeliveryRoute,
    Job,
    JobStatus,
    Kind,
    ResultRequest,
    Tier,
)
from bot.storage.money import from_micro, to_micro


class Row(Protocol):
    """A database row read by column name (``sqlite3.Row``, ``asyncpg.Record``)."""

    def __getitem__(self, key: str, /) -> Any:
        """Return the value of column ``key``."""
        ...


def job_from_row(row: Row) -> Job:
    """Build a :class:`Job` from a row of the ``jobs`` table (either engine).

    ``details`` and ``outputs`` arrive as JSON text (SQLite TEXT, PostgreSQL jsonb as text);
    ``cost_micro`` is micro-cents (:mod:`bot.storage.money`).
    """
    return Job(
        id=row["id"],
        task_id=row["task_id"],
        provider=row["provider"],
        poll_url=row["poll_url"],
        kind=Kind(row["kind"]),
        model=row["model"],
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        message_id=row["message_id"],
        user_id=row["user_id"],
        prompt_summary=row["prompt_summary"],
        details=json.loads(row["details"]),
        cost_cents=from_micro(row["cost_micro"]),
        key_fingerprint=row["key_fingerprint"],
        created_at=row["created_at"],
        next_poll_at=row["next_poll_at"],
        status=JobStatus(row["status"]),
        finished_at=row["finished_at"],
        outputs=tuple(json.loads(row["outputs"])),
        error=row["error"],
        poll_count=row["poll_count"],
        announced_at=row["announced_at"],
        last_progress_at=row["last_progress_at"],
        unwatched_at=row["unwatched_at"],
        delivery_route=DeliveryRoute(row["delivery_route"]),
        delivery_attempts=row["delivery_attempts"],
        next_delivery_at=row["next_delivery_at"],
        delivery_error=row["delivery_error"],
        poll_token=row["poll_token"],
        delivery_token=row["delivery_token"],
    )


def result_request_from_row(row: Row) -> ResultRequest:
    """Build a :class:`ResultRequest` from a row of ``result_requests`` (either engine)."""
    return ResultRequest(
        id=int(row["id"]),
        kind=str(row["kind"]),
        guild_id=int(row["guild_id"]),
        user_id=int(row["user_id"]),
        job_id=None if row["job_id"] is None else int(row["job_id"]),
        options=json.loads(row["options"]),
        outputs=tuple(json.loads(row["outputs"])),
    )


def anomaly_from_row(row: Row) -> ChargeAnomaly:
    """Build a :class:`ChargeAnomaly` from a row of ``charge_anomalies`` (either engine)."""
    return ChargeAnomaly(
        guild_id=row["guild_id"],
        channel_id=row["channel_id"],
        user_id=row["user_id"],
        kind=Kind(row["kind"]),
        model=row["model"],
        task_id=row["task_id"],
        reported_cost=row["reported_cost"],
        reported_remaining=row["reported_remaining"],
        reason=row["reason"],
        key_fingerprint=row["key_fingerprint"],
        at=row["at"],
    )


def models_text(models: tuple[str, ...] | None) -> str | None:
    """A tier's model patterns as stored (comma-separated; None = the server's list)."""
    return None if models is None else ",".join(models)


def tier_from_row(row: Row) -> Tier:
    """Build a :class:`Tier` from a row of ``policy_tiers`` (either engine)."""
    models = row["models"]
    return Tier(
        guild_id=row["guild_id"],
        role_id=row["role_id"],
        role_name=row["role_name"],
        daily_per_user_cents=row["daily_per_user_cents"],
        monthly_per_user_cents=row["monthly_per_user_cents"],
        videos_at_once=row["videos_at_once"],
        models=None if models is None else tuple(m for m in models.split(",") if m),
    )


def conversation_from_row(row: Any) -> Conversation:
    """Build a :class:`Conversation` from a ``conversations`` row (either engine)."""
    return Conversation(
        thread_id=int(row["thread_id"]),
        guild_id=int(row["guild_id"]),
        channel_id=int(row["channel_id"]),
        user_id=int(row["user_id"]),
        model=row["model"],
        system=row["system"],
        created_at=float(row["created_at"]),
        ended_at=None if row["ended_at"] is None else float(row["ended_at"]),
        end_reason=row["end_reason"],
        summary=row["summary"],
        summary_upto=int(row["summary_upto"]),
    )


def turn_from_row(row: Any) -> ConversationTurn:
    """Build a :class:`ConversationTurn` from a ``conversation_turns`` row (either engine)."""
    micro = row["cost_micro"]
    return ConversationTurn(
        thread_id=int(row["thread_id"]),
        user_id=int(row["user_id"]),
        author=str(row["author"]),
        text=str(row["text"]),
        answer=str(row["answer"]),
        model=str(row["model"]),
        prompt_tokens=int(row["prompt_tokens"]),
        completion_tokens=int(row["completion_tokens"]),
        cost_cents=None if micro is None else from_micro(int(micro)),
        carried=int(row["carried"]),
        at=float(row["created_at"]),
    )


def cost_micro(turn: ConversationTurn) -> int | None:
    """The turn's cost as micro-cents; None when it is not a usable number."""
    cents = turn.cost_cents
    if cents is None or not cents.is_finite() or cents < 0:
        return None
    return to_micro(cents)
