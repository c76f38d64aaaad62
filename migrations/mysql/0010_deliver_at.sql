-- Delivery at a chosen time (issue 28): the earliest moment a committed message may be
-- sent, from prepare's `deliver_at` or `deliver_after_ms` (the latter added to the
-- database clock at prepare). NULL for a message without one, which is every message
-- written before this column. No index: a delayed commit's `next_send_at` is this time,
-- so the forwarder's due scan (idx_messages_send_due) finds it when it is due.
-- Instant on MySQL >= 8.0.12 and MariaDB >= 10.3 (a nullable column at the end).
ALTER TABLE messages ADD COLUMN deliver_at DATETIME(3) NULL;
