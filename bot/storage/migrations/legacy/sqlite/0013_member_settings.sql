-- 0013: members' own defaults (/settings), keyed by user id; wherever they use the bot.
--
-- A member without a row has set nothing. NULL: no default (the command's own applies).
CREATE TABLE member_settings (
    user_id        INTEGER PRIMARY KEY,
    text_model     TEXT,
    image_model    TEXT,
    video_model    TEXT,
    aspect_ratio   TEXT,
    video_duration REAL CHECK (video_duration IS NULL OR video_duration > 0),
    prompt_suffix  TEXT,
    private        INTEGER NOT NULL DEFAULT 0,
    remix          INTEGER NOT NULL DEFAULT 0,
    notify_dm      INTEGER NOT NULL DEFAULT 0,
    updated_at     REAL NOT NULL
) STRICT;
