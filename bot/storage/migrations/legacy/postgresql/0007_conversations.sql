-- 0007: /chat conversations and their turns, keyed by thread (SQLite 0012).
--
-- The API takes no messages array (docs/genapi.md §4.5: prompt and system), so the bot keeps the history
-- and folds it into each call; a restart keeps every conversation.
CREATE TABLE conversations (
    thread_id  bigint PRIMARY KEY,
    guild_id   bigint NOT NULL,
    channel_id bigint NOT NULL,
    user_id    bigint NOT NULL,
    model      text,
    system     text,
    created_at double precision NOT NULL,
    ended_at   double precision,
    end_reason text,
    -- The Summarise button: one summary standing for the first summary_upto turns.
    summary      text,
    summary_upto integer NOT NULL DEFAULT 0
);

-- One row per answered turn; cost_micro NULL: the service reported no usable number.
CREATE TABLE conversation_turns (
    id                bigserial PRIMARY KEY,
    thread_id         bigint NOT NULL REFERENCES conversations (thread_id) ON DELETE CASCADE,
    user_id           bigint NOT NULL,
    author            text NOT NULL,
    text              text NOT NULL,
    answer            text NOT NULL,
    model             text NOT NULL,
    prompt_tokens     bigint NOT NULL,
    completion_tokens bigint NOT NULL,
    cost_micro        bigint CHECK (cost_micro IS NULL OR cost_micro >= 0),
    carried           integer NOT NULL,
    created_at        double precision NOT NULL
);

CREATE INDEX conversation_turns_thread ON conversation_turns (thread_id, id);

-- A channel's persona (/config persona): a system prompt and a default model for /chat and /text
-- in the channel and its threads; model NULL: the member's or the service's default.
CREATE TABLE personas (
    guild_id   bigint NOT NULL,
    channel_id bigint PRIMARY KEY,
    system     text NOT NULL,
    model      text,
    updated_at double precision NOT NULL
);

CREATE INDEX personas_guild ON personas (guild_id);
