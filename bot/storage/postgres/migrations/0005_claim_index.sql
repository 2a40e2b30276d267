-- 0005: the claim's first step (the keys of the earliest due jobs, CLAIM_DUE_SQL in
-- bot/storage/postgres/jobs.py) reads (next_poll_at, key_fingerprint) from this index alone
-- (an index-only scan), as SQLite's 0010 does; guild_id for the ranked claim's candidates
-- (CLAIM_CANDIDATES_SQL).
CREATE INDEX jobs_claim ON jobs (next_poll_at, key_fingerprint, guild_id)
    WHERE status = 'pending' AND unwatched_at IS NULL;
