-- 0009: several processes share the work. A poll or a delivery of a job is held by
-- one process at a time under a lease: its expiry is the job's next_poll_at (next_delivery_at)
-- and its fencing token the counter below, incremented by every claim. A write made under an
-- older token (a holder whose lease expired: paused, partitioned, or killed) is ignored.
ALTER TABLE jobs ADD COLUMN poll_token INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN delivery_token INTEGER NOT NULL DEFAULT 0;

-- The service's rate window per key, shared by every process (bot/genapi/shared_ratelimit.py):
-- one row per request sent, timed by the database's clock, kept for the rolling minute.
-- key_id is a fingerprint of the API key, never the key.
CREATE TABLE rate_requests (
    id         INTEGER PRIMARY KEY,
    key_id     TEXT NOT NULL,
    at         REAL NOT NULL,
    background INTEGER NOT NULL CHECK (background IN (0, 1))
) STRICT;
CREATE INDEX rate_requests_key ON rate_requests (key_id, at);

-- A key the service answered 429: no process sends with it before blocked_until.
CREATE TABLE rate_blocks (
    key_id        TEXT PRIMARY KEY,
    blocked_until REAL NOT NULL
) STRICT;
