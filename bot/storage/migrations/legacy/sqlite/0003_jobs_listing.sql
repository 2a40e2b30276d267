-- 0003: /jobs lists a member's (or a server's) recent jobs, newest first, from an index.

-- Walked backwards from the newest: no scan of every job ever made, no sort.
CREATE INDEX jobs_listing ON jobs (guild_id, user_id, created_at);
CREATE INDEX jobs_guild_listing ON jobs (guild_id, created_at);
