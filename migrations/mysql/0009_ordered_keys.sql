-- In order per key (issue 28): a producer registered `ordered` has the messages of one
-- (biz_id, topic, record key) sent one after the other, in commit order.
--
-- messages.order_key is SHA-256(biz_id, topic, record key), set at prepare for an ordered
-- producer's keyed message and NULL otherwise; order_seq is the message's place in its key,
-- taken at commit under the key's row lock in ordered_keys (so "commit order" is the order in
-- which the database serialised the commits). Neither column is indexed: an unordered row
-- writes no index entry for them.
--
-- ordered_keys: one row per key. last_seq is the last seq a commit took, sent_through the
-- last seq that is SENT or given up by an operator (skip); the message with seq
-- sent_through + 1 is the key's head, the only one that may be due.
-- ordered_seqs: (key, seq) -> message id for the committed messages of a key not yet SENT
-- or skipped, so the SENT mark of a head finds its successor (and the admin view the head
-- that blocks a waiting message); a row goes when its message is SENT or skipped.
ALTER TABLE producers ADD COLUMN ordered BOOLEAN NOT NULL DEFAULT FALSE;

ALTER TABLE messages
    ADD COLUMN order_key BINARY(32) NULL,
    ADD COLUMN order_seq BIGINT UNSIGNED NULL;

CREATE TABLE ordered_keys (
    order_key    BINARY(32)      NOT NULL,
    last_seq     BIGINT UNSIGNED NOT NULL,
    sent_through BIGINT UNSIGNED NOT NULL,
    updated_at   DATETIME(3)     NOT NULL,
    PRIMARY KEY (order_key)
) ENGINE=InnoDB;

CREATE TABLE ordered_seqs (
    order_key  BINARY(32)      NOT NULL,
    seq        BIGINT UNSIGNED NOT NULL,
    message_id BIGINT UNSIGNED NOT NULL,
    PRIMARY KEY (order_key, seq)
) ENGINE=InnoDB;
