-- 0010: the poller's claim reads only (id, key_fingerprint, guild_id, next_poll_at) of the due
-- jobs, from this index, without visiting the table (bot/storage/sqlite/jobs.py CLAIM_CANDIDATES_SQL). With
-- most keys at their limit, the due jobs of the others are spread over the whole due set: the
-- claim walked the table row of every due job each pass (10,000 at the scale benchmark's size).
-- status and unwatched_at are implied by the WHERE, but SQLite counts an index as covering only
-- when it holds every column the query names.
CREATE INDEX jobs_claim ON jobs (next_poll_at, key_fingerprint, guild_id, status, unwatched_at)
    WHERE status = 'pending' AND unwatched_at IS NULL;
