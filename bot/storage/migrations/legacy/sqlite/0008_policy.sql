-- 0008: a server's policy: role tiers, the server-wide model list, blocked terms,
-- cooldowns and their last uses, the audit of /config changes, and the tier of each charge.

-- Allowances: whole cents; -1 = unlimited; NULL = the server default. models: comma-separated
-- ids or prefixes, '*' = all; NULL = the server's model list.
CREATE TABLE policy_tiers (
    guild_id               INTEGER NOT NULL,
    role_id                INTEGER NOT NULL,
    role_name              TEXT NOT NULL,
    daily_per_user_cents   INTEGER CHECK (daily_per_user_cents >= -1),
    monthly_per_user_cents INTEGER CHECK (monthly_per_user_cents >= -1),
    videos_at_once         INTEGER CHECK (videos_at_once >= 1),
    models                 TEXT,
    PRIMARY KEY (guild_id, role_id)
) STRICT;

-- The model list of members without a tier: allowed (empty = all) minus blocked.
CREATE TABLE policy_models (
    guild_id INTEGER NOT NULL,
    pattern  TEXT NOT NULL,
    allowed  INTEGER NOT NULL CHECK (allowed IN (0, 1)),
    PRIMARY KEY (guild_id, allowed, pattern)
) STRICT;

-- Stored normalised (NFKC, case-folded, zero-width characters removed).
CREATE TABLE blocked_terms (
    guild_id INTEGER NOT NULL,
    term     TEXT NOT NULL,
    PRIMARY KEY (guild_id, term)
) STRICT;

CREATE TABLE cooldowns (
    guild_id INTEGER NOT NULL,
    command  TEXT NOT NULL CHECK (command IN ('text', 'image', 'video')),
    seconds  INTEGER NOT NULL CHECK (seconds >= 1),
    PRIMARY KEY (guild_id, command)
) STRICT;

-- When a member last passed a command's checks (UTC epoch seconds).
CREATE TABLE cooldown_uses (
    guild_id INTEGER NOT NULL,
    user_id  INTEGER NOT NULL,
    command  TEXT NOT NULL,
    used_at  REAL NOT NULL,
    PRIMARY KEY (guild_id, user_id, command)
) STRICT;

CREATE TABLE config_audit (
    id       INTEGER PRIMARY KEY,
    guild_id INTEGER NOT NULL,
    user_id  INTEGER NOT NULL,
    what     TEXT NOT NULL,
    old      TEXT NOT NULL,
    new      TEXT NOT NULL,
    at       REAL NOT NULL
) STRICT;
CREATE INDEX config_audit_guild ON config_audit (guild_id, id);

-- The tier (its role) the member was in when charged; NULL = the server defaults.
ALTER TABLE ledger ADD COLUMN tier_role_id INTEGER;
