-- 0001: settings, ledger, reservations, jobs.
-- Money is INTEGER cents; times are REAL UTC epoch seconds. STRICT tables reject wrong types.

CREATE TABLE meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

-- One row per guild that changed anything; NULL limits mean "the Settings default".
CREATE TABLE guild_settings (
    guild_id                     INTEGER PRIMARY KEY,
    api_key_ciphertext           BLOB,
    api_key_last4                TEXT,
    monthly_budget_cents         INTEGER CHECK (monthly_budget_cents >= 0),
    user_daily_budget_cents      INTEGER CHECK (user_daily_budget_cents >= 0),
    max_pending_videos_per_user  INTEGER CHECK (max_pending_videos_per_user >= 1),
    max_pending_videos_per_guild INTEGER CHECK (max_pending_videos_per_guild >= 1),
    admin_channel_id             INTEGER,
    notified_problem             TEXT,
    CHECK ((api_key_ciphertext IS NULL) = (api_key_last4 IS NULL))
) STRICT;

CREATE TABLE allowed_channels (
    guild_id   INTEGER NOT NULL REFERENCES guild_settings (guild_id) ON DELETE CASCADE,
    channel_id INTEGER NOT NULL,
    PRIMARY KEY (guild_id, channel_id)
) STRICT, WITHOUT ROWID;

-- The financial record: one row per charge the service reported. Never updated or deleted.
CREATE TABLE ledger (
    id                      INTEGER PRIMARY KEY,
    guild_id                INTEGER NOT NULL,
    channel_id              INTEGER NOT NULL,
    user_id                 INTEGER NOT NULL,
    kind                    TEXT NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    model                   TEXT NOT NULL,
    task_id                 TEXT,
    cost_cents              INTEGER NOT NULL CHECK (cost_cents >= 0),
    remaining_credits_cents INTEGER NOT NULL,
    key_fingerprint         TEXT NOT NULL,
    at                      REAL NOT NULL
) STRICT;
-- A task is charged once: recording the same task twice is ignored (INSERT OR IGNORE).
CREATE UNIQUE INDEX ledger_task ON ledger (kind, task_id) WHERE task_id IS NOT NULL;
CREATE INDEX ledger_guild_at ON ledger (guild_id, at);
CREATE INDEX ledger_guild_user_at ON ledger (guild_id, user_id, at);
CREATE INDEX ledger_key_at ON ledger (key_fingerprint, at);
CREATE INDEX ledger_model_at ON ledger (model, at);

-- Budget held by requests in flight; rows past expires_at no longer count.
CREATE TABLE reservations (
    id           INTEGER PRIMARY KEY,
    guild_id     INTEGER NOT NULL,
    user_id      INTEGER NOT NULL,
    kind         TEXT NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    model        TEXT NOT NULL,
    amount_cents INTEGER NOT NULL CHECK (amount_cents >= 0),
    created_at   REAL NOT NULL,
    expires_at   REAL NOT NULL
) STRICT;
CREATE INDEX reservations_guild_expires ON reservations (guild_id, expires_at);
CREATE INDEX reservations_expires ON reservations (expires_at);

-- Asynchronous tasks: everything needed to finish them after a restart.
CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY,
    task_id          TEXT NOT NULL UNIQUE,
    provider         TEXT NOT NULL,
    poll_url         TEXT NOT NULL,
    kind             TEXT NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    model            TEXT NOT NULL,
    guild_id         INTEGER NOT NULL,
    channel_id       INTEGER NOT NULL,
    message_id       INTEGER,
    user_id          INTEGER NOT NULL,
    prompt_summary   TEXT NOT NULL,
    details          TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details)),
    cost_cents       INTEGER NOT NULL CHECK (cost_cents >= 0),
    key_fingerprint  TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'pending'
                     CHECK (status IN ('pending', 'completed', 'failed')),
    created_at       REAL NOT NULL,
    next_poll_at     REAL NOT NULL,
    finished_at      REAL,
    outputs          TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(outputs)),
    error            TEXT,
    poll_count       INTEGER NOT NULL DEFAULT 0,
    last_progress_at REAL,
    CHECK ((status = 'pending') = (finished_at IS NULL))
) STRICT;
-- The pending-video caps count these.
CREATE INDEX jobs_pending_videos ON jobs (guild_id, user_id)
    WHERE status = 'pending' AND kind = 'video';
