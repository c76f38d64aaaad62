-- The consumption ledger (issue 30, part 2): consumers in any language ask trustmsg whether to
-- process a message (POST /v1/consumptions/begin) and say how it went (…/finish), so each
-- registered consumer group processes every message once in effect, and operators see who
-- processed what, what fails, and how far each group lags.
--
-- consumer_groups: a registered group. `topics` is its allow-list (a JSON array of exact topic
-- names and prefixes ending in `*`, as a producer's): it defines the group's lag (messages SENT
-- to those topics since `created_at` that the group has not processed). token_hash: SHA-256 of
-- the group's bearer token. max_failures: failed consumptions of one message before the
-- `consumption_failing` alert; in_progress_timeout_ms: how long a begun consumption holds the
-- message before another delivery may take it over (and the `consumption_stuck` alert fires).
CREATE TABLE consumer_groups (
    group_name             VARCHAR(64)  NOT NULL,
    topics                 TEXT         NOT NULL,
    token_hash             BINARY(32)   NOT NULL,
    max_failures           INT UNSIGNED NOT NULL,
    in_progress_timeout_ms INT UNSIGNED NOT NULL,
    created_at             DATETIME(3)  NOT NULL,
    updated_at             DATETIME(3)  NOT NULL,
    PRIMARY KEY (group_name)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- One group's consumption of one message. state: 'in_progress' (a delivery began it and has
-- not finished; expires_at is when another delivery may take it over), 'failed' (the last
-- delivery failed: the next begin is a retry), 'done' (processed: every later begin skips).
-- attempts counts begins that were told to go. failing_alerted: the consumption_failing alert
-- was raised (once per message and group); stuck_alerted: the consumption_stuck alert of the
-- current begin was raised (a takeover clears it). The rows go with their message under
-- retention, as audit rows do.
CREATE TABLE consumptions (
    group_name      VARCHAR(64)     NOT NULL,
    message_id      BIGINT UNSIGNED NOT NULL,
    state           VARCHAR(16)     NOT NULL,
    attempts        INT UNSIGNED    NOT NULL,
    last_error      VARCHAR(2048)   NULL,
    first_began_at  DATETIME(3)     NOT NULL,
    last_began_at   DATETIME(3)     NOT NULL,
    finished_at     DATETIME(3)     NULL,
    expires_at      DATETIME(3)     NULL,
    failing_alerted BOOLEAN         NOT NULL DEFAULT FALSE,
    stuck_alerted   BOOLEAN         NOT NULL DEFAULT FALSE,
    updated_at      DATETIME(3)     NOT NULL,
    PRIMARY KEY (group_name, message_id),
    KEY idx_consumptions_message (message_id),
    KEY idx_consumptions_state (group_name, state),
    KEY idx_consumptions_stuck (stuck_alerted, expires_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The consumer group a consumption alert is about; NULL for a message alert.
ALTER TABLE alerts ADD COLUMN consumer_group VARCHAR(64) NULL;

-- A group's lag counts the messages SENT to its topics since it was registered: with this
-- index that is a range per topic (or prefix) over sent_at, read from the index alone
-- (sent_at is set only when a message is SENT). Built online.
ALTER TABLE messages ADD KEY idx_messages_topic_sent (topic, sent_at),
    ALGORITHM = INPLACE, LOCK = NONE;
