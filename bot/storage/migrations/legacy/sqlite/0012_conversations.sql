-- 0012: /chat conversations and their turns, keyed by thread.
--
-- The API takes no messages array (docs/genapi.md §4.5: prompt and system), so the bot keeps the history
-- and folds it into each call; a restart keeps every conversation. Money columns are
-- micro-cents, as everywhere (0005).
CREATE TABLE conversations (
    thread_id  INTEGER PRIMARY KEY,
    guild_id   INTEGER NOT NULL,
    channel_id INTEGER NOT NULL,
    user_id    INTEGER NOT NULL,
    model      TEXT,
    system     TEXT,
    created_at REAL NOT NULL,
    ended_at   REAL,
    end_reason TEXT,
    -- The Summarise button: one summary standing for the first summary_upto turns.
    summary      TEXT,
    summary_upto INTEGER NOT NULL DEFAULT 0
) STRICT;

-- One row per answered turn; cost_micro NULL: the service reported no usable number.
CREATE TABLE conversation_turns (
    id                INTEGER PRIMARY KEY,
    thread_id         INTEGER NOT NULL REFERENCES conversations (thread_id) ON DELETE CASCADE,
    user_id           INTEGER NOT NULL,
    author            TEXT NOT NULL,
    text              TEXT NOT NULL,
    answer            TEXT NOT NULL,
    model             TEXT NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cost_micro        INTEGER CHECK (cost_micro IS NULL OR cost_micro >= 0),
    carried           INTEGER NOT NULL,
    created_at        REAL NOT NULL
) STRICT;

CREATE INDEX conversation_turns_thread ON conversation_turns (thread_id, id);

-- A channel's persona (/config persona): a system prompt and a default model for /chat and /text
-- in the channel and its threads; model NULL: the member's or the service's default.
CREATE TABLE personas (
    guild_id   INTEGER NOT NULL,
    channel_id INTEGER PRIMARY KEY,
    system     TEXT NOT NULL,
    model      TEXT,
    updated_at REAL NOT NULL
) STRICT;

CREATE INDEX personas_guild ON personas (guild_id);
