-- 0005: money becomes exact. The spec types every amount as a number (0.35 is valid); money
-- columns become INTEGER micro-cents (1 cent = 1,000,000), so SUM() stays exact in SQL.
-- Existing whole cents are multiplied, exactly. Columns are swapped in place (ADD, copy,
-- DROP COLUMN, which STRICT tables allow) rather than by rebuilding the tables: indexes and
-- the columns other migrations add to these tables are kept whatever their order.
-- The new NOT NULL columns need a DEFAULT to be added; every INSERT names them.

ALTER TABLE ledger ADD COLUMN cost_micro INTEGER NOT NULL DEFAULT 0 CHECK (cost_micro >= 0);
-- NULL: the service reported no usable balance (an anomaly recorded in charge_anomalies).
ALTER TABLE ledger ADD COLUMN remaining_credits_micro INTEGER;
UPDATE ledger SET cost_micro = cost_cents * 1000000,
                  remaining_credits_micro = remaining_credits_cents * 1000000;
ALTER TABLE ledger DROP COLUMN cost_cents;
ALTER TABLE ledger DROP COLUMN remaining_credits_cents;

ALTER TABLE reservations ADD COLUMN amount_micro INTEGER NOT NULL DEFAULT 0
    CHECK (amount_micro >= 0);
UPDATE reservations SET amount_micro = amount_cents * 1000000;
ALTER TABLE reservations DROP COLUMN amount_cents;

ALTER TABLE jobs ADD COLUMN cost_micro INTEGER NOT NULL DEFAULT 0 CHECK (cost_micro >= 0);
UPDATE jobs SET cost_micro = cost_cents * 1000000;
ALTER TABLE jobs DROP COLUMN cost_cents;

-- Reported charges that break the protocol (negative, NaN, absurd, finer than a micro-cent):
-- the exact reported text, for the admins. Not summed into budgets; never updated or deleted.
CREATE TABLE charge_anomalies (
    id                 INTEGER PRIMARY KEY,
    guild_id           INTEGER NOT NULL,
    channel_id         INTEGER NOT NULL,
    user_id            INTEGER NOT NULL,
    kind               TEXT NOT NULL CHECK (kind IN ('text', 'image', 'video')),
    model              TEXT NOT NULL,
    task_id            TEXT,
    reported_cost      TEXT NOT NULL,
    reported_remaining TEXT NOT NULL,
    reason             TEXT NOT NULL,
    key_fingerprint    TEXT NOT NULL,
    at                 REAL NOT NULL
) STRICT;
CREATE UNIQUE INDEX charge_anomalies_task ON charge_anomalies (kind, task_id)
    WHERE task_id IS NOT NULL;
CREATE INDEX charge_anomalies_guild_at ON charge_anomalies (guild_id, at);
