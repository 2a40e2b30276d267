-- 0006: delivery is its own durable step (poll -> settle -> deliver), and a job the service
-- still reports processing after JOB_TIMEOUT_SECONDS stops being watched instead of failing.

-- When the poller stopped watching a job that was still processing; NULL = watched. Such a job
-- stays 'pending' (the service may still finish it) but is no longer due on a schedule.
ALTER TABLE jobs ADD COLUMN unwatched_at REAL;

-- The route the next delivery attempt takes, in fallback order; once announced_at is set, the
-- route the result was delivered by ('jobs': nowhere else would take it; /jobs shows it).
ALTER TABLE jobs ADD COLUMN delivery_route TEXT NOT NULL DEFAULT 'placeholder'
    CHECK (delivery_route IN ('placeholder', 'channel', 'dm', 'jobs'));
-- Failed delivery attempts so far (transient failures only: they set the backoff).
ALTER TABLE jobs ADD COLUMN delivery_attempts INTEGER NOT NULL DEFAULT 0;
-- When to attempt delivery next (UTC epoch seconds); NULL while pending or once delivered.
ALTER TABLE jobs ADD COLUMN next_delivery_at REAL;
-- The last delivery failure, for /jobs and the logs.
ALTER TABLE jobs ADD COLUMN delivery_error TEXT;

UPDATE jobs SET next_delivery_at = finished_at WHERE status <> 'pending' AND announced_at IS NULL;

CREATE INDEX jobs_delivery_due ON jobs (next_delivery_at)
    WHERE status <> 'pending' AND announced_at IS NULL;
