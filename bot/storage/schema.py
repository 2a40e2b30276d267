"""The tables, once for both engines: SQLAlchemy Core ``Table`` objects the repositories query.

These describe the schema the migrations build (``bot/storage/migrations``); they are not
used to create it. Types are the generic ones both engines share: money is ``BigInteger``
micro-cents (``bot.storage.money``), times are ``Double`` UTC epoch seconds, flags are
``Integer`` 0/1, and the JSON columns (``jobs.details``, ``jobs.outputs``,
``result_requests.options``, ``result_requests.outputs``) are ``Text`` holding JSON (jsonb on
PostgreSQL), encoded and decoded by their repositories.
"""

from __future__ import annotations

from sqlalchemy import (
    BigInteger,
    Boolean,
    Column,
    Double,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    Table,
    Text,
    UniqueConstraint,
    text,
)

metadata = MetaData()
"""Every table of the bot's schema."""

NOT_COPIED = {"copy_db": False}
"""``Table.info`` of a table whose rows are worthless after a move (the shared rate window: the
last minute of requests): ``copy-db`` leaves it behind. Every other table is copied."""

JSON_TEXT = {"json": True}
"""``Column.info`` of a column holding JSON text: ``jsonb`` on PostgreSQL, ``TEXT`` on SQLite.

The repositories encode and decode the JSON themselves, so the column is ``Text`` to
SQLAlchemy on both engines (a ``JSONB`` type would encode the text a second time).
"""


blocked_terms = Table(
    "blocked_terms",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("term", Text, primary_key=True),
)


card_settings = Table(
    "card_settings",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("confirm_above_micro", BigInteger),
)


