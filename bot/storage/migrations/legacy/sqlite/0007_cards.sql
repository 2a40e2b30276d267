-- 0007: what the buttons under a result need after any restart.

-- The request behind each result (a job, or a synchronous /image or /text answer), so that
-- Again, Vary, Animate and Edit can rebuild it; the buttons' custom ids carry the job id
-- ("j<id>") or this row's id ("r<id>"). options: the command's options as JSON; outputs: the
-- result URLs of a synchronous answer as a JSON list (a job keeps its own in jobs.outputs).
CREATE TABLE result_requests (
    id INTEGER PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    guild_id INTEGER NOT NULL,
    user_id INTEGER NOT NULL,
    job_id INTEGER UNIQUE,
    options TEXT NOT NULL,
    outputs TEXT NOT NULL DEFAULT '[]',
    created_at REAL NOT NULL
) STRICT;

-- Per-guild confirmation threshold of /config confirm-above, micro-cents; no row or NULL: off.
CREATE TABLE card_settings (
    guild_id INTEGER PRIMARY KEY,
    confirm_above_micro INTEGER CHECK (confirm_above_micro IS NULL OR confirm_above_micro >= 0)
) STRICT;
