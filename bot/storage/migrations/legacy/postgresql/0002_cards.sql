-- 0002: what the buttons under a result need after any restart (SQLite 0007).

-- The request behind each result (a job, or a synchronous /image or /text answer), so that
-- Again, Vary, Animate and Edit can rebuild it; the buttons' custom ids carry the job id
-- ("j<id>") or this row's id ("r<id>").
CREATE TABLE result_requests (
    id         bigserial PRIMARY KEY,
    kind       text NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    guild_id   bigint NOT NULL,
    user_id    bigint NOT NULL,
    job_id     bigint UNIQUE,
    options    jsonb NOT NULL,
    outputs    jsonb NOT NULL DEFAULT '[]',
    created_at double precision NOT NULL
);

-- Per-guild confirmation threshold of /config confirm-above, micro-cents; no row or NULL: off.
CREATE TABLE card_settings (
    guild_id            bigint PRIMARY KEY,
    confirm_above_micro bigint CHECK (confirm_above_micro IS NULL OR confirm_above_micro >= 0)
);