charge_anomalies = Table(
    "charge_anomalies",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("task_id", Text),
    Column("reported_cost", Text, nullable=False),
    Column("reported_remaining", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("key_fingerprint", Text, nullable=False),
    Column("at", Double, nullable=False),
)
Index(
    "charge_anomalies_task",
    charge_anomalies.c.kind,
    charge_anomalies.c.task_id,
    charge_anomalies.c.key_fingerprint,
    charge_anomalies.c.at,
    charge_anomalies.c.reason,
    unique=True,
    sqlite_where=text("task_id IS NOT NULL"),
    postgresql_where=text("task_id IS NOT NULL"),
)
Index("charge_anomalies_guild_at", charge_anomalies.c.guild_id, charge_anomalies.c.at)


config_audit = Table(
    "config_audit",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("what", Text, nullable=False),
    Column("old", Text, nullable=False),
    Column("new", Text, nullable=False),
    Column("at", Double, nullable=False),
    # Where the change was made: "discord" (/config) or "web" (the dashboard).
    Column("via", Text, nullable=False, server_default="discord"),
)
Index("config_audit_guild", config_audit.c.guild_id, config_audit.c.id)


conversations = Table(
    "conversations",
    metadata,
    Column("thread_id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("model", Text),
    Column("system", Text),
    Column("created_at", Double, nullable=False),
    Column("ended_at", Double),
    Column("end_reason", Text),
    Column("summary", Text),
    Column("summary_upto", Integer, nullable=False),
)


cooldown_uses = Table(
    "cooldown_uses",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("user_id", BigInteger, primary_key=True),
    Column("command", Text, primary_key=True),
    Column("used_at", Double, nullable=False),
)


cooldowns = Table(
    "cooldowns",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("command", Text, primary_key=True),
    Column("seconds", Integer, nullable=False),
)


default_keys = Table(
    "default_keys",
    metadata,
    Column("fingerprint", Text, primary_key=True),
    Column("ciphertext", LargeBinary, nullable=False),
    Column("stored_at", Double, nullable=False),
    Column("retired_at", Double),
)


# Unused since issue 35 (sign-ins under way live in a signed cookie, written nowhere); kept so
# that no migration is needed, and empty.
dashboard_logins = Table(
    "dashboard_logins",
    metadata,
    # SHA-256 of the OAuth2 ``state`` and of the pre-login cookie: neither is stored as sent.
    Column("state_hash", Text, primary_key=True),
    Column("binding_hash", Text, nullable=False),
    Column("code_verifier", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    info=NOT_COPIED,
)


dashboard_roles = Table(
    "dashboard_roles",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("role_id", BigInteger, primary_key=True),
    # "view" today; "edit" is kept for the roles that may change settings from the web.
    Column("access", Text, nullable=False, server_default="view"),
)


showcase_entries = Table(
    "showcase_entries",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("job_id", BigInteger, nullable=False),
    # Who shared it: always the member who asked for it (a private result is theirs alone).
    Column("user_id", BigInteger, nullable=False),
    Column("shared_at", Double, nullable=False),
    # Set when an admin removed it: it leaves every showcase page at once.
    Column("removed_at", Double),
    Column("removed_by", BigInteger),
    # The showcase channel's message of it (with its Vote button), when one was posted.
    Column("channel_id", BigInteger),
    Column("message_id", BigInteger),
    UniqueConstraint("guild_id", "job_id", name="showcase_entries_job"),
)
Index("showcase_entries_guild", showcase_entries.c.guild_id, showcase_entries.c.shared_at)


showcase_votes = Table(
    "showcase_votes",
    metadata,
    Column("entry_id", BigInteger, primary_key=True),
    Column("user_id", BigInteger, primary_key=True),
    Column("at", Double, nullable=False),
)


showcase_settings = Table(
    "showcase_settings",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    # Where shared results are posted (/config showcase); None: nowhere.
    Column("channel_id", BigInteger),
    # 1: the showcase is readable by anyone at /showcase/<guild id>; off by default.
    Column("public", Integer, nullable=False, server_default="0"),
    # When the page last became public (UTC epoch seconds), NULL while it is not: the public
    # page lists only entries shared since (0009_showcase_public_since).
    Column("public_since", Double),
)


dashboard_sessions = Table(
    "dashboard_sessions",
    metadata,
    # SHA-256 of the session cookie's value: a copy of the table signs nobody in.
    Column("id_hash", Text, primary_key=True),
    Column("user_id", BigInteger, nullable=False),
    Column("user_name", Text, nullable=False),
    # JSON list of the member's servers at sign-in (id, name, permissions), as Discord said.
    Column("guilds", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("last_seen_at", Double, nullable=False),
)
Index("dashboard_sessions_user", dashboard_sessions.c.user_id)


guild_settings = Table(
    "guild_settings",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("api_key_ciphertext", LargeBinary),
    Column("api_key_last4", Text),
    Column("monthly_budget_cents", BigInteger),
    Column("user_daily_budget_cents", BigInteger),
    Column("max_pending_videos_per_user", Integer),
    Column("max_pending_videos_per_guild", Integer),
    Column("admin_channel_id", BigInteger),
    Column("notified_problem", Text),
    # The language of the server's public cards an admin chose (/config language), a Discord
    # locale code; NULL: Discord's preferred locale of the server.
    Column("locale", Text),
)


jobs = Table(
    "jobs",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("task_id", Text, nullable=False),
    Column("provider", Text, nullable=False),
    Column("poll_url", Text, nullable=False),
    Column("kind", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("message_id", BigInteger),
    Column("user_id", BigInteger, nullable=False),
    Column("prompt_summary", Text, nullable=False),
    Column("details", Text, nullable=False, info=JSON_TEXT),
    Column("key_fingerprint", Text, nullable=False),
    Column("status", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("next_poll_at", Double, nullable=False),
    Column("finished_at", Double),
    Column("outputs", Text, nullable=False, info=JSON_TEXT),
    Column("error", Text),
    Column("poll_count", Integer, nullable=False),
    Column("last_progress_at", Double),
    Column("announced_at", Double),
    Column("cost_micro", BigInteger, nullable=False),
    Column("unwatched_at", Double),
    Column("delivery_route", Text, nullable=False),
    Column("delivery_attempts", Integer, nullable=False),
    Column("next_delivery_at", Double),
    Column("delivery_error", Text),
    Column("poll_token", BigInteger, nullable=False),
    Column("delivery_token", BigInteger, nullable=False),
)
# Partial indexes: their size follows the pending (or undelivered) jobs, not all jobs ever.
Index(
    "jobs_pending_videos",
    jobs.c.guild_id,
    jobs.c.user_id,
    sqlite_where=text("status = 'pending' AND kind = 'video'"),
    postgresql_where=text("status = 'pending' AND kind = 'video'"),
)
Index(
    "jobs_due",
    jobs.c.next_poll_at,
    sqlite_where=text("status = 'pending'"),
    postgresql_where=text("status = 'pending'"),
)
Index(
    "jobs_unannounced",
    jobs.c.finished_at,
    sqlite_where=text("status <> 'pending' AND announced_at IS NULL"),
    postgresql_where=text("status <> 'pending' AND announced_at IS NULL"),
)
Index(
    "jobs_completed_model",
    jobs.c.model,
    jobs.c.finished_at,
    sqlite_where=text("status = 'completed'"),
    postgresql_where=text("status = 'completed'"),
)
Index("jobs_listing", jobs.c.guild_id, jobs.c.user_id, jobs.c.created_at)
Index("jobs_guild_listing", jobs.c.guild_id, jobs.c.created_at)
# A member's results in every server (the dashboard's My results).
Index("jobs_user_listing", jobs.c.user_id, jobs.c.created_at)
Index(
    "jobs_pending_key",
    jobs.c.guild_id,
    jobs.c.key_fingerprint,
    sqlite_where=text("status = 'pending'"),
    postgresql_where=text("status = 'pending'"),
)
Index(
    "jobs_pending_fingerprint",
    jobs.c.key_fingerprint,
    sqlite_where=text("status = 'pending'"),
    postgresql_where=text("status = 'pending'"),
)
Index(
    "jobs_delivery_due",
    jobs.c.next_delivery_at,
    sqlite_where=text("status <> 'pending' AND announced_at IS NULL"),
    postgresql_where=text("status <> 'pending' AND announced_at IS NULL"),
)
# The poller's claim reads its candidates from this index alone; status and unwatched_at are
# implied by the WHERE, but SQLite counts an index as covering only when it holds every column
# the query names.
# A task id is unique only within its key's account, and a service may give one again: the
# time it came tells another task from the same one recorded again.
Index(
    "jobs_task",
    jobs.c.kind,
    jobs.c.task_id,
    jobs.c.key_fingerprint,
    jobs.c.created_at,
    unique=True,
)
Index(
    "jobs_claim",
    jobs.c.next_poll_at,
    jobs.c.key_fingerprint,
    jobs.c.guild_id,
    jobs.c.status,
    jobs.c.unwatched_at,
    sqlite_where=text("status = 'pending' AND unwatched_at IS NULL"),
    postgresql_where=text("status = 'pending' AND unwatched_at IS NULL"),
)


ledger = Table(
    "ledger",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("task_id", Text),
    Column("at", Double, nullable=False),
    Column("key_fingerprint", Text, nullable=False),
    Column("cost_micro", BigInteger, nullable=False),
    Column("remaining_credits_micro", BigInteger),
    Column("tier_role_id", BigInteger),
    # The prompt's summary of a charge without a job (/text, a conversation's turn), as a
    # job's prompt_summary; NULL for a job's charge (its job holds it) and before 0013.
    Column("prompt_summary", Text),
    # Draft → Final (docs/creative.md): "draft" for a draft's charge, "final" for its Final's;
    # NULL for every other charge (and every charge before 0017).
    Column("stage", Text),
)
Index(
    "ledger_task",
    ledger.c.kind,
    ledger.c.task_id,
    ledger.c.key_fingerprint,
    ledger.c.at,
    unique=True,
    sqlite_where=text("task_id IS NOT NULL"),
    postgresql_where=text("task_id IS NOT NULL"),
)
Index("ledger_guild_at", ledger.c.guild_id, ledger.c.at)
Index("ledger_guild_user_at", ledger.c.guild_id, ledger.c.user_id, ledger.c.at)
Index("ledger_key_at", ledger.c.key_fingerprint, ledger.c.at)
Index("ledger_model_at", ledger.c.model, ledger.c.at)
# A member's spend in every server (the dashboard's My results).
Index("ledger_user_at", ledger.c.user_id, ledger.c.at)
# The dashboard's ledger filtered by model (and kind): its pages and their totals read this
# index alone (it holds every column the total sums), not the server's every charge.
Index(
    "ledger_guild_model_at",
    ledger.c.guild_id,
    ledger.c.model,
    ledger.c.at,
    ledger.c.kind,
    ledger.c.cost_micro,
)


ledger_daily = Table(
    "ledger_daily",
    metadata,
    # The ledger summed per server, UTC day and one dimension: written with each charge, in its
    # transaction (LedgerStore.insert_charge), so the dashboard's periods read a few hundred
    # rows a day instead of every charge. ``dimension``: total, model, kind, tier, member, stage;
    # ``bucket``: "" for total, the model, the kind, the tier's role id ("" without one), the
    # member's id, the stage ("draft", "final", "" for any other). ``day``: the UTC midnight,
    # epoch seconds.
    Column("guild_id", BigInteger, primary_key=True),
    Column("day", BigInteger, primary_key=True),
    Column("dimension", Text, primary_key=True),
    Column("bucket", Text, primary_key=True),
    Column("charges", BigInteger, nullable=False),
    Column("micro", BigInteger, nullable=False),
)


member_settings = Table(
    "member_settings",
    metadata,
    Column("user_id", BigInteger, primary_key=True),
    Column("text_model", Text),
    Column("image_model", Text),
    Column("video_model", Text),
    Column("aspect_ratio", Text),
    Column("video_duration", Double),
    Column("prompt_suffix", Text),
    Column("private", Integer, nullable=False),
    Column("remix", Integer, nullable=False),
    Column("notify_dm", Integer, nullable=False),
    Column("updated_at", Double, nullable=False),
)


meta = Table(
    "meta",
    metadata,
    Column("key", Text, primary_key=True),
    Column("value", Text, nullable=False),
)


personas = Table(
    "personas",
    metadata,
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, primary_key=True),
    Column("system", Text, nullable=False),
    Column("model", Text),
    Column("updated_at", Double, nullable=False),
    # 1: a member's ``system`` cannot countermand the persona (``/config persona set locked``).
    Column("locked", Integer, nullable=False, server_default="0"),
)
Index("personas_guild", personas.c.guild_id)


policy_models = Table(
    "policy_models",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("pattern", Text, primary_key=True),
    Column("allowed", Integer, primary_key=True),
)


policy_tiers = Table(
    "policy_tiers",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("role_id", BigInteger, primary_key=True),
    Column("role_name", Text, nullable=False),
    Column("daily_per_user_cents", BigInteger),
    Column("monthly_per_user_cents", BigInteger),
    Column("videos_at_once", Integer),
    Column("models", Text),
)


rate_blocks = Table(
    "rate_blocks",
    metadata,
    Column("key_id", Text, primary_key=True),
    Column("blocked_until", Double, nullable=False),
    info=NOT_COPIED,
)


rate_requests = Table(
    "rate_requests",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("key_id", Text, nullable=False),
    Column("at", Double, nullable=False),
    Column("background", Boolean, nullable=False),
    info=NOT_COPIED,
)
Index("rate_requests_key", rate_requests.c.key_id, rate_requests.c.at)


reservations = Table(
    "reservations",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("created_at", Double, nullable=False),
    Column("expires_at", Double, nullable=False),
    Column("amount_micro", BigInteger, nullable=False),
    Column("key_fingerprint", Text),
)
Index("reservations_guild_expires", reservations.c.guild_id, reservations.c.expires_at)
Index("reservations_expires", reservations.c.expires_at)


result_requests = Table(
    "result_requests",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("kind", Text, nullable=False),
    Column("guild_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("job_id", BigInteger, unique=True),
    Column("options", Text, nullable=False, info=JSON_TEXT),
    Column("outputs", Text, nullable=False, info=JSON_TEXT),
    Column("created_at", Double, nullable=False),
)


sequence_settings = Table(
    "sequence_settings",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("max_clips", Integer, nullable=False),
)


sequences = Table(
    "sequences",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("created_at", Double, nullable=False),
)


sequence_clips = Table(
    "sequence_clips",
    metadata,
    Column(
        "sequence_id",
        BigInteger,
        ForeignKey("sequences.id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("position", Integer, primary_key=True),
    Column("job_id", BigInteger, nullable=False),
)
Index("sequence_clips_job", sequence_clips.c.job_id)


takes = Table(
    "takes",
    metadata,
    Column("job_id", BigInteger, primary_key=True),
    Column("group_id", BigInteger, nullable=False),
    Column("position", Integer, nullable=False),
    # On the first take's row: the take whose delivery made the group's final one (claimed).
    Column("final_delivered_by", BigInteger),
)
Index("takes_group", takes.c.group_id)


member_takes = Table(
    "member_takes",
    metadata,
    Column("user_id", BigInteger, primary_key=True),
    Column("takes", Integer, nullable=False),
)


retired_keys = Table(
    "retired_keys",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("fingerprint", Text),
    Column("ciphertext", LargeBinary, nullable=False),
    Column("last4", Text, nullable=False),
    Column("retired_at", Double, nullable=False),
    UniqueConstraint("guild_id", "fingerprint"),
)


allowed_channels = Table(
    "allowed_channels",
    metadata,
    Column(
        "guild_id",
        BigInteger,
        ForeignKey("guild_settings.guild_id", ondelete="CASCADE"),
        primary_key=True,
    ),
    Column("channel_id", BigInteger, primary_key=True),
)


conversation_turns = Table(
    "conversation_turns",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column(
        "thread_id",
        BigInteger,
        ForeignKey("conversations.thread_id", ondelete="CASCADE"),
        nullable=False,
    ),
    Column("user_id", BigInteger, nullable=False),
    Column("author", Text, nullable=False),
    Column("text", Text, nullable=False),
    Column("answer", Text, nullable=False),
    Column("model", Text, nullable=False),
    Column("prompt_tokens", BigInteger, nullable=False),
    Column("completion_tokens", BigInteger, nullable=False),
    Column("cost_micro", BigInteger),
    Column("carried", Integer, nullable=False),
    Column("created_at", Double, nullable=False),
)
Index("conversation_turns_thread", conversation_turns.c.thread_id, conversation_turns.c.id)


# The spend guard (revision 0011_spend_guard; docs/guard.md).
guard_settings = Table(
    "guard_settings",
    metadata,
    # One row per server that changed a guard setting; NULL = the default in code
    # (bot.services.guard.GuardSettings).
    Column("guild_id", BigInteger, primary_key=True),
    # Percentages of a budget that alert, comma-separated ascending ("50,80,100").
    Column("thresholds", Text),
    # 0: members are not told of their own allowance's thresholds.
    Column("member_notes", Integer),
    # "admin-channel" or "owner-dm".
    Column("destination", Text),
    Column("runway_days", Integer),
    Column("credits_floor_cents", BigInteger),
    Column("anomaly_factor", Double),
    Column("anomaly_floor_cents", BigInteger),
    Column("member_10min_cents", BigInteger),
    Column("pause_on_anomaly", Integer),
    # Paid requests of the server are refused while paused_at is set; paused_by: the member
    # (0: the guard itself, on an anomaly); pause_reason: what the guard measured.
    Column("paused_at", Double),
    Column("paused_by", BigInteger),
    Column("pause_reason", Text),
)


guard_alerts = Table(
    "guard_alerts",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    # month, tier, member_day, member_month, runway, credits, anomaly, member_burst.
    Column("kind", Text, nullable=False),
    # The period it belongs to ("2026-01", "2026-01-15", "2026-01-15T13"), with its subject
    # where one applies (a member, a key): an alert fires once per period.
    Column("period", Text, nullable=False),
    # The percentage crossed ("80"), or "" for an alert without one.
    Column("threshold", Text, nullable=False),
    Column("at", Double, nullable=False),
    Column("amount_micro", BigInteger, nullable=False),
    Column("limit_micro", BigInteger),
    # What it measured, for people (English; the Guard page's list).
    Column("measured", Text, nullable=False),
    # Its INSERT wins once: once per threshold and period, across restarts and processes.
    UniqueConstraint("guild_id", "kind", "period", "threshold", name="guard_alerts_once"),
)
Index("guard_alerts_guild_at", guard_alerts.c.guild_id, guard_alerts.c.at)


guard_hourly = Table(
    "guard_hourly",
    metadata,
    # Spend per UTC hour of a server ("g<guild id>") or a key ("k<fingerprint>"), written
    # after each charge: the anomaly's median and the key's burn rate read a few hundred rows.
    Column("scope", Text, primary_key=True),
    Column("hour", BigInteger, primary_key=True),
    Column("micro", BigInteger, nullable=False),
)


# Safety checking of results (revision 0012_safety; docs/safety.md).
safety_settings = Table(
    "safety_settings",
    metadata,
    # One row per server that changed a /config safety setting; NULL = the default in code
    # (bot.services.safety.SafetyPolicy).
    Column("guild_id", BigInteger, primary_key=True),
    # "off", "review" or "block".
    Column("mode", Text),
    Column("review_above", Double),
    Column("block_above", Double),
    # Where review cards go; NULL = the admin channel.
    Column("review_channel_id", BigInteger),
    Column("reports_to_hide", Integer),
    # Age-restricted channels: "spoiler" (results at or above review-above shown there as
    # spoilers) or "policy" (the policy applies there as anywhere).
    Column("nsfw_channels", Text),
)


safety_results = Table(
    "safety_results",
    metadata,
    # A result ("j<job id>" or "r<result request id>") whose score did more than show it, or
    # that members reported: its state (shown, spoiler, held, withheld, approved, rejected),
    # why (score, failed, reports), its score (NULL: the scorer failed).
    Column("ref", Text, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("prompt", Text, nullable=False),
    Column("score", Double),
    Column("state", Text, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", Double, nullable=False),
    # The member's card (a synchronous result's response) and the review channel's card.
    Column("card_channel_id", BigInteger),
    Column("card_message_id", BigInteger),
    Column("review_channel_id", BigInteger),
    Column("review_message_id", BigInteger),
    Column("decided_by", BigInteger),
    Column("decided_at", Double),
)
Index(
    "safety_results_guild_state",
    safety_results.c.guild_id,
    safety_results.c.state,
    safety_results.c.at,
)


safety_reports = Table(
    "safety_reports",
    metadata,
    # One report per member and result: its key.
    Column("ref", Text, primary_key=True),
    Column("user_id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("reason", Text, nullable=False),
    Column("at", Double, nullable=False),
)


safety_decisions = Table(
    "safety_decisions",
    metadata,
    # Every Approve and Reject: who, how ("discord" or "web"), when.
    Column("id", BigInteger, primary_key=True),
    Column("ref", Text, nullable=False),
    Column("guild_id", BigInteger, nullable=False),
    Column("user_id", BigInteger, nullable=False),
    Column("decision", Text, nullable=False),
    Column("via", Text, nullable=False),
    Column("at", Double, nullable=False),
)
Index("safety_decisions_ref", safety_decisions.c.ref)


# Thumbnails of delivered results (revision 0013_thumbnails; docs/storage.md): small WebP
# pictures the dashboard serves itself, so a gallery asks Discord for nothing and outlives
# Discord's attachment URLs. Swept with their job (bot/services/retention.py).
thumbnails = Table(
    "thumbnails",
    metadata,
    Column("job_id", BigInteger, primary_key=True),
    # The result file's place among the job's outputs (0 first).
    Column("file_index", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
    # The first 32 hex characters of the data's SHA-256: its ETag and its URL's ?v=.
    Column("digest", Text, nullable=False),
    Column("mime", Text, nullable=False),
    Column("width", Integer, nullable=False),
    Column("height", Integer, nullable=False),
    # A clip's duration, seconds; NULL for an image.
    Column("duration", Double),
    Column("made_at", Double, nullable=False),
)


# Members' credit balances (revision 0016_credits; docs/credits.md, docs/storage.md): packs
# bought in Discord credit a member's balance, which pays commands in servers that let members
# pay (guild_billing). Micro-cents, as the ledger.
credit_balances = Table(
    "credit_balances",
    metadata,
    Column("user_id", BigInteger, primary_key=True),
    # May be below 0 after a refund of credits already spent.
    Column("balance_micro", BigInteger, nullable=False),
    Column("updated_at", Double, nullable=False),
)

# The credit ledger: every change of a balance, one row each. A purchase's entry_key is its
# entitlement id and a refund's "<entitlement id>:refund" (UNIQUE): a purchase is credited
# once, and refunded once, by construction. A spend (a command paid from the balance) is keyed
# "spend:<settlement id>": taken once, also when the settlement spool replays it.
credit_entries = Table(
    "credit_entries",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("user_id", BigInteger, nullable=False),
    Column("kind", Text, nullable=False),
    Column("entry_key", Text, unique=True),
    Column("entitlement_id", BigInteger),
    Column("sku_id", BigInteger),
    # The change of the balance, signed: + purchase, - refund, - spend (the price with markup).
    Column("amount_micro", BigInteger, nullable=False),
    # A spend's price as the service charged it (the ledger's cost_micro), before the markup.
    Column("cost_micro", BigInteger),
    Column("guild_id", BigInteger),
    Column("model", Text),
    Column("task_id", Text),
    # When it was recorded: a purchase's credited_at.
    Column("at", Double, nullable=False),
    # A purchase: when Discord confirmed it consumed; NULL until then (repaired at start-up).
    Column("consumed_at", Double),
)
Index("credit_entries_user_at", credit_entries.c.user_id, credit_entries.c.at)
# A server's purchases and refunds, for its Ledger and CSV (revision 0019_credits_refunds).
Index("credit_entries_guild_at", credit_entries.c.guild_id, credit_entries.c.at)

# Where a member was last shown the premium buttons (revision 0019_credits_refunds): a purchase
# Discord reports without a server is recorded in that one (docs/credits.md).
credit_offers = Table(
    "credit_offers",
    metadata,
    Column("user_id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("at", Double, nullable=False),
)

# What requests in flight hold of a member's balance, one row per reservation; a hold that
# outlives its reservation (a crash) stops counting at expires_at.
credit_holds = Table(
    "credit_holds",
    metadata,
    Column("reservation_id", BigInteger, primary_key=True),
    Column("user_id", BigInteger, nullable=False),
    Column("amount_micro", BigInteger, nullable=False),
    Column("expires_at", Double, nullable=False),
)
Index("credit_holds_user_expires", credit_holds.c.user_id, credit_holds.c.expires_at)

# Who pays a server's paid commands (/config billing): server (no row), members,
# server-then-members.
guild_billing = Table(
    "guild_billing",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    Column("mode", Text, nullable=False),
)
# Creative control (revision 0015_creative; docs/creative.md): a server's Enhance and Draft
# settings, its styles and their reference images, members' characters. A reference is the
# Discord message that holds it (channel, message, attachment), asked for a fresh URL when sent:
# attachment URLs expire, the message does not.
creative_settings = Table(
    "creative_settings",
    metadata,
    Column("guild_id", BigInteger, primary_key=True),
    # The text model that rewrites prompts (/config enhance); NULL: the cheapest in the catalogue.
    Column("enhance_model", Text),
    # The system prompts of a rewrite, per kind; NULL: the defaults in code.
    Column("image_system", Text),
    Column("video_system", Text),
    # The draft models (/config draft); NULL: the cheapest of the catalogue.
    Column("draft_image_model", Text),
    Column("draft_video_model", Text),
)


styles = Table(
    "styles",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("guild_id", BigInteger, nullable=False),
    Column("name", Text, nullable=False),
    # Appended to the prompt of a request in this style.
    Column("suffix", Text, nullable=False),
    Column("created_by", BigInteger, nullable=False),
    Column("created_at", Double, nullable=False),
    # The tiers' role ids that may use it, space-separated (revision 0018_style_tiers);
    # NULL: every member.
    Column("roles", Text),
    UniqueConstraint("guild_id", "name", name="styles_guild_name"),
)


style_references = Table(
    "style_references",
    metadata,
    Column("style_id", BigInteger, primary_key=True),
    # The reference's place among the style's (0 first): the first is a video's image_url.
    Column("position", Integer, primary_key=True),
    Column("channel_id", BigInteger, nullable=False),
    Column("message_id", BigInteger, nullable=False),
    # Which of the message's attachments.
    Column("attachment", Integer, nullable=False, server_default="0"),
)


# A style reference's thumbnail (revision 0018_style_tiers): made once when the style is
# added, so that the dashboard's Styles page asks Discord for no picture. Deleted with its style.
style_thumbnails = Table(
    "style_thumbnails",
    metadata,
    Column("style_id", BigInteger, primary_key=True),
    Column("position", Integer, primary_key=True),
    Column("data", LargeBinary, nullable=False),
    # The first 32 hex characters of the data's SHA-256: its ETag and its URL's ?v=.
    Column("digest", Text, nullable=False),
    Column("mime", Text, nullable=False),
    Column("width", Integer, nullable=False),
    Column("height", Integer, nullable=False),
    Column("made_at", Double, nullable=False),
)


characters = Table(
    "characters",
    metadata,
    Column("id", BigInteger, primary_key=True),
    Column("user_id", BigInteger, nullable=False),
    # The server it was made in, and shared to when ``shared`` is 1.
    Column("guild_id", BigInteger, nullable=False),
    Column("name", Text, nullable=False),
    Column("channel_id", BigInteger, nullable=False),
    Column("message_id", BigInteger, nullable=False),
    Column("attachment", Integer, nullable=False, server_default="0"),
    Column("shared", Integer, nullable=False, server_default="0"),
    Column("created_at", Double, nullable=False),
    UniqueConstraint("user_id", "name", name="characters_user_name"),
)
Index("characters_guild", characters.c.guild_id)
