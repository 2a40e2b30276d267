-- 0002: announce results exactly once, and find due jobs without scanning finished ones.

-- When the result was posted to Discord; NULL = finished but not yet announced.
ALTER TABLE jobs ADD COLUMN announced_at REAL;
-- Jobs finished under 0001 were announced when they finished: do not announce them again.
UPDATE jobs SET announced_at = finished_at WHERE status <> 'pending';

-- Partial indexes: their size follows the pending (or unannounced) jobs, not all jobs ever.
CREATE INDEX jobs_due ON jobs (next_poll_at) WHERE status = 'pending';
CREATE INDEX jobs_unannounced ON jobs (finished_at)
    WHERE status <> 'pending' AND announced_at IS NULL;
CREATE INDEX jobs_completed_model ON jobs (model, finished_at) WHERE status = 'completed';
