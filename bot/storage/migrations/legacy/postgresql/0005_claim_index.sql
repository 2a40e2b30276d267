-- 0005: the claim's first step (its candidates, CLAIM_CANDIDATES_SQL in
-- bot/storage/postgres/jobs.py) reads (next_poll_at, key_fingerprint, guild_id) of the earliest
-- due jobs from this index, as SQLite's 0010 does.
CREATE INDEX jobs_claim ON jobs (next_poll_at, key_fingerprint, guild_id)
    WHERE status = 'pending' AND unwatched_at IS NULL;
